//! Configuration: read once from TOML, validated in full, turned into typed
//! settings. Config is data: each phase owns its settings type and the
//! gateway builds its runtime services from them; nothing on the request
//! path ever looks at a config string again.

mod check;
mod controls;
mod limits;
mod listener;
mod locate;
mod problems;
mod raw;
mod read;
mod reload;
mod resource;
mod restart;
mod route;
mod runtime;
mod sandbox;
mod sign_in;
mod stdio;
mod traces;
mod upstream;
mod warnings;
mod words;
pub use warnings::ConfigWarning;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::audit::{AuditSettings, TracesCollector};
use crate::identify::AuthSchemes;
use crate::mrtr::settings::StateSettings;
use crate::policy::config::PolicySet;
use crate::throttle::ThrottleSettings;
use locate::{resolve, Locator};
use problems::Problems;
use raw::RawConfig;

pub use crate::model::ConfigError;
pub use controls::{weakened, Scope, SecurityControls, Weakened};
pub use limits::{InspectionLimits, Limits, LogConfig, LogFormat};
pub use listener::{is_loopback_name, ListenerConfig, ServerName, ServerNames};
pub use problems::ConfigErrors;
pub use reload::OnWeakened;
pub use resource::{Metadata as ResourceMetadata, ProtectedResource, METADATA_PATH};
pub use route::{FederationSettings, RouteConfig, TaskMode, FEDERATION_NAME};
pub use runtime::RuntimeModel;
pub use sandbox::{CgroupMode, RunAs, Sandbox, ETC_ALLOWED, OVERFLOW_ID, SYSTEM_READ_ONLY};
pub use sign_in::ApprovalSignIn;
pub use stdio::{ProcessLimits, StdioSettings, INHERITED_VARIABLES};
pub use traces::TraceSettings;
pub use upstream::UpstreamRoute;

/// The keys and kinds of the config file, read once from [`RawConfig`].
static RAW_SHAPE: std::sync::LazyLock<crate::model::Shape> =
    std::sync::LazyLock::new(crate::model::Shape::of::<RawConfig>);

/// The keys and kinds of the config file (the book's key reference is made from it).
pub fn file_shape() -> &'static crate::model::Shape {
    &RAW_SHAPE
}

#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub source: PathBuf,
    pub listeners: Vec<ListenerConfig>,
    pub admin: Option<SocketAddr>,
    /// Where approvers reach the admin listener's approval page
    /// (`[admin] approval_url`: scheme, host, port and a path prefix, no
    /// trailing `/`); `None`: at the admin listener's own address.
    pub approval_url: Option<String>,
    /// How long an approver's sign-in to the approval page lasts (`[admin]
    /// session_lifetime`, default 8 hours): the session cookie's lifetime.
    pub approval_session: Duration,
    /// `[[admin.sign_in]]`: OAuth clients of the approval page, by scheme.
    pub approval_sign_in: Vec<ApprovalSignIn>,
    pub limits: Limits,
    /// Origins allowed besides the gateway's own (normalised: lower case,
    /// no trailing slash).
    pub allowed_origins: Arc<HashSet<String>>,
    pub drain_timeout: Duration,
    /// How the data plane's threads are laid out (`[runtime]`).
    pub runtime: RuntimeModel,
    /// After SIGTERM, keep serving this long while `/readyz` answers 503
    /// (load balancers notice), then drain.
    pub pre_stop_delay: Duration,
    pub log: LogConfig,
    pub state: Arc<StateSettings>,
    pub upstreams: Vec<Arc<UpstreamRoute>>,
    /// Request path → route.
    pub routes: HashMap<String, Arc<RouteConfig>>,
    pub auth: Arc<AuthSchemes>,
    pub throttle: ThrottleSettings,
    /// Files besides the config that a change of triggers a reload
    /// (policies directory, state keys file).
    pub(crate) watched_files: Vec<PathBuf>,
    pub audit: AuditSettings,
    /// OpenTelemetry traces; `None` (no `[tracing]` section) is off.
    pub tracing: Option<traces::TraceSettings>,
    /// `[reload] on_weakened`.
    pub on_weakened: OnWeakened,
}

