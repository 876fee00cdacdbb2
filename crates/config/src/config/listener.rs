//! `[[listener]]`, `[admin]` and `[security]`: where the gateway listens,
//! with which certificate, for which host names and origins.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use http::uri::Authority;
use http::Uri;
use toml::Spanned;

use super::locate::{resolve, Locator};
use super::problems::Problems;
use super::raw::{RawListener, RawSecurity, RawServerTls};
use crate::model::ConfigError;
use crate::tls::TlsError;

#[derive(Clone)]
pub struct ListenerConfig {
    pub name: String,
    pub address: SocketAddr,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// SHA-256 of the certificate, key and client CA files (names and
    /// contents) when TLS is on: a change needs a restart.
    pub(crate) tls_digest: Option<String>,
    pub server_names: ServerNames,
}

impl std::fmt::Debug for ListenerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerConfig")
            .field("name", &self.name)
            .field("address", &self.address)
            .field("tls", &self.tls.is_some())
            .field("server_names", &self.server_names)
            .finish()
    }
}

/// One name a listener answers to: a host, with or without a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerName {
    host: String,
    port: Option<u16>,
}

/// The `Host` / `:authority` values a listener serves. The gateway rewrites
/// `Host` for its upstream, so the upstream's own DNS-rebinding protection
/// never sees the client's: the gateway checks it here instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerNames {
    /// `["*"]`: any host (behind a load balancer that checks it).
    Any,
    /// The default on a loopback address: `localhost`, `127.0.0.1` and `[::1]`
    /// with the listener's own port.
    Loopback,
    Names(Vec<ServerName>),
}

