//! `[[upstream]]`: the MCP servers behind the gateway, how to reach them,
//! and the policy each one's answers are held to.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use toml::Spanned;

use super::locate::{resolve, Locator};
use super::raw::RawUpstream;
use crate::model::ConfigError;
use crate::mrtr::settings::SingleUse;
use crate::policy::config::{Policy, PolicySet};

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
    /// Which of this upstream's sealed states may be answered once.
    pub single_use: SingleUse,
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

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

pub(super) fn upstreams(
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
        let single_use_by_policy = policy.single_use;
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
            single_use: SingleUse {
                all: r.single_use_state.unwrap_or(single_use_by_policy),
                tools: r.single_use_tools.clone().unwrap_or_default(),
            },
        }));
    }
    Ok(out)
}
