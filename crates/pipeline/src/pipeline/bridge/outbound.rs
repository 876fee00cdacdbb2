//! A bridged session's messages in the other generation: each request the
//! 2025-11-25 client sends becomes a 2026-07-28 request (the session's
//! capabilities in `_meta`, `Mcp-Method` and `Mcp-Name`), parsed and
//! checked like any client's; each 2026-07-28 result comes back without the
//! members 2025-11-25 does not have.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Request};
use serde_json::{Map, Value};

use super::super::refuse::Refused;
use super::super::request::{self, ParsedRequest, Transport};
use super::super::{Inbound, Peer};
use crate::headers::{
    encode_mcp_header_value, LAST_EVENT_ID, MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION,
    MCP_SESSION_ID,
};
use crate::identify::Principal;
use crate::model::{ClientCaps, Generation, McpMethod, ProtocolVersion, Reason, Refusal};
use crate::telemetry::RequestTrace;

/// Where the version and capabilities of a 2026-07-28 request are written.
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPS_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// The longest `Mcp-Name` the bridge writes (half the default
/// `max_header_bytes`: what a client's own request head could carry).
const MAX_NAME_HEADER: usize = 8192;

/// The members of a 2026-07-28 result that 2025-11-25 has no place for.
const STATELESS_ONLY: [&str; 3] = ["resultType", "ttlMs", "cacheScope"];

/// Where a 2026-07-28 result names the server that wrote it (2025-11-25
/// names it once, at `initialize`: the gateway's configured name).
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// What every request a bridged session sends upstream is made from: the
/// client's request head and who it is.
pub(super) struct Outbound {
    head: Parts,
    authority: HeaderValue,
    pub(crate) principal: Principal,
    pub(crate) peer: Arc<Peer>,
    pub(crate) request_id: Arc<str>,
    pub(crate) started: Instant,
    pub(crate) trace: RequestTrace,
    subject: Option<crate::credential::SubjectToken>,
    caps: ClientCaps,
}

impl Outbound {
    pub(super) fn new(
        mut head: Parts,
        authority: HeaderValue,
        ctx: &super::super::ctx::RequestCtx,
        caps: ClientCaps,
    ) -> Outbound {
        for name in [&MCP_SESSION_ID, &LAST_EVENT_ID, &MCP_NAME, &MCP_METHOD] {
            head.headers.remove(name);
        }
        head.headers.remove(header::CONTENT_LENGTH);
        head.method = http::Method::POST;
        Outbound {
            head,
            authority,
            principal: ctx.principal.clone(),
            peer: ctx.peer.clone(),
            request_id: ctx.request_id.clone(),
            started: ctx.started,
            trace: ctx.trace.clone(),
            subject: ctx.subject.clone(),
            caps,
        }
    }