impl GatewayConfig {
    /// Read and validate a config file. Blocking file I/O: call it off the
    /// runtime's workers (`spawn_blocking`).
    pub fn load(path: &Path) -> Result<GatewayConfig, ConfigErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.display().to_string(),
            line: 0,
            column: 0,
            field: "(file)".into(),
            message: format!("cannot read {}: {e}", absolute(path).display()),
        })?;
        Self::parse(&text, path)
    }

    /// Parse and validate config text; `path` names the file in errors and
    /// its folder is the base for relative paths inside it. Every problem
    /// is found in one run (see [`ConfigErrors`]).
    pub fn parse(text: &str, path: &Path) -> Result<GatewayConfig, ConfigErrors> {
        let file = path.display().to_string();
        let loc = Locator { file: &file, text };
        let read = read::read::<RawConfig>(&loc, &RAW_SHAPE);
        let mut p = Problems::new(read.errors, read.removed);
        let Some(raw) = read.raw.filter(|_| read.complete) else {
            return p.finish(|| None);
        };
        let base = absolute(path)
            .parent()
            .map(Path::to_owned)
            .unwrap_or_default();
        let built = validate(raw, &loc, &base, path, &mut p);
        p.finish(|| built)
    }

    /// Every file the config is made of: itself, then the policies
    /// directory and the state keys file.
    pub(crate) fn files(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.source.as_path())
            .chain(self.watched_files.iter().map(PathBuf::as_path))
    }
}

/// `path` made absolute against the working directory (as written when
/// that fails), so that an error names the file that was really tried.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

fn admin_address(
    raw: &RawConfig,
    listeners: &[ListenerConfig],
    loc: &Locator<'_>,
) -> Result<Option<SocketAddr>, ConfigError> {
    let Some(a) = &raw.admin else { return Ok(None) };
    let admin = listener::socket_addr(&a.get_ref().address, "admin.address", loc)?;
    if let Some(l) = listeners
        .iter()
        .find(|l| l.address == admin && admin.port() != 0)
    {
        return Err(loc.at(
            a.span(),
            "admin.address",
            format!("same address as listener \"{}\"", l.name),
        ));
    }
    Ok(Some(admin))
}

/// `[admin] approval_url`: an absolute http(s) URL with no query or
/// fragment, kept without its trailing `/`.
fn approval_url(raw: &RawConfig, loc: &Locator<'_>) -> Result<Option<String>, ConfigError> {
    let Some(written) = raw
        .admin
        .as_ref()
        .and_then(|a| a.get_ref().approval_url.as_ref())
    else {
        return Ok(None);
    };
    let bad = |why: &str| loc.at(written.span(), "admin.approval_url", why.to_owned());
    let url = url::Url::parse(written.get_ref()).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(bad("must be an http or https URL with a host"));
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(bad("must have no query, fragment or user info"));
    }
    Ok(Some(url.as_str().trim_end_matches('/').to_owned()))
}

/// An approver's sign-in lasts a working day unless `[admin]
/// session_lifetime` says otherwise (at most a week: a session cannot be
/// revoked before it ends, only by changing the `[state]` keys).
fn approval_session(raw: &RawConfig, loc: &Locator<'_>) -> Result<Duration, ConfigError> {
    const WORKING_DAY: Duration = Duration::from_secs(8 * 3600);
    const WEEK: Duration = Duration::from_secs(7 * 24 * 3600);
    let written = raw
        .admin
        .as_ref()
        .and_then(|a| a.get_ref().session_lifetime.clone());
    let lifetime = loc.duration(&written, "admin.session_lifetime", WORKING_DAY)?;
    match (lifetime > WEEK, &written) {
        (true, Some(w)) => Err(loc.at(
            w.span(),
            "admin.session_lifetime",
            "at most 7 days (a sign-in cannot be revoked before it ends)",
        )),
        _ => Ok(lifetime),
    }
}

