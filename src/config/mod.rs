//! Configuration: read once from TOML, validated in full, turned into typed
//! values. Nothing on the request path ever looks at a config string again.

mod raw;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use toml::Spanned;

use crate::identify::{AuthSchemes, SchemeId};
use crate::pipeline::permit::{PermissionRule, Permissions};
use crate::policy::config::{Policy, PolicySet};
use crate::throttle::Throttle;
use raw::*;

/// A problem in a config file, pinned to a line.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}:{column}: {field}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub source: PathBuf,
    pub listeners: Vec<ListenerConfig>,
    pub admin: Option<SocketAddr>,
    pub limits: Limits,
    /// `None`: no `Origin` check. `Some`: a request whose `Origin` header is
    /// not in the set is refused with 403.
    pub allowed_origins: Option<Arc<HashSet<String>>>,
    pub drain_timeout: Duration,
    pub log: LogConfig,
    pub state: Arc<StateConfig>,
    pub upstreams: Vec<Arc<UpstreamRoute>>,
    /// Request path → route.
    pub routes: HashMap<String, Arc<RouteConfig>>,
    pub auth: Arc<AuthSchemes>,
    pub throttle: Arc<Throttle>,
    /// Files besides the config that a change of triggers a reload
    /// (policies directory, state keys file).
    pub watched_files: Vec<PathBuf>,
    pub audit: crate::audit::AuditSettings,
}

#[derive(Clone)]
pub struct ListenerConfig {
    pub name: String,
    pub address: SocketAddr,
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl std::fmt::Debug for ListenerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerConfig")
            .field("name", &self.name)
            .field("address", &self.address)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_request_body_bytes: usize,
    /// The most the gateway holds of one response message (a JSON body or one
    /// SSE event) to inspect it. Larger is refused, never truncated.
    pub max_response_body_bytes: usize,
    pub max_header_bytes: usize,
    pub header_read_timeout: Duration,
    pub request_body_timeout: Duration,
    pub max_connections: usize,
    pub http2_max_concurrent_streams: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_body_bytes: 1 << 20,
            max_response_body_bytes: 8 << 20,
            max_header_bytes: 16 << 10,
            header_read_timeout: Duration::from_secs(10),
            request_body_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            http2_max_concurrent_streams: 256,
        }
    }
}

/// One path of the gateway: its upstream, who may use it and for what.
#[derive(Debug)]
pub struct RouteConfig {
    pub upstream: Arc<UpstreamRoute>,
    /// Auth schemes tried in order; empty: anonymous only.
    pub auth: Vec<SchemeId>,
    pub allow_anonymous: bool,
    pub permissions: Permissions,
}

/// Where single-use state redemptions are remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayBackend {
    Local,
    Redis(String),
}

/// The gateway's MRTR state: keys and the limits of an operation.
#[derive(Debug)]
pub struct StateConfig {
    pub keys: crate::mrtr::seal::StateKeys,
    pub max_client_state_bytes: usize,
    pub round_timeout: Duration,
    pub max_rounds: u32,
    pub max_operation_time: Duration,
    pub max_answer_bytes: u64,
    pub allow_secret_values: bool,
    pub replay: ReplayBackend,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    pub format: LogFormat,
    pub level: String,
}

/// One upstream MCP server and how to reach it.
pub struct UpstreamRoute {
    /// Short identifier; also the `upstream` label of metrics.
    pub id: String,
    /// The name people see in errors and provenance. Configured, never taken
    /// from the server.
    pub name: String,
    pub url: Uri,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub http2: bool,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub stream_idle_timeout: Duration,
    pub pool_idle_timeout: Duration,
    pub pool_max_idle_per_host: usize,
    pub forward_authorization: bool,
    /// The elicitation policy applied to this upstream's answers.
    pub policy: Arc<Policy>,
    /// `host[:port]` of the URL, shown in provenance.
    pub endpoint_host: String,
    /// Every sealed state of this upstream may be redeemed once.
    pub single_use_state: bool,
    /// Tools whose sealed states may be redeemed once.
    pub single_use_tools: Vec<String>,
}

