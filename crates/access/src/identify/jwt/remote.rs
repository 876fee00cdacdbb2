//! A `jwks_url`: fetched over https, cached, refreshed in the background.

use super::*;

pub(super) fn check_jwks_url(s: &str) -> Result<Uri, &'static str> {
    let uri: Uri = s.trim().parse().map_err(|_| "not a valid URL")?;
    let host = uri.host().ok_or("the URL has no host")?;
    let h = host.trim_start_matches('[').trim_end_matches(']');
    let loopback =
        h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if loopback => Ok(uri),
        Some("http") => {
            Err("must be an https:// URL (plain http is accepted only for a loopback host)")
        }
        _ => Err("must be an https:// URL"),
    }
}

/// What a `jwks_url`'s key set is fetched with. Two configs that fetch
/// alike share one key set and one refresh task across a reload.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fetch {
    pub(super) url: Uri,
    pub(super) refresh: Duration,
    pub(super) allowed: Vec<Algorithm>,
}

/// The running side of a `jwks_url`, shared by the config generations
/// whose scheme fetches alike.
pub(super) struct Live {
    pub(super) kick: Notify,
    pub(super) started: AtomicBool,
    /// True once the scheme has a key set (fetched, or kept from the
    /// previous config): what readiness waits for.
    pub(super) loaded: watch::Sender<bool>,
}

impl Default for Live {
    fn default() -> Live {
        Live {
            kick: Notify::new(),
            started: AtomicBool::new(false),
            loaded: watch::Sender::new(false),
        }
    }
}

pub(super) struct Remote {
    pub(super) fetch: Fetch,
    /// The configured `issuer`: the label of the fetch-failure metric.
    pub(super) issuer: String,
    /// How long readiness waits at start for the first key set.
    pub(super) ready_timeout: Duration,
    pub(super) live: Arc<Live>,
}

/// A URL as logs show it: scheme, host, port and path; never a user name,
/// password or query (where a careless setup might keep a token).
pub(crate) fn shown(url: &Uri) -> String {
    let host = url.host().unwrap_or_default();
    let port = url.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}://{host}{port}{}",
        url.scheme_str().unwrap_or_default(),
        url.path()
    )
}

pub(super) type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Empty<Bytes>,
>;

pub(super) fn https_client() -> Result<Client, String> {
    let tls = crate::tls::client_config(None).map_err(|e| e.to_string())?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config((*tls).clone())
        .https_or_http() // http only ever reaches here for a loopback host
        .enable_http1()
        .enable_http2()
        .build();
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector),
    )
}

pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

pub(super) async fn fetch(client: &Client, url: &Uri) -> Result<Vec<u8>, String> {
    let req = http::Request::get(url.clone())
        .header(
            http::header::ACCEPT,
            "application/jwk-set+json, application/json",
        )
        .header(
            http::header::USER_AGENT,
            concat!("portcullis/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let work = async {
        let resp = client.request(req).await.map_err(|e| error_chain(&e))?;
        if resp.status() != http::StatusCode::OK {
            return Err(format!("HTTP status {}", resp.status()));
        }
        let body = Limited::new(resp.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map_err(|e| format!("reading the body: {e}"))?;
        Ok(body.to_bytes().to_vec())
    };
    tokio::time::timeout(FETCH_TIMEOUT, work)
        .await
        .map_err(|_| format!("no answer within {FETCH_TIMEOUT:?}"))?
}

/// Fetches the key set now and then until the scheme is dropped (config
/// reload that changed how it is fetched). A failed fetch keeps the keys the
/// scheme has and is counted in `failures`.
pub(super) async fn refresh_loop(
    keys: Weak<ArcSwap<KeySet>>,
    live: Arc<Live>,
    fetch_with: Fetch,
    scheme: String,
    failures: super::super::FetchFailed,
) {
    let Fetch {
        url,
        refresh,
        allowed,
    } = fetch_with;
    let shown = shown(&url);
    let client = match https_client() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(auth_scheme = %scheme, error = %e, "cannot build the JWKS client; keys will not be fetched");
            return;
        }
    };
    loop {
        if keys.strong_count() == 0 {
            return; // the scheme was dropped (config reload)
        }
        let result = fetch(&client, &url)
            .await
            .and_then(|b| parse_jwks(&b, &allowed, false));
        let fetched_at = Instant::now();
        let Some(store) = keys.upgrade() else { return };
        let wait = match result {
            Ok((set, broken)) => {
                for b in broken {
                    tracing::warn!(auth_scheme = %scheme, url = %shown, "JWKS {b}; key skipped");
                }
                tracing::debug!(auth_scheme = %scheme, url = %shown, keys = set.len(), "JWKS refreshed");
                store.store(Arc::new(set));
                live.loaded.send_replace(true);
                refresh
            }
            Err(e) => {
                failures();
                tracing::warn!(auth_scheme = %scheme, url = %shown, error = %e, "JWKS refresh failed; keeping the previous keys");
                refresh.min(RETRY_CAP)
            }
        };
        drop(store);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = live.kick.notified() => {
                // A token named a key we do not have: refresh early, but not
                // more often than every min(refresh, 10 s).
                tokio::time::sleep_until((fetched_at + refresh.min(KICK_GAP)).into()).await;
            }
        }
    }
}
