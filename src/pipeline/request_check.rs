//! Phase: check the request. Reads the body under its limits, parses the one
//! JSON-RPC message, and checks the transport rules of 2026-07-28: POST only,
//! JSON only, no batches, `Origin`, and the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers against the body. No later phase ever
//! reads one of those headers without the body agreeing with it.

use std::borrow::Cow;
use std::collections::HashSet;

use bytes::Bytes;
use http::{header, request::Parts, Method};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::config::Limits;
use crate::headers::{decode_mcp_header_value, MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};
use crate::jsonrpc::{Message, MessageKind};
use crate::policy::inspect::ClientCaps;
use crate::refusal::{Reason, Refusal};

/// Protocol versions the gateway understands and can police.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &["2026-07-28"];

/// Where a method's target lives in params, for the `Mcp-Name` header.
/// `required`: the spec makes the header mandatory for this method.
struct NameMember {
    member: &'static str,
    required: bool,
}

fn name_member(method: &str) -> Option<NameMember> {
    let (member, required) = match method {
        "tools/call" | "prompts/get" => ("name", true),
        "resources/read" => ("uri", true),
        "resources/subscribe" | "resources/unsubscribe" => ("uri", false),
        m if m.starts_with("tasks/") => ("taskId", false),
        // Other methods carry no target: a stray Mcp-Name is forwarded
        // unchecked, and nothing in the gateway reads it.
        _ => return None,
    };
    Some(NameMember { member, required })
}

/// A request that passed every check, with what later phases need of it.
#[derive(Debug)]
pub struct CheckedRequest {
    pub parts: Parts,
    /// The body exactly as the client sent it; forwarded byte for byte.
    pub body: Bytes,
    pub kind: MessageKind,
    pub id: Option<Box<RawValue>>,
    pub method: String,
    /// What the client declared it can do for this request.
    pub client: ClientCaps,
    /// The tool / prompt name or resource uri the request is about.
    pub target: Option<String>,
}

/// A refusal together with the id of the request it answers, when known.
#[derive(Debug)]
pub struct Rejected {
    pub id: Option<Box<RawValue>>,
    /// The body's method, when the body could be read that far.
    pub method: Option<String>,
    pub refusal: Refusal,
}

impl From<Refusal> for Rejected {
    fn from(refusal: Refusal) -> Self {
        Rejected {
            id: None,
            method: None,
            refusal,
        }
    }
}