impl std::fmt::Debug for UpstreamRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamRoute")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Turns byte spans into `file:line:column` errors.
struct Locator<'a> {
    file: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    fn at(
        &self,
        span: Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        let start = span.start.min(self.text.len());
        let before = &self.text[..start];
        let line = before.matches('\n').count() + 1;
        let column = before.rfind('\n').map_or(start, |nl| start - nl - 1) + 1;
        ConfigError {
            file: self.file.to_owned(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    fn duration(
        &self,
        raw: &Option<Spanned<String>>,
        field: &str,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        let Some(raw) = raw else { return Ok(default) };
        let d = humantime::parse_duration(raw.get_ref().trim()).map_err(|e| {
            self.at(
                raw.span(),
                field,
                format!("not a duration ({e}); write e.g. \"500ms\", \"10s\", \"5m\""),
            )
        })?;
        if d.is_zero() {
            return Err(self.at(raw.span(), field, "must be greater than zero"));
        }
        Ok(d)
    }

    fn positive(
        &self,
        raw: &Option<Spanned<i64>>,
        field: &str,
        default: usize,
    ) -> Result<usize, ConfigError> {
        let Some(raw) = raw else { return Ok(default) };
        usize::try_from(*raw.get_ref())
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| self.at(raw.span(), field, "must be a positive whole number"))
    }
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    }
}

impl GatewayConfig {
    pub fn load(path: &Path) -> Result<GatewayConfig, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            line: 0,
            column: 0,
            field: "(file)".into(),
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Parse and validate config text; `path` names the file in errors and
    /// is the base for relative paths inside it.
    pub fn parse(text: &str, path: &Path) -> Result<GatewayConfig, ConfigError> {
        let file = path.display().to_string();
        let loc = Locator { file: &file, text };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            loc.at(span, "(syntax)", e.message().to_owned())
        })?;
        let base = path.parent().map(Path::to_owned).unwrap_or_default();
        validate(raw, &loc, &base, path)
    }
}

fn validate(
    raw: RawConfig,
    loc: &Locator<'_>,
    base: &Path,
    path: &Path,
) -> Result<GatewayConfig, ConfigError> {
    let limits = limits(&raw.limits, loc)?;
    let listeners = listeners(&raw.listener, loc, base)?;
    let admin = match &raw.admin {
        Some(a) => Some(socket_addr(&a.get_ref().address, "admin.address", loc)?),
        None => None,
    };
    if let Some(admin) = admin {
        if let Some(l) = listeners
            .iter()
            .find(|l| l.address == admin && admin.port() != 0)
        {
            let span = raw.admin.as_ref().map(|a| a.span()).unwrap_or(0..0);
            return Err(loc.at(
                span,
                "admin.address",
                format!("same address as listener \"{}\"", l.name),
            ));
        }
    }
    let allowed_origins = match &raw.security.allowed_origins {
        None => None,
        Some(list) => {
            let mut set = HashSet::new();
            for o in list.get_ref() {
                let v = o
                    .get_ref()
                    .trim()
                    .trim_end_matches('/')
                    .to_ascii_lowercase();
                let uri: Result<Uri, _> = v.parse();
                let ok = uri
                    .as_ref()
                    .is_ok_and(|u| u.scheme().is_some() && u.host().is_some() && u.path() == "/");
                if !ok && v != "null" {
                    return Err(loc.at(
                        o.span(),
                        "security.allowed_origins",
                        format!(
                            "\"{}\" is not an origin like \"https://app.example.com\"",
                            o.get_ref()
                        ),
                    ));
                }
                set.insert(v);
            }
            Some(Arc::new(set))
        }
    };
    let drain_timeout = loc.duration(
        &raw.shutdown.drain_timeout,
        "shutdown.drain_timeout",
        Duration::from_secs(30),
    )?;
    let log = log_config(&raw.log, loc)?;
    let state = Arc::new(state_config(&raw.state, loc, base)?);
    let policies = match &raw.policies {
        None => PolicySet::load(None)?,
        Some(p) => {
            let dir = resolve(base, p.dir.get_ref());
            if !dir.is_dir() {
                return Err(loc.at(
                    p.dir.span(),
                    "policies.dir",
                    format!("{} is not a directory", dir.display()),
                ));
            }
            PolicySet::load(Some(&dir))?
        }
    };
    let upstreams = upstreams(&raw.upstream, loc, base, &policies)?;
    let auth =
        AuthSchemes::build(&raw.auth, base).map_err(|e| loc.at(e.span, e.field, e.message))?;
    let throttle = Throttle::build(raw.rate_limits.as_ref())
        .map_err(|e| loc.at(e.span, e.field, e.message))?;
    let routes = routes(&raw.route, &upstreams, &auth, loc)?;
    let audit = crate::audit::AuditSettings::from_raw(raw.audit.as_ref(), base)
        .map_err(|e| loc.at(e.span, e.field, e.message))?;
    Ok(GatewayConfig {
        source: path.to_owned(),
        listeners,
        admin,
        limits,
        allowed_origins,
        drain_timeout,
        log,
        state,
        upstreams,
        routes,
        auth: Arc::new(auth),
        throttle: Arc::new(throttle),
        watched_files: watched_files(&raw, base),
        audit,
    })
}

