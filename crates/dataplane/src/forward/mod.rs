//! Phase: forward to the upstream. One connection pool per upstream
//! ([`pool`]: keep-alive HTTP/1.1 driven in the request's task, HTTP/2,
//! rustls), kept across reloads while its [`ConnectionSettings`] are
//! unchanged, with connect and response-head timeouts, and failures sorted
//! into the gateway's stable reasons.

mod body;
pub(crate) mod pool;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, Uri};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;

use super::stdio::{
    self, StdioConnector, StdioMetrics, StdioUpstream, Unanswered, ANSWER_WITHIN, UNANSWERED,
};
use crate::config::{StdioSettings, UpstreamRoute};
use crate::model::{Reason, Refusal};
pub use body::UpstreamBody;
use pool::{ConnPool, PoolLimits, SendError};

type Https = HttpsConnector<HttpConnector>;

/// What an upstream's connection pool is built from, and nothing else: the
/// URL's scheme and authority, its TLS trust, HTTP/2, the connect timeout
/// and the pool's limits. Two configs with equal settings share one pool
/// (a reload that leaves them alone re-dials nothing); the path, the
/// response timeout and the policy are read per request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConnectionSettings {
    scheme: String,
    authority: String,
    /// The CA file's digest (`None`: plain http).
    tls: Option<String>,
    http2: bool,
    connect_timeout: Duration,
    pool_idle_timeout: Duration,
    pool_max_idle_per_host: usize,
    /// A stdio program: how it is started (its processes are the pool's).
    stdio: Option<Arc<StdioSettings>>,
}

impl ConnectionSettings {
    pub fn of(route: &UpstreamRoute) -> ConnectionSettings {
        ConnectionSettings {
            scheme: route.url.scheme_str().unwrap_or_default().to_owned(),
            authority: route.endpoint_host.clone(),
            tls: route.tls_digest.clone(),
            http2: route.http2,
            connect_timeout: route.connect_timeout,
            pool_idle_timeout: route.pool_idle_timeout,
            pool_max_idle_per_host: route.pool_max_idle_per_host,
            stdio: route.stdio.clone(),
        }
    }
}

/// One connection pool (keep-alive connections to one upstream). Dropped
/// with the last client holding it: after a reload that changed or removed
/// its upstream, once the requests still using it have finished.
pub struct Pool {
    settings: ConnectionSettings,
    client: Transport,
}

/// How a pool reaches its upstream.
enum Transport {
    Http(Arc<ConnPool<Https>>),
    /// In-memory connections to a stdio program's HTTP face.
    Stdio(Arc<ConnPool<StdioConnector>>, Arc<StdioUpstream>),
}

impl Pool {
    fn new(
        route: &UpstreamRoute,
        stdio: &Arc<StdioMetrics>,
        max_line: usize,
        slots: usize,
    ) -> Result<Pool, rustls::Error> {
        let Some(settings) = &route.stdio else {
            return Self::http(route, slots);
        };
        let upstream = StdioUpstream::new(
            &route.id,
            settings.clone(),
            route.generations.as_deref(),
            max_line,
            route.connect_timeout,
            stdio.clone(),
        );
        upstream.start_eagerly();
        let limits = PoolLimits {
            idle_timeout: route.pool_idle_timeout,
            max_idle: usize::MAX,
            http2_only: false,
            slots,
        };
        let client = ConnPool::new(
            StdioConnector::new(upstream.clone()),
            dial_target(&route.url),
            limits,
        );
        Ok(Pool {
            settings: ConnectionSettings::of(route),
            client: Transport::Stdio(client, upstream),
        })
    }