/// Every section, each checked even when another failed; the config only
/// when all are good (`p` holds the problems otherwise).
fn validate(
    raw: RawConfig,
    loc: &Locator<'_>,
    base: &Path,
    path: &Path,
    p: &mut Problems,
) -> Option<GatewayConfig> {
    let limits = limits::limits(&raw.limits, loc, p);
    let listeners = listener::listeners(&raw.listener, loc, base, p);
    let admin = p.take(admin_address(&raw, &listeners, loc));
    let approval_url = p.take(approval_url(&raw, loc));
    let approval_session = p.take(approval_session(&raw, loc));
    let allowed_origins = p.take(listener::allowed_origins(&raw.security, loc));
    let thirty = Duration::from_secs(30);
    let drain_timeout = p.or(
        loc.duration(
            &raw.shutdown.drain_timeout,
            "shutdown.drain_timeout",
            thirty,
        ),
        thirty,
    );
    let pre_stop_delay = p.or(
        loc.duration(
            &raw.shutdown.pre_stop_delay,
            "shutdown.pre_stop_delay",
            Duration::ZERO,
        ),
        Duration::ZERO,
    );
    let log = p.take(limits::log_config(&raw.log, loc));
    let runtime = p.take(runtime::runtime(&raw.runtime, loc));
    let on_weakened = p.take(reload::on_weakened(&raw.reload, loc));
    let state = limits::state_config(&raw.state, loc, base, p);
    let policies = p.take(policies(&raw, loc, base));
    let upstreams = upstream::upstreams(&raw.upstream, loc, base, policies.as_ref(), p);
    keys_kept_from_programs(&raw, &upstreams, loc, base, p);
    let auth = p.take(AuthSchemes::build(&raw.auth, base).map_err(|e| loc.settings(e)));
    let approval_sign_in = auth
        .as_ref()
        .and_then(|auth| p.take(sign_in::sign_ins(&raw, auth, loc, base)));
    let throttle =
        p.take(crate::throttle::validate(raw.rate_limits.as_ref()).map_err(|e| loc.settings(e)));
    let targets = route::RouteTargets {
        upstreams: &upstreams,
        declared: raw
            .upstream
            .iter()
            .map(|u| u.get_ref().id.get_ref().as_str())
            .collect(),
        auth: auth.as_ref(),
    };
    let routes = route::routes(&raw.route, &targets, loc, p);
    resource_names_the_route(&raw, &listeners, &routes, loc, p);
    let tracing = p.take(traces::trace_settings(raw.tracing.as_ref(), loc));
    let collector = tracing
        .as_ref()
        .and_then(Option::as_ref)
        .map(|t| TracesCollector {
            endpoint: &t.endpoint,
            service_name: &t.service_name,
        });
    let audit = p.take(
        AuditSettings::from_raw(raw.audit.as_ref(), base, collector).map_err(|e| loc.settings(e)),
    );
    if !p.is_empty() {
        return None;
    }
    Some(GatewayConfig {
        source: path.to_owned(),
        listeners,
        admin: admin?,
        approval_url: approval_url?,
        approval_session: approval_session?,
        approval_sign_in: approval_sign_in?,
        limits,
        allowed_origins: allowed_origins?,
        drain_timeout,
        runtime: runtime?,
        pre_stop_delay,
        log: log?,
        state: Arc::new(state?),
        upstreams,
        routes,
        auth: Arc::new(auth?),
        throttle: throttle?,
        watched_files: watched_files(&raw, base),
        audit: audit?,
        tracing: tracing?,
        on_weakened: on_weakened?,
    })
}

fn policies(raw: &RawConfig, loc: &Locator<'_>, base: &Path) -> Result<PolicySet, ConfigError> {
    let Some(p) = &raw.policies else {
        return PolicySet::load(None);
    };
    let dir = resolve(base, p.dir.get_ref());
    if !dir.is_dir() {
        return Err(loc.at(
            p.dir.span(),
            "policies.dir",
            format!("{} is not a directory", dir.display()),
        ));
    }
    PolicySet::load(Some(&dir))
}

/// The state keys never reach a stdio program: not through `env_from` or
/// `env`, nor through a sandbox that shows it the keys file.
fn keys_kept_from_programs(
    raw: &RawConfig,
    upstreams: &[Arc<UpstreamRoute>],
    loc: &Locator<'_>,
    base: &Path,
    p: &mut Problems,
) {
    if let Some(name) = &raw.state.keys_env {
        for (i, u) in raw.upstream.iter().enumerate() {
            let u = u.get_ref();
            let named = u
                .env_from
                .iter()
                .flatten()
                .find(|n| n.get_ref() == name.get_ref());
            let set = u
                .env
                .iter()
                .flatten()
                .map(|(k, _)| k)
                .find(|k| k.get_ref() == name.get_ref());
            if let Some(at) = named.or(set) {
                p.push(loc.at(
                    at.span(),
                    format!("upstream[{i}].env_from"),
                    format!(
                        "{} holds the gateway's state keys; a program never gets them",
                        name.get_ref()
                    ),
                ));
            }
        }
    }
    let Some(file) = &raw.state.keys_file else {
        return;
    };
    let keys = resolve(base, file.get_ref());
    for u in upstreams {
        let Some(sandbox) = u.stdio.as_ref().and_then(|s| s.sandbox.as_ref()) else {
            continue;
        };
        if sandbox
            .read_only
            .iter()
            .chain(&sandbox.writable)
            .any(|d| keys.starts_with(d))
        {
            p.push(loc.at(
                file.span(),
                "state.keys_file",
                format!(
                    "the sandbox of upstream \"{}\" shows this file to its program",
                    u.id
                ),
            ));
        }
    }
}