fn socket_addr(
    raw: &Spanned<String>,
    field: &str,
    loc: &Locator<'_>,
) -> Result<SocketAddr, ConfigError> {
    raw.get_ref().trim().parse().map_err(|_| {
        loc.at(
            raw.span(),
            field,
            format!(
                "\"{}\" is not an address like \"127.0.0.1:8080\" or \"[::1]:8080\"",
                raw.get_ref()
            ),
        )
    })
}

fn limits(raw: &RawLimits, loc: &Locator<'_>) -> Result<Limits, ConfigError> {
    let d = Limits::default();
    let max_header_bytes = loc.positive(
        &raw.max_header_bytes,
        "limits.max_header_bytes",
        d.max_header_bytes,
    )?;
    if max_header_bytes < 8192 {
        let span = raw
            .max_header_bytes
            .as_ref()
            .map(|s| s.span())
            .unwrap_or(0..0);
        return Err(loc.at(
            span,
            "limits.max_header_bytes",
            "must be at least 8192 (HTTP/1.1 needs room for the request line and headers)",
        ));
    }
    let streams = loc.positive(
        &raw.http2_max_concurrent_streams,
        "limits.http2_max_concurrent_streams",
        d.http2_max_concurrent_streams as usize,
    )?;
    Ok(Limits {
        max_request_body_bytes: loc.positive(
            &raw.max_request_body_bytes,
            "limits.max_request_body_bytes",
            d.max_request_body_bytes,
        )?,
        max_response_body_bytes: loc.positive(
            &raw.max_response_body_bytes,
            "limits.max_response_body_bytes",
            d.max_response_body_bytes,
        )?,
        max_header_bytes,
        header_read_timeout: loc.duration(
            &raw.header_read_timeout,
            "limits.header_read_timeout",
            d.header_read_timeout,
        )?,
        request_body_timeout: loc.duration(
            &raw.request_body_timeout,
            "limits.request_body_timeout",
            d.request_body_timeout,
        )?,
        max_connections: loc.positive(
            &raw.max_connections,
            "limits.max_connections",
            d.max_connections,
        )?,
        http2_max_concurrent_streams: u32::try_from(streams).unwrap_or(u32::MAX),
    })
}

fn listeners(
    raw: &[Spanned<RawListener>],
    loc: &Locator<'_>,
    base: &Path,
) -> Result<Vec<ListenerConfig>, ConfigError> {
    if raw.is_empty() {
        return Err(loc.at(
            0..0,
            "listener",
            "no [[listener]] configured; add one with an address such as \"127.0.0.1:8080\"",
        ));
    }
    let mut out = Vec::new();
    let mut names = HashSet::new();
    for (i, l) in raw.iter().enumerate() {
        let field = format!("listener[{i}]");
        let r = l.get_ref();
        let address = socket_addr(&r.address, &format!("{field}.address"), loc)?;
        let name = r
            .name
            .as_ref()
            .map(|n| n.get_ref().clone())
            .unwrap_or_else(|| format!("listener-{i}"));
        if !names.insert(name.clone()) {
            return Err(loc.at(
                l.span(),
                format!("{field}.name"),
                format!("listener name \"{name}\" is used twice"),
            ));
        }
        if address.port() != 0 && out.iter().any(|o: &ListenerConfig| o.address == address) {
            return Err(loc.at(
                r.address.span(),
                format!("{field}.address"),
                format!("{address} is used by another listener"),
            ));
        }
        let tls = match &r.tls {
            None => None,
            Some(t) => Some(listener_tls(t.get_ref(), &field, loc, base)?),
        };
        out.push(ListenerConfig { name, address, tls });
    }
    Ok(out)
}