    fn http(route: &UpstreamRoute, slots: usize) -> Result<Pool, rustls::Error> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(route.connect_timeout));
        http.set_keepalive(Some(Duration::from_secs(60)));
        let tls = match &route.tls {
            Some(cfg) => (**cfg).clone(),
            // Plain-http upstream: the connector needs a config it never uses.
            None => rustls::ClientConfig::builder_with_provider(crate::tls::provider())
                .with_safe_default_protocol_versions()?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        };
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let limits = PoolLimits {
            idle_timeout: route.pool_idle_timeout,
            max_idle: route.pool_max_idle_per_host,
            http2_only: route.http2,
            slots,
        };
        let client = ConnPool::new(connector, dial_target(&route.url), limits);
        Ok(Pool {
            settings: ConnectionSettings::of(route),
            client: Transport::Http(client),
        })
    }

    pub fn settings(&self) -> &ConnectionSettings {
        &self.settings
    }

    /// Its upstream is still warming: a stdio program's eager start is
    /// not over yet.
    pub fn warming(&self) -> bool {
        self.stdio().is_some_and(|program| !program.is_warm())
    }

    /// Resolves once its upstream is warm: a stdio program's eager start
    /// is over; an HTTP upstream at once (nothing is dialled ahead).
    pub async fn warmed(&self) {
        if let Some(program) = self.stdio() {
            program.warmed().await;
        }
    }

    /// The stdio program's processes behind this pool, if it is one.
    pub fn stdio(&self) -> Option<&Arc<StdioUpstream>> {
        match &self.client {
            Transport::Stdio(_, upstream) => Some(upstream),
            Transport::Http(_) => None,
        }
    }
}

impl Drop for Pool {
    /// No generation uses it any more (a reload changed or removed its
    /// upstream): a stdio program's processes stop now, not when their
    /// sessions time out.
    fn drop(&mut self) {
        if let Some(program) = self.stdio() {
            program.stop_all();
        }
    }
}

/// The pools of a config generation, by what they were built from: what the
/// next generation's upstreams may keep.
pub type Pools = HashMap<ConnectionSettings, Arc<Pool>>;

/// What a pool dials for `url`: its scheme and authority.
fn dial_target(url: &Uri) -> Uri {
    let mut parts = http::uri::Parts::default();
    parts.scheme = url.scheme().cloned();
    parts.authority = url.authority().cloned();
    parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    Uri::from_parts(parts).unwrap_or_else(|_| url.clone())
}

/// A configured upstream and the connection pool that reaches it.
pub struct UpstreamClient {
    pub(crate) route: Arc<UpstreamRoute>,
    pool: Arc<Pool>,
    /// The URL's path and query: an HTTP/1.1 request's target.
    origin: Uri,
    /// `Host` of an HTTP/1.1 request: the URL's host, and its port unless
    /// it is the scheme's default.
    host: HeaderValue,
}

impl UpstreamClient {
    /// A client that keeps the pool in `previous` built from the same
    /// [`ConnectionSettings`], or one of its own when there is none.
    /// `max_line`: the longest line a stdio program may write; `slots`:
    /// idle lists, one per runtime ([`crate::config::RuntimeModel`]).
    pub fn keeping(
        route: Arc<UpstreamRoute>,
        previous: &Pools,
        stdio: &Arc<StdioMetrics>,
        max_line: usize,
        slots: usize,
    ) -> Result<Self, rustls::Error> {
        let pool = match previous.get(&ConnectionSettings::of(&route)) {
            Some(pool) => pool.clone(),
            None => Arc::new(Pool::new(&route, stdio, max_line, slots)?),
        };
        let origin = route
            .url
            .path_and_query()
            .map_or_else(|| Uri::from_static("/"), |p| Uri::from(p.clone()));
        let host = host_header(&route.url);
        Ok(UpstreamClient {
            route,
            pool,
            origin,
            host,
        })
    }

