//! Configuration: read once from TOML, validated in full, turned into typed
//! settings. Config is data: each phase owns its settings type and the
//! gateway builds its runtime services from them; nothing on the request
//! path ever looks at a config string again.

mod limits;
mod listener;
mod locate;
mod raw;
mod route;
mod upstream;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::audit::AuditSettings;
use crate::identify::AuthSchemes;
use crate::mrtr::settings::StateSettings;
use crate::policy::config::PolicySet;
use crate::throttle::ThrottleSettings;
use locate::{resolve, Locator};
use raw::RawConfig;

pub use crate::model::ConfigError;
pub use limits::{Limits, LogConfig, LogFormat};
pub use listener::{ListenerConfig, ServerName, ServerNames};
pub(crate) use locate::syntax_message;
pub use route::RouteConfig;
pub use upstream::UpstreamRoute;

#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub source: PathBuf,
    pub listeners: Vec<ListenerConfig>,
    pub admin: Option<SocketAddr>,
    pub limits: Limits,
    /// Origins allowed besides the gateway's own (normalised: lower case,
    /// no trailing slash).
    pub allowed_origins: Arc<HashSet<String>>,
    pub drain_timeout: Duration,
    pub log: LogConfig,
    pub state: Arc<StateSettings>,
    pub upstreams: Vec<Arc<UpstreamRoute>>,
    /// Request path → route.
    pub routes: HashMap<String, Arc<RouteConfig>>,
    pub auth: Arc<AuthSchemes>,
    pub throttle: ThrottleSettings,
    /// Files besides the config that a change of triggers a reload
    /// (policies directory, state keys file).
    pub watched_files: Vec<PathBuf>,
    pub audit: AuditSettings,
}

impl GatewayConfig {
    /// Read and validate a config file. Blocking file I/O: call it off the
    /// runtime's workers (`spawn_blocking`).
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
            loc.at(span, "(syntax)", locate::syntax_message(&e))
        })?;
        let base = path.parent().map(Path::to_owned).unwrap_or_default();
        validate(raw, &loc, &base, path)
    }

    /// Every file the config is made of: itself, then the policies
    /// directory and the state keys file.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.source.as_path())
            .chain(self.watched_files.iter().map(PathBuf::as_path))
    }
}

fn validate(
    raw: RawConfig,
    loc: &Locator<'_>,
    base: &Path,
    path: &Path,
) -> Result<GatewayConfig, ConfigError> {
    let limits = limits::limits(&raw.limits, loc)?;
    let listeners = listener::listeners(&raw.listener, loc, base)?;
    let admin = match &raw.admin {
        Some(a) => Some(listener::socket_addr(
            &a.get_ref().address,
            "admin.address",
            loc,
        )?),
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
    let allowed_origins = listener::allowed_origins(&raw.security, loc)?;
    let drain_timeout = loc.duration(
        &raw.shutdown.drain_timeout,
        "shutdown.drain_timeout",
        Duration::from_secs(30),
    )?;
    let log = limits::log_config(&raw.log, loc)?;
    let state = Arc::new(limits::state_config(&raw.state, loc, base)?);
    let policies = policies(&raw, loc, base)?;
    let upstreams = upstream::upstreams(&raw.upstream, loc, base, &policies)?;
    let auth = AuthSchemes::build(&raw.auth, base).map_err(|e| loc.settings(e.into()))?;
    let throttle =
        crate::throttle::validate(raw.rate_limits.as_ref()).map_err(|e| loc.settings(e.into()))?;
    let routes = route::routes(&raw.route, &upstreams, &auth, loc)?;
    let audit =
        AuditSettings::from_raw(raw.audit.as_ref(), base).map_err(|e| loc.settings(e.into()))?;
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
        throttle,
        watched_files: watched_files(&raw, base),
        audit,
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
        assert!(c.allowed_origins.is_empty());
    }

    /// Found by the `config` fuzz target: toml gives no message for a
    /// control character in a comment.
    #[test]
    fn a_syntax_error_without_a_parser_message_still_says_what_is_wrong() {
        let text = format!("{GOOD}# a comment with a \u{1} control character\n");
        let e = parse(&text).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (14, "(syntax)"), "{e}");
        assert!(e.message.contains("not valid TOML"), "{e}");
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
        assert!(c.allowed_origins.contains("https://app.example.com"));
        let bad = format!("{GOOD}\n[security]\nallowed_origins = [\"app.example.com\"]\n");
        assert_eq!(parse(&bad).unwrap_err().field, "security.allowed_origins");
    }
}