fn state_config(
    raw: &RawState,
    loc: &Locator<'_>,
    base: &Path,
) -> Result<StateConfig, ConfigError> {
    use crate::mrtr::seal::StateKeys;
    let keys = match (&raw.keys_file, &raw.keys_env) {
        (Some(_), Some(env)) => {
            return Err(loc.at(
                env.span(),
                "state.keys_env",
                "give keys_file or keys_env, not both",
            ))
        }
        (Some(file), None) => StateKeys::from_file(&resolve(base, file.get_ref()))
            .map_err(|e| loc.at(file.span(), "state.keys_file", e.to_string()))?,
        (None, Some(env)) => StateKeys::from_env(env.get_ref())
            .map_err(|e| loc.at(env.span(), "state.keys_env", e.to_string()))?,
        (None, None) => StateKeys::generate(),
    };
    let rounds = loc.positive(&raw.max_rounds, "state.max_rounds", 10)?;
    let replay = match raw
        .single_use_backend
        .as_ref()
        .map(|b| (b.get_ref().as_str(), b.span()))
    {
        None | Some(("local", _)) => ReplayBackend::Local,
        Some(("redis", span)) => match &raw.redis_url {
            Some(url)
                if url.get_ref().starts_with("redis://")
                    || url.get_ref().starts_with("rediss://") =>
            {
                ReplayBackend::Redis(url.get_ref().clone())
            }
            Some(url) => {
                return Err(loc.at(url.span(), "state.redis_url", "a redis:// or rediss:// URL"))
            }
            None => {
                return Err(loc.at(
                    span,
                    "state.redis_url",
                    "single_use_backend = \"redis\" needs redis_url",
                ))
            }
        },
        Some((other, span)) => {
            return Err(loc.at(
                span,
                "state.single_use_backend",
                format!("\"{other}\" is not one of local, redis"),
            ))
        }
    };
    Ok(StateConfig {
        keys,
        max_client_state_bytes: loc.positive(
            &raw.max_client_state_bytes,
            "state.max_client_state_bytes",
            32 << 10,
        )?,
        round_timeout: loc.duration(
            &raw.round_timeout,
            "state.round_timeout",
            Duration::from_secs(600),
        )?,
        max_rounds: u32::try_from(rounds).unwrap_or(u32::MAX),
        max_operation_time: loc.duration(
            &raw.max_operation_time,
            "state.max_operation_time",
            Duration::from_secs(600),
        )?,
        max_answer_bytes: loc.positive(&raw.max_answer_bytes, "state.max_answer_bytes", 64 << 10)?
            as u64,
        allow_secret_values: raw.allow_secret_values.unwrap_or(false),
        replay,
    })
}

fn watched_files(raw: &RawConfig, base: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = &raw.policies {
        out.push(resolve(base, p.dir.get_ref()));
    }
    if let Some(k) = &raw.state.keys_file {
        out.push(resolve(base, k.get_ref()));
    }
    out
}

