//! The request one upstream of a federated route gets: the client's, with
//! the upstream's own name (or URI, or list cursor) where the client wrote
//! the exposed one, in the body and in `Mcp-Name`; then parsed as any
//! request is, so every later phase reads it as if the client had sent it.
//! Only that one value changes: it is spliced into the client's bytes,
//! which the upstream otherwise gets as written (as on a route to it alone).
//!
//! A request for one upstream (a call by a prefixed name) is not parsed
//! again: the upstream's own name is never longer than the exposed one, so
//! it is written in the same bytes, padded with JSON whitespace, and every
//! position the parse recorded in the body still holds; only the body and
//! the target change (the test below checks this against a fresh parse).

use std::ops::Range;

use bytes::Bytes;
use http::request::Parts;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::super::refuse::Refused;
use super::super::request::{self, copy_head, ParsedRequest};
use super::super::route::Federated;
use super::super::Inbound;
use crate::headers::{encode_mcp_header_value, LAST_EVENT_ID, MCP_NAME};
use crate::json::span_in;
use crate::model::{Reason, Refusal, TargetKind};

/// What changes in the request on its way to one upstream.
pub(super) enum Retarget {
    /// `params.name` / `params.uri`: the upstream's own.
    Target { member: Member, own: String },
    /// `params.ref.<member>` of a completion.
    Reference { member: Member, own: String },
    /// `params.cursor`: the upstream's own.
    Cursor(String),
    /// `params.notifications.resourceSubscriptions`: the upstream's own URIs
    /// of those the client named (`subscriptions/listen`).
    Subscriptions(Vec<String>),
    /// The same message (a list or description asked of every upstream,
    /// from their first pages, or a client's notification).
    Unchanged,
}

/// The member of `params` (or of `params.ref`) that names the target.
#[derive(Clone, Copy)]
pub(super) enum Member {
    Name,
    Uri,
}

impl Member {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Member::Name => "name",
            Member::Uri => "uri",
        }
    }
}

impl Retarget {
    pub(super) fn target(kind: TargetKind, own: &str) -> Retarget {
        let member = match kind {
            TargetKind::Tool | TargetKind::Prompt => Member::Name,
            TargetKind::Resource => Member::Uri,
        };
        Retarget::Target {
            member,
            own: own.to_owned(),
        }
    }

    pub(super) fn reference(member: Member, own: &str) -> Retarget {
        Retarget::Reference {
            member,
            own: own.to_owned(),
        }
    }

    /// A list's page: the upstream's own cursor, or its first page.
    pub(super) fn cursor(cursor: Option<String>) -> Retarget {
        cursor.map_or(Retarget::Unchanged, Retarget::Cursor)
    }

    /// The request as one of several upstreams asked at once gets it: a
    /// copy of the client's, parsed.
    pub(super) fn apply(self, inbound: &Inbound, fed: &Federated) -> Result<Inbound, Refused> {
        let (parts, request) = self.retarget(copy_head(&inbound.parts), &inbound.request, fed)?;
        Ok(Inbound {
            parts,
            authority: inbound.authority.clone(),
            principal: inbound.principal.clone(),
            request,
            peer: inbound.peer.clone(),
            request_id: inbound.request_id.clone(),
            started: inbound.started,
            trace: inbound.trace.clone(),
            subject: inbound.subject.clone(),
            carried: inbound.carried,
            own: inbound.own,
        })
    }

    /// The request as the one upstream it concerns gets it: the client's
    /// own (its head moved, not copied), changed in place where it can be.
    pub(super) fn apply_to_one(
        self,
        mut inbound: Inbound,
        fed: &Federated,
    ) -> Result<Inbound, Refused> {
        if self.in_place(&mut inbound.parts, &mut inbound.request) {
            return Ok(inbound);
        }
        let (parts, request) = self.retarget(inbound.parts, &inbound.request, fed)?;
        Ok(Inbound {
            parts,
            request,
            ..inbound
        })
    }

    /// Write the upstream's own value over the exposed one, in the same
    /// bytes; `false` (nothing changed) when it does not fit or is not
    /// there.
    fn in_place(&self, parts: &mut Parts, request: &mut ParsedRequest) -> bool {
        if request.transport != request::Transport::Post {
            return false;
        }
        let Some((span, value)) = self.located(request) else {
            return false;
        };
        let Some(body) = splice(&request.body, span, value, Fit::Padded) else {
            return false;
        };
        request.body = body;
        match self {
            Retarget::Target { own, .. } => {
                set_name_header(parts, own);
                request.target = Some(own.clone());
            }
            // What the argument checks read of the reference.
            Retarget::Reference { member, own } => {
                if let Some(serde_json::Value::Object(r)) = request.reference.as_mut() {
                    r.insert(member.as_str().to_owned(), own.clone().into());
                }
            }
            _ => {}
        }
        true
    }

