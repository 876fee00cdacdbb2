//! Asking several upstreams of a federated route at once: each takes the
//! usual phases to its upstream ([`Gateway::through`]), so its answer is
//! checked under its own upstream's policy and permissions; the checked
//! answer is then read back as one message. An upstream that fails, refuses
//! or is slower than `fanout_timeout` is left out: logged, counted and named
//! in the merged answer's `_meta`.

use std::sync::Arc;

use bytes::BytesMut;
use http::{header, HeaderMap, Response};
use http_body_util::BodyExt;
use serde_json::{json, Value};

use super::super::body::ProxyBody;
use super::super::route::{Federated, Route};
use super::super::sse::SseFramer;
use super::super::{Gateway, Inbound};
use crate::config::UpstreamRoute;
use crate::model::{McpMethod, Reason, Refusal};

/// The `_meta` key of a merged answer that names the upstreams left out.
pub(super) const FEDERATION_KEY: &str = "dev.portcullis/federation";

/// The note's reason for an upstream's own JSON-RPC error.
const UPSTREAM_ERROR: &str = "upstream_error";

/// JSON-RPC's "method not found".
const METHOD_NOT_FOUND: i64 = -32601;

/// Who wrote a JSON-RPC error an upstream's checked answer holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The upstream's own error (a JSON body passes it as it is; the
    /// gateway refuses those by failing the request, never with a body).
    Upstream,
    /// The error event with which the gateway ended a stream it refused.
    Gateway(Reason),
}

/// What one upstream answered, once checked.
pub(super) enum Outcome {
    /// A JSON-RPC result.
    Result(Value),
    /// A JSON-RPC error: the upstream's own (a JSON body: whatever its
    /// `data.reason` says), or one on a checked event stream, which may be
    /// the gateway's (its `data.reason` then names why).
    Error(Value, Source),
    /// Nothing to say (a notification was accepted).
    Accepted,
    /// No answer: the phases refused, or the upstream failed.
    Unavailable(Refusal),
}

pub(super) struct Answer {
    pub(crate) member: Arc<Route>,
    pub(crate) outcome: Outcome,
    /// The checked response's head (the session a member minted).
    pub(crate) headers: HeaderMap,
}

impl Answer {
    /// Why this upstream has no part in a merged answer, as a reason name
    /// (one of the gateway's, or `upstream_error` for the upstream's own
    /// JSON-RPC error), or `None` when it answered.
    pub(super) fn left_out_reason(&self) -> Option<&'static str> {
        match &self.outcome {
            Outcome::Result(_) | Outcome::Accepted => None,
            // A server without that list (no prompts, say) has nothing to add.
            Outcome::Error(e, _)
                if e.get("code").and_then(Value::as_i64) == Some(METHOD_NOT_FOUND) =>
            {
                None
            }
            Outcome::Unavailable(r) => Some(r.reason.as_str()),
            Outcome::Error(_, Source::Upstream) => Some(UPSTREAM_ERROR),
            Outcome::Error(_, Source::Gateway(reason)) => Some(reason.as_str()),
        }
    }
}

/// Ask every `(upstream, request)` at once; the answers in the same order.
pub(super) async fn ask_all(
    gateway: &Arc<Gateway>,
    fed: &Federated,
    asked: Vec<(Arc<Route>, Inbound)>,
) -> Vec<Answer> {
    let timeout = fed.settings.fanout_timeout;
    let max = gateway.config.limits.max_response_body_bytes;
    let each = asked.into_iter().map(|(member, inbound)| async move {
        let method = inbound.request.method;
        let asked = async {
            let resp = gateway.through(member.clone(), Box::new(inbound)).await;
            match resp {
                Ok(resp) => read_back(resp, max).await,
                Err(refused) => (HeaderMap::new(), Outcome::Unavailable(refused.refusal)),
            }
        };
        let (headers, outcome) = match tokio::time::timeout(timeout, asked).await {
            Ok(answered) => answered,
            Err(_) => (
                HeaderMap::new(),
                Outcome::Unavailable(Refusal::new(
                    Reason::UpstreamTimeout,
                    "no answer within the federated route's fanout_timeout",
                )),
            ),
        };
        // The upstream's part is counted under its own id (the client's
        // request is counted under the route's name): it answered, or why not.
        let counted = match &outcome {
            Outcome::Unavailable(r) => r.reason.as_str(),
            _ => "ok",
        };
        gateway
            .metrics
            .federated_part(&member.upstream.label, method, counted);
        Answer {
            member,
            outcome,
            headers,
        }
    });
    futures_util::future::join_all(each).await
}

