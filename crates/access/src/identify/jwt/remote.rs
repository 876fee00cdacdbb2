//! A `jwks_url`: fetched over https, cached, refreshed in the background.

use super::*;

pub(super) fn check_jwks_url(s: &str) -> Result<Uri, &'static str> {
    crate::oauth::check_endpoint(s)
}

/// Where a key set comes from: a configured `jwks_url`, or the `jwks_uri`
/// of an issuer's metadata (an `oauth` scheme), found again on each refresh
/// so a server that moves its keys is followed.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum KeySource {
    Jwks(Uri),
    Issuer(String),
}

impl KeySource {
    /// As logs show it.
    pub(super) fn shown(&self) -> String {
        match self {
            KeySource::Jwks(u) => shown(u),
            KeySource::Issuer(i) => format!("metadata of {i}"),
        }
    }
}

/// What a `jwks_url`'s key set is fetched with. Two configs that fetch
/// alike share one key set and one refresh task across a reload.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fetch {
    pub(super) url: KeySource,
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
    /// An `oauth` scheme's issuer metadata, once fetched (its introspection
    /// endpoint is read per opaque token).
    pub(super) metadata: ArcSwapOption<IssuerMetadata>,
}

impl Default for Live {
    fn default() -> Live {
        Live {
            kick: Notify::new(),
            started: AtomicBool::new(false),
            loaded: watch::Sender::new(false),
            metadata: ArcSwapOption::empty(),
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

pub(crate) use crate::oauth::shown;

/// The key set of `source`, fetched once (an issuer's metadata first).
pub(super) async fn fetch(
    http: &OAuthHttp,
    source: &KeySource,
    live: &Live,
) -> Result<Bytes, String> {
    let url = match source {
        KeySource::Jwks(u) => u.clone(),
        KeySource::Issuer(issuer) => {
            let found = discover(http, issuer).await.map_err(|e| e.to_string())?;
            let jwks = found.jwks_uri.clone();
            live.metadata.store(Some(Arc::new(found)));
            jwks.ok_or("the issuer's metadata has no jwks_uri")?
        }
    };
    http.get(&url, "application/jwk-set+json, application/json")
        .await
        .map_err(|e| e.to_string())
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
    let shown = url.shown();
    let client = match OAuthHttp::new() {
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
        let result = fetch(&client, &url, &live)
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
