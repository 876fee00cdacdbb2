//! An upstream answer, dry-run: the message is read the way it would
//! arrive (a JSON body, or one event of a stream), judged by the response
//! phase of an offline gateway, and traced by the policy.

use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{Capability, Check, ExplainArgs, Explanation, RefusalOut, UpstreamOut, UsageError};
use crate::json::{self, error_body, Message};
use crate::model::{McpMethod, Refusal};
use crate::pipeline::ctx::RequestCtx;
use crate::pipeline::response::disposition::Disposition;
use crate::pipeline::response::exchange::{result_route, Carrier, Exchange, ResultRoute};
use crate::pipeline::sse::SseFramer;
use crate::pipeline::Gateway;
use crate::policy::inspect::{
    trace_content, trace_every_rule, trace_notification, trace_result, trace_whole_result, Report,
    Verdict, PROVENANCE_KEY,
};

/// What the message file holds.
pub(super) enum Incoming {
    /// A JSON-RPC message from the upstream and how it came.
    Answer {
        bytes: Vec<u8>,
        carrier: Carrier,
        read_as: &'static str,
    },
    /// A client request that answers questions.
    Retry(Vec<u8>),
    /// A client's call: its arguments through the argument rules.
    Call(Vec<u8>),
}

/// A human-facing text the gateway rewrote.
#[derive(Debug, Clone, Serialize)]
pub struct TextChange {
    pub key: String,
    /// Where in the question (`message`, `room_id.description`, …).
    pub at: String,
    pub before: String,
    pub after: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct FieldOut {
    pub key: String,
    pub field: String,
}

fn is_event_stream(text: &[u8]) -> bool {
    let start = text
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(0);
    let rest = &text[start..];
    [&b"data:"[..], b"event:", b"id:", b"retry:", b":"]
        .iter()
        .any(|p| rest.starts_with(p))
}

impl Incoming {
    /// Read the message file: an SSE event, a JSON-RPC message, a bare
    /// result (wrapped as the response to request 1) or a client retry.
    pub(super) fn read(bytes: &[u8], max_event: usize) -> Result<Incoming, UsageError> {
        if is_event_stream(bytes) {
            let mut framer = SseFramer::new(max_event);
            framer.push(bytes);
            framer.push(b"\n\n");
            let event = framer
                .next_event()
                .map_err(|e| UsageError::Message(format!("the event stream: {e}")))?;
            let data = event.and_then(|e| e.data).ok_or_else(|| {
                UsageError::Message("the event stream has no event with data".into())
            })?;
            return Ok(Incoming::Answer {
                bytes: data.into_bytes(),
                carrier: Carrier::Stream,
                read_as: "an event of a stream",
            });
        }
        // Read loosely only to tell the kinds apart; the phases read strictly.
        let loose: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        let params = loose.get("params");
        let answers = ["requestState", "inputResponses"]
            .iter()
            .any(|m| params.and_then(|p| p.get(m)).is_some());
        if loose.get("method").is_some() && loose.get("id").is_some() && answers {
            return Ok(Incoming::Retry(bytes.to_vec()));
        }
        let method = loose.get("method").and_then(Value::as_str);
        let sends = method.is_some_and(|m| McpMethod::parse(m).sends_arguments());
        if loose.get("id").is_some() && sends {
            return Ok(Incoming::Call(bytes.to_vec()));
        }
        if loose.get("resultType").is_some() {
            let text = String::from_utf8_lossy(bytes);
            let wrapped = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}}",
                text.trim()
            );
            return Ok(Incoming::Answer {
                bytes: wrapped.into_bytes(),
                carrier: Carrier::Body,
                read_as: "a result (as the response to request 1)",
            });
        }
        let carrier = match loose.get("method").is_some() && loose.get("id").is_none() {
            true => Carrier::Stream,
            false => Carrier::Body,
        };
        Ok(Incoming::Answer {
            bytes: bytes.to_vec(),
            carrier,
            read_as: match carrier {
                Carrier::Stream => "a notification on a stream",
                Carrier::Body => "a JSON-RPC message in a response body",
            },
        })
    }
}

/// `params._meta` capabilities as the client would write them.
fn capabilities(caps: &[Capability]) -> Value {
    let has = |c| caps.contains(&c);
    let mut out = Map::new();
    let mut elicitation = Map::new();
    for (cap, name) in [(Capability::Form, "form"), (Capability::Url, "url")] {
        if has(cap) {
            elicitation.insert(name.into(), json!({}));
        }
    }
    if !elicitation.is_empty() {
        out.insert("elicitation".into(), Value::Object(elicitation));
    }
    if has(Capability::SamplingContext) {
        out.insert("sampling".into(), json!({"context": {}}));
    } else if has(Capability::Sampling) {
        out.insert("sampling".into(), json!({}));
    }
    if has(Capability::Roots) {
        out.insert("roots".into(), json!({}));
    }
    Value::Object(out)
}

