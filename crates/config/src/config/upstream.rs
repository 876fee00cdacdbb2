//! `[[upstream]]`: the MCP servers behind the gateway, how to reach them,
//! and the policy each one's answers are held to.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use toml::Spanned;

use super::listener::readable;
use super::locate::Locator;
use super::problems::Problems;
use super::raw::RawUpstream;
use super::stdio::{http_only_keys, stdio, stdio_only_keys, StdioSettings};
use crate::model::{ConfigError, Generation};
use crate::mrtr::settings::SingleUse;
use crate::policy::config::{PlaintextRemote, Policy, PolicySet};
use portcullis_access::pins::SpkiPin;

/// One upstream MCP server and how to reach it.
pub struct UpstreamRoute {
    /// Short identifier; also the `upstream` label of metrics.
    pub id: String,
    /// The name people see in errors and provenance. Configured, never taken
    /// from the server.
    pub name: String,
    pub url: Uri,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// What `tls` was built from (the CA file's path and bytes, or the
    /// built-in roots), comparable across reloads; `None` for plain http.
    pub tls_digest: Option<String>,
    /// `tls_pins`, each as base64 of the key's SHA-256 (empty: not pinned).
    pub tls_pins: Vec<String>,
    pub http2: bool,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub stream_idle_timeout: Duration,
    pub pool_idle_timeout: Duration,
    pub pool_max_idle_per_host: usize,
    pub forward_authorization: bool,
    /// `allow_plaintext = true`: plain http:// to a host that is not this
    /// machine, accepted by the operator for this upstream.
    pub allow_plaintext: bool,
    /// What the gateway sends the upstream as its own credential.
    pub credential: Option<Arc<crate::credential::UpstreamCredential>>,
    /// The elicitation policy applied to this upstream's answers.
    pub policy: Arc<Policy>,
    /// `host[:port]` of the URL, shown in provenance.
    pub endpoint_host: String,
    /// Which of this upstream's sealed states may be answered once.
    pub single_use: SingleUse,
    /// What its names start with in a federated route (the id unless set).
    pub prefix: String,
    /// Where `prefix` was written (for problems found by the routes).
    pub(crate) prefix_span: std::ops::Range<usize>,
    /// The protocol generations it speaks, when configured; `None`: asked
    /// with `server/discover` when a client of another generation needs
    /// it (`pipeline::bridge`).
    pub generations: Option<Vec<Generation>>,
    /// Set for a local program spoken to over stdio (`command`); its `url`
    /// is then the gateway's own name for it, never dialled.
    pub stdio: Option<Arc<StdioSettings>>,
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

/// The upstream URL: http or https, a host, no credentials.
fn upstream_url(
    raw: &Spanned<String>,
    field: &str,
    loc: &Locator<'_>,
) -> Result<(Uri, bool), ConfigError> {
    let at = |m: String| loc.at(raw.span(), field, m);
    let url: Uri = raw
        .get_ref()
        .parse()
        .map_err(|e| at(format!("not a URL: {e}")))?;
    let https = match url.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(at("must start with http:// or https://".into())),
    };
    if url.host().is_none_or(str::is_empty) {
        return Err(at("has no host".into()));
    }
    if url.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(at(
            "must not carry credentials (user:password@); use a route credential instead".into(),
        ));
    }
    Ok((url, https))
}

/// What a stdio upstream is called in the places a URL goes (logs,
/// `portcullis listings`, the HTTP requests the gateway writes to it).
fn stdio_url(id: &str) -> Option<(Uri, bool)> {
    let url = format!("http://stdio.invalid/{id}").parse().ok()?;
    Some((url, false))
}

/// A stdio upstream with a key only an HTTP one has, or the other way.
fn transport_keys(
    r: &RawUpstream,
    field: &dyn Fn(&str) -> String,
    loc: &Locator<'_>,
    p: &mut Problems,
) {
    for (key, span) in http_only_keys(r) {
        p.push(loc.at(span, field(key), "only an upstream with a url has this"));
    }
    if r.http2.is_some() {
        p.push(loc.at(
            r.id.span(),
            field("http2"),
            "only an upstream with a url has this",
        ));
    }
}

/// The client TLS config of an https upstream (with its `ca_file` and
/// `tls_pins`), and the digest of what it was built from.
fn upstream_tls(
    r: &RawUpstream,
    https: bool,
    field: &dyn Fn(&str) -> String,
    loc: &Locator<'_>,
    base: &Path,
) -> Result<Option<(Arc<rustls::ClientConfig>, String)>, ConfigError> {
    let pins = upstream_pins(r, https, field, loc)?;
    let pinned = |digest: String| {
        let keys: Vec<String> = pins.iter().map(|p| p.to_base64()).collect();
        format!("{digest};pins={}", keys.join(","))
    };
    match (&r.ca_file, https) {
        (Some(c), false) => Err(loc.at(
            c.span(),
            field("ca_file"),
            "only applies to https:// upstreams",
        )),
        (None, false) => Ok(None),
        (None, true) => crate::tls::client_config(None, &pins)
            .map(|c| Some((c, pinned(super::listener::files_digest(&[])))))
            .map_err(|e| loc.at(r.id.span(), field("url"), e.to_string())),
        (Some(c), true) => {
            let path = readable(c, &field("ca_file"), loc, base)?;
            crate::tls::client_config(Some(&path), &pins)
                .map(|c| Some((c, pinned(super::listener::files_digest(&[&path])))))
                .map_err(|e| loc.at(c.span(), field("ca_file"), e.to_string()))
        }
    }
}

