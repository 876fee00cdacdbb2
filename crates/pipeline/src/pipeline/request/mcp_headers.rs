//! The 2026-07-28 transport headers, checked against the body: a gateway
//! must never decide from a header it has not checked against the body, and
//! the upstream may read either.

use std::borrow::Cow;

use http::request::Parts;
use http::{HeaderName, HeaderValue};

use super::params::{ParamsView, Target};
use crate::headers::{
    decode_mcp_header_value, MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, MCP_SESSION_ID,
};
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

/// `Mcp-Method`: required on every 2026-07-28 message (`required`), equal to
/// the body's method wherever it is present.
pub(super) fn check_method(parts: &Parts, method: &str, required: bool) -> Result<(), Refusal> {
    match header_str(parts, &MCP_METHOD)? {
        None if !required => Ok(()),
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

/// Which generation a message belongs to, as the spec describes for a
/// server that serves both: `initialize` and a session id mean 2025-11-25,
/// `_meta`'s version means 2026-07-28, the version header says which.
/// `header` is the request's `MCP-Protocol-Version` ([`version_header`]).
pub(super) fn detect(
    parts: &Parts,
    header: Option<&str>,
    method: McpMethod,
    params: Option<&ParamsView<'_>>,
    supported: &[ProtocolVersion],
) -> Result<ProtocolVersion, Refusal> {
    let body = params.and_then(|p| p.meta_version.as_deref());
    let pick = |v: &str| {
        ProtocolVersion::parse(v)
            .filter(|v| supported.contains(v))
            .ok_or_else(|| unsupported(v, supported))
    };
    let sessions = |v: ProtocolVersion| {
        if supported.contains(&v) {
            Ok(v)
        } else {
            Err(unsupported(v.as_str(), supported))
        }
    };
    if method == McpMethod::Initialize {
        // The version is negotiated by the upstream; the request names the
        // client's preference.
        return sessions(ProtocolVersion::V2025_11_25);
    }
    match (header, body) {
        (Some(h), _) => pick(h),
        (None, Some(b)) => pick(b),
        // 2025-11-25: a request without the header is 2025-03-26.
        (None, None) if parts.headers.contains_key(&MCP_SESSION_ID) => {
            sessions(ProtocolVersion::V2025_03_26)
        }
        (None, None) if supported.contains(&ProtocolVersion::V2026_07_28) => {
            Ok(ProtocolVersion::V2026_07_28)
        }
        (None, None) => sessions(ProtocolVersion::V2025_03_26),
    }
}

/// `MCP-Protocol-Version`: equal to `params._meta`'s on 2026-07-28 requests
/// (which must carry both).
/// The single `MCP-Protocol-Version` of the request, read once for
/// [`detect`] and [`check_version`].
pub(super) fn version_header(parts: &Parts) -> Result<Option<&str>, Refusal> {
    header_str(parts, &MCP_PROTOCOL_VERSION)
}

pub(super) fn check_version(
    header: Option<&str>,
    kind: MessageKind,
    params: Option<&ParamsView<'_>>,
    version: ProtocolVersion,
) -> Result<(), Refusal> {
    let body = params.and_then(|p| p.meta_version.as_deref());
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
        _ => {
            debug_assert_eq!(version.generation(), crate::model::Generation::Stateless);
            Ok(())
        }
    }
}

/// `Mcp-Name`: required where the spec says so; equal to the target
/// wherever it is present. Returns the decoded target.
pub(super) fn check_name(
    parts: &Parts,
    member: TargetMember,
    params: Option<&ParamsView<'_>>,
    method: McpMethod,
    header_defined: bool,
) -> Result<Option<String>, Refusal> {
    let member = TargetMember {
        header_required: member.header_required && header_defined,
        ..member
    };
    let body_name: Option<Cow<'_, str>> = match params.and_then(|p| p.target.as_ref()) {
        None => None,
        Some(Target::Text(text)) => Some(Cow::Borrowed(text.as_ref())),
        Some(Target::NotText) => {
            return Err(Refusal::new(
                Reason::InvalidRequest,
                format!("params.{} must be a string", member.member),
            ))
        }
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