/// Under `server_names = ["*"]` any `Host` is served, so it cannot name an
/// OAuth route's resource: tokens for any resource would then pass. Such
/// a route must say its `resource`.
fn resource_names_the_route(
    raw: &RawConfig,
    listeners: &[ListenerConfig],
    routes: &HashMap<String, Arc<RouteConfig>>,
    loc: &Locator<'_>,
    p: &mut Problems,
) {
    if !listeners
        .iter()
        .any(|l| matches!(l.server_names, ServerNames::Any))
    {
        return;
    }
    for (i, r) in raw.route.iter().enumerate() {
        let r = r.get_ref();
        let derived = routes
            .get(r.path.get_ref())
            .and_then(|c| c.protected.as_ref())
            .is_some_and(|p| p.configured.is_none());
        if derived {
            p.push(loc.at(
                r.path.span(),
                format!("route[{i}].resource"),
                "an OAuth route behind a listener with server_names = [\"*\"] needs `resource` (its public URL): the Host header cannot name it",
            ));
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<GatewayConfig, ConfigErrors> {
        GatewayConfig::parse(text, Path::new("test.toml"))
    }

    /// The one problem of a config that has exactly one.
    fn only(text: &str) -> ConfigError {
        let e = parse(text).unwrap_err();
        assert_eq!(e.len(), 1, "{e}");
        e.first().clone()
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
    fn the_approval_url_is_an_http_base_without_query_or_trailing_slash() {
        let with = |url: &str| {
            format!("{GOOD}\n[admin]\naddress = \"127.0.0.1:0\"\napproval_url = \"{url}\"\n")
        };
        let c = parse(&with("https://approvals.example.com/gw/")).unwrap();
        assert_eq!(
            c.approval_url.as_deref(),
            Some("https://approvals.example.com/gw")
        );
        assert_eq!(parse(GOOD).unwrap().approval_url, None);
        for bad in [
            "ftp://x.example",
            "not a url",
            "https://x.example/?a=1",
            "https://u@x.example",
        ] {
            let e = only(&with(bad));
            assert!(e.to_string().contains("admin.approval_url"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_approvers_sign_in_lasts_a_working_day_unless_told() {
        let with = |d: &str| {
            format!("{GOOD}\n[admin]\naddress = \"127.0.0.1:0\"\nsession_lifetime = \"{d}\"\n")
        };
        assert_eq!(
            parse(GOOD).unwrap().approval_session,
            Duration::from_secs(8 * 3600)
        );
        assert_eq!(
            parse(&with("30m")).unwrap().approval_session,
            Duration::from_secs(1800)
        );
        for bad in ["0s", "8 weeks", "soon"] {
            let e = only(&with(bad));
            assert!(
                e.to_string().contains("admin.session_lifetime"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_sign_in_client_names_an_oauth_scheme_and_brings_its_secret() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();
        let schemes = "[[auth]]\nname = \"corp\"\ntype = \"oauth\"\nissuer = \"https://idp.example.com\"\n[[auth]]\nname = \"keys\"\ntype = \"api_key\"\n";
        let with = |client: &str| {
            format!("{schemes}{GOOD}\n[admin]\naddress = \"127.0.0.1:0\"\n[[admin.sign_in]]\n{client}\n")
        };
        let good = format!(
            "scheme = \"corp\"\nclient_id = \"approvals\"\nclient_secret_file = \"{}\"",
            secret.display()
        );
        let c = parse(&with(&good)).unwrap();
        assert_eq!(c.approval_sign_in.len(), 1);
        assert_eq!(c.approval_sign_in[0].issuer, "https://idp.example.com");
        assert_eq!(c.approval_sign_in[0].client.id, "approvals");
        for (bad, field) in [
            (good.replace("\"corp\"", "\"keys\""), "admin.sign_in.scheme"),
            (
                good.replace("\"corp\"", "\"nobody\""),
                "admin.sign_in.scheme",
            ),
            (
                good.replace("client_secret_file", "# no secret:"),
                "admin.sign_in.client_secret",
            ),
            (
                good.replace("\"approvals\"", "\"\""),
                "admin.sign_in.client_id",
            ),
        ] {
            let e = only(&with(&bad));
            assert!(e.to_string().contains(field), "{bad}: {e}");
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn a_good_config_becomes_typed_values() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.listeners.len(), 1);
        let up = &c.routes["/mcp/rooms"].upstreams[0];
        assert_eq!(up.id, "rooms");
        assert_eq!(up.response_timeout, Duration::from_secs(2));
        assert_eq!(up.connect_timeout, Duration::from_secs(5));
        assert!(c.allowed_origins.is_empty());
    }

    /// Found by the `config` fuzz target: toml gives no message for a
    /// control character in a comment.
    #[test]
    fn a_syntax_error_without_a_parser_message_still_says_what_is_wrong() {
        let text = format!("{GOOD}# a comment with a \u{1} control character\n");
        let e = only(&text);
        assert_eq!((e.line, e.field.as_str()), (14, "(syntax)"), "{e}");
        assert!(e.message.contains("not valid TOML"), "{e}");
    }

    #[test]
    fn unknown_keys_name_the_full_path_and_the_likely_key() {
        let text = GOOD.replace("response_timeout", "reponse_timeout");
        let e = only(&text);
        assert_eq!((e.file.as_str(), e.line, e.column), ("test.toml", 9, 1));
        assert_eq!(e.field, "upstream[0].reponse_timeout");
        assert!(e.message.contains("did you mean `response_timeout`"), "{e}");
    }

    #[test]
    fn every_problem_is_found_in_one_run() {
        let text = GOOD
            .replace("response_timeout", "reponse_timeout")
            .replace("\"2s\"", "\"2s\"\nconnect_timeout = \"soon\"")
            .replace("127.0.0.1:0", "localhost")
            .replace("upstream = \"rooms\"", "upstream = \"room\"")
            + "\n[limits]\nmax_conections = 5\nheader_read_timeout = \"0s\"\n";
        let e = parse(&text).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "listener[0].address",
                "upstream[0].reponse_timeout",
                "upstream[0].connect_timeout",
                "route[0].upstream",
                "limits.max_conections",
                "limits.header_read_timeout",
            ],
            "{e}"
        );
        assert!(e.iter().all(|e| e.line > 0 && e.column > 0), "{e}");
        assert_eq!(e.to_string().lines().count(), 6);
    }

    #[test]
    fn inspection_settings_are_read_and_checked() {
        let set = GOOD.to_owned()
            + "\n[limits]\ninline_inspection_bytes = 1024\nheavy_inspections_per_upstream = 3\nheavy_inspection_queue = 0\n";
        let limits = parse(&set).expect("valid").limits.inspection;
        assert_eq!(
            (limits.inline_bytes, limits.per_upstream, limits.queue),
            (1024, 3, 0)
        );
        let defaults = parse(GOOD).expect("valid").limits.inspection;
        assert_eq!(defaults, InspectionLimits::default());
        assert!(defaults.per_upstream >= 1 && defaults.queue > 0);
        let bad = GOOD.to_owned()
            + "\n[limits]\ninline_inspection_bytes = 0\nheavy_inspections_per_upstream = 0\nheavy_inspection_queue = -1\n";
        let e = parse(&bad).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "limits.inline_inspection_bytes",
                "limits.heavy_inspections_per_upstream",
                "limits.heavy_inspection_queue",
            ],
            "{e}"
        );
    }

    #[test]
    fn syntax_errors_are_said_in_words() {
        let e = only(&GOOD.replace("\"127.0.0.1:0\"", "127.0.0.1:0"));
        assert_eq!((e.line, e.field.as_str()), (3, "(syntax)"), "{e}");
        assert!(e.message.contains("in quotes"), "{e}");
        assert!(!e.message.contains("expected `"), "{e}");
        let twice = only(&GOOD.replace("name = \"Room booking\"", "id = \"again\""));
        assert!(twice.message.contains("`id` is given twice"), "{twice}");
        let kind = only(&GOOD.replace("response_timeout = \"2s\"", "http2 = \"yes\""));
        assert_eq!(kind.field, "upstream[0].http2");
        assert!(kind.message.contains("true or false"), "{kind}");
    }

    #[test]
    fn files_that_cannot_be_read_are_named_by_key_and_absolute_path() {
        let text = GOOD.replace(
            "address = \"127.0.0.1:0\"",
            "address = \"127.0.0.1:0\"\ntls = { cert = \"certs/missing.pem\", key = \"certs/missing.key\" }",
        );
        let e = GatewayConfig::parse(&text, Path::new("conf/gw.toml")).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["listener[0].tls.cert", "listener[0].tls.key"]);
        let cwd = std::env::current_dir().unwrap();
        let cert = cwd.join("conf/certs/missing.pem");
        assert!(
            e[0].message
                .starts_with(&format!("cannot read {}: ", cert.display())),
            "{e}"
        );
        let missing = GatewayConfig::load(Path::new("no-such-dir/gw.toml")).unwrap_err();
        assert!(
            missing[0]
                .message
                .contains(&cwd.join("no-such-dir/gw.toml").display().to_string()),
            "{missing}"
        );
    }

    #[test]
    fn a_misspelt_table_is_said_once() {
        let text = GOOD.replace("[[listener]]", "[[listeners]]");
        let e = only(&text);
        assert_eq!(e.field, "listeners");
        assert!(e.message.contains("did you mean `listener`"), "{e}");
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
            assert_eq!(e.first().field, field, "{e}");
        }
    }

    #[test]
    fn upstreams_name_a_known_policy() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.routes["/mcp/rooms"].upstreams[0].policy.name, "untrusted");
        let trusted = GOOD.replace(
            "response_timeout = \"2s\"",
            "response_timeout = \"2s\"\npolicy = \"trusted\"",
        );
        assert_eq!(parse(&trusted).unwrap().upstreams[0].policy.name, "trusted");
        let unknown = GOOD.replace(
            "response_timeout = \"2s\"",
            "response_timeout = \"2s\"\npolicy = \"strict\"",
        );
        let e = only(&unknown);
        assert_eq!(
            (e.line, e.field.as_str()),
            (10, "upstream[0].policy"),
            "{e}"
        );
        let bad_dir = format!("[policies]\ndir = \"/nonexistent/policies\"\n{GOOD}");
        assert_eq!(only(&bad_dir).field, "policies.dir");
    }

    #[test]
    fn origins_are_normalised() {
        let text =
            format!("{GOOD}\n[security]\nallowed_origins = [\"https://App.example.com/\"]\n");
        let c = parse(&text).unwrap();
        assert!(c.allowed_origins.contains("https://app.example.com"));
        let bad = format!("{GOOD}\n[security]\nallowed_origins = [\"app.example.com\"]\n");
        assert_eq!(only(&bad).field, "security.allowed_origins");
    }

    #[test]
    fn the_log_format_is_read_from_a_file_with_problems() {
        let text = format!("{GOOD}\n[log]\nformat = \"json\"\n[limitz]\n");
        assert!(parse(&text).is_err());
        assert_eq!(LogFormat::declared_in(&text), Some(LogFormat::Json));
        assert_eq!(LogFormat::declared_in("[log\n"), None);
    }

    #[test]
    fn route_approval_rules_and_conditions_are_read_and_pinned() {
        let text = format!(
            "{GOOD}[[route.allow]]\ntools = [\"*\"]\nwhen = 'arguments.nights <= 14'\n[[route.approval]]\nname = \"cancel\"\ntools = [\"cancel_*\"]\n"
        );
        let c = parse(&text).unwrap();
        let route = &c.routes["/mcp/rooms"];
        let names: Vec<&str> = route.approval.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["cancel"]);
        assert!(route.permissions.reads_arguments());
        let bad = format!("{GOOD}[[route.deny]]\ntools = [\"*\"]\nwhen = 'verdicts.size() > 0'\n");
        let e = only(&bad);
        assert_eq!(e.field, "route[0].deny.when", "{e}");
        assert_eq!((e.line, e.column), (GOOD.lines().count() + 3, 9), "{e}");
        assert!(e.message.contains("judged before"), "{e}");
        let bad = format!("{GOOD}[[route.approval]]\ntools = [\"*\"]\nwhen = 'tool =='\n");
        let e = only(&bad);
        assert_eq!(e.field, "route[0].approval[0].when", "{e}");
        assert!(e.message.contains("not a valid CEL expression"), "{e}");
    }
}