fn listener_tls(
    t: &RawServerTls,
    field: &str,
    loc: &Locator<'_>,
    base: &Path,
) -> Result<Arc<rustls::ServerConfig>, ConfigError> {
    let cert = resolve(base, t.cert.get_ref());
    let key = resolve(base, t.key.get_ref());
    let client = match (&t.client_ca, &t.client_auth) {
        (None, None) => None,
        (None, Some(a)) => {
            return Err(loc.at(
                a.span(),
                format!("{field}.tls.client_auth"),
                "needs client_ca",
            ))
        }
        (Some(ca), mode) => {
            let required = match mode.as_ref().map(|m| m.get_ref().as_str()) {
                None | Some("required") => true,
                Some("optional") => false,
                Some(other) => {
                    let span = mode.as_ref().map(|m| m.span()).unwrap_or(0..0);
                    return Err(loc.at(
                        span,
                        format!("{field}.tls.client_auth"),
                        format!("\"{other}\" is not one of required, optional"),
                    ));
                }
            };
            Some((resolve(base, ca.get_ref()), required))
        }
    };
    let client = client.as_ref().map(|(p, r)| (p.as_path(), *r));
    crate::tls::server_config(&cert, &key, client)
        .map_err(|e| loc.at(t.cert.span(), format!("{field}.tls"), e.to_string()))
}

fn log_config(raw: &RawLog, loc: &Locator<'_>) -> Result<LogConfig, ConfigError> {
    let format = match &raw.format {
        None => LogFormat::Text,
        Some(f) => match f.get_ref().as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(loc.at(
                    f.span(),
                    "log.format",
                    format!("\"{other}\" is not one of \"text\", \"json\""),
                ))
            }
        },
    };
    let level = match &raw.level {
        None => "info".to_owned(),
        Some(l) => {
            let v = l.get_ref().clone();
            if v.parse::<tracing_subscriber::EnvFilter>().is_err() {
                return Err(loc.at(
                    l.span(),
                    "log.level",
                    format!(
                        "\"{v}\" is not a level or filter such as \"info\" or \"portcullis=debug\""
                    ),
                ));
            }
            v
        }
    };
    Ok(LogConfig { format, level })
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn upstreams(
    raw: &[Spanned<RawUpstream>],
    loc: &Locator<'_>,
    base: &Path,
    policies: &PolicySet,
) -> Result<Vec<Arc<UpstreamRoute>>, ConfigError> {
    let mut out: Vec<Arc<UpstreamRoute>> = Vec::new();
    for (i, u) in raw.iter().enumerate() {
        let f = |name: &str| format!("upstream[{i}].{name}");
        let r = u.get_ref();
        let id = r.id.get_ref().clone();
        if !valid_id(&id) {
            return Err(loc.at(
                r.id.span(),
                f("id"),
                "use 1 to 64 of a-z, 0-9, '-' and '_' (it becomes a metric label)",
            ));
        }
        if out.iter().any(|o| o.id == id) {
            return Err(loc.at(
                r.id.span(),
                f("id"),
                format!("upstream id \"{id}\" is used twice"),
            ));
        }
        let name = r.name.get_ref().trim().to_owned();
        if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
            return Err(loc.at(
                r.name.span(),
                f("name"),
                "a display name of 1 to 200 printable characters",
            ));
        }
        let url: Uri = r
            .url
            .get_ref()
            .parse()
            .map_err(|e| loc.at(r.url.span(), f("url"), format!("not a URL: {e}")))?;
        let https = match url.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(loc.at(
                    r.url.span(),
                    f("url"),
                    "must start with http:// or https://",
                ))
            }
        };
        if url.host().is_none_or(str::is_empty) {
            return Err(loc.at(r.url.span(), f("url"), "has no host"));
        }
        if url.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(loc.at(
                r.url.span(),
                f("url"),
                "must not carry credentials (user:password@); use a route credential instead",
            ));
        }
        let ca_file = r
            .ca_file
            .as_ref()
            .map(|c| (resolve(base, c.get_ref()), c.span()));
        if ca_file.is_some() && !https {
            let span = r.ca_file.as_ref().map(|c| c.span()).unwrap_or(0..0);
            return Err(loc.at(span, f("ca_file"), "only applies to https:// upstreams"));
        }
        let tls = if https {
            let (path, span) = match &ca_file {
                Some((p, s)) => (Some(p.as_path()), s.clone()),
                None => (None, r.url.span()),
            };
            Some(
                crate::tls::client_config(path)
                    .map_err(|e| loc.at(span, f("ca_file"), e.to_string()))?,
            )
        } else {
            None
        };
        let pool_max = loc.positive(&r.pool_max_idle_per_host, &f("pool_max_idle_per_host"), 64)?;
        let policy = match &r.policy {
            None => policies.get("untrusted"),
            Some(name) => policies.get(name.get_ref()),
        }
        .ok_or_else(|| {
            let span = r.policy.as_ref().map(|p| p.span()).unwrap_or(0..0);
            let name = r.policy.as_ref().map(|p| p.get_ref().as_str()).unwrap_or("untrusted");
            loc.at(span, f("policy"), format!("no policy named \"{name}\" (known: {}); set [policies] dir to load policy files", policies.names().join(", ")))
        })?;
        let endpoint_host = url
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        out.push(Arc::new(UpstreamRoute {
            id,
            name,
            url,
            tls,
            http2: r.http2.unwrap_or(false),
            connect_timeout: loc.duration(
                &r.connect_timeout,
                &f("connect_timeout"),
                Duration::from_secs(5),
            )?,
            response_timeout: loc.duration(
                &r.response_timeout,
                &f("response_timeout"),
                Duration::from_secs(60),
            )?,
            stream_idle_timeout: loc.duration(
                &r.stream_idle_timeout,
                &f("stream_idle_timeout"),
                Duration::from_secs(300),
            )?,
            pool_idle_timeout: loc.duration(
                &r.pool_idle_timeout,
                &f("pool_idle_timeout"),
                Duration::from_secs(90),
            )?,
            pool_max_idle_per_host: pool_max,
            forward_authorization: r.forward_authorization.unwrap_or(false),
            policy,
            endpoint_host,
            single_use_state: r.single_use_state.unwrap_or(false),
            single_use_tools: r.single_use_tools.clone().unwrap_or_default(),
        }));
    }
    Ok(out)
}

