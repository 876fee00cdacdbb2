//! The checks that need only the request head, run before the body is read
//! so that a wrong method, host, origin or type costs nothing: the checks
//! the MCP spec asks of a server, which the gateway is toward the client.

use http::{header, request::Parts, HeaderValue, Method};

use super::Transport;
use crate::config::{is_loopback_name, ServerNames};
use crate::model::{Generation, Reason, Refusal};

/// What the head checks need of the listener and the config.
pub(crate) struct HeadRules<'a> {
    pub(crate) server_names: &'a ServerNames,
    /// The generations the route serves (2025-11-25 adds GET and DELETE).
    pub(crate) generations: &'a [Generation],
    pub(crate) allowed_origins: &'a std::collections::HashSet<String>,
    pub(crate) local_port: u16,
    /// The connection came in on a loopback address.
    pub(crate) loopback: bool,
    pub(crate) tls: bool,
}

/// What the head checks found that later phases need.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) transport: Transport,
    /// The authority the server-name check read (the absolute target or
    /// `:authority`, else `Host`): what the upstream is told the request
    /// was sent to. Any other `Host` was never checked.
    pub(crate) authority: HeaderValue,
}

/// The `Host` (HTTP/1.1) or `:authority` (HTTP/2) the request was sent to.
fn authority(parts: &Parts) -> Option<&str> {
    parts
        .uri
        .authority()
        .map(|a| a.as_str())
        .or_else(|| parts.headers.get(header::HOST)?.to_str().ok())
}

/// The HTTP methods a route serves, for `Allow`.
pub(crate) fn allowed_methods(generations: &[Generation]) -> &'static str {
    if generations.contains(&Generation::Sessions) {
        "GET, POST, DELETE"
    } else {
        "POST"
    }
}

pub(crate) fn check(parts: &Parts, rules: &HeadRules<'_>) -> Result<Head, Refusal> {
    let sessions = rules.generations.contains(&Generation::Sessions);
    let transport = match parts.method {
        Method::POST => Transport::Post,
        Method::GET if sessions => Transport::Listen,
        Method::DELETE if sessions => Transport::End,
        ref other => {
            return Err(Refusal::new(
                Reason::MethodNotAllowed,
                format!(
                    "{other} is not supported on this MCP endpoint; it accepts {}",
                    allowed_methods(rules.generations)
                ),
            ))
        }
    };
    let authority = check_host(parts, rules)?;
    check_origin(parts, rules)?;
    if transport == Transport::Post {
        check_content_type(parts)?;
    }
    Ok(Head {
        transport,
        authority,
    })
}

/// DNS rebinding: a page on another site that resolves its own name to
/// this address reaches the gateway with its own name as `Host`. Returns
/// the authority it checked.
pub(crate) fn check_host(parts: &Parts, rules: &HeadRules<'_>) -> Result<HeaderValue, Refusal> {
    // One look-up of `Host`: its first value, and whether there is another.
    let mut hosts = parts.headers.get_all(header::HOST).iter();
    let host = hosts.next();
    let single = hosts.next().is_none();
    let allowed = |a: &str| single && rules.server_names.allows(a, rules.local_port);
    let checked = match parts.uri.authority() {
        Some(a) => Some(a.as_str())
            .filter(|a| allowed(a))
            .and_then(|a| HeaderValue::from_str(a).ok()),
        // The `Host` header's own value: a shared copy of the same bytes.
        None => host.filter(|h| h.to_str().is_ok_and(allowed)).cloned(),
    };
    checked.ok_or_else(|| {
        Refusal::new(
            Reason::HostNotAllowed,
            "this listener does not serve that host name (see server_names)",
        )
    })
}

/// The spec: a server must validate `Origin` and answer 403 for an invalid
/// one. Allowed: the configured origins and the gateway's own (see
/// [`is_own_origin`]).
fn check_origin(parts: &Parts, rules: &HeadRules<'_>) -> Result<(), Refusal> {
    let mut origins = parts.headers.get_all(header::ORIGIN).iter();
    let Some(origin) = origins.next() else {
        return Ok(());
    };
    let refused = || {
        Refusal::new(
            Reason::OriginNotAllowed,
            "requests from this Origin are not allowed",
        )
    };
    if origins.next().is_some() {
        return Err(refused());
    }
    let origin = origin
        .to_str()
        .map_err(|_| refused())?
        .trim_end_matches('/')
        .to_ascii_lowercase();
    if rules.allowed_origins.contains(&origin) || is_own_origin(&origin, parts, rules) {
        Ok(())
    } else {
        Err(refused())
    }
}