    fn retarget(
        self,
        mut parts: Parts,
        request: &ParsedRequest,
        fed: &Federated,
    ) -> Result<(Parts, ParsedRequest), Refused> {
        let parsed = match request.transport {
            request::Transport::Post => {
                let body = self.body(request).ok_or_else(|| {
                    Refused::new(
                        Refusal::new(
                            Reason::InvalidRequest,
                            "the request could not be rewritten for its upstream",
                        ),
                        request.id(),
                        &fed.settings.name,
                    )
                })?;
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
        Ok((parts, parsed))
    }

    /// The body to send: the client's, with the one value replaced.
    fn body(&self, request: &ParsedRequest) -> Option<Bytes> {
        match self {
            Retarget::Unchanged => return Some(request.body.clone()),
            Retarget::Subscriptions(own) => return subscribed(request, own),
            _ => {}
        }
        let (span, value) = self.located(request)?;
        splice(&request.body, span, value, Fit::Any)
    }

    /// Where the value to replace sits in the body, and what replaces it.
    fn located<'r>(&'r self, request: &ParsedRequest) -> Option<(Range<usize>, &'r str)> {
        let (at, value) = match self {
            Retarget::Unchanged | Retarget::Subscriptions(_) => return None,
            Retarget::Target { member, own } => {
                (Members::of(request.params_text()?)?.get(*member)?, own)
            }
            Retarget::Reference { member, own } => {
                let reference = Members::of(request.params_text()?)?.reference?;
                (Members::of(reference.get())?.get(*member)?, own)
            }
            Retarget::Cursor(cursor) => (Members::of(request.params_text()?)?.cursor?, cursor),
        };
        Some((span_in(&request.body, at.get())?, value))
    }
}

/// The members of a `params` object (or of its `ref`) a retarget replaces,
/// where they sit in the text. The message was parsed strictly already (no
/// member twice); everything else is skipped.
#[derive(Deserialize)]
struct Members<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    uri: Option<&'a RawValue>,
    #[serde(borrow, default)]
    cursor: Option<&'a RawValue>,
    #[serde(rename = "ref", borrow, default)]
    reference: Option<&'a RawValue>,
}

impl<'a> Members<'a> {
    fn of(object: &'a str) -> Option<Members<'a>> {
        serde_json::from_str(object).ok()
    }

    fn get(&self, member: Member) -> Option<&'a RawValue> {
        match member {
            Member::Name => self.name,
            Member::Uri => self.uri,
        }
    }
}

/// How a spliced value may change the body's length.
#[derive(Clone, Copy, PartialEq)]
enum Fit {
    Any,
    /// The same length: a shorter value is followed by spaces.
    Padded,
}

/// `body` with the JSON text at `span` replaced by the string `value`.
fn splice(body: &[u8], span: Range<usize>, value: &str, fit: Fit) -> Option<Bytes> {
    let mut out = Vec::with_capacity(body.len() + value.len() + 8);
    out.extend_from_slice(body.get(..span.start)?);
    serde_json::to_writer(&mut out, value).ok()?;
    let written = out.len() - span.start;
    if fit == Fit::Padded {
        let pad = span.len().checked_sub(written)?;
        out.resize(out.len() + pad, b' ');
    }
    out.extend_from_slice(body.get(span.end..)?);
    Some(Bytes::from(out))
}

/// A `subscriptions/listen` naming only the upstream's own resource URIs
/// (a list of values, not one: the message is written again, its id as the
/// client wrote it).
fn subscribed(request: &ParsedRequest, own: &[String]) -> Option<Bytes> {
    let mut params = request.params_map();
    let filter = params.get_mut("notifications")?.as_object_mut()?;
    filter.get("resourceSubscriptions")?;
    let own = own.iter().cloned().map(serde_json::Value::String).collect();
    filter.insert(
        "resourceSubscriptions".to_owned(),
        serde_json::Value::Array(own),
    );
    let method = serde_json::to_string(request.method.as_str()).ok()?;
    let params = serde_json::to_string(&params).ok()?;
    let id = request
        .id()
        .map(|id| format!(",\"id\":{id}"))
        .unwrap_or_default();
    Some(Bytes::from(format!(
        "{{\"jsonrpc\":\"2.0\"{id},\"method\":{method},\"params\":{params}}}"
    )))
}

/// `Mcp-Name` (2026-07-28) carries the upstream's own name, encoded as the
/// transport encodes a value that is not printable ASCII.
fn set_name_header(parts: &mut Parts, own: &str) {
    if !parts.headers.contains_key(&MCP_NAME) {
        return;
    }
    match encode_mcp_header_value(own) {
        Some(v) => parts.headers.insert(MCP_NAME.clone(), v),
        None => parts.headers.remove(&MCP_NAME),
    };
}

