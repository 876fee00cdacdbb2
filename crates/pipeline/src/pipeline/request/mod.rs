//! Phase: check the request. The head first (method, host, origin, type),
//! then the body under its limits, parsed once and strictly into a
//! [`ParsedRequest`] that every later phase reads; the 2026-07-28 transport
//! headers are checked against it. No later phase reads one of those
//! headers, or the body's bytes, again.

mod body;
pub(crate) mod head;
mod mcp_headers;
mod params;

use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;
use http::request::Parts;
use hyper::body::Incoming;
use smallvec::SmallVec;

use super::refuse::Refused;
use crate::config::Limits;
use crate::json::strict::Failure;
use crate::json::{self, span_in, Message, MessageKind};
use crate::model::{ClientCaps, Generation, McpMethod, ProtocolVersion, Reason, Refusal};

/// How the request reached the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// A JSON-RPC message in a POST body.
    Post,
    /// A 2025-11-25 GET: the session's stream of server messages.
    Listen,
    /// A 2025-11-25 DELETE: the end of a session.
    End,
}

impl Transport {
    /// The HTTP method the upstream gets.
    pub(crate) fn http_method(self) -> http::Method {
        match self {
            Transport::Post => http::Method::POST,
            Transport::Listen => http::Method::GET,
            Transport::End => http::Method::DELETE,
        }
    }
}

/// The client's message, checked, with what later phases need of it.
#[derive(Debug, Clone)]
pub struct ParsedRequest {
    /// The body exactly as the client sent it; forwarded byte for byte
    /// unless a retry's answers are rewritten.
    pub(crate) body: Bytes,
    pub(crate) kind: MessageKind,
    /// Where the id's JSON text sits in `body`.
    id: Option<Range<usize>>,
    pub method: McpMethod,
    pub(crate) version: ProtocolVersion,
    pub(crate) transport: Transport,
    /// A 2025-11-25 GET with `Last-Event-ID`: a stream resumed, which may
    /// replay the response to an earlier request.
    pub(crate) resuming: bool,
    /// `params.protocolVersion` of an `initialize`: the client's preference.
    pub(crate) requested_version: Option<String>,
    /// What the client declared it can do for this request.
    pub(crate) client: ClientCaps,
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
    pub(crate) input_responses: bool,
    /// What the call sends its server, built in the one parse: the
    /// `arguments` of a `tools/call` or `prompts/get`, the `argument` of a
    /// `completion/complete` (the argument checks read it).
    pub(crate) arguments: Option<serde_json::Value>,
    /// A `completion/complete`'s `ref`.
    pub(crate) reference: Option<serde_json::Value>,
    /// `params.cursor` is present: a list's later page.
    pub(crate) paged: bool,
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

    pub fn generation(&self) -> Generation {
        self.version.generation()
    }

    /// A GET or DELETE of a 2025-11-25 session: no body, no message.
    pub(crate) fn without_message(transport: Transport, version: ProtocolVersion) -> ParsedRequest {
        ParsedRequest {
            body: Bytes::new(),
            kind: MessageKind::Notification,
            id: None,
            method: McpMethod::Other,
            version,
            transport,
            resuming: false,
            requested_version: None,
            client: ClientCaps::default(),
            target: None,
            params: None,
            request_state: None,
            request_state_not_string: false,
            input_responses: false,
            arguments: None,
            reference: None,
            paged: false,
            digest: OnceLock::new(),
        }
    }

    /// A retry: it carries the gateway's state or answers.
    pub(crate) fn is_retry(&self) -> bool {
        self.request_state.is_some() || self.request_state_not_string || self.input_responses
    }

