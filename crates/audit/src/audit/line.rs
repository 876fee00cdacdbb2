//! One event as written: the envelope every event of a request shares
//! ([`AuditContext`]), then the event's own members, as one JSON line or
//! one object (an OpenTelemetry log record's body).

use std::borrow::Cow;

use serde::{Serialize, Serializer};

use super::config_event::GatewayAbout;
use super::event::{clean, AuditEvent};

/// An upstream endpoint as configured, without `user:password@`, query or
/// fragment (where credentials and tokens hide), then [`clean`]ed.
fn clean_endpoint(s: &str) -> Cow<'_, str> {
    let s = &s[..s.find(['?', '#']).unwrap_or(s.len())];
    let authority_start = s.find("://").map_or(0, |i| i + 3);
    let authority_end = s[authority_start..]
        .find('/')
        .map_or(s.len(), |i| authority_start + i);
    match s[authority_start..authority_end].rfind('@') {
        None => clean(s),
        Some(at) => {
            let joined = format!(
                "{}{}",
                &s[..authority_start],
                &s[authority_start + at + 1..]
            );
            Cow::Owned(clean(&joined).into_owned())
        }
    }
}

/// Who, where and which step: the envelope every event of one request
/// shares. Strings here are identifiers (configured upstream id, name and
/// endpoint; the principal's name; the MCP method; the tool name or
/// resource URI; ids); they are cleaned and clipped like [`Name`]s when
/// written, and the endpoint loses any `user:password@`, query and fragment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditContext {
    pub request_id: String,
    /// The MRTR operation id; `None` until the gateway has minted one.
    pub operation: Option<String>,
    pub upstream_id: String,
    pub upstream_name: String,
    pub upstream_endpoint: String,
    /// The principal's name, or `anonymous`.
    pub principal: String,
    /// The configured auth scheme that accepted the principal (`None` for
    /// an anonymous caller): two schemes may each know an `alice`.
    pub auth_scheme: Option<String>,
    /// The OAuth client the caller signed in with (`client_id` or `azp` of
    /// its access token), when it has one.
    pub client: Option<String>,
    pub method: String,
    /// `params.name` / `params.uri`.
    pub target: Option<String>,
    /// The round the event belongs to (1 = the first `input_required`).
    pub round: Option<u32>,
    /// The protocol generation: `2026-07-28` (MRTR) or `2025-11-25` (pushed).
    pub generation: &'static str,
    /// The span of the traced request the event happened in (not written
    /// in the JSON line; an OpenTelemetry log record carries it).
    pub trace: Option<TraceIds>,
}

/// A W3C trace context's ids, as bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIds {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
}

impl AuditContext {
    /// This context for one round of one operation.
    pub fn with_operation(&self, operation: &str, round: u32) -> AuditContext {
        AuditContext {
            operation: Some(operation.to_owned()),
            round: Some(round),
            ..self.clone()
        }
    }
}

/// A context string as written.
struct Clean<'a>(&'a str);

impl Serialize for Clean<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&clean(self.0))
    }
}

struct Endpoint<'a>(&'a str);

impl Serialize for Endpoint<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&clean_endpoint(self.0))
    }
}

#[derive(Serialize)]
struct Upstream<'a> {
    id: Clean<'a>,
    name: Clean<'a>,
    endpoint: Endpoint<'a>,
}

#[derive(Serialize)]
struct Line<'a> {
    ts: &'a str,
    event: &'static str,
    operation: Option<Clean<'a>>,
    request_id: Clean<'a>,
    upstream: Upstream<'a>,
    principal: Clean<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    auth_scheme: Option<Clean<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<Clean<'a>>,
    method: Clean<'a>,
    target: Option<Clean<'a>>,
    round: Option<u32>,
    generation: &'a str,
    #[serde(flatten)]
    body: &'a AuditEvent,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

/// A time as written in `ts`: RFC 3339, UTC, milliseconds.
pub(crate) fn timestamp(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// One event as its JSON line, newline included.
pub(crate) fn to_line(
    ts: &str,
    ctx: &AuditContext,
    event: &AuditEvent,
) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(512);
    serde_json::to_writer(&mut out, &line(ts, ctx, event))?;
    out.push(b'\n');
    Ok(out)
}

/// One event as the JSON object its line holds.
pub(crate) fn to_object(
    ts: &str,
    ctx: &AuditContext,
    event: &AuditEvent,
) -> serde_json::Result<serde_json::Value> {
    serde_json::to_value(line(ts, ctx, event))
}

fn line<'a>(ts: &'a str, ctx: &'a AuditContext, event: &'a AuditEvent) -> Line<'a> {
    Line {
        ts,
        event: event.name(),
        operation: ctx.operation.as_deref().map(Clean),
        request_id: Clean(&ctx.request_id),
        upstream: Upstream {
            id: Clean(&ctx.upstream_id),
            name: Clean(&ctx.upstream_name),
            endpoint: Endpoint(&ctx.upstream_endpoint),
        },
        principal: Clean(&ctx.principal),
        auth_scheme: ctx.auth_scheme.as_deref().map(Clean),
        client: ctx.client.as_deref().map(Clean),
        method: Clean(&ctx.method),
        target: ctx.target.as_deref().map(Clean),
        round: ctx.round,
        generation: ctx.generation,
        body: event,
        truncated: event.truncated(),
    }
}

/// The line of an event tied to no request: the time, the event's name,
/// the upstream it is about (or `null`), then the event's own members.
#[derive(Serialize)]
struct UnboundLine<'a> {
    ts: &'a str,
    event: &'static str,
    upstream: Option<Upstream<'a>>,
    #[serde(flatten)]
    body: &'a AuditEvent,
}

fn unbound<'a>(ts: &'a str, about: &'a GatewayAbout, event: &'a AuditEvent) -> UnboundLine<'a> {
    UnboundLine {
        ts,
        event: event.name(),
        upstream: about.upstream_id.as_deref().map(|id| Upstream {
            id: Clean(id),
            name: Clean(&about.upstream_name),
            endpoint: Endpoint(&about.upstream_endpoint),
        }),
        body: event,
    }
}

/// An event tied to no request as its JSON line, newline included.
pub(crate) fn to_unbound_line(
    ts: &str,
    about: &GatewayAbout,
    event: &AuditEvent,
) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    serde_json::to_writer(&mut out, &unbound(ts, about, event))?;
    out.push(b'\n');
    Ok(out)
}

/// An event tied to no request as the JSON object its line holds.
pub(crate) fn to_unbound_object(
    ts: &str,
    about: &GatewayAbout,
    event: &AuditEvent,
) -> serde_json::Result<serde_json::Value> {
    serde_json::to_value(unbound(ts, about, event))
}
