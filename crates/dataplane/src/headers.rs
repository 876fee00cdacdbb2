//! Which headers cross the gateway, in each direction, and the forwarding
//! headers it adds.

use std::net::SocketAddr;
use std::sync::OnceLock;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use smallvec::SmallVec;

pub static MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
pub static MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub static LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
pub(crate) static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(crate) static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub(crate) static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
pub(crate) static FORWARDED: HeaderName = HeaderName::from_static("forwarded");
pub static X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");
static KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
static PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

// Hop-by-hop headers (RFC 9110 §7.6.1) and the framing headers the gateway
// recomputes itself; `Host` is set from the upstream URL by the client.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    [
        &header::CONNECTION,
        &KEEP_ALIVE,
        &PROXY_CONNECTION,
        &header::PROXY_AUTHENTICATE,
        &header::PROXY_AUTHORIZATION,
        &header::TE,
        &header::TRAILER,
        &header::TRANSFER_ENCODING,
        &header::UPGRADE,
        &header::CONTENT_LENGTH,
        &header::HOST,
    ]
    .contains(&name)
}

/// Headers named in `Connection` are hop-by-hop for this hop only.
fn connection_listed(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect()
}

/// Remove hop-by-hop headers (and those `Connection` names) plus `drop`.
/// One pass over the names present (a request has a handful) instead of a
/// look-up per name that might be.
fn strip_hop_by_hop(headers: &mut HeaderMap, drop: &[&HeaderName]) {
    if headers.contains_key(header::CONNECTION) {
        for name in connection_listed(headers) {
            headers.remove(&name);
        }
    }
    let doomed: SmallVec<[HeaderName; 4]> = headers
        .keys()
        .filter(|name| is_hop_by_hop(name) || drop.contains(name))
        .cloned()
        .collect();
    for name in &doomed {
        headers.remove(name);
    }
}

/// The forwarding headers of one connection's peer, built when it is
/// accepted (every request on the connection adds the same ones).
#[derive(Debug, Clone)]
pub struct Forwarding {
    /// The peer's address, as `X-Forwarded-For` gives it.
    ip: Option<HeaderValue>,
    ip_text: String,
    /// `for=<node>;proto=<scheme>`: this hop's `Forwarded` element, before its host.
    element: String,
    tls: bool,
    /// The `Forwarded` value for the first `Host` the connection sent (the
    /// one a connection keeps sending).
    by_host: OnceLock<(HeaderValue, HeaderValue)>,
}

impl Forwarding {
    pub fn new(peer: SocketAddr, tls: bool) -> Forwarding {
        let ip = peer.ip();
        let proto = if tls { "https" } else { "http" };
        // RFC 7239: IPv6 addresses are quoted and bracketed.
        let element = if ip.is_ipv6() {
            format!("for=\"[{ip}]\";proto={proto}")
        } else {
            format!("for={ip};proto={proto}")
        };
        let ip_text = ip.to_string();
        Forwarding {
            ip: HeaderValue::from_str(&ip_text).ok(),
            ip_text,
            element,
            tls,
            by_host: OnceLock::new(),
        }
    }

    fn proto(&self) -> HeaderValue {
        HeaderValue::from_static(if self.tls { "https" } else { "http" })
    }

    /// This hop's `Forwarded` element for a request sent to `host`.
    fn element_for(&self, host: &HeaderValue) -> Option<HeaderValue> {
        if let Some((h, v)) = self.by_host.get() {
            if h == host {
                return Some(v.clone());
            }
        }
        let mut fwd = self.element.clone();
        if let Some(h) = host.to_str().ok().filter(|h| {
            h.bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b';' && b != b',')
        }) {
            fwd.push_str(";host=");
            fwd.push_str(h);
        }
        let value = HeaderValue::from_str(&fwd).ok()?;
        let _ = self.by_host.set((host.clone(), value.clone()));
        Some(value)
    }
}

/// `prev, ours`: a forwarding header that earlier hops started.
fn appended(prev: &HeaderValue, ours: &[u8]) -> Option<HeaderValue> {
    let prev = prev.to_str().ok()?;
    let mut v = Vec::with_capacity(prev.len() + 2 + ours.len());
    v.extend_from_slice(prev.as_bytes());
    v.extend_from_slice(b", ");
    v.extend_from_slice(ours);
    HeaderValue::from_bytes(&v).ok()
}

/// What the client sent becomes what the upstream gets, edited in place:
/// hop-by-hop headers out, forwarding headers in. `authority` is the one the
/// server-name check read (an absolute target or HTTP/2 `:authority` before
/// `Host`): the upstream is told that one, never a `Host` nobody checked.
/// `Accept-Encoding` is dropped so the upstream answers in a form the
/// gateway can inspect; `Authorization` is kept only when the route says so
/// (MCP forbids passing a client's token through to another server).
pub fn to_upstream(
    headers: &mut HeaderMap,
    peer: &Forwarding,
    authority: &HeaderValue,
    forward_authorization: bool,
) {
    let dropped: &[&HeaderName] = if forward_authorization {
        &[&header::ACCEPT_ENCODING]
    } else {
        &[&header::ACCEPT_ENCODING, &header::AUTHORIZATION]
    };
    strip_hop_by_hop(headers, dropped);
    let xff = match headers.get(&X_FORWARDED_FOR) {
        Some(prev) => appended(prev, peer.ip_text.as_bytes()),
        None => peer.ip.clone(),
    };
    if let Some(v) = xff {
        headers.insert(X_FORWARDED_FOR.clone(), v);
    }
    headers.insert(X_FORWARDED_PROTO.clone(), peer.proto());
    let ours = peer.element_for(authority);
    headers.insert(X_FORWARDED_HOST.clone(), authority.clone());
    let fwd = match (headers.get(&FORWARDED), ours) {
        (Some(prev), Some(ours)) => appended(prev, ours.as_bytes()),
        (None, ours) => ours,
        (Some(_), None) => None,
    };
    if let Some(v) = fwd {
        headers.insert(FORWARDED.clone(), v);
    }
}