    /// Its pool (handed on to the next generation).
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Send the checked request body with the given headers; resolves when the
    /// upstream's response head has arrived.
    pub async fn send(
        &self,
        method: Method,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response<UpstreamBody>, Refusal> {
        headers.insert(http::header::HOST, self.host.clone());
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = self.origin.clone();
        *req.headers_mut() = headers;
        let url = &self.route.url;
        let mut wait = self.route.response_timeout;
        if self.pool.stdio().is_some() {
            // The face times the answer from the moment a process has the
            // request; starting one is bounded on its own.
            let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            req.headers_mut()
                .insert(ANSWER_WITHIN.clone(), HeaderValue::from(millis));
            wait = stdio::longest_wait(wait, self.route.connect_timeout);
        }
        let sent = async {
            match &self.pool.client {
                Transport::Http(pool) => {
                    pool.send(req, url).await.map(|r| r.map(UpstreamBody::Http))
                }
                // Boxed: a program's pipe is its own, larger future; inline,
                // every HTTP request's forward would carry its size.
                Transport::Stdio(pool, _) => Box::pin(pool.send(req, url))
                    .await
                    .map(|r| r.map(UpstreamBody::Stdio)),
            }
        };
        match tokio::time::timeout(wait, sent).await {
            Err(_) => Err(Refusal::new(
                Reason::UpstreamTimeout,
                format!(
                    "the upstream did not answer within {}",
                    humantime::format_duration(self.route.response_timeout)
                ),
            )),
            Ok(Ok(resp)) => match resp.headers().get(&UNANSWERED) {
                Some(why) if self.pool.stdio().is_some() => {
                    let why = Unanswered::parse(why.as_bytes());
                    Err(Box::pin(unanswered(why, resp.into_body())).await)
                }
                _ => Ok(resp),
            },
            Ok(Err(e)) => Err(classify(&e)),
        }
    }
}

/// `Host` for `url`: as legacy hyper clients and curl send it, the port
/// only when it is not the scheme's default.
fn host_header(url: &Uri) -> HeaderValue {
    let host = url.host().unwrap_or_default();
    let default = match url.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    };
    let value = match url.port_u16() {
        Some(port) if Some(port) != default => format!("{host}:{port}"),
        _ => host.to_owned(),
    };
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("localhost"))
}

/// A stdio program that gave no answer, as the reason an HTTP server's
/// failure of the same kind gets, with what the face said of it (the
/// gateway's own words: a JSON-RPC error's message, in memory).
async fn unanswered(why: Option<Unanswered>, body: UpstreamBody) -> Refusal {
    use http_body_util::BodyExt;
    let said = body
        .collect()
        .await
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b.to_bytes()).ok())
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned));
    let reason = match why {
        Some(Unanswered::Exited) => Reason::UpstreamConnectionClosed,
        Some(Unanswered::OutOfStep) => Reason::UpstreamBadResponse,
        Some(Unanswered::Timeout) => Reason::UpstreamTimeout,
        Some(Unanswered::Unavailable) | None => Reason::UpstreamUnreachable,
    };
    let said = said.unwrap_or_else(|| "it gave no answer".into());
    Refusal::new(reason, format!("the upstream program: {said}"))
}

/// Sort a client error into a reason a person and a dashboard can act on.
fn classify(e: &SendError) -> Refusal {
    let e = match e {
        SendError::Connect(detail) if portcullis_access::pins::is_pin_mismatch(&**detail) => {
            return Refusal::new(
                Reason::UpstreamIdentityMismatch,
                "the upstream's certificate key is not one of its pinned keys (tls_pins); nothing was sent",
            )
        }
        SendError::Connect(detail) => {
            return Refusal::new(
                Reason::UpstreamUnreachable,
                format!("could not connect to the upstream ({detail})"),
            )
        }
        SendError::Http(e) => e,
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() || h.is_closed() {
                return Refusal::new(
                    Reason::UpstreamConnectionClosed,
                    "the upstream closed the connection before answering",
                );
            }
            if h.is_parse() || h.is_parse_status() {
                return Refusal::new(
                    Reason::UpstreamBadResponse,
                    "the upstream's answer is not valid HTTP",
                );
            }
            if h.is_timeout() {
                return Refusal::new(
                    Reason::UpstreamTimeout,
                    "the upstream did not answer in time",
                );
            }
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            ) {
                return Refusal::new(
                    Reason::UpstreamConnectionClosed,
                    "the upstream closed the connection before answering",
                );
            }
        }
        source = s.source();
    }
    Refusal::new(
        Reason::UpstreamBadResponse,
        "the upstream's answer could not be read",
    )
}