/// A host as compared: lower case, without its one trailing dot (the
/// fully qualified spelling of the same name; `localhost..` is no name).
fn normal_host(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// `localhost`, `127.0.0.1` or `[::1]`, in any case, with or without the
/// one trailing dot: the names of the loopback default.
pub fn is_loopback_name(host: &str) -> bool {
    // As `normal_host` reads it, without its copy (every request asks).
    let host = host.strip_suffix('.').unwrap_or(host);
    ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .any(|name| host.eq_ignore_ascii_case(name))
}

impl ServerNames {
    /// Whether a request for `authority` (the `Host` header or the HTTP/2
    /// `:authority`) is one this listener serves; `local_port` is the port
    /// the connection came in on.
    pub fn allows(&self, authority: &str, local_port: u16) -> bool {
        match plain_authority(authority) {
            Some((host, port)) => self.serves(host, port, local_port),
            None => {
                let Ok(a) = authority.parse::<Authority>() else {
                    return false;
                };
                !a.as_str().contains('@') && self.serves(a.host(), a.port_u16(), local_port)
            }
        }
    }

    /// Whether this listener serves `host` (as written) with `port`.
    fn serves(&self, host: &str, port: Option<u16>, local_port: u16) -> bool {
        match self {
            ServerNames::Any => true,
            ServerNames::Loopback => {
                is_loopback_name(host)
                    && port.map_or(matches!(local_port, 80 | 443), |p| p == local_port)
            }
            ServerNames::Names(names) => {
                // `normal_host` of `host` compared without its copy: the
                // listed names are normal already, so a byte comparison in
                // any ASCII case is the same test.
                let host = host.strip_suffix('.').unwrap_or(host);
                names.iter().any(|n| {
                    n.host.eq_ignore_ascii_case(host) && n.port.is_none_or(|p| Some(p) == port)
                })
            }
        }
    }
}

/// The host and port of the usual authority (`name` or `name:port`, the
/// name of ASCII letters, digits, dots and hyphens, the port of one to five
/// digits that fit in a `u16`), read without building an `Authority` (which
/// copies it: every request asks). `None` for anything else, which the full
/// parse reads; on what this reads, the two agree
/// (`plain_authority_agrees_with_the_full_parse`).
fn plain_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    let name_byte = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-');
    if host.is_empty() || !host.bytes().all(|b| name_byte(&b)) {
        return None;
    }
    let port = match port {
        None => None,
        Some(p) if (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse::<u16>().ok()?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

fn server_names(
    raw: &Option<Spanned<Vec<Spanned<String>>>>,
    address: SocketAddr,
    field: &str,
    loc: &Locator<'_>,
) -> Result<ServerNames, ConfigError> {
    let Some(list) = raw else {
        if address.ip().is_loopback() {
            return Ok(ServerNames::Loopback);
        }
        return Err(loc.at(
            0..0,
            format!("{field}.server_names"),
            format!(
                "{address} is not a loopback address, so list the host names clients use to reach it (e.g. server_names = [\"mcp.example.com\"]), or [\"*\"] to accept any Host; requests for other names are refused (DNS rebinding)"
            ),
        ));
    };
    if list.get_ref().iter().any(|n| n.get_ref() == "*") {
        return Ok(ServerNames::Any);
    }
    let mut names = Vec::new();
    for n in list.get_ref() {
        let a = n
            .get_ref()
            .trim()
            .parse::<Authority>()
            .ok()
            .filter(|a| !a.host().is_empty() && !a.as_str().contains('@'));
        let Some(a) = a else {
            return Err(loc.at(
                n.span(),
                format!("{field}.server_names"),
                format!("\"{}\" is not a host name such as \"mcp.example.com\" or \"mcp.example.com:8443\"", n.get_ref()),
            ));
        };
        names.push(ServerName {
            host: normal_host(a.host()),
            port: a.port_u16(),
        });
    }
    if names.is_empty() {
        return Err(loc.at(
            list.span(),
            format!("{field}.server_names"),
            "an empty list would refuse every request; name at least one host, or [\"*\"]",
        ));
    }
    Ok(ServerNames::Names(names))
}

pub(super) fn socket_addr(
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

pub(super) fn listeners(
    raw: &[Spanned<RawListener>],
    loc: &Locator<'_>,
    base: &Path,
    p: &mut Problems,
) -> Vec<ListenerConfig> {
    if raw.is_empty() {
        p.push(loc.at(
            0..0,
            "listener",
            "no [[listener]] configured; add one with an address such as \"127.0.0.1:8080\"",
        ));
    }
    let mut out = Vec::new();
    let mut names = HashSet::new();
    let mut addresses = HashSet::new();
    for (i, l) in raw.iter().enumerate() {
        let field = format!("listener[{i}]");
        let r = l.get_ref();
        let address = p.take(socket_addr(&r.address, &format!("{field}.address"), loc));
        let name = r
            .name
            .as_ref()
            .map(|n| n.get_ref().clone())
            .unwrap_or_else(|| format!("listener-{i}"));
        if !names.insert(name.clone()) {
            let span = r.name.as_ref().map_or(l.span(), |n| n.span());
            p.push(loc.at(
                span,
                format!("{field}.name"),
                format!("listener name \"{name}\" is used twice"),
            ));
        }
        if let Some(a) = address.filter(|a| a.port() != 0 && !addresses.insert(*a)) {
            p.push(loc.at(
                r.address.span(),
                format!("{field}.address"),
                format!("{a} is used by another listener"),
            ));
        }
        let tls = r
            .tls
            .as_ref()
            .map(|t| listener_tls(t.get_ref(), &field, loc, base, p));
        let Some(address) = address else { continue };
        let server_names = server_names(&r.server_names, address, &field, loc).map_err(|e| {
            if e.line == 1 && e.column == 1 {
                loc.at(l.span(), e.field, e.message)
            } else {
                e
            }
        });
        let Some(server_names) = p.take(server_names) else {
            continue;
        };
        let tls = match tls {
            None => None,
            Some(None) => continue,
            Some(Some(t)) => Some(t),
        };
        out.push(ListenerConfig {
            name,
            address,
            tls_digest: tls.as_ref().map(|(_, d)| d.clone()),
            tls: tls.map(|(c, _)| c),
            server_names,
        });
    }
    out
}

/// A file a key names must be readable: the error names the key and the
/// file's absolute path.
pub(super) fn readable(
    raw: &Spanned<String>,
    field: &str,
    loc: &Locator<'_>,
    base: &Path,
) -> Result<std::path::PathBuf, ConfigError> {
    let path = resolve(base, raw.get_ref());
    match std::fs::read(&path) {
        Ok(_) => Ok(path),
        Err(e) => Err(loc.at(
            raw.span(),
            field,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

/// SHA-256 of the files a TLS listener is made of: a reload that changes
/// them needs a restart, and this says whether it did.
pub(super) fn files_digest(paths: &[&Path]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in paths {
        ctx.update(p.as_os_str().as_encoded_bytes());
        ctx.update(&std::fs::read(p).unwrap_or_default());
    }
    ctx.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn client_auth(
    t: &RawServerTls,
    field: &str,
    loc: &Locator<'_>,
    base: &Path,
) -> Result<Option<(std::path::PathBuf, bool)>, ConfigError> {
    match (&t.client_ca, &t.client_auth) {
        (None, None) => Ok(None),
        (None, Some(a)) => Err(loc.at(
            a.span(),
            format!("{field}.tls.client_auth"),
            "needs client_ca",
        )),
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
            let path = readable(ca, &format!("{field}.tls.client_ca"), loc, base)?;
            Ok(Some((path, required)))
        }
    }
}

/// The listener's TLS config and the digest of its files; every file
/// problem is reported under its own key.
fn listener_tls(
    t: &RawServerTls,
    field: &str,
    loc: &Locator<'_>,
    base: &Path,
    p: &mut Problems,
) -> Option<(Arc<rustls::ServerConfig>, String)> {
    let cert = p.take(readable(&t.cert, &format!("{field}.tls.cert"), loc, base));
    let key = p.take(readable(&t.key, &format!("{field}.tls.key"), loc, base));
    let client = p.take(client_auth(t, field, loc, base));
    let (cert, key, client) = (cert?, key?, client?);
    let client_ref = client.as_ref().map(|(p, r)| (p.as_path(), *r));
    let built = crate::tls::server_config(&cert, &key, client_ref).map_err(|e| {
        let (span, which) = match &e {
            TlsError::NoKey { .. } => (t.key.span(), "tls.key"),
            TlsError::BadCa { .. } => (
                t.client_ca.as_ref().map_or(t.cert.span(), |c| c.span()),
                "tls.client_ca",
            ),
            TlsError::NoCertificate { .. } | TlsError::Read { .. } => (t.cert.span(), "tls.cert"),
            TlsError::Rustls(_) => (t.cert.span(), "tls"),
        };
        loc.at(span, format!("{field}.{which}"), e.to_string())
    });
    let config = p.take(built)?;
    let mut files = vec![cert.as_path(), key.as_path()];
    files.extend(client.as_ref().map(|(c, _)| c.as_path()));
    Some((config, files_digest(&files)))
}

/// `[security] allowed_origins`, normalised (lower case, no trailing slash).
pub(super) fn allowed_origins(
    raw: &RawSecurity,
    loc: &Locator<'_>,
) -> Result<Arc<HashSet<String>>, ConfigError> {
    let mut set = HashSet::new();
    for o in raw.allowed_origins.iter().flat_map(|l| l.get_ref()) {
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
    Ok(Arc::new(set))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> ServerNames {
        let text = format!(
            "x = [{}]",
            list.iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(",")
        );
        #[derive(serde::Deserialize)]
        struct T {
            x: Spanned<Vec<Spanned<String>>>,
        }
        let t: T = toml::from_str(&text).unwrap();
        let loc = Locator {
            file: "t",
            text: &text,
        };
        server_names(
            &Some(t.x),
            "10.0.0.1:443".parse().unwrap(),
            "listener[0]",
            &loc,
        )
        .unwrap()
    }

    /// The verdict as the full parse gives it (what `allows` did for every
    /// request before the plain reading): the oracle.
    fn allows_by_parse(n: &ServerNames, authority: &str, local_port: u16) -> bool {
        let Ok(a) = authority.parse::<Authority>() else {
            return false;
        };
        !a.as_str().contains('@') && n.serves(a.host(), a.port_u16(), local_port)
    }

    #[test]
    fn plain_authority_agrees_with_the_full_parse() {
        let hosts = [
            "",
            "localhost",
            "LocalHost.",
            "localhost..",
            "127.0.0.1",
            "[::1]",
            "mcp.example.com",
            "MCP.Example.COM.",
            "a-b.c",
            "-",
            ".",
            "x_y",
            "é.com",
            "a b",
            "u@localhost",
            "%41",
        ];
        let ports = [
            "", ":", ":8080", ":80", ":443", ":0", ":08080", ":65535", ":65536", ":123456",
            ":8080:1", ":x", ":+80", ":-1", ": 80", "/", "?q", "#f",
        ];
        let lists = [
            ServerNames::Any,
            ServerNames::Loopback,
            names(&["mcp.example.com", "localhost:8080", "LocalHost.:443"]),
        ];
        for host in hosts {
            for port in ports {
                let authority = format!("{host}{port}");
                for n in &lists {
                    for local in [80, 443, 8080] {
                        assert_eq!(
                            n.allows(&authority, local),
                            allows_by_parse(n, &authority, local),
                            "{authority:?} {n:?} {local}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn loopback_names_with_the_listeners_port() {
        let n = ServerNames::Loopback;
        for ok in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST:8080",
            "localhost.:8080",
        ] {
            assert!(n.allows(ok, 8080), "{ok}");
        }
        for bad in [
            "evil.example.com:8080",
            "localhost:9090",
            "127.0.0.2:8080",
            "localhost",
            "user@localhost:8080",
            "",
        ] {
            assert!(!n.allows(bad, 8080), "{bad}");
        }
        assert!(n.allows("localhost", 80));
    }

    #[test]
    fn loopback_names_allow_one_trailing_dot_only() {
        for name in [
            "localhost",
            "LOCALHOST",
            "localhost.",
            "127.0.0.1",
            "[::1]",
            "[::1].",
        ] {
            assert!(is_loopback_name(name), "{name}");
        }
        for name in [
            "localhost..",
            "127.0.0.2",
            "[::2]",
            "localhost.evil",
            "127.0.0.1.nip.io",
            "",
        ] {
            assert!(!is_loopback_name(name), "{name}");
        }
    }

    #[test]
    fn configured_names_with_and_without_port() {
        let n = names(&["mcp.example.com", "Admin.Example.com:8443"]);
        assert!(n.allows("mcp.example.com", 443));
        assert!(n.allows("mcp.example.com.:443", 443));
        assert!(n.allows("admin.example.com:8443", 443));
        assert!(!n.allows("admin.example.com:9443", 443));
        assert!(!n.allows("evil.example.com", 443));
        assert_eq!(names(&["*"]), ServerNames::Any);
    }
}