/// The checked response read back as its one JSON-RPC message.
async fn read_back(resp: Response<ProxyBody>, max: usize) -> (HeaderMap, Outcome) {
    let (head, mut body) = resp.into_parts();
    let mut bytes = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(never) => match never {},
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if bytes.len() + data.len() > max {
            let r = Refusal::new(
                Reason::UpstreamResponseTooLarge,
                "the upstream's answer is over max_response_body_bytes",
            );
            return (head.headers, Outcome::Unavailable(r));
        }
        bytes.extend_from_slice(&data);
    }
    // Read when the stream has ended: whether the gateway cut it.
    let cut = body.refused();
    let bytes = bytes.freeze();
    if bytes.is_empty() {
        return (head.headers, Outcome::Accepted);
    }
    let stream = head
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    let source = cut.map_or(Source::Upstream, Source::Gateway);
    let message = match stream {
        true => response_event(&bytes, max),
        false => crate::json::parse_value(&bytes).ok(),
    };
    let outcome = match message {
        Some(mut m) => match (m.get_mut("result").map(Value::take), m.get_mut("error")) {
            // Every MCP result is an object: anything else has no part
            // to merge, and is named rather than skipped.
            (Some(result), _) if !result.is_object() => Outcome::Unavailable(Refusal::new(
                Reason::UpstreamProtocolViolation,
                "the upstream's result is not an object",
            )),
            (Some(result), _) => Outcome::Result(result),
            (None, Some(error)) => Outcome::Error(error.take(), source),
            (None, None) => Outcome::Unavailable(unreadable()),
        },
        None => Outcome::Unavailable(unreadable()),
    };
    (head.headers, outcome)
}

/// The response among a checked event stream's messages (the others — a
/// progress notification, a log line — belong to no merged answer).
fn response_event(bytes: &[u8], max: usize) -> Option<Value> {
    let mut framer = SseFramer::new(max);
    framer.push(bytes);
    while let Ok(Some(event)) = framer.next_event() {
        let Some(message) = event
            .data
            .and_then(|d| crate::json::parse_value(d.as_bytes()).ok())
        else {
            continue;
        };
        if message.get("result").is_some() || message.get("error").is_some() {
            return Some(message);
        }
    }
    None
}

fn unreadable() -> Refusal {
    Refusal::new(
        Reason::UpstreamBadResponse,
        "the upstream's answer held no JSON-RPC response",
    )
}

/// Log and count each upstream left out of a merged answer; the entries
/// of the answer's `_meta` note (none when every upstream answered).
pub(super) fn left_out(gateway: &Gateway, method: McpMethod, answers: &[Answer]) -> Vec<Value> {
    let mut unavailable = Vec::new();
    for answer in answers {
        let Some(reason) = answer.left_out_reason() else {
            continue;
        };
        let up = &answer.member.upstream.settings;
        unavailable.push(cut_short(gateway, method, up, reason));
        if let Outcome::Unavailable(r) = &answer.outcome {
            if r.reason.is_upstream_failure() {
                gateway.metrics.upstream_error(&up.id, r.reason);
            }
        }
    }
    unavailable
}

/// Log and count one upstream whose part of a merged answer ends, for
/// `reason` (left out, or its next pages not carried): its note entry.
pub(super) fn cut_short(
    gateway: &Gateway,
    method: McpMethod,
    up: &UpstreamRoute,
    reason: &str,
) -> Value {
    tracing::warn!(
        upstream = %up.id,
        method = method.as_str(),
        reason,
        "federated route: upstream left out of a merged answer"
    );
    gateway.metrics.federation.left_out(&up.id, method, reason);
    json!({"upstream": up.id, "name": up.name, "reason": reason})
}