// Kept for the tests, after the code (what follows a `#[cfg(test)]` is read
// as test code by the size and module-graph checks).
#[cfg(test)]
impl UpstreamClient {
    /// A client with a pool of its own.
    pub(crate) fn new(
        route: Arc<UpstreamRoute>,
        stdio: &Arc<StdioMetrics>,
    ) -> Result<Self, rustls::Error> {
        Self::keeping(route, &Pools::new(), stdio, usize::MAX, 1)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::GatewayConfig;

    /// The settings of the one upstream of a config with `upstream` lines.
    fn settings(dir: &Path, upstream: &str) -> ConnectionSettings {
        let text = format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n[[upstream]]\nid = \"a\"\n{upstream}\n[[route]]\npath = \"/mcp\"\nupstream = \"a\"\n"
        );
        let config = GatewayConfig::parse(&text, &dir.join("gateway.toml")).unwrap();
        ConnectionSettings::of(&config.upstreams[0])
    }

    fn write_ca(dir: &Path) {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(dir.join("ca.pem"), cert.cert.pem()).unwrap();
    }

    #[test]
    fn a_pool_is_kept_for_what_does_not_dial_and_rebuilt_for_what_does() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        write_ca(dir.path());
        let base = "name = \"A\"\nurl = \"https://127.0.0.1:8443/mcp\"\nca_file = \"ca.pem\"";
        let running = settings(dir.path(), base);
        // Read per request, or not about connections: the same pool.
        for same in [
            "name = \"Renamed\"\nurl = \"https://127.0.0.1:8443/mcp\"\nca_file = \"ca.pem\"",
            "name = \"A\"\nurl = \"https://127.0.0.1:8443/other/path\"\nca_file = \"ca.pem\"",
            &format!("{base}\nresponse_timeout = \"9s\"\nforward_authorization = true"),
        ] {
            assert_eq!(settings(dir.path(), same), running, "{same}");
        }
        // What the connections are made with: a new pool.
        for changed in [
            "name = \"A\"\nurl = \"https://127.0.0.1:9443/mcp\"\nca_file = \"ca.pem\"",
            "name = \"A\"\nurl = \"https://localhost:8443/mcp\"\nca_file = \"ca.pem\"",
            "name = \"A\"\nurl = \"https://127.0.0.1:8443/mcp\"",
            "name = \"A\"\nurl = \"http://127.0.0.1:8443/mcp\"",
            &format!("{base}\nhttp2 = true"),
            &format!("{base}\nconnect_timeout = \"1s\""),
            &format!("{base}\npool_idle_timeout = \"1s\""),
            &format!("{base}\npool_max_idle_per_host = 3"),
        ] {
            assert_ne!(settings(dir.path(), changed), running, "{changed}");
        }
        // The same CA file path with another certificate in it.
        write_ca(dir.path());
        assert_ne!(settings(dir.path(), base), running, "a rotated CA file");
    }

    #[test]
    fn equal_settings_share_one_pool_and_others_get_their_own() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let text = "[[listener]]\naddress = \"127.0.0.1:0\"\n\
            [[upstream]]\nid = \"a\"\nname = \"A\"\nurl = \"http://127.0.0.1:9/a\"\n\
            [[upstream]]\nid = \"b\"\nname = \"B\"\nurl = \"http://127.0.0.1:9/b\"\n\
            [[upstream]]\nid = \"c\"\nname = \"C\"\nurl = \"http://127.0.0.1:10/c\"\n\
            [[route]]\npath = \"/mcp\"\nupstream = \"a\"\n";
        let config = GatewayConfig::parse(text, &dir.path().join("g.toml")).unwrap();
        let [a, b, c] = [0, 1, 2].map(|i| config.upstreams[i].clone());
        let stdio = Arc::new(StdioMetrics::new(&crate::described::Described::new()).unwrap());
        let first = UpstreamClient::new(a.clone(), &stdio).unwrap();
        let mut pools = Pools::new();
        pools.insert(first.pool().settings().clone(), first.pool().clone());
        let again = UpstreamClient::keeping(a, &pools, &stdio, 1 << 20, 1).unwrap();
        let same_host = UpstreamClient::keeping(b, &pools, &stdio, 1 << 20, 1).unwrap();
        let other = UpstreamClient::keeping(c, &pools, &stdio, 1 << 20, 1).unwrap();
        assert!(Arc::ptr_eq(again.pool(), first.pool()));
        assert!(Arc::ptr_eq(same_host.pool(), first.pool()));
        assert!(!Arc::ptr_eq(other.pool(), first.pool()));
    }
}
