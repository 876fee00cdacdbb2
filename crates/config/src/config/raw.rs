//! The config file exactly as written: serde types with `deny_unknown_fields`
//! and spans, so that every later complaint can name a line.

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub listener: Vec<Spanned<RawListener>>,
    pub admin: Option<Spanned<RawAdmin>>,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub security: RawSecurity,
    #[serde(default)]
    pub shutdown: RawShutdown,
    #[serde(default)]
    pub runtime: super::runtime::RawRuntime,
    #[serde(default)]
    pub log: RawLog,
    pub policies: Option<RawPolicies>,
    #[serde(default)]
    pub auth: Vec<Spanned<crate::identify::RawAuthScheme>>,
    pub rate_limits: Option<Spanned<crate::throttle::RawRateLimits>>,
    pub audit: Option<Spanned<crate::audit::RawAudit>>,
    pub tracing: Option<Spanned<super::traces::RawTracing>>,
    #[serde(default)]
    pub state: RawState,
    #[serde(default)]
    pub upstream: Vec<Spanned<RawUpstream>>,
    #[serde(default)]
    pub route: Vec<Spanned<RawRoute>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    pub name: Option<Spanned<String>>,
    pub address: Spanned<String>,
    pub tls: Option<Spanned<RawServerTls>>,
    /// Host names (optionally `:port`) this listener serves; `["*"]` any.
    pub server_names: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServerTls {
    pub cert: Spanned<String>,
    pub key: Spanned<String>,
    /// PEM CA that client certificates must chain to (mTLS).
    pub client_ca: Option<Spanned<String>>,
    /// `required` (default when client_ca is set) or `optional`.
    pub client_auth: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub address: Spanned<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub max_request_body_bytes: Option<Spanned<i64>>,
    pub max_response_body_bytes: Option<Spanned<i64>>,
    pub max_header_bytes: Option<Spanned<i64>>,
    pub header_read_timeout: Option<Spanned<String>>,
    pub request_body_timeout: Option<Spanned<String>>,
    pub max_connections: Option<Spanned<i64>>,
    pub http2_max_concurrent_streams: Option<Spanned<i64>>,
    pub max_in_flight_requests: Option<Spanned<i64>>,
    pub request_timeout: Option<Spanned<String>>,
    pub inline_inspection_bytes: Option<Spanned<i64>>,
    pub heavy_inspections_per_upstream: Option<Spanned<i64>>,
    pub heavy_inspection_queue: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSecurity {
    pub allowed_origins: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShutdown {
    pub drain_timeout: Option<Spanned<String>>,
    pub pre_stop_delay: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    pub format: Option<Spanned<String>>,
    pub level: Option<Spanned<String>>,
    pub access: Option<Spanned<bool>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawState {
    pub keys_file: Option<Spanned<String>>,
    pub keys_env: Option<Spanned<String>>,
    pub max_client_state_bytes: Option<Spanned<i64>>,
    pub round_timeout: Option<Spanned<String>>,
    pub max_rounds: Option<Spanned<i64>>,
    pub max_operation_time: Option<Spanned<String>>,
    pub max_answer_bytes: Option<Spanned<i64>>,
    pub allow_secret_values: Option<bool>,
    pub single_use_backend: Option<Spanned<String>>,
    pub redis_url: Option<Spanned<String>>,
    pub session_lifetime: Option<Spanned<String>>,
    pub push_timeout: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPolicies {
    pub dir: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    pub id: Spanned<String>,
    pub name: Spanned<String>,
    /// An MCP server over HTTP; or `command`, a local program over stdio.
    pub url: Option<Spanned<String>>,
    /// A local program spoken to over stdio: the program and its arguments.
    pub command: Option<Spanned<Vec<Spanned<String>>>>,
    /// The program's whole environment (beside PATH and HOME).
    pub env: Option<std::collections::BTreeMap<Spanned<String>, Spanned<String>>>,
    /// Names passed through from the gateway's own environment.
    pub env_from: Option<Vec<Spanned<String>>>,
    pub cwd: Option<Spanned<String>>,
    /// Start one process when the gateway starts, not on first use.
    pub eager: Option<bool>,
    pub max_processes: Option<Spanned<i64>>,
    pub idle_timeout: Option<Spanned<String>>,
    pub stop_timeout: Option<Spanned<String>>,
    pub max_memory_bytes: Option<Spanned<i64>>,
    pub max_open_files: Option<Spanned<i64>>,
    pub max_cpu_seconds: Option<Spanned<i64>>,
    /// Confinement of the program (bubblewrap).
    pub sandbox: Option<Spanned<RawSandbox>>,
    pub ca_file: Option<Spanned<String>>,
    pub http2: Option<bool>,
    pub connect_timeout: Option<Spanned<String>>,
    pub response_timeout: Option<Spanned<String>>,
    pub stream_idle_timeout: Option<Spanned<String>>,
    pub pool_idle_timeout: Option<Spanned<String>>,
    pub pool_max_idle_per_host: Option<Spanned<i64>>,
    pub forward_authorization: Option<bool>,
    /// The gateway's own credential for this upstream (never the client's).
    pub credential: Option<Spanned<crate::credential::RawCredential>>,
    pub policy: Option<Spanned<String>>,
    pub single_use_state: Option<bool>,
    pub single_use_tools: Option<Vec<String>>,
    /// The prefix of this upstream's names in a federated route.
    pub prefix: Option<Spanned<String>>,
    /// Protocol generations the upstream speaks (default: discovered).
    pub generations: Option<Spanned<Vec<Spanned<String>>>>,
}

/// `[upstream.sandbox]`: what a stdio program may see and reach.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSandbox {
    #[serde(default)]
    pub read_only: Vec<Spanned<String>>,
    #[serde(default)]
    pub writable: Vec<Spanned<String>>,
    pub network: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    pub path: Spanned<String>,
    /// The one upstream of the route; or `upstreams`, several federated.
    pub upstream: Option<Spanned<String>>,
    pub upstreams: Option<Spanned<Vec<Spanned<String>>>>,
    /// A federated route's name as one server (`serverInfo.name`).
    pub name: Option<Spanned<String>>,
    /// How long a federated answer waits for each upstream.
    pub fanout_timeout: Option<Spanned<String>>,
    /// Auth schemes tried in order; absent: anonymous only.
    pub auth: Option<Vec<Spanned<String>>>,
    pub allow_anonymous: Option<bool>,
    /// Protocol generations served: "2026-07-28", "2025-11-25" (default both).
    pub generations: Option<Spanned<Vec<Spanned<String>>>>,
    /// The Tasks extension: "police" (default) or "refuse".
    pub tasks: Option<Spanned<String>>,
    /// What a stdio upstream's `roots/list` is answered with (file URIs).
    pub roots: Option<Vec<Spanned<String>>>,
    /// The route's OAuth resource identifier (RFC 8707), which access tokens
    /// must name in `aud`; default: the URL the client used (scheme, checked
    /// `Host`, path).
    pub resource: Option<Spanned<String>>,
    #[serde(default)]
    pub allow: Vec<Spanned<RawPermission>>,
    #[serde(default)]
    pub deny: Vec<Spanned<RawPermission>>,
}

/// Who may call what: a rule matches a principal by name or group, and
/// names tools, prompts and resources by glob.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPermission {
    #[serde(default)]
    pub principals: Vec<Spanned<String>>,
    #[serde(default)]
    pub groups: Vec<Spanned<String>>,
    #[serde(default)]
    pub tools: Vec<Spanned<String>>,
    #[serde(default)]
    pub prompts: Vec<Spanned<String>>,
    #[serde(default)]
    pub resources: Vec<Spanned<String>>,
    /// OAuth scopes the caller's access token must carry (an `oauth` route).
    #[serde(default)]
    pub scopes: Vec<Spanned<String>>,
}