/// `tls_pins`: each a SHA-256 of the upstream key's SubjectPublicKeyInfo
/// (`sha256/<base64>`, base64, or hex), an https upstream's only.
fn upstream_pins(
    r: &RawUpstream,
    https: bool,
    field: &dyn Fn(&str) -> String,
    loc: &Locator<'_>,
) -> Result<Vec<SpkiPin>, ConfigError> {
    let Some(list) = &r.tls_pins else {
        return Ok(Vec::new());
    };
    if !https {
        return Err(loc.at(
            list.span(),
            field("tls_pins"),
            "only applies to https:// upstreams",
        ));
    }
    if list.get_ref().is_empty() {
        return Err(loc.at(
            list.span(),
            field("tls_pins"),
            "an empty list pins nothing: list the key's pins, or leave tls_pins out",
        ));
    }
    list.get_ref()
        .iter()
        .map(|p| {
            SpkiPin::parse(p.get_ref())
                .map_err(|e| loc.at(p.span(), field("tls_pins"), e.to_string()))
        })
        .collect()
}

/// The pins as [`upstream_pins`] read them (already checked there), for
/// holding one generation's against another's.
fn written_pins(r: &RawUpstream) -> Vec<String> {
    let list = r.tls_pins.as_ref().map(Spanned::get_ref);
    list.into_iter()
        .flatten()
        .filter_map(|p| SpkiPin::parse(p.get_ref()).ok())
        .map(|p| p.to_base64())
        .collect()
}

fn upstream_policy(
    r: &RawUpstream,
    field: &str,
    loc: &Locator<'_>,
    policies: &PolicySet,
) -> Result<Arc<Policy>, ConfigError> {
    let name = r
        .policy
        .as_ref()
        .map_or("untrusted", |p| p.get_ref().as_str());
    policies.get(name).ok_or_else(|| {
        let span = r.policy.as_ref().map(|p| p.span()).unwrap_or(0..0);
        loc.at(
            span,
            field,
            format!(
                "no policy named \"{name}\" (known: {}); set [policies] dir to load policy files",
                policies.names().join(", ")
            ),
        )
    })
}

fn upstream_identity(
    r: &RawUpstream,
    field: &dyn Fn(&str) -> String,
    loc: &Locator<'_>,
    p: &mut Problems,
) -> (String, String) {
    let id = r.id.get_ref().clone();
    if !valid_id(&id) {
        p.push(loc.at(
            r.id.span(),
            field("id"),
            "use 1 to 64 of a-z, 0-9, '-' and '_' (it becomes a metric label)",
        ));
    }
    let name = r.name.get_ref().trim().to_owned();
    if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
        p.push(loc.at(
            r.name.span(),
            field("name"),
            "a display name of 1 to 200 printable characters",
        ));
    }
    (id, name)
}

/// `credential`: built, or `Some(None)` when there is none; `None` when it
/// is wrong (the problem is in `p`).
fn credential(
    r: &RawUpstream,
    f: &dyn Fn(&str) -> String,
    loc: &Locator<'_>,
    base: &Path,
    p: &mut Problems,
) -> Option<Option<Arc<crate::credential::UpstreamCredential>>> {
    let Some(raw) = &r.credential else {
        return Some(None);
    };
    let field = f("credential");
    if r.command.is_some() {
        p.push(loc.at(
            raw.span(),
            field,
            "a stdio program gets no HTTP credential (give it `env` instead)",
        ));
        return None;
    }
    if r.forward_authorization == Some(true) {
        p.push(loc.at(
            raw.span(),
            field,
            "give credential or forward_authorization = true, not both",
        ));
        return None;
    }
    let built = crate::credential::UpstreamCredential::build(raw.get_ref(), base, &field)
        .map_err(|e| loc.settings(e));
    p.take(built).map(|c| Some(Arc::new(c)))
}