/// `params.cursor` of the client's request, as written.
pub(super) fn cursor_of(request: &ParsedRequest) -> Option<&RawValue> {
    Members::of(request.params_text()?)?.cursor
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Generation;
    use http::{HeaderValue, Request};

    const GENERATIONS: &[Generation] = &[Generation::Stateless, Generation::Sessions];
    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}"#;

    fn head(method: &str, name: Option<&str>) -> Parts {
        let mut parts = Request::post("/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .body(())
            .unwrap()
            .into_parts()
            .0;
        if let Some(name) = name {
            parts
                .headers
                .insert(MCP_NAME.clone(), HeaderValue::from_static("-"));
            set_name_header(&mut parts, name);
        }
        parts
    }

    /// Spellings of one call by an exposed name: escapes in the name and
    /// in its member's key, the id before, after and as a string, other
    /// members around it, non-ASCII names.
    fn calls() -> Vec<(String, &'static str, &'static str)> {
        let mut out = Vec::new();
        for (written, exposed, own) in [
            (r#""gh_get_room""#, "gh_get_room", "get_room"),
            (r#""gh\u005fget_room""#, "gh_get_room", "get_room"),
            (r#""\u0067h_get\u005Froom""#, "gh_get_room", "get_room"),
            (r#""gh_r\u00e9server""#, "gh_r\u{e9}server", "r\u{e9}server"),
            (r#""gh_say_\"hi\"""#, "gh_say_\"hi\"", "say_\"hi\""),
            (r#""gh_a\/b""#, "gh_a/b", "a/b"),
        ] {
            for key in [r#""name""#, r#""n\u0061me""#] {
                for (before, after) in [
                    (r#""jsonrpc":"2.0","id":7,"method":"tools/call","#, ""),
                    (
                        r#""method":"tools/call","jsonrpc":"2.0","#,
                        r#","id":"call-\u0031""#,
                    ),
                ] {
                    for params in [
                        format!(
                            r#"{{{META},{key}:{written},"arguments":{{"room_id":"gh_get_room"}}}}"#
                        ),
                        format!(r#"{{ {key} : {written} , {META} }}"#),
                        format!(
                            r#"{{"arguments":{{"name":"gh_get_room"}},{key}:{written},{META}}}"#
                        ),
                    ] {
                        let body = format!(r#"{{{before}"params":{params}{after}}}"#);
                        out.push((body, exposed, own));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn a_call_retargeted_in_place_is_what_a_fresh_parse_of_its_bytes_gives() {
        let calls = calls();
        assert_eq!(calls.len(), 72);
        for (body, exposed, own) in calls {
            let mut parts = head("tools/call", Some(exposed));
            let mut request = request::parse(&parts, &Bytes::from(body.clone()), GENERATIONS)
                .unwrap_or_else(|e| panic!("{body}: {:?}", e.refusal));
            assert_eq!(request.target.as_deref(), Some(exposed), "{body}");
            let retarget = Retarget::target(TargetKind::Tool, own);
            assert!(retarget.in_place(&mut parts, &mut request), "{body}");
            assert_eq!(request.body.len(), body.len(), "{body}");
            let fresh = request::parse(&parts, &request.body, GENERATIONS)
                .unwrap_or_else(|e| panic!("{body}: {:?}", e.refusal));
            assert_eq!(format!("{request:?}"), format!("{fresh:?}"), "{body}");
            assert_eq!(request.target.as_deref(), Some(own));
            assert_eq!(
                parts.headers[&MCP_NAME],
                head("", Some(own)).headers[&MCP_NAME]
            );
            // The upstream gets the client's message with its own name.
            let mut sent: serde_json::Value = serde_json::from_str(&body).unwrap();
            sent["params"]["name"] = own.into();
            let got: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
            assert_eq!(got, sent, "{body}");
        }
    }

    #[test]
    fn a_value_that_does_not_fit_is_spliced_and_parsed_again() {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META},"cursor":"pfc1.x"}}}}"#
        );
        let mut parts = head("tools/list", None);
        let mut request = request::parse(&parts, &Bytes::from(body.clone()), GENERATIONS).unwrap();
        let longer = Retarget::cursor(Some("the upstream's own, longer cursor".into()));
        assert!(!longer.in_place(&mut parts, &mut request));
        assert_eq!(request.body, body.as_bytes());
        let sent = longer.body(&request).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(v["params"]["cursor"], "the upstream's own, longer cursor");
        assert_eq!(v["id"], 1);
        let shorter = Retarget::cursor(Some("c2".into()));
        assert!(shorter.in_place(&mut parts, &mut request));
        let v: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(v["params"]["cursor"], "c2");
        assert!(matches!(Retarget::cursor(None), Retarget::Unchanged));
    }

    #[test]
    fn a_completion_reference_is_retargeted_inside_ref() {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{{{META},"ref":{{"type":"ref/prompt","name":"gh_plan"}},"argument":{{"name":"gh_plan","value":"a"}}}}}}"#
        );
        let parts = head("completion/complete", None);
        let request = request::parse(&parts, &Bytes::from(body), GENERATIONS).unwrap();
        let sent = Retarget::reference(Member::Name, "plan")
            .body(&request)
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(v["params"]["ref"]["name"], "plan");
        assert_eq!(v["params"]["argument"]["name"], "gh_plan");
    }
}