/// Checks that need only the request head; run before the body is read so a
/// wrong method or type costs nothing.
pub fn check_head(parts: &Parts, allowed_origins: Option<&HashSet<String>>) -> Result<(), Refusal> {
    if parts.method != Method::POST {
        return Err(Refusal::new(
            Reason::MethodNotAllowed,
            format!("{} is not supported: this MCP endpoint (stateless Streamable HTTP) accepts POST only", parts.method),
        ));
    }
    if let (Some(allowed), Some(origin)) = (allowed_origins, parts.headers.get(header::ORIGIN)) {
        let origin = origin
            .to_str()
            .unwrap_or("")
            .trim_end_matches('/')
            .to_ascii_lowercase();
        if !allowed.contains(&origin) {
            return Err(Refusal::new(
                Reason::OriginNotAllowed,
                "requests from this Origin are not allowed",
            ));
        }
    }
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

/// Read the whole body, refusing early on a declared length over the limit and
/// giving a slow client no more than `request_body_timeout`.
pub async fn read_body(parts: &Parts, body: Incoming, limits: &Limits) -> Result<Bytes, Refusal> {
    let max = limits.max_request_body_bytes;
    let too_large = || {
        Refusal::new(
            Reason::BodyTooLarge,
            format!("the request body is larger than the gateway's limit of {max} bytes"),
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let collected = tokio::time::timeout(
        limits.request_body_timeout,
        Limited::new(body, max).collect(),
    )
    .await;
    match collected {
        Err(_) => Err(Refusal::new(
            Reason::RequestTimeout,
            "the request body did not arrive in time",
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(Refusal::new(
            Reason::InvalidRequest,
            "the request body could not be read to its end",
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

#[derive(Deserialize)]
struct ParamsView<'a> {
    #[serde(default, borrow)]
    name: Option<&'a RawValue>,
    #[serde(default, borrow)]
    uri: Option<&'a RawValue>,
    #[serde(default, rename = "taskId", borrow)]
    task_id: Option<&'a RawValue>,
    #[serde(default, rename = "_meta", borrow)]
    meta: Option<MetaView<'a>>,
}

impl<'a> ParamsView<'a> {
    fn member(&self, name: &str) -> Option<&'a RawValue> {
        match name {
            "name" => self.name,
            "uri" => self.uri,
            _ => self.task_id,
        }
    }
}

#[derive(Deserialize)]
struct MetaView<'a> {
    #[serde(default, rename = "io.modelcontextprotocol/protocolVersion", borrow)]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(default, rename = "io.modelcontextprotocol/clientCapabilities", borrow)]
    client_capabilities: Option<&'a RawValue>,
}

/// The single value of a header. A header given twice is refused: the
/// upstream might read the other copy than the one the gateway checked.
fn single<'h>(
    parts: &'h Parts,
    name: &http::HeaderName,
) -> Result<Option<&'h http::HeaderValue>, Refusal> {
    let mut all = parts.headers.get_all(name).iter();
    let first = all.next();
    if all.next().is_some() {
        return Err(Refusal::new(
            Reason::HeaderMismatch,
            format!("the {name} header is given more than once"),
        ));
    }
    Ok(first)
}

fn header_str<'h>(parts: &'h Parts, name: &http::HeaderName) -> Result<Option<&'h str>, Refusal> {
    match single(parts, name)? {
        None => Ok(None),
        Some(v) => v.to_str().map(Some).map_err(|_| {
            Refusal::new(
                Reason::HeaderMismatch,
                format!("the {name} header is not printable ASCII"),
            )
        }),
    }
}

fn check_name(
    parts: &Parts,
    target: &NameMember,
    params: Option<&ParamsView<'_>>,
    method: &str,
) -> Result<(), Refusal> {
    let raw = params.and_then(|p| p.member(target.member));
    let body_name: Option<Cow<'_, str>> = match raw {
        None => None,
        Some(raw) => Some(serde_json::from_str(raw.get()).map_err(|_| {
            Refusal::new(
                Reason::InvalidRequest,
                format!("params.{} must be a string", target.member),
            )
        })?),
    };
    match (single(parts, &MCP_NAME)?, body_name) {
        (None, None) if target.required => Err(Refusal::new(
            Reason::InvalidRequest,
            format!("{method} needs params.{}", target.member),
        )),
        (None, Some(_)) if target.required => Err(Refusal::new(
            Reason::HeaderMissing,
            format!("the Mcp-Name header is required on {method}"),
        )),
        (None, _) => Ok(()),
        (Some(header), body) => {
            let decoded = decode_mcp_header_value(header.as_bytes()).ok_or_else(|| {
                Refusal::new(
                    Reason::HeaderMismatch,
                    "the Mcp-Name header is not valid (bad =?base64?...?= encoding)",
                )
            })?;
            if body.as_deref() == Some(decoded.as_ref()) {
                Ok(())
            } else {
                Err(Refusal::new(
                    Reason::HeaderMismatch,
                    format!(
                        "the Mcp-Name header does not match params.{} in the body",
                        target.member
                    ),
                ))
            }
        }
    }
}

/// Parse the body and check it against the headers.
pub fn check_message(parts: Parts, body: Bytes) -> Result<CheckedRequest, Rejected> {
    // Message::parse skips params without descending into them; this pass
    // bounds nesting so that no upstream is handed a depth bomb.
    // A body with at most 128 opening brackets cannot nest deeper than 128.
    let openers = memchr::memchr2_iter(b'[', b'{', &body).take(129).count();
    let deep_possible = openers > 128;
    if let Err(e) = if deep_possible {
        crate::jsonrpc::check_json(&body)
    } else {
        Ok(())
    } {
        let reason = if body.first() == Some(&b'[') {
            Reason::BatchNotSupported
        } else {
            Reason::InvalidJson
        };
        return Err(Refusal::new(reason, crate::jsonrpc::describe_json_error(&e)).into());
    }
    let msg = Message::parse(&body).map_err(|e| Refusal::new(e.reason(), e.to_string()))?;
    let id: Option<Box<RawValue>> = msg.id.map(|r| r.to_owned());
    let reject = |refusal: Refusal| Rejected {
        id: id.clone(),
        method: msg.method.as_deref().map(str::to_owned),
        refusal,
    };
    if msg.kind == MessageKind::Response {
        return Err(reject(Refusal::new(
            Reason::InvalidRequest,
            "a client sends requests and notifications on this transport, not responses",
        )));
    }
    let method = msg.method.as_deref().unwrap_or_default();
    let params: Option<ParamsView<'_>> = match msg.params {
        Some(p) => Some(serde_json::from_str(p.get()).map_err(|e| {
            reject(Refusal::new(
                Reason::InvalidJson,
                format!("params: {}", crate::jsonrpc::describe_json_error(&e)),
            ))
        })?),
        None => None,
    };

    // Mcp-Method: required on every message, equal to the body's method.
    match header_str(&parts, &MCP_METHOD).map_err(reject)? {
        None => {
            return Err(reject(Refusal::new(
                Reason::HeaderMissing,
                "the Mcp-Method header is required",
            )))
        }
        Some(h) if h != method => {
            return Err(reject(Refusal::new(
                Reason::HeaderMismatch,
                "the Mcp-Method header does not match the method in the body",
            )));
        }
        Some(_) => {}
    }

    // MCP-Protocol-Version: supported, and equal to params._meta's on requests.
    let header_version = header_str(&parts, &MCP_PROTOCOL_VERSION).map_err(reject)?;
    let body_version = params
        .as_ref()
        .and_then(|p| p.meta.as_ref())
        .and_then(|m| m.protocol_version.as_deref());
    let requested = header_version.or(body_version);
    if let Some(v) = requested {
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&v) {
            return Err(reject(
                Refusal::new(
                    Reason::UnsupportedProtocolVersion,
                    format!("protocol version {v} is not supported by this gateway"),
                )
                .with_data("requested", v.into())
                .with_data(
                    "supported",
                    SUPPORTED_PROTOCOL_VERSIONS
                        .iter()
                        .map(|s| serde_json::Value::from(*s))
                        .collect(),
                ),
            ));
        }
    }
    if msg.kind == MessageKind::Request {
        match (header_version, body_version) {
            (None, _) => return Err(reject(Refusal::new(Reason::HeaderMissing, "the MCP-Protocol-Version header is required"))),
            (Some(_), None) => {
                return Err(reject(Refusal::new(
                    Reason::HeaderMismatch,
                    "params._meta[\"io.modelcontextprotocol/protocolVersion\"] is missing; it must equal the MCP-Protocol-Version header",
                )))
            }
            (Some(h), Some(b)) if h != b => {
                return Err(reject(Refusal::new(Reason::HeaderMismatch, "the MCP-Protocol-Version header does not match params._meta's protocol version")));
            }
            _ => {}
        }
    } else if let (Some(h), Some(b)) = (header_version, body_version) {
        if h != b {
            return Err(reject(Refusal::new(
                Reason::HeaderMismatch,
                "the MCP-Protocol-Version header does not match params._meta's protocol version",
            )));
        }
    }

    // Mcp-Name: required where the spec says so; equal to the target wherever checked.
    if let Some(target) = name_member(method) {
        check_name(&parts, &target, params.as_ref(), method).map_err(reject)?;
    }

    let client = params
        .as_ref()
        .and_then(|p| p.meta.as_ref())
        .and_then(|m| m.client_capabilities)
        .map(|raw| ClientCaps::parse(raw.get()))
        .unwrap_or_default();
    let target = name_member(method)
        .and_then(|t| params.as_ref().and_then(|p| p.member(t.member)))
        .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    let method = method.to_owned();
    let kind = msg.kind;
    drop(params);
    Ok(CheckedRequest {
        parts,
        body,
        kind,
        id,
        method,
        client,
        target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder().method("POST").uri("/mcp");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"book_room","arguments":{}}}"#;
    const GOOD: &[(&str, &str)] = &[
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "book_room"),
    ];

    fn with(over: &[(&str, Option<&str>)]) -> Vec<(&'static str, String)> {
        let mut h: Vec<(&'static str, String)> =
            GOOD.iter().map(|(k, v)| (*k, v.to_string())).collect();
        for (k, v) in over {
            h.retain(|(n, _)| n != k);
            if let Some(v) = v {
                let k: &'static str = Box::leak(k.to_string().into_boxed_str());
                h.push((k, v.to_string()));
            }
        }
        h
    }

    fn check(headers: &[(&'static str, String)], body: &str) -> Result<CheckedRequest, Rejected> {
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        check_message(parts(&h), Bytes::from(body.to_owned()))
    }

    fn reason(r: Result<CheckedRequest, Rejected>) -> Reason {
        r.map(|_| ()).unwrap_err().refusal.reason
    }

    #[test]
    fn a_consistent_request_passes() {
        let c = check(&with(&[]), CALL).unwrap();
        assert_eq!(c.method, "tools/call");
        assert_eq!(c.id.unwrap().get(), "1");
    }

    #[test]
    fn each_header_is_checked_against_the_body() {
        assert_eq!(
            reason(check(&with(&[("mcp-method", None)]), CALL)),
            Reason::HeaderMissing
        );
        assert_eq!(
            reason(check(&with(&[("mcp-method", Some("tools/list"))]), CALL)),
            Reason::HeaderMismatch
        );
        assert_eq!(
            reason(check(&with(&[("mcp-name", None)]), CALL)),
            Reason::HeaderMissing
        );
        assert_eq!(
            reason(check(&with(&[("mcp-name", Some("delete_all"))]), CALL)),
            Reason::HeaderMismatch
        );
        assert_eq!(
            reason(check(&with(&[("mcp-protocol-version", None)]), CALL)),
            Reason::HeaderMissing
        );
        assert_eq!(
            reason(check(
                &with(&[("mcp-protocol-version", Some("2025-11-25"))]),
                CALL
            )),
            Reason::UnsupportedProtocolVersion
        );
        let other_body = CALL.replace("\"2026-07-28\"", "\"2025-06-18\"");
        assert_eq!(
            reason(check(&with(&[]), &other_body)),
            Reason::HeaderMismatch
        );
        let no_meta = CALL.replace(
            "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",",
            "",
        );
        assert_eq!(reason(check(&with(&[]), &no_meta)), Reason::HeaderMismatch);
    }

    #[test]
    fn escaped_body_names_and_base64_headers_compare_as_values() {
        let escaped = CALL.replace("\"book_room\"", "\"book\\u005froom\"");
        assert!(check(&with(&[]), &escaped).is_ok());
        let cafe = CALL.replace("\"book_room\"", "\"caf\u{e9}\"");
        assert!(check(&with(&[("mcp-name", Some("=?base64?Y2Fmw6k=?="))]), &cafe).is_ok());
    }

    #[test]
    fn mcp_name_follows_the_method_target() {
        let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let h = with(&[("mcp-method", Some("tools/list")), ("mcp-name", None)]);
        assert!(check(&h, list).is_ok());
        let task = r#"{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"taskId":"t-1"}}"#;
        let h = with(&[("mcp-method", Some("tasks/get")), ("mcp-name", Some("t-1"))]);
        assert!(check(&h, task).is_ok());
        let h = with(&[("mcp-method", Some("tasks/get")), ("mcp-name", Some("t-2"))]);
        assert_eq!(reason(check(&h, task)), Reason::HeaderMismatch);
        let read = r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"uri":"file:///a"}}"#;
        let h = with(&[
            ("mcp-method", Some("resources/read")),
            ("mcp-name", Some("file:///a")),
        ]);
        assert!(check(&h, read).is_ok());
        let h = with(&[("mcp-method", Some("resources/read")), ("mcp-name", None)]);
        assert_eq!(reason(check(&h, read)), Reason::HeaderMissing);
        let no_name = CALL.replace(",\"name\":\"book_room\"", "");
        assert_eq!(
            reason(check(&with(&[("mcp-name", None)]), &no_name)),
            Reason::InvalidRequest
        );
        assert_eq!(reason(check(&with(&[]), &no_name)), Reason::HeaderMismatch);
    }

    #[test]
    fn unsupported_version_carries_the_supported_list() {
        let r = check(&with(&[("mcp-protocol-version", Some("1999-01-01"))]), CALL).unwrap_err();
        let extra = r.refusal.extra.unwrap();
        assert_eq!(extra["requested"], "1999-01-01");
        assert_eq!(extra["supported"][0], "2026-07-28");
        assert_eq!(r.id.unwrap().get(), "1");
    }

    #[test]
    fn notifications_need_method_but_no_body_version() {
        let n =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"1"}}"#;
        let h = with(&[
            ("mcp-method", Some("notifications/cancelled")),
            ("mcp-name", None),
        ]);
        assert_eq!(check(&h, n).unwrap().kind, MessageKind::Notification);
    }

    #[test]
    fn a_closed_depth_bomb_in_params_is_refused() {
        let head = &CALL[..CALL.find("\"arguments\":").unwrap()];
        let mut deep = format!("{head}\"arguments\":{{\"a\":").into_bytes();
        deep.extend(std::iter::repeat_n(b'[', 100_000));
        deep.extend(std::iter::repeat_n(b']', 100_000));
        deep.extend(b"}}}");
        assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&deep[..deep.len() - 1]).is_err());
        let h: Vec<(&str, &str)> = GOOD.to_vec();
        let r = check_message(parts(&h), Bytes::from(deep))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(r.refusal.reason, Reason::InvalidJson);
        assert!(
            r.refusal.message.contains("nesting"),
            "{}",
            r.refusal.message
        );
    }

    #[test]
    fn head_checks() {
        let get = http::Request::builder()
            .method("GET")
            .uri("/")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        assert_eq!(
            check_head(&get, None).unwrap_err().reason,
            Reason::MethodNotAllowed
        );
        let text = parts(&[("content-type", "text/plain")]);
        assert_eq!(
            check_head(&text, None).unwrap_err().reason,
            Reason::UnsupportedMediaType
        );
        let ok = parts(&[
            ("content-type", "application/json; charset=utf-8"),
            ("origin", "https://app.example.com"),
        ]);
        let allowed: HashSet<String> = ["https://app.example.com".to_owned()].into();
        assert!(check_head(&ok, Some(&allowed)).is_ok());
        let evil = parts(&[
            ("content-type", "application/json"),
            ("origin", "https://evil.example"),
        ]);
        assert_eq!(
            check_head(&evil, Some(&allowed)).unwrap_err().reason,
            Reason::OriginNotAllowed
        );
    }
}
