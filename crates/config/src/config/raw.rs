//! The config file exactly as written: serde types with `deny_unknown_fields`
//! and spans, so that every later complaint can name a line.

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(crate) listener: Vec<Spanned<RawListener>>,
    pub(crate) admin: Option<Spanned<RawAdmin>>,
    #[serde(default)]
    pub(crate) limits: RawLimits,
    #[serde(default)]
    pub(crate) security: RawSecurity,
    #[serde(default)]
    pub(crate) shutdown: RawShutdown,
    #[serde(default)]
    pub(crate) runtime: super::runtime::RawRuntime,
    #[serde(default)]
    pub(crate) reload: super::reload::RawReload,
    #[serde(default)]
    pub(crate) log: RawLog,
    pub(crate) policies: Option<RawPolicies>,
    #[serde(default)]
    pub(crate) auth: Vec<Spanned<crate::identify::RawAuthScheme>>,
    pub(crate) rate_limits: Option<Spanned<crate::throttle::RawRateLimits>>,
    pub(crate) audit: Option<Spanned<crate::audit::RawAudit>>,
    pub(crate) tracing: Option<Spanned<super::traces::RawTracing>>,
    #[serde(default)]
    pub(crate) state: RawState,
    #[serde(default)]
    pub(crate) upstream: Vec<Spanned<RawUpstream>>,
    #[serde(default)]
    pub(crate) route: Vec<Spanned<RawRoute>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawListener {
    pub(crate) name: Option<Spanned<String>>,
    pub(crate) address: Spanned<String>,
    pub(crate) tls: Option<Spanned<RawServerTls>>,
    /// Host names (optionally `:port`) this listener serves; `["*"]` any.
    pub(crate) server_names: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServerTls {
    pub(crate) cert: Spanned<String>,
    pub(crate) key: Spanned<String>,
    /// PEM CA that client certificates must chain to (mTLS).
    pub(crate) client_ca: Option<Spanned<String>>,
    /// `required` (default when client_ca is set) or `optional`.
    pub(crate) client_auth: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmin {
    pub(crate) address: Spanned<String>,
    pub(crate) approval_url: Option<Spanned<String>>,
    /// How long an approver's sign-in to the approval page lasts.
    pub(crate) session_lifetime: Option<Spanned<String>>,
    /// The approval page's OAuth clients: a browser signs in at the issuer
    /// of a route's `oauth` scheme (authorization code flow, PKCE).
    #[serde(default)]
    pub(crate) sign_in: Vec<Spanned<RawAdminSignIn>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdminSignIn {
    /// The `oauth` `[[auth]]` scheme whose issuer the approver signs in at.
    pub(crate) scheme: Spanned<String>,
    pub(crate) client_id: Spanned<String>,
    pub(crate) client_secret_file: Option<Spanned<String>>,
    pub(crate) client_secret_env: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(crate) max_request_body_bytes: Option<Spanned<i64>>,
    pub(crate) max_response_body_bytes: Option<Spanned<i64>>,
    pub(crate) max_header_bytes: Option<Spanned<i64>>,
    pub(crate) header_read_timeout: Option<Spanned<String>>,
    pub(crate) request_body_timeout: Option<Spanned<String>>,
    pub(crate) max_connections: Option<Spanned<i64>>,
    pub(crate) http2_max_concurrent_streams: Option<Spanned<i64>>,
    pub(crate) max_in_flight_requests: Option<Spanned<i64>>,
    pub(crate) request_timeout: Option<Spanned<String>>,
    pub(crate) inline_inspection_bytes: Option<Spanned<i64>>,
    pub(crate) heavy_inspections_per_upstream: Option<Spanned<i64>>,
    pub(crate) heavy_inspection_queue: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecurity {
    pub(crate) allowed_origins: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawShutdown {
    pub(crate) drain_timeout: Option<Spanned<String>>,
    pub(crate) pre_stop_delay: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLog {
    pub(crate) format: Option<Spanned<String>>,
    pub(crate) level: Option<Spanned<String>>,
    pub(crate) access: Option<Spanned<bool>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawState {
    pub(crate) keys_file: Option<Spanned<String>>,
    pub(crate) keys_env: Option<Spanned<String>>,
    pub(crate) max_client_state_bytes: Option<Spanned<i64>>,
    pub(crate) round_timeout: Option<Spanned<String>>,
    pub(crate) max_rounds: Option<Spanned<i64>>,
    pub(crate) max_operation_time: Option<Spanned<String>>,
    pub(crate) max_answer_bytes: Option<Spanned<i64>>,
    pub(crate) allow_secret_values: Option<bool>,
    pub(crate) single_use_backend: Option<Spanned<String>>,
    pub(crate) redis_url: Option<Spanned<String>>,
    pub(crate) session_lifetime: Option<Spanned<String>>,
    pub(crate) push_timeout: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicies {
    pub(crate) dir: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    pub(crate) id: Spanned<String>,
    pub(crate) name: Spanned<String>,
    /// An MCP server over HTTP; or `command`, a local program over stdio.
    pub(crate) url: Option<Spanned<String>>,
    /// A local program spoken to over stdio: the program and its arguments.
    pub(crate) command: Option<Spanned<Vec<Spanned<String>>>>,
    /// The program's whole environment (beside PATH and HOME).
    pub(crate) env: Option<std::collections::BTreeMap<Spanned<String>, Spanned<String>>>,
    /// Names passed through from the gateway's own environment.
    pub(crate) env_from: Option<Vec<Spanned<String>>>,
    pub(crate) cwd: Option<Spanned<String>>,
    /// Start one process when the gateway starts, not on first use.
    pub(crate) eager: Option<bool>,
    pub(crate) max_processes: Option<Spanned<i64>>,
    pub(crate) idle_timeout: Option<Spanned<String>>,
    pub(crate) stop_timeout: Option<Spanned<String>>,
    pub(crate) max_memory_bytes: Option<Spanned<i64>>,
    pub(crate) max_open_files: Option<Spanned<i64>>,
    pub(crate) max_cpu_seconds: Option<Spanned<i64>>,
    /// The most tasks (processes and threads) the program and its children hold.
    pub(crate) max_tasks: Option<Spanned<i64>>,
    /// Whether the program's limits are kept by a cgroup: auto, required, off.
    pub(crate) cgroup: Option<Spanned<String>>,
    /// Confinement of the program (bubblewrap).
    pub(crate) sandbox: Option<Spanned<RawSandbox>>,
    pub(crate) ca_file: Option<Spanned<String>>,
    /// SHA-256 pins of the upstream's public key (`portcullis_access::pins`).
    pub(crate) tls_pins: Option<Spanned<Vec<Spanned<String>>>>,
    pub(crate) http2: Option<bool>,
    pub(crate) connect_timeout: Option<Spanned<String>>,
    pub(crate) response_timeout: Option<Spanned<String>>,
    pub(crate) stream_idle_timeout: Option<Spanned<String>>,
    pub(crate) pool_idle_timeout: Option<Spanned<String>>,
    pub(crate) pool_max_idle_per_host: Option<Spanned<i64>>,
    pub(crate) forward_authorization: Option<bool>,
    /// Accept plain http:// to a host that is not this machine although the policy refuses it.
    pub(crate) allow_plaintext: Option<Spanned<bool>>,
    /// The gateway's own credential for this upstream (never the client's).
    pub(crate) credential: Option<Spanned<crate::credential::RawCredential>>,
    pub(crate) policy: Option<Spanned<String>>,
    pub(crate) single_use_state: Option<bool>,
    pub(crate) single_use_tools: Option<Vec<String>>,
    /// The prefix of this upstream's names in a federated route.
    pub(crate) prefix: Option<Spanned<String>>,
    /// Protocol generations the upstream speaks (default: discovered).
    pub(crate) generations: Option<Spanned<Vec<Spanned<String>>>>,
}

/// `[upstream.sandbox]`: what a stdio program may see and reach.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    #[serde(default)]
    pub(crate) read_only: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) writable: Vec<Spanned<String>>,
    pub(crate) network: Option<bool>,
    /// The host user (and group) the program runs as when the gateway runs as root.
    pub(crate) user: Option<Spanned<String>>,
    pub(crate) group: Option<Spanned<String>>,
    /// The size of its /tmp and of its /dev/shm, each.
    pub(crate) max_tmp_bytes: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub(crate) path: Spanned<String>,
    /// The one upstream of the route; or `upstreams`, several federated.
    pub(crate) upstream: Option<Spanned<String>>,
    pub(crate) upstreams: Option<Spanned<Vec<Spanned<String>>>>,
    /// A federated route's name as one server (`serverInfo.name`).
    pub(crate) name: Option<Spanned<String>>,
    /// How long a federated answer waits for each upstream.
    pub(crate) fanout_timeout: Option<Spanned<String>>,
    /// Auth schemes tried in order; absent: anonymous only.
    pub(crate) auth: Option<Vec<Spanned<String>>>,
    pub(crate) allow_anonymous: Option<bool>,
    /// Protocol generations served: "2026-07-28", "2025-11-25" (default both).
    pub(crate) generations: Option<Spanned<Vec<Spanned<String>>>>,
    /// The Tasks extension: "police" (default) or "refuse".
    pub(crate) tasks: Option<Spanned<String>>,
    /// What a stdio upstream's `roots/list` is answered with (file URIs).
    pub(crate) roots: Option<Vec<Spanned<String>>>,
    /// The route's OAuth resource identifier (RFC 8707), which access tokens
    /// must name in `aud`; default: the URL the client used (scheme, checked
    /// `Host`, path).
    pub(crate) resource: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) allow: Vec<Spanned<RawPermission>>,
    #[serde(default)]
    pub(crate) deny: Vec<Spanned<RawPermission>>,
    /// `[[route.approval]]`: calls on this route the gateway asks the
    /// person about, before the upstream policy's own rules.
    #[serde(default)]
    pub(crate) approval: Vec<Spanned<portcullis_approval::RawApproval>>,
}

/// Who may call what: a rule matches a principal by name or group, and
/// names tools, prompts and resources by glob.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPermission {
    #[serde(default)]
    pub(crate) principals: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) groups: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) tools: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) prompts: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) resources: Vec<Spanned<String>>,
    /// OAuth scopes the caller's access token must carry (an `oauth` route).
    #[serde(default)]
    pub(crate) scopes: Vec<Spanned<String>>,
    /// A CEL condition on the call: the rule covers it only while it holds.
    pub(crate) when: Option<Spanned<String>>,
}
