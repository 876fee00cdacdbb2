//! Phase: check the request. The head first (method, host, origin, type),
//! then the body under its limits, parsed once and strictly into a
//! [`ParsedRequest`] that every later phase reads; the 2026-07-28 transport
//! headers are checked against it. No later phase reads one of those
//! headers, or the body's bytes, again.

mod body;
pub mod head;
mod mcp_headers;
mod params;

use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;
use http::request::Parts;
use hyper::body::Incoming;
use serde_json::value::RawValue;

use super::refuse::Refused;
use crate::config::Limits;
use crate::json::{self, span_in, Message, MessageKind};
use crate::model::{ClientCaps, McpMethod, ProtocolVersion, Reason, Refusal};

/// The protocol versions routes serve.
pub const SUPPORTED_VERSIONS: &[ProtocolVersion] = &[ProtocolVersion::V2026_07_28];

/// The client's message, checked, with what later phases need of it.
#[derive(Debug)]
pub struct ParsedRequest {
    /// The body exactly as the client sent it; forwarded byte for byte
    /// unless a retry's answers are rewritten.
    pub body: Bytes,
    pub kind: MessageKind,
    /// Where the id's JSON text sits in `body`.
    id: Option<Range<usize>>,
    pub method: McpMethod,
    pub version: ProtocolVersion,
    /// What the client declared it can do for this request.
    pub client: ClientCaps,
    /// The tool / prompt name, resource uri or task id the request is about.
    pub target: Option<String>,
    /// Where `params` sits in `body`.
    params: Option<Range<usize>>,
    /// `params.requestState` when it is a string (a retry brings the
    /// gateway's own back).
    pub request_state: Option<String>,
    /// `params.requestState` is present but not a string.
    pub request_state_not_string: bool,
    /// `params.inputResponses` is present.
    pub input_responses: bool,
    /// [`crate::mrtr::params_digest`] of `params`, computed once when needed.
    digest: OnceLock<String>,
}

impl ParsedRequest {
    /// The id's JSON text, when the message has one.
    pub fn id(&self) -> Option<&str> {
        let r = self.id.clone()?;
        std::str::from_utf8(&self.body[r]).ok()
    }

    /// `params` as raw JSON text.
    pub fn params_text(&self) -> Option<&str> {
        let r = self.params.clone()?;
        std::str::from_utf8(&self.body[r]).ok()
    }

    /// A retry: it carries the gateway's state or answers.
    pub fn is_retry(&self) -> bool {
        self.request_state.is_some() || self.request_state_not_string || self.input_responses
    }

    /// `params`, parsed strictly into a map (the body was checked already).
    pub fn params_map(&self) -> serde_json::Map<String, serde_json::Value> {
        match self.params_text().map(|t| json::parse_value(t.as_bytes())) {
            Some(Ok(serde_json::Value::Object(m))) => m,
            _ => serde_json::Map::new(),
        }
    }

    /// The digest sealed states bind the request's arguments with.
    pub fn digest(&self) -> &str {
        self.digest
            .get_or_init(|| crate::mrtr::params_digest(&self.params_map()))
    }

    /// Record a digest computed from params parsed elsewhere (a retry).
    pub fn set_digest(&self, digest: String) {
        let _ = self.digest.set(digest);
    }
}

/// Read the body and check the message.
pub async fn read(parts: &Parts, body: Incoming, limits: &Limits) -> Result<Bytes, Refusal> {
    body::read(parts, body, limits).await
}

/// Parse the body and check it against the headers.
pub fn parse(parts: &Parts, body: &Bytes) -> Result<ParsedRequest, Refused> {
    let msg =
        Message::parse(body).map_err(|e| Refused::from(Refusal::new(e.reason(), e.to_string())))?;
    let id = msg.id.and_then(|raw| span_in(body, raw.get()));
    let method = msg.method.as_deref().map(McpMethod::parse);
    let reject = |refusal: Refusal| Refused {
        id: msg.id.map(|raw| raw.get().to_owned()),
        method,
        ..Refused::from(refusal)
    };
    if msg.kind == MessageKind::Response {
        return Err(reject(Refusal::new(
            Reason::InvalidRequest,
            "a client sends requests and notifications on this transport, not responses",
        )));
    }
    let name = msg.method.as_deref().unwrap_or_default();
    let method = McpMethod::parse(name);
    let target_member = method.target();
    let view = match msg.params {
        Some(p) => Some(
            params::read(p, target_member.map(|t| t.member))
                .map_err(|e| reject(Refusal::new(Reason::InvalidJson, format!("params: {e}"))))?,
        ),
        None => None,
    };
    mcp_headers::check_method(parts, name).map_err(reject)?;
    let version = mcp_headers::check_version(parts, msg.kind, view.as_ref(), SUPPORTED_VERSIONS)
        .map_err(reject)?;
    let target = match target_member {
        Some(member) => {
            mcp_headers::check_name(parts, member, view.as_ref(), method).map_err(reject)?
        }
        None => None,
    };
    let client = view
        .as_ref()
        .and_then(|p| p.meta_capabilities)
        .map(|raw| ClientCaps::parse(raw.get()))
        .unwrap_or_default();
    let state = view.as_ref().and_then(|p| p.request_state);
    let request_state = state.and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    let request_state_not_string = state.is_some() && request_state.is_none();
    let input_responses = view.as_ref().is_some_and(|p| p.input_responses);
    let params = msg.params.and_then(|p: &RawValue| span_in(body, p.get()));
    let kind = msg.kind;
    Ok(ParsedRequest {
        body: body.clone(),
        kind,
        id,
        method,
        version,
        client,
        target,
        params,
        request_state,
        request_state_not_string,
        input_responses,
        digest: OnceLock::new(),
    })
}

#[cfg(test)]
mod tests;