/// The client request the answer answers, checked by the request phase as
/// it would be on the wire.
pub(super) fn client_request(
    args: &ExplainArgs,
    id: &str,
) -> Result<crate::pipeline::request::ParsedRequest, UsageError> {
    let method = McpMethod::parse(&args.method);
    // `initialize` exists only in 2025-11-25 sessions: its own shape.
    let legacy = method == McpMethod::Initialize;
    let version = match legacy {
        true => crate::model::ProtocolVersion::V2025_11_25,
        false => crate::model::ProtocolVersion::V2026_07_28,
    }
    .as_str();
    let mut params = match legacy {
        true => json!({"protocolVersion": version, "capabilities": capabilities(&args.caps),
            "clientInfo": {"name": "portcullis-explain", "version": env!("CARGO_PKG_VERSION")}}),
        false => json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": capabilities(&args.caps),
        }}),
    };
    let member = method.target().map(|t| t.member);
    match member {
        Some("name") => {
            params["name"] = json!(args.target);
            params["arguments"] = json!({});
        }
        Some(m) => params[m] = json!(args.target),
        None => {}
    }
    let id: Value = serde_json::from_str(id).unwrap_or(json!(1));
    let body = json!({"jsonrpc": "2.0", "id": id, "method": args.method, "params": params});
    let mut request = http::Request::builder()
        .method("POST")
        .uri("/")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if !legacy {
        request = request
            .header("mcp-protocol-version", version)
            .header("mcp-method", &args.method);
    }
    if member.is_some() {
        request = request.header("mcp-name", &args.target);
    }
    let parts = request
        .body(())
        .map_err(|e| UsageError::Message(format!("--method/--target: {e}")))?
        .into_parts()
        .0;
    crate::pipeline::request::parse(
        &parts,
        &Bytes::from(body.to_string()),
        crate::model::Generation::ALL,
    )
    .map_err(|r| {
        UsageError::Message(format!(
            "--method {} / --target: {}",
            args.method, r.refusal.message
        ))
    })
}

pub(super) fn checks(verdicts: &[Verdict]) -> Vec<Check> {
    verdicts
        .iter()
        .map(|v| Check {
            rule: v.rule.as_str(),
            action: v.action.as_str(),
            key: v.key.clone(),
            field: v.field.clone(),
            detail: v.detail.clone(),
        })
        .collect()
}

pub(super) fn refusal_out(r: &Refusal) -> RefusalOut {
    RefusalOut {
        reason: r.reason.as_str(),
        code: r.reason.code(),
        message: r.message.clone(),
    }
}

/// The policy's trace of the message (and, when enforcing stopped it,
/// what every rule would have found).
struct Traced {
    report: Report,
    every_rule: Vec<Check>,
}

fn trace(exchange: &Exchange, message: &[u8]) -> Option<Traced> {
    let msg = Message::parse(message).ok()?;
    let policy = &exchange.ctx.route.upstream.settings.policy;
    let subject = exchange.subject();
    if let Some(result) = msg.result {
        let mut loose: Value = serde_json::from_str(result.get()).ok()?;
        let method = exchange.ctx.request.method;
        let result_type = loose.get("resultType").and_then(Value::as_str);
        // The rules the response phase sends this result to.
        let route = result_route(method, result_type);
        let report = match route {
            ResultRoute::Question => None,
            ResultRoute::Listing => Some(trace_whole_result(policy, &subject, &mut loose).1),
            ResultRoute::ServerDescription => {
                Some(trace_notification(policy, &subject, method, result.get().as_bytes()).1)
            }
            ResultRoute::Task(_)
            | ResultRoute::TaskAck
            | ResultRoute::TaskList
            | ResultRoute::Content => Some(trace_content(policy, &subject, method, &mut loose).1),
        };
        if let Some(report) = report {
            return Some(Traced {
                report,
                every_rule: Vec::new(),
            });
        }
        let bytes = result.get().as_bytes();
        let (outcome, report) = trace_result(policy, &subject, bytes);
        let every_rule = match outcome {
            Err(_) if policy.mode == crate::policy::config::Mode::Enforce => {
                let every = trace_every_rule(policy, &subject, bytes).1.trace;
                // A protocol violation stops both runs at the same place.
                if every.len() > report.trace.len() {
                    checks(&every)
                } else {
                    Vec::new()
                }
            }
            _ => Vec::new(),
        };
        return Some(Traced { report, every_rule });
    }
    let method = McpMethod::parse(msg.method.as_deref()?);
    let params = msg.params?;
    let (_, report) = trace_notification(policy, &subject, method, params.get().as_bytes());
    Some(Traced {
        report,
        every_rule: Vec::new(),
    })
}