/// Every upstream that is valid; the problems of the others are in `p`.
/// `policies` is `None` when the policy files could not be read.
pub(super) fn upstreams(
    raw: &[Spanned<RawUpstream>],
    loc: &Locator<'_>,
    base: &Path,
    policies: Option<&PolicySet>,
    p: &mut Problems,
) -> Vec<Arc<UpstreamRoute>> {
    let mut out: Vec<Arc<UpstreamRoute>> = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (i, u) in raw.iter().enumerate() {
        let f = |name: &str| format!("upstream[{i}].{name}");
        let r = u.get_ref();
        let (id, name) = upstream_identity(r, &f, loc, p);
        if !ids.insert(id.clone()) {
            p.push(loc.at(
                r.id.span(),
                f("id"),
                format!("upstream id \"{id}\" is used twice"),
            ));
        }
        let stdio = stdio(r, &f, loc, base, p).map(Arc::new);
        let url = match (&r.url, &r.command) {
            (Some(url), None) => p.take(upstream_url(url, &f("url"), loc)),
            (None, Some(_)) => {
                transport_keys(r, &f, loc, p);
                stdio_url(&id)
            }
            (Some(url), Some(_)) => {
                p.push(loc.at(url.span(), f("url"), "give url or command, not both"));
                None
            }
            (None, None) => {
                p.push(loc.at(
                    u.span(),
                    f("url"),
                    "missing: url (a server over HTTP) or command (a local program over stdio)",
                ));
                None
            }
        };
        if r.command.is_some() && stdio.is_none() {
            continue;
        }
        if r.command.is_none() {
            for (key, span) in stdio_only_keys(r) {
                p.push(loc.at(span, f(key), "only an upstream with a command has this"));
            }
        }
        let tls = url
            .as_ref()
            .and_then(|(_, https)| p.take(upstream_tls(r, *https, &f, loc, base)));
        let pool_max = p.or(
            loc.positive(&r.pool_max_idle_per_host, &f("pool_max_idle_per_host"), 64),
            64,
        );
        let policy = policies.and_then(|set| p.take(upstream_policy(r, &f("policy"), loc, set)));
        let mut time = |raw: &Option<Spanned<String>>, key: &str, secs: u64| {
            let d = Duration::from_secs(secs);
            p.or(loc.duration(raw, &f(key), d), d)
        };
        // A program's start may fetch it first (npx, uvx): longer than a dial.
        let start_secs = if r.command.is_some() { 30 } else { 5 };
        let connect_timeout = time(&r.connect_timeout, "connect_timeout", start_secs);
        let response_timeout = time(&r.response_timeout, "response_timeout", 60);
        let stream_idle_timeout = time(&r.stream_idle_timeout, "stream_idle_timeout", 300);
        let pool_idle_timeout = time(&r.pool_idle_timeout, "pool_idle_timeout", 90);
        let generations = match &r.generations {
            None => None,
            some => p.take(super::route::generations(some, &f("generations"), loc)),
        };
        let credential = credential(r, &f, loc, base, p);
        let (Some((url, _)), Some(tls), Some(policy), Some(credential)) =
            (url, tls, policy, credential)
        else {
            continue;
        };
        let single_use_by_policy = policy.single_use;
        let endpoint_host = match &stdio {
            Some(_) => format!("stdio:{id}"),
            None => url
                .authority()
                .map(|a| a.as_str().to_owned())
                .unwrap_or_default(),
        };
        let route = UpstreamRoute {
            name,
            url,
            tls_digest: tls.as_ref().map(|(_, d)| d.clone()),
            tls_pins: written_pins(r),
            tls: tls.map(|(c, _)| c),
            http2: r.http2.unwrap_or(false),
            connect_timeout,
            response_timeout,
            stream_idle_timeout,
            pool_idle_timeout,
            pool_max_idle_per_host: pool_max,
            forward_authorization: r.forward_authorization.unwrap_or(false),
            credential,
            policy,
            endpoint_host,
            single_use: SingleUse {
                all: r.single_use_state.unwrap_or(single_use_by_policy),
                tools: r.single_use_tools.clone().unwrap_or_default(),
            },
            prefix: r
                .prefix
                .as_ref()
                .map_or_else(|| id.clone(), |p| p.get_ref().clone()),
            prefix_span: r.prefix.as_ref().map_or_else(|| r.id.span(), |p| p.span()),
            generations,
            stdio,
            allow_plaintext: r.allow_plaintext.as_ref().is_some_and(|a| *a.get_ref()),
            id,
        };
        if let Some(e) = plaintext_refused(&route, r, &f("url"), loc) {
            p.push(e);
            continue;
        }
        out.push(Arc::new(route));
    }
    out
}

/// A plain `http://` upstream on a host that is not this machine, under a
/// policy that refuses it (`[transport] plaintext_remote = "refuse"`, the
/// `untrusted` preset) and without `allow_plaintext = true`.
fn plaintext_refused(
    route: &UpstreamRoute,
    r: &RawUpstream,
    field: &str,
    loc: &Locator<'_>,
) -> Option<ConfigError> {
    if route.allow_plaintext || route.policy.plaintext_remote != PlaintextRemote::Refuse {
        return None;
    }
    let host = super::warnings::plaintext_remote(route)?;
    let span = r.url.as_ref().map_or_else(|| r.id.span(), |u| u.span());
    Some(loc.at(
        span,
        field,
        format!(
            "plain http:// to {host}, which is not this machine, under policy \"{}\": what callers send it and what it answers would cross the network readable and alterable by anyone on the way; use https://, or set allow_plaintext = true on this upstream to accept that",
            route.policy.name
        ),
    ))
}
