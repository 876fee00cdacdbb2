//! The 2026-07-28 transport headers, checked against the body: a gateway
//! must never decide from a header it has not checked against the body, and
//! the upstream may read either.

use std::borrow::Cow;

use http::request::Parts;
use http::{HeaderName, HeaderValue};

use super::params::ParamsView;
use crate::headers::{decode_mcp_header_value, MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};
use crate::json::MessageKind;
use crate::model::{McpMethod, ProtocolVersion, Reason, Refusal, TargetMember};

/// The single value of a header. A header given twice is refused: the
/// upstream might read the other copy than the one the gateway checked.
fn single<'h>(parts: &'h Parts, name: &HeaderName) -> Result<Option<&'h HeaderValue>, Refusal> {
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

pub(super) fn header_str<'h>(
    parts: &'h Parts,
    name: &HeaderName,
) -> Result<Option<&'h str>, Refusal> {
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

/// `Mcp-Method`: required on every message, equal to the body's method.
pub(super) fn check_method(parts: &Parts, method: &str) -> Result<(), Refusal> {
    match header_str(parts, &MCP_METHOD)? {
        None => Err(Refusal::new(
            Reason::HeaderMissing,
            "the Mcp-Method header is required",
        )),
        Some(h) if h != method => Err(Refusal::new(
            Reason::HeaderMismatch,
            "the Mcp-Method header does not match the method in the body",
        )),
        Some(_) => Ok(()),
    }
}

pub(super) fn unsupported(requested: &str, supported: &[ProtocolVersion]) -> Refusal {
    let shown: String = requested
        .chars()
        .filter(|c| !c.is_control())
        .take(32)
        .collect();
    Refusal::new(
        Reason::UnsupportedProtocolVersion,
        format!("protocol version {shown} is not supported by this gateway"),
    )
    .with_data("requested", shown.into())
    .with_data(
        "supported",
        supported
            .iter()
            .map(|v| serde_json::Value::from(v.as_str()))
            .collect(),
    )
}

/// `MCP-Protocol-Version`: supported, and equal to `params._meta`'s on
/// requests (which must carry both).
pub(super) fn check_version(
    parts: &Parts,
    kind: MessageKind,
    params: Option<&ParamsView<'_>>,
    supported: &[ProtocolVersion],
) -> Result<ProtocolVersion, Refusal> {
    let header = header_str(parts, &MCP_PROTOCOL_VERSION)?;
    let body = params.and_then(|p| p.meta_version.as_deref());
    let requested = header.or(body);
    let version = match requested {
        Some(v) => ProtocolVersion::parse(v)
            .filter(|v| supported.contains(v))
            .ok_or_else(|| unsupported(v, supported))?,
        None => ProtocolVersion::V2026_07_28,
    };
    let mismatch = || {
        Refusal::new(
            Reason::HeaderMismatch,
            "the MCP-Protocol-Version header does not match params._meta's protocol version",
        )
    };
    match (kind, header, body) {
        (MessageKind::Request, None, _) => Err(Refusal::new(
            Reason::HeaderMissing,
            "the MCP-Protocol-Version header is required",
        )),
        (MessageKind::Request, Some(_), None) => Err(Refusal::new(
            Reason::HeaderMismatch,
            "params._meta[\"io.modelcontextprotocol/protocolVersion\"] is missing; it must equal the MCP-Protocol-Version header",
        )),
        (_, Some(h), Some(b)) if h != b => Err(mismatch()),
        _ => Ok(version),
    }
}

/// `Mcp-Name`: required where the spec says so; equal to the target
/// wherever it is present. Returns the decoded target.
pub(super) fn check_name(
    parts: &Parts,
    member: TargetMember,
    params: Option<&ParamsView<'_>>,
    method: McpMethod,
) -> Result<Option<String>, Refusal> {
    let raw = params.and_then(|p| p.target);
    let body_name: Option<Cow<'_, str>> = match raw {
        None => None,
        Some(raw) => Some(serde_json::from_str(raw.get()).map_err(|_| {
            Refusal::new(
                Reason::InvalidRequest,
                format!("params.{} must be a string", member.member),
            )
        })?),
    };
    match (single(parts, &MCP_NAME)?, &body_name) {
        (None, None) if member.header_required => Err(Refusal::new(
            Reason::InvalidRequest,
            format!("{method} needs params.{}", member.member),
        )),
        (None, Some(_)) if member.header_required => Err(Refusal::new(
            Reason::HeaderMissing,
            format!("the Mcp-Name header is required on {method}"),
        )),
        (None, _) => Ok(body_name.map(Cow::into_owned)),
        (Some(header), body) => {
            let decoded = decode_mcp_header_value(header.as_bytes()).ok_or_else(|| {
                Refusal::new(
                    Reason::HeaderMismatch,
                    "the Mcp-Name header is not valid (bad =?base64?...?= encoding)",
                )
            })?;
            if body.as_deref() == Some(decoded.as_ref()) {
                Ok(body_name.map(Cow::into_owned))
            } else {
                Err(Refusal::new(
                    Reason::HeaderMismatch,
                    format!(
                        "the Mcp-Name header does not match params.{} in the body",
                        member.member
                    ),
                ))
            }
        }
    }
}