pub(super) fn explain(
    gateway: &Arc<Gateway>,
    path: &str,
    args: &ExplainArgs,
    incoming: Incoming,
    upstream: UpstreamOut,
) -> Result<Explanation, UsageError> {
    let Incoming::Answer {
        bytes,
        carrier,
        read_as,
    } = incoming
    else {
        return Err(UsageError::Message("not an upstream answer".into()));
    };
    let id = Message::parse(&bytes)
        .ok()
        .and_then(|m| m.id.map(|i| i.get().to_owned()))
        .unwrap_or_else(|| "1".into());
    let request = client_request(args, &id)?;
    let ctx = RequestCtx::offline_to(Arc::clone(gateway), path, &args.upstream, request)
        .ok_or_else(|| UsageError::NoRoute(args.upstream.clone()))?;
    let mut exchange = Exchange::new(ctx);
    let traced = trace(&exchange, &bytes);
    let disposition = exchange.inspect(&bytes, carrier);
    let delivered: Result<Bytes, Refusal> = match disposition {
        Disposition::Final | Disposition::Notify => Ok(Bytes::from(bytes.clone())),
        Disposition::FinalRewritten(b)
        | Disposition::NotifyRewritten(b)
        | Disposition::AskNotify(b)
        | Disposition::Ask(b)
        | Disposition::Pushed(b) => Ok(b),
        Disposition::Withheld => Err(Refusal::new(
            crate::model::Reason::UpstreamProtocolViolation,
            "a pushed request would be withheld",
        )),
        // Offline there is no question budget to spend: the policy's word.
        Disposition::PushPending(push) => match exchange.admit_push(push, Ok(())) {
            Disposition::Pushed(b) => Ok(b),
            Disposition::Refuse(r) => Err(r),
            _ => Err(Refusal::new(
                crate::model::Reason::UpstreamProtocolViolation,
                "a pushed request would be withheld",
            )),
        },
        // Offline there is no session whose store entries could decide it.
        Disposition::Held(_) => Err(Refusal::new(
            crate::model::Reason::UpstreamProtocolViolation,
            "this message waits for the session's entries in the single-use store, which an offline explanation does not have",
        )),
        Disposition::Refuse(r) | Disposition::ReplayRefused { refusal: r, .. } => Err(r),
    };
    let (report, every_rule) = match traced {
        Some(t) => (Some(t.report), t.every_rule),
        None => (None, Vec::new()),
    };
    let client_bytes = match &delivered {
        Ok(b) => b.clone(),
        Err(r) => error_body(Some(&id), r, Some(&upstream.name)),
    };
    let client: Option<Value> = json::parse_value(&client_bytes).ok();
    let delivered_result = client.as_ref().and_then(|c| c.get("result"));
    Ok(Explanation {
        keys_name: match result_route(exchange.ctx.request.method, None) {
            ResultRoute::Listing => "listed item",
            ResultRoute::ServerDescription => "description of",
            _ => "input request",
        },
        upstream,
        message: read_as,
        decision: if delivered.is_ok() {
            "delivered"
        } else {
            "refused"
        },
        checks: report
            .as_ref()
            .map(|r| checks(&r.trace))
            .unwrap_or_default(),
        every_rule,
        refusal: delivered.as_ref().err().map(refusal_out),
        sanitised: sanitised(&bytes, delivered_result),
        stripped: report
            .as_ref()
            .map(|r| {
                r.stripped()
                    .map(|(key, field)| FieldOut {
                        key: key.to_owned(),
                        field: field.to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        provenance: delivered_result
            .and_then(|r| r.get("_meta"))
            .and_then(|m| m.get(PROVENANCE_KEY))
            .cloned(),
        client_receives: client,
        retry: None,
        changed_arguments: Vec::new(),
    })
}

/// The strings of the questions that differ between what the upstream sent
/// and what the client receives (the gateway's own `_meta` aside).
fn sanitised(original: &[u8], delivered: Option<&Value>) -> Vec<TextChange> {
    let before = Message::parse(original)
        .ok()
        .and_then(|m| m.result)
        .and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
    let (Some(before), Some(after)) = (before, delivered) else {
        return Vec::new();
    };
    let (Some(Value::Object(b)), Some(Value::Object(a))) =
        (before.get("inputRequests"), after.get("inputRequests"))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, request) in b {
        if let (Some(pb), Some(pa)) = (
            request.get("params"),
            a.get(key).and_then(|r| r.get("params")),
        ) {
            changed_strings(key, "", pb, pa, &mut out);
        }
    }
    out
}

/// Where in a question a text sits, as a person reads it
/// (`requestedSchema.properties.room_id.description` → `room_id.description`).
fn readable_place(path: &str) -> String {
    let place = path
        .replace("requestedSchema.properties.", "")
        .replace("requestedSchema.", "");
    if place.is_empty() {
        "(text)".into()
    } else {
        place
    }
}

fn changed_strings(key: &str, at: &str, before: &Value, after: &Value, out: &mut Vec<TextChange>) {
    let join = |name: &str| {
        if at.is_empty() {
            name.to_owned()
        } else {
            format!("{at}.{name}")
        }
    };
    match (before, after) {
        (Value::String(b), Value::String(a)) if a != b => out.push(TextChange {
            key: key.to_owned(),
            at: readable_place(at),
            before: b.clone(),
            after: a.clone(),
        }),
        (Value::Object(b), Value::Object(a)) => {
            for (k, vb) in b.iter().filter(|(k, _)| *k != "_meta") {
                if let Some(va) = a.get(k) {
                    changed_strings(key, &join(k), vb, va, out);
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (vb, va)) in b.iter().zip(a).enumerate() {
                changed_strings(key, &format!("{at}[{i}]"), vb, va, out);
            }
        }
        _ => {}
    }
}
