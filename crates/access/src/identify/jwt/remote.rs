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

pub(super) struct Remote {
    pub(super) url: Uri,
    pub(super) refresh: Duration,
    pub(super) allowed: Vec<Algorithm>,
    pub(super) kick: Arc<Notify>,
    pub(super) started: AtomicBool,
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

pub(super) async fn refresh_loop(
    keys: Weak<ArcSwap<KeySet>>,
    kick: Arc<Notify>,
    url: Uri,
    refresh: Duration,
    allowed: Vec<Algorithm>,
    scheme: String,
) {
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
                    tracing::warn!(auth_scheme = %scheme, url = %url, "JWKS {b}; key skipped");
                }
                tracing::debug!(auth_scheme = %scheme, url = %url, keys = set.len(), "JWKS refreshed");
                store.store(Arc::new(set));
                refresh
            }
            Err(e) => {
                tracing::warn!(auth_scheme = %scheme, url = %url, error = %e, "JWKS refresh failed; keeping the previous keys");
                refresh.min(RETRY_CAP)
            }
        };
        drop(store);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = kick.notified() => {
                // A token named a key we do not have: refresh early, but not
                // more often than every min(refresh, 10 s).
                tokio::time::sleep_until((fetched_at + refresh.min(KICK_GAP)).into()).await;
            }
        }
    }
}