/// `scheme://authority` of the request itself. That proves the page came
/// from the gateway only when the host was checked against names the
/// gateway owns: listed `server_names`, or the loopback default. Under
/// `server_names = ["*"]` any `Host` passes, so a page on an attacker's name
/// resolved to this address (DNS rebinding) would send that name as both
/// `Host` and `Origin`; there only a loopback origin on a loopback listener
/// is the gateway's own (a page on this machine's loopback at this port is
/// the gateway), and every other origin must be in `allowed_origins`.
/// On a loopback listener the loopback names are one host: a page loaded
/// from `http://localhost:PORT` calling `http://127.0.0.1:PORT` is still
/// this machine's loopback at the gateway's port (a browser elsewhere
/// cannot reach this listener at all).
fn is_own_origin(origin: &str, parts: &Parts, rules: &HeadRules<'_>) -> bool {
    let scheme = if rules.tls { "https://" } else { "http://" };
    let (Some(rest), Some(authority)) = (origin.strip_prefix(scheme), authority(parts)) else {
        return false;
    };
    // A serialised origin is `scheme://host[:port]`: user info is no origin.
    if rest.contains('@') {
        return false;
    }
    let default_port = if rules.tls { 443 } else { 80 };
    let (Ok(page), Ok(asked)) = (
        rest.parse::<http::uri::Authority>(),
        authority.parse::<http::uri::Authority>(),
    ) else {
        return false;
    };
    let port = |a: &http::uri::Authority| a.port_u16().unwrap_or(default_port);
    let page_is_loopback = is_loopback_name(page.host());
    let same_host = page.host().eq_ignore_ascii_case(asked.host())
        || rules.loopback && page_is_loopback && is_loopback_name(asked.host());
    if !same_host || port(&page) != port(&asked) {
        return false;
    }
    match rules.server_names {
        ServerNames::Any => rules.loopback && page_is_loopback,
        ServerNames::Loopback | ServerNames::Names(_) => true,
    }
}