    /// The 2026-07-28 request `method` with `params` (their `_meta` kept,
    /// the version and the session's capabilities written into it), under
    /// the JSON-RPC id `id` (JSON text), parsed and checked as a client's.
    pub(super) fn request(
        &self,
        id: &str,
        method: &str,
        mut params: Map<String, Value>,
    ) -> Result<Inbound, Refused> {
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        if let Value::Object(meta) = meta {
            let version = ProtocolVersion::V2026_07_28.as_str();
            meta.insert(VERSION_KEY.to_owned(), version.into());
            meta.insert(CAPS_KEY.to_owned(), self.caps.to_value());
        }
        let target = crate::model::McpMethod::parse(method)
            .target()
            .and_then(|t| params.get(t.member))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let params = Value::Object(params);
        let body = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":{},\"params\":{params}}}",
            Value::from(method)
        );
        let body = Bytes::from(body);
        let parts = self.head(method, target.as_deref())?;
        let parsed: ParsedRequest = request::parse(&parts, &body, Generation::ALL)?;
        Ok(self.inbound(parts, parsed))
    }

    /// The 2025-11-25 message `body` (a request, notification or answer)
    /// in the upstream session `session` (none: `initialize`), spoken in
    /// `version`, parsed and checked as a client's.
    pub(super) fn in_session(
        &self,
        body: Value,
        session: Option<&HeaderValue>,
        version: &HeaderValue,
    ) -> Result<Inbound, Refused> {
        let body = Bytes::from(body.to_string());
        let mut parts = self.post(version.clone());
        if let Some(session) = session {
            parts
                .headers
                .insert(MCP_SESSION_ID.clone(), session.clone());
        }
        let parsed: ParsedRequest = request::parse(&parts, &body, Generation::ALL)?;
        Ok(self.inbound(parts, parsed))
    }

    /// The end (`DELETE`) of the upstream session `session`.
    pub(super) fn end_session(&self, session: &HeaderValue, version: &HeaderValue) -> Inbound {
        let (mut parts, ()) = Request::new(()).into_parts();
        parts.method = http::Method::DELETE;
        parts.uri = self.head.uri.clone();
        parts.version = self.head.version;
        parts.headers = self.head.headers.clone();
        parts.headers.remove(header::CONTENT_TYPE);
        parts
            .headers
            .insert(MCP_SESSION_ID.clone(), session.clone());
        parts
            .headers
            .insert(MCP_PROTOCOL_VERSION.clone(), version.clone());
        let spoken = version
            .to_str()
            .ok()
            .and_then(ProtocolVersion::parse)
            .unwrap_or(ProtocolVersion::V2025_11_25);
        let request = ParsedRequest::without_message(Transport::End, spoken);
        self.inbound(parts, request)
    }

    fn inbound(&self, parts: Parts, request: ParsedRequest) -> Inbound {
        Inbound {
            parts,
            authority: self.authority.clone(),
            principal: self.principal.clone(),
            request,
            peer: self.peer.clone(),
            request_id: self.request_id.clone(),
            started: self.started,
            trace: self.trace.clone(),
            subject: self.subject.clone(),
            carried: true,
            own: false,
        }
    }

    /// A POST of a JSON-RPC message spoken in `version`, with the client's
    /// end-to-end headers.
    fn post(&self, version: HeaderValue) -> Parts {
        let (mut parts, ()) = Request::new(()).into_parts();
        parts.method = http::Method::POST;
        parts.uri = self.head.uri.clone();
        parts.version = self.head.version;
        parts.headers = self.head.headers.clone();
        let h = &mut parts.headers;
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        h.insert(MCP_PROTOCOL_VERSION.clone(), version);
        parts
    }

    fn head(&self, method: &str, target: Option<&str>) -> Result<Parts, Refused> {
        let stateless = HeaderValue::from_static(ProtocolVersion::V2026_07_28.as_str());
        let mut parts = self.post(stateless);
        let h = &mut parts.headers;
        let method = HeaderValue::from_str(method).map_err(|_| {
            Refused::from(Refusal::new(
                Reason::InvalidRequest,
                "the method name is not a valid header value",
            ))
        })?;
        h.insert(MCP_METHOD.clone(), method);
        if let Some(name) = target.and_then(encode_mcp_header_value) {
            // A name a client could not have sent in a header of its own.
            if name.len() > MAX_NAME_HEADER {
                return Err(Refused::from(Refusal::new(
                    Reason::InvalidRequest,
                    "the name is too long to carry in an Mcp-Name header",
                )));
            }
            h.insert(MCP_NAME.clone(), name);
        }
        Ok(parts)
    }
}

/// A 2026-07-28 result as a 2025-11-25 client reads it.
pub(super) fn to_sessions(result: &mut Value) {
    if let Value::Object(r) = result {
        for member in STATELESS_ONLY {
            r.remove(member);
        }
        if let Some(Value::Object(meta)) = r.get_mut("_meta") {
            meta.remove(SERVER_INFO_KEY);
            if meta.is_empty() {
                r.remove("_meta");
            }
        }
    }
}

/// A 2025-11-25 result of `method` as a 2026-07-28 client reads it: complete,
/// and a list not to be cached (the upstream said nothing of it). The list
/// methods' 2026-07-28 results say how long they may be cached (`ttlMs`,
/// `cacheScope`; required there).
pub(super) fn to_stateless(result: &mut Value, method: McpMethod) {
    if let Value::Object(r) = result {
        r.entry("resultType").or_insert_with(|| "complete".into());
        if method.catalogue().is_some() {
            r.entry("ttlMs").or_insert_with(|| 0.into());
            r.entry("cacheScope").or_insert_with(|| "private".into());
        }
    }
}

/// The `params` of a 2026-07-28 request as a 2025-11-25 one carries them:
/// without the version and capabilities (the session has them) and the
/// answers of a retry (the gateway delivers those itself).
pub(super) fn to_sessions_params(mut params: Map<String, Value>) -> Map<String, Value> {
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        meta.remove(VERSION_KEY);
        meta.remove(CAPS_KEY);
        if meta.is_empty() {
            params.remove("_meta");
        }
    }
    params.remove("inputResponses");
    params.remove("requestState");
    params
}

/// The client's `params` as an object (a request without them has none).
pub(super) fn params_of(request: &ParsedRequest) -> Result<Map<String, Value>, Refusal> {
    match request.params_text() {
        None => Ok(Map::new()),
        Some(text) => match crate::json::parse_value(text.as_bytes()) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(Refusal::new(
                Reason::InvalidRequest,
                "params is not an object",
            )),
        },
    }
}