fn routes(
    raw: &[Spanned<RawRoute>],
    upstreams: &[Arc<UpstreamRoute>],
    auth: &AuthSchemes,
    loc: &Locator<'_>,
) -> Result<HashMap<String, Arc<RouteConfig>>, ConfigError> {
    let mut out = HashMap::new();
    for (i, r) in raw.iter().enumerate() {
        let r = r.get_ref();
        let path = r.path.get_ref();
        if !path.starts_with('/') || path.contains(['?', '#', ' ']) {
            return Err(loc.at(
                r.path.span(),
                format!("route[{i}].path"),
                "a path such as \"/mcp/rooms\" (starts with '/', no query)",
            ));
        }
        let Some(up) = upstreams.iter().find(|u| u.id == *r.upstream.get_ref()) else {
            let known: Vec<_> = upstreams.iter().map(|u| u.id.as_str()).collect();
            return Err(loc.at(
                r.upstream.span(),
                format!("route[{i}].upstream"),
                format!(
                    "no upstream with id \"{}\" (known: {})",
                    r.upstream.get_ref(),
                    known.join(", ")
                ),
            ));
        };
        let mut schemes = Vec::new();
        for name in r.auth.iter().flatten() {
            let id = auth.lookup(name.get_ref()).ok_or_else(|| {
                loc.at(
                    name.span(),
                    format!("route[{i}].auth"),
                    format!(
                        "no [[auth]] scheme named \"{}\" (known: {})",
                        name.get_ref(),
                        auth.names().join(", ")
                    ),
                )
            })?;
            schemes.push(id);
        }
        // Without schemes a route is anonymous; with them, anonymous only when asked for.
        let allow_anonymous = r.allow_anonymous.unwrap_or(schemes.is_empty());
        let permissions = Permissions {
            allow: permission_rules(&r.allow, &format!("route[{i}].allow"), loc)?,
            deny: permission_rules(&r.deny, &format!("route[{i}].deny"), loc)?,
        };
        let route = RouteConfig {
            upstream: up.clone(),
            auth: schemes,
            allow_anonymous,
            permissions,
        };
        if out.insert(path.clone(), Arc::new(route)).is_some() {
            return Err(loc.at(
                r.path.span(),
                format!("route[{i}].path"),
                format!("path \"{path}\" is routed twice"),
            ));
        }
    }
    Ok(out)
}