fn check_content_type(parts: &Parts) -> Result<(), Refusal> {
    let mut content_types = parts.headers.get_all(header::CONTENT_TYPE).iter();
    let content_type = content_types
        .next()
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_types.next().is_some() {
        return Err(Refusal::new(
            Reason::UnsupportedMediaType,
            "Content-Type is given more than once",
        ));
    }
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(Refusal::new(
            Reason::UnsupportedMediaType,
            "the request body must be a JSON-RPC message sent as Content-Type: application/json",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn parts(method: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder().method(method).uri("/mcp");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    /// A plain-HTTP listener on port 8080 serving `server_names`.
    fn rules<'a>(
        server_names: &'a ServerNames,
        origins: &'a HashSet<String>,
        loopback: bool,
    ) -> HeadRules<'a> {
        HeadRules {
            server_names,
            generations: &[Generation::Stateless],
            allowed_origins: origins,
            local_port: 8080,
            loopback,
            tls: false,
        }
    }

    fn reason(p: &Parts, origins: &HashSet<String>) -> Option<Reason> {
        let rules = rules(&ServerNames::Loopback, origins, true);
        check(p, &rules).err().map(|r| r.reason)
    }

    const JSON: (&str, &str) = ("content-type", "application/json; charset=utf-8");
    const HOST: (&str, &str) = ("host", "127.0.0.1:8080");

    #[test]
    fn method_host_origin_and_type() {
        let none = HashSet::new();
        let allowed: HashSet<String> = ["https://app.example.com".to_owned()].into();
        assert_eq!(
            reason(&parts("GET", &[JSON, HOST]), &none),
            Some(Reason::MethodNotAllowed)
        );
        assert_eq!(reason(&parts("POST", &[JSON, HOST]), &none), None);
        assert_eq!(
            reason(&parts("POST", &[JSON, ("host", "evil.example.com")]), &none),
            Some(Reason::HostNotAllowed)
        );
        assert_eq!(
            reason(&parts("POST", &[JSON]), &none),
            Some(Reason::HostNotAllowed)
        );
        assert_eq!(
            reason(
                &parts("POST", &[JSON, HOST, ("host", "127.0.0.1:8080")]),
                &none
            ),
            Some(Reason::HostNotAllowed)
        );
        assert_eq!(
            reason(
                &parts("POST", &[("content-type", "text/plain"), HOST]),
                &none
            ),
            Some(Reason::UnsupportedMediaType)
        );
        let from = |o: &str| parts("POST", &[JSON, HOST, ("origin", o)]);
        assert_eq!(reason(&from("https://app.example.com"), &allowed), None);
        assert_eq!(reason(&from("http://127.0.0.1:8080"), &none), None);
        assert_eq!(
            reason(&from("https://evil.example"), &allowed),
            Some(Reason::OriginNotAllowed)
        );
        assert_eq!(
            reason(&from("https://127.0.0.1:8080"), &none),
            Some(Reason::OriginNotAllowed)
        );
        assert_eq!(reason(&from("null"), &none), Some(Reason::OriginNotAllowed));
    }

    #[test]
    fn the_checked_authority_is_the_one_sent() {
        let none = HashSet::new();
        let rules = rules(&ServerNames::Loopback, &none, true);
        let host = parts("POST", &[JSON, ("host", "LocalHost.:8080")]);
        assert_eq!(check_host(&host, &rules).unwrap(), "LocalHost.:8080");
        // HTTP/2: the `:authority` is read, not a `Host` beside it.
        let mut h2 = parts("POST", &[JSON, ("host", "other.example:8080")]);
        h2.uri = "https://localhost:8080/mcp".parse().unwrap();
        assert_eq!(check_host(&h2, &rules).unwrap(), "localhost:8080");
    }

    #[test]
    fn under_a_wildcard_only_a_loopback_page_is_the_own_origin() {
        let none = HashSet::new();
        let check_with = |host: &str, origin: &str, loopback: bool| {
            let p = parts("POST", &[JSON, ("host", host), ("origin", origin)]);
            check(&p, &rules(&ServerNames::Any, &none, loopback))
                .err()
                .map(|r| r.reason)
        };
        for host in [
            "evil.example:8080",
            "evil.example",
            "127.0.0.1.nip.io:8080",
            "10.0.0.5:8080",
        ] {
            for origin in [
                format!("http://{host}"),
                format!("http://{}/", host.to_uppercase()),
            ] {
                for loopback in [true, false] {
                    assert_eq!(
                        check_with(host, &origin, loopback),
                        Some(Reason::OriginNotAllowed),
                        "{host} {origin} {loopback}"
                    );
                }
            }
        }
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LocalHost.:8080",
            "[::1]:8080",
        ] {
            let origin = format!("http://{host}");
            assert_eq!(check_with(host, &origin, true), None, "{host}");
            assert_eq!(
                check_with(host, &origin, false),
                Some(Reason::OriginNotAllowed),
                "{host} on a public listener"
            );
        }
        // On a loopback listener the loopback names are one host, at the same port only.
        for (host, origin) in [
            ("127.0.0.1:8080", "http://localhost:8080"),
            ("localhost:8080", "http://127.0.0.1:8080"),
            ("[::1]:8080", "http://LOCALHOST:8080/"),
        ] {
            assert_eq!(check_with(host, origin, true), None, "{host} {origin}");
            assert_eq!(
                check_with(host, origin, false),
                Some(Reason::OriginNotAllowed),
                "{host} {origin} on a public listener: the page's localhost is the browser's machine"
            );
        }
        for (host, origin) in [
            ("127.0.0.1:8080", "http://localhost:8081"),
            ("127.0.0.1:8080", "http://localhost"),
            ("127.0.0.1:8080", "https://localhost:8080"),
            ("127.0.0.1:8080", "http://localhost.evil.example:8080"),
            ("127.0.0.1:8080", "http://user@localhost:8080"),
            ("127.0.0.1:8080", "http://user@127.0.0.1:8080"),
        ] {
            assert_eq!(
                check_with(host, origin, true),
                Some(Reason::OriginNotAllowed),
                "{host} {origin}"
            );
        }
        // The wildcard itself still serves any Host without an Origin.
        let p = parts("POST", &[JSON, ("host", "evil.example")]);
        let head = check(&p, &rules(&ServerNames::Any, &none, true)).unwrap();
        assert_eq!(head.authority, "evil.example");
    }
}
