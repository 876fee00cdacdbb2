//! The request one upstream of a federated route gets: the client's, with
//! the upstream's own name (or URI, or list cursor) where the client wrote
//! the exposed one, in the body and in `Mcp-Name`; then parsed as any
//! request is, so every later phase reads it as if the client had sent it.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Request};
use serde_json::{Map, Value};

use super::super::refuse::Refused;
use super::super::request::{self, ParsedRequest};
use super::super::route::Federated;
use super::super::Inbound;
use crate::headers::{LAST_EVENT_ID, MCP_NAME};
use crate::model::{Reason, Refusal, TargetKind};

/// What changes in the request on its way to one upstream.
pub(super) enum Retarget {
    /// `params.name` / `params.uri`: the upstream's own.
    Target { member: &'static str, own: String },
    /// `params.ref.<member>` of a completion.
    Reference { member: &'static str, own: String },
    /// `params.cursor`: the upstream's own, or none (its first page).
    Cursor(Option<String>),
    /// `params.notifications.resourceSubscriptions`: the upstream's own URIs
    /// of those the client named (`subscriptions/listen`).
    Subscriptions(Vec<String>),
    /// The same message (a list or description asked of every upstream,
    /// without a cursor, or a client's notification).
    Unchanged,
}

impl Retarget {
    pub(super) fn target(kind: TargetKind, own: &str) -> Retarget {
        let member = match kind {
            TargetKind::Tool | TargetKind::Prompt => "name",
            TargetKind::Resource => "uri",
        };
        Retarget::Target {
            member,
            own: own.to_owned(),
        }
    }

    pub(super) fn reference(member: &'static str, own: &str) -> Retarget {
        Retarget::Reference {
            member,
            own: own.to_owned(),
        }
    }

    /// The request as the upstream gets it, parsed.
    pub(super) fn apply(self, inbound: &Inbound, fed: &Federated) -> Result<Inbound, Refused> {
        let request = &inbound.request;
        let mut parts = copy_parts(&inbound.parts);
        let parsed = match request.transport {
            request::Transport::Post => {
                let body = match self.params(request) {
                    Some(params) => rebuilt(request, params)?,
                    None => request.body.clone(),
                };
                if let Retarget::Target { own, .. } = &self {
                    set_name_header(&mut parts, own);
                }
                request::parse(&parts, &body, &fed.config.generations)
                    .map_err(|r| r.within(request.id(), &fed.settings.name))?
            }
            other => {
                // A merged stream is not resumed by one upstream's event id.
                parts.headers.remove(&LAST_EVENT_ID);
                ParsedRequest::without_message(other, request.version)
            }
        };
        Ok(Inbound {
            parts,
            authority: inbound.authority.clone(),
            principal: inbound.principal.clone(),
            request: parsed,
            peer: inbound.peer.clone(),
            request_id: inbound.request_id.clone(),
            started: inbound.started,
            trace: inbound.trace.clone(),
        })
    }

    /// The params to send, when they change.
    fn params(&self, request: &ParsedRequest) -> Option<Map<String, Value>> {
        let mut params = request.params_map();
        match self {
            Retarget::Unchanged => return None,
            Retarget::Target { member, own } => {
                params.insert((*member).to_owned(), Value::String(own.clone()));
            }
            Retarget::Reference { member, own } => {
                let reference = params.get_mut("ref").and_then(Value::as_object_mut)?;
                reference.insert((*member).to_owned(), Value::String(own.clone()));
            }
            Retarget::Cursor(Some(cursor)) => {
                params.insert("cursor".to_owned(), Value::String(cursor.clone()));
            }
            Retarget::Cursor(None) => {
                params.remove("cursor")?;
            }
            Retarget::Subscriptions(own) => {
                let filter = params
                    .get_mut("notifications")
                    .and_then(Value::as_object_mut)?;
                filter.get("resourceSubscriptions")?;
                let own = own.iter().cloned().map(Value::String).collect();
                filter.insert("resourceSubscriptions".to_owned(), Value::Array(own));
            }
        }
        Some(params)
    }
}

/// The head of the client's request, for one upstream's copy.
fn copy_parts(parts: &Parts) -> Parts {
    let (mut copy, ()) = Request::new(()).into_parts();
    copy.method = parts.method.clone();
    copy.uri = parts.uri.clone();
    copy.version = parts.version;
    copy.headers = parts.headers.clone();
    copy
}

/// `Mcp-Name` (2026-07-28) carries the upstream's own name, encoded as the
/// transport encodes a value that is not printable ASCII.
fn set_name_header(parts: &mut Parts, own: &str) {
    if !parts.headers.contains_key(&MCP_NAME) {
        return;
    }
    let printable = own.bytes().all(|b| (0x20..0x7f).contains(&b));
    let value = if printable && !own.starts_with("=?base64?") {
        HeaderValue::from_str(own).ok()
    } else {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(own.as_bytes());
        HeaderValue::from_str(&format!("=?base64?{encoded}?=")).ok()
    };
    match value {
        Some(v) => parts.headers.insert(MCP_NAME.clone(), v),
        None => parts.headers.remove(&MCP_NAME),
    };
}

/// The client's message with new params: its id as written (spliced, so
/// the answer's id is the client's to the byte), its method.
fn rebuilt(request: &ParsedRequest, params: Map<String, Value>) -> Result<Bytes, Refused> {
    let method = serde_json::to_string(request.method.as_str()).map_err(|_| unbuildable())?;
    let params = serde_json::to_string(&params).map_err(|_| unbuildable())?;
    let id = request
        .id()
        .map(|id| format!(",\"id\":{id}"))
        .unwrap_or_default();
    Ok(Bytes::from(format!(
        "{{\"jsonrpc\":\"2.0\"{id},\"method\":{method},\"params\":{params}}}"
    )))
}

fn unbuildable() -> Refused {
    Refused::from(Refusal::new(
        Reason::InvalidRequest,
        "the request could not be rewritten for its upstream",
    ))
}