/// What the upstream answered becomes what the client gets, edited in
/// place: hop-by-hop headers out, and the upstream's own authentication
/// challenge unless the route passes credentials through.
pub fn to_client(headers: &mut HeaderMap, _status: http::StatusCode, forward_authorization: bool) {
    let dropped: &[&HeaderName] = if forward_authorization {
        &[]
    } else {
        &[&header::WWW_AUTHENTICATE]
    };
    strip_hop_by_hop(headers, dropped);
}

/// `Mcp-Name` (and `Mcp-Param-*`) values that are not plain printable ASCII
/// travel as `=?base64?<base64 of UTF-8>?=`. Returns the decoded value, or
/// `None` when the sentinel is there but the inside is not valid base64 UTF-8.
pub fn decode_mcp_header_value(raw: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    use base64::Engine;
    let s = std::str::from_utf8(raw).ok()?;
    match s
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(inner) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(inner)
                .ok()?;
            String::from_utf8(bytes).ok().map(std::borrow::Cow::Owned)
        }
        None => Some(std::borrow::Cow::Borrowed(s)),
    }
}

/// The header value for `value`, encoded as [`decode_mcp_header_value`]
/// reads it when it is not plain printable ASCII (or could be read as the
/// encoding itself).
pub fn encode_mcp_header_value(value: &str) -> Option<HeaderValue> {
    let printable = value.bytes().all(|b| (0x20..0x7f).contains(&b));
    if printable && !value.starts_with("=?base64?") {
        return HeaderValue::from_str(value).ok();
    }
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
    HeaderValue::from_str(&format!("=?base64?{encoded}?=")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_listed_headers_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret-hop"),
        );
        h.insert("x-secret-hop", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert("mcp-param-region", HeaderValue::from_static("eu"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t"));
        h.insert(header::HOST, HeaderValue::from_static("gw.example:8080"));
        let peer: SocketAddr = "10.1.2.3:5555".parse().unwrap();
        let mut out = h.clone();
        let host = HeaderValue::from_static("gw.example:8080");
        to_upstream(&mut out, &Forwarding::new(peer, false), &host, false);
        assert!(out.get("x-secret-hop").is_none());
        assert!(out.get("keep-alive").is_none());
        assert!(out.get(header::TRANSFER_ENCODING).is_none());
        assert!(out.get(header::AUTHORIZATION).is_none());
        assert!(out.get(header::HOST).is_none());
        assert_eq!(out["mcp-param-region"], "eu");
        assert_eq!(out[&X_FORWARDED_FOR], "10.1.2.3");
        assert_eq!(
            out[&FORWARDED],
            "for=10.1.2.3;proto=http;host=gw.example:8080"
        );
        let mut with_auth = h.clone();
        to_upstream(&mut with_auth, &Forwarding::new(peer, true), &host, true);
        assert_eq!(with_auth[header::AUTHORIZATION], "Bearer t");
        assert_eq!(with_auth[&X_FORWARDED_PROTO], "https");
    }

    #[test]
    fn forwarding_headers_append_to_earlier_hops() {
        let mut h = HeaderMap::new();
        h.insert(&X_FORWARDED_FOR, HeaderValue::from_static("1.1.1.1"));
        h.insert(&FORWARDED, HeaderValue::from_static("for=1.1.1.1"));
        let peer: SocketAddr = "[::1]:1".parse().unwrap();
        let mut out = h;
        let host = HeaderValue::from_static("gw");
        to_upstream(&mut out, &Forwarding::new(peer, false), &host, false);
        assert_eq!(out[&X_FORWARDED_FOR], "1.1.1.1, ::1");
        assert_eq!(
            out[&FORWARDED],
            "for=1.1.1.1, for=\"[::1]\";proto=http;host=gw"
        );
    }

    #[test]
    fn a_connection_forwards_each_requests_own_host() {
        let peer = Forwarding::new("10.0.0.9:1".parse().unwrap(), false);
        for host in [
            "a.example",
            "a.example",
            "b.example",
            "bad\"host",
            "a.example",
        ] {
            // The Host header is not what is forwarded: the checked authority is.
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static("unchecked.example"));
            to_upstream(&mut h, &peer, &HeaderValue::from_str(host).unwrap(), false);
            assert!(h.get(header::HOST).is_none());
            let want = if host.contains('"') {
                "for=10.0.0.9;proto=http".to_owned()
            } else {
                format!("for=10.0.0.9;proto=http;host={host}")
            };
            assert_eq!(h[&FORWARDED], want.as_str());
            assert_eq!(h[&X_FORWARDED_HOST], host);
        }
    }

    #[test]
    fn base64_header_values_decode() {
        assert_eq!(
            decode_mcp_header_value(b"get_weather").as_deref(),
            Some("get_weather")
        );
        assert_eq!(
            decode_mcp_header_value(b"=?base64?Y2Fmw6k=?=").as_deref(),
            Some("caf\u{e9}")
        );
        assert_eq!(decode_mcp_header_value(b"=?base64?***?="), None);
    }
}