fn permission_rules(
    raw: &[Spanned<RawPermission>],
    field: &str,
    loc: &Locator<'_>,
) -> Result<Vec<PermissionRule>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for rule in raw {
        let r = rule.get_ref();
        fn strs(v: &[Spanned<String>]) -> Vec<&str> {
            v.iter().map(|s| s.get_ref().as_str()).collect()
        }
        if r.tools.is_empty() && r.prompts.is_empty() && r.resources.is_empty() {
            return Err(loc.at(
                rule.span(),
                field,
                "a rule names at least one of tools, prompts, resources (use [\"*\"] for all)",
            ));
        }
        let built = PermissionRule::new(
            &strs(&r.principals),
            &strs(&r.groups),
            &strs(&r.tools),
            &strs(&r.prompts),
            &strs(&r.resources),
        )
        .map_err(|e| loc.at(rule.span(), field, format!("bad glob: {e}")))?;
        out.push(built);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<GatewayConfig, ConfigError> {
        GatewayConfig::parse(text, Path::new("test.toml"))
    }

    const GOOD: &str = r#"
[[listener]]
address = "127.0.0.1:0"

[[upstream]]
id = "rooms"
name = "Room booking"
url = "http://127.0.0.1:9/mcp"
response_timeout = "2s"

[[route]]
path = "/mcp/rooms"
upstream = "rooms"
"#;

    #[test]
    fn a_good_config_becomes_typed_values() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.listeners.len(), 1);
        let up = &c.routes["/mcp/rooms"].upstream;
        assert_eq!(up.id, "rooms");
        assert_eq!(up.response_timeout, Duration::from_secs(2));
        assert_eq!(up.connect_timeout, Duration::from_secs(5));
        assert!(c.allowed_origins.is_none());
    }

    #[test]
    fn unknown_keys_name_file_and_line() {
        let text = GOOD.replace("response_timeout", "reponse_timeout");
        let e = parse(&text).unwrap_err();
        assert_eq!(e.file, "test.toml");
        assert_eq!(e.line, 9, "{e}");
        assert!(e.message.contains("reponse_timeout"), "{e}");
    }

    #[test]
    fn a_route_to_a_missing_upstream_is_refused_with_its_line() {
        let text = GOOD.replace("upstream = \"rooms\"", "upstream = \"room\"");
        let e = parse(&text).unwrap_err();
        assert_eq!(e.line, 13, "{e}");
        assert_eq!(e.field, "route[0].upstream");
        assert!(e.message.contains("known: rooms"), "{e}");
    }

    #[test]
    fn bad_values_are_refused() {
        for (from, to, field) in [
            ("2s", "soon", "upstream[0].response_timeout"),
            ("http://127", "ftp://127", "upstream[0].url"),
            ("\"rooms\"\nname", "\"Rooms!\"\nname", "upstream[0].id"),
            ("127.0.0.1:0", "localhost", "listener[0].address"),
        ] {
            let e = parse(&GOOD.replacen(from, to, 1)).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }

    #[test]
    fn upstreams_name_a_known_policy() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.routes["/mcp/rooms"].upstream.policy.name, "untrusted");
        let trusted = GOOD.replace(
            "response_timeout = \"2s\"",
            "response_timeout = \"2s\"\npolicy = \"trusted\"",
        );
        assert_eq!(parse(&trusted).unwrap().upstreams[0].policy.name, "trusted");
        let unknown = GOOD.replace(
            "response_timeout = \"2s\"",
            "response_timeout = \"2s\"\npolicy = \"strict\"",
        );
        let e = parse(&unknown).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (10, "upstream[0].policy"),
            "{e}"
        );
        let bad_dir = format!("[policies]\ndir = \"/nonexistent/policies\"\n{GOOD}");
        assert_eq!(parse(&bad_dir).unwrap_err().field, "policies.dir");
    }

    #[test]
    fn origins_are_normalised() {
        let text =
            format!("{GOOD}\n[security]\nallowed_origins = [\"https://App.example.com/\"]\n");
        let c = parse(&text).unwrap();
        assert!(c
            .allowed_origins
            .unwrap()
            .contains("https://app.example.com"));
        let bad = format!("{GOOD}\n[security]\nallowed_origins = [\"app.example.com\"]\n");
        assert_eq!(parse(&bad).unwrap_err().field, "security.allowed_origins");
    }
}