    /// `params`, parsed strictly into a map (the body was checked already).
    pub(crate) fn params_map(&self) -> serde_json::Map<String, serde_json::Value> {
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
    pub(crate) fn set_digest(&self, digest: String) {
        let _ = self.digest.set(digest);
    }
}

/// Whether the request says a body follows its head (a length over zero,
/// or a transfer coding).
pub(crate) fn declares_body(headers: &http::HeaderMap) -> bool {
    let length = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    headers.contains_key(http::header::TRANSFER_ENCODING) || length.is_some_and(|n| n > 0)
}

/// Read the body and check the message.
pub(crate) async fn read(parts: &Parts, body: Incoming, limits: &Limits) -> Result<Bytes, Refusal> {
    body::read(parts, body, limits).await
}

/// Parse the body and check it against the headers, under the rules of the
/// generation it belongs to (one of `generations`, the route's).
/// A copy of a request's head (what `Parts` cannot clone: its extensions
/// stay behind), for a request the gateway makes from the client's.
pub(crate) fn copy_head(parts: &Parts) -> Parts {
    let (mut copy, ()) = http::Request::new(()).into_parts();
    copy.method = parts.method.clone();
    copy.uri = parts.uri.clone();
    copy.version = parts.version;
    copy.headers = parts.headers.clone();
    copy
}

/// The message and its `params`, read strictly: in the envelope's own pass
/// when it can answer, else the envelope and then `params` (which gives
/// the error, with the request's id and method).
fn read_message<'a>(body: &'a [u8], failure: &Failure) -> Result<ReadMessage<'a>, Refused> {
    let fast = Message::parse_reading(body, failure, "params", |method| {
        Some(params::seed(failure, McpMethod::parse(method?)))
    });
    if let Some(read) = fast {
        let (view, text) = read.member.unzip();
        return Ok((read.message, view, text));
    }
    let msg =
        Message::parse(body).map_err(|e| Refused::from(Refusal::new(e.reason(), e.to_string())))?;
    let Some(raw) = msg.params else {
        return Ok((msg, None, None));
    };
    let method = msg.method.as_deref().map(McpMethod::parse);
    let read = McpMethod::parse(msg.method.as_deref().unwrap_or_default());
    match params::read(
        raw,
        read.target().map(|t| t.member),
        params::sent_members(read),
    ) {
        Ok(view) => Ok((msg, Some(view), Some(raw.get()))),
        Err(e) => Err(Refused {
            id: msg.id.map(|raw| raw.get().to_owned()),
            method,
            ..Refused::from(Refusal::new(Reason::InvalidJson, format!("params: {e}")))
        }),
    }
}

type ReadMessage<'a> = (Message<'a>, Option<params::ParamsView<'a>>, Option<&'a str>);

pub fn parse(
    parts: &Parts,
    body: &Bytes,
    generations: &[Generation],
) -> Result<ParsedRequest, Refused> {
    let failure = Failure::default();
    let (msg, view, params_text) = read_message(body, &failure)?;
    let id = msg.id.and_then(|raw| span_in(body, raw.get()));
    let method = msg.method.as_deref().map(McpMethod::parse);
    let reject = |refusal: Refusal| Refused {
        id: msg.id.map(|raw| raw.get().to_owned()),
        method,
        ..Refused::from(refusal)
    };
    let name = msg.method.as_deref().unwrap_or_default();
    let method = McpMethod::parse(name);
    let target_member = method.target();
    // The versions of the route's generations, newest first (on the stack).
    let supported: SmallVec<[ProtocolVersion; 8]> = ProtocolVersion::ALL
        .iter()
        .copied()
        .filter(|v| generations.contains(&v.generation()))
        .collect();
    let version_header = mcp_headers::version_header(parts).map_err(reject)?;
    let version = mcp_headers::detect(parts, version_header, method, view.as_ref(), &supported)
        .map_err(reject)?;
    let stateless = version.generation() == Generation::Stateless;
    if stateless && msg.kind == MessageKind::Response {
        return Err(reject(Refusal::new(
            Reason::InvalidRequest,
            "a client sends requests and notifications on this transport, not responses",
        )));
    }
    if msg.kind != MessageKind::Response {
        mcp_headers::check_method(parts, name, stateless).map_err(reject)?;
    }
    if stateless {
        mcp_headers::check_version(version_header, msg.kind, view.as_ref(), version)
            .map_err(reject)?;
    }
    let target = match target_member {
        Some(member) => mcp_headers::check_name(parts, member, view.as_ref(), method, stateless)
            .map_err(reject)?,
        None => None,
    };
    // 2026-07-28 declares capabilities per request; 2025-11-25 at initialize
    // (later requests take them from the session).
    let caps = match stateless {
        true => view.as_ref().and_then(|p| p.meta_capabilities),
        false => view.as_ref().and_then(|p| p.capabilities),
    };
    let client = caps
        .map(|raw| ClientCaps::parse(raw.get()))
        .unwrap_or_default();
    let requested_version = view
        .as_ref()
        .filter(|_| method == McpMethod::Initialize)
        .and_then(|p| p.protocol_version.as_deref())
        .map(str::to_owned);
    let state = view.as_ref().and_then(|p| p.request_state);
    let request_state = state.and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    let request_state_not_string = state.is_some() && request_state.is_none();
    let input_responses = view.as_ref().is_some_and(|p| p.input_responses);
    let params = params_text.and_then(|p| span_in(body, p));
    let kind = msg.kind;
    let (arguments, reference, paged) = match view {
        Some(v) => (v.arguments, v.reference, v.cursor),
        None => (None, None, false),
    };
    Ok(ParsedRequest {
        body: body.clone(),
        kind,
        id,
        method,
        version,
        transport: Transport::Post,
        resuming: false,
        requested_version,
        client,
        target,
        params,
        request_state,
        request_state_not_string,
        input_responses,
        arguments,
        reference,
        paged,
        digest: OnceLock::new(),
    })
}

#[cfg(test)]
mod tests;
