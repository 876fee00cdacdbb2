//! Asking several upstreams of a federated route at once: each takes the
//! usual phases to its upstream ([`Gateway::through`]), so its answer is
//! checked under its own upstream's policy and permissions; the checked
//! answer is then read back as one message. An upstream that fails, refuses
//! or is slower than `fanout_timeout` is left out: logged, counted and named
//! in the merged answer's `_meta`.

use std::sync::Arc;

use http::{header, HeaderMap, Response};
use http_body_util::{BodyExt, Limited};
use serde_json::{json, Value};

use super::super::body::ProxyBody;
use super::super::route::{Federated, Route};
use super::super::sse::SseFramer;
use super::super::{Gateway, Inbound};
use crate::model::{McpMethod, Reason, Refusal};

/// The `_meta` key of a merged answer that names the upstreams left out.
pub(super) const FEDERATION_KEY: &str = "dev.portcullis/federation";

/// JSON-RPC's "method not found".
const METHOD_NOT_FOUND: i64 = -32601;

/// What one upstream answered, once checked.
pub(super) enum Outcome {
    /// A JSON-RPC result.
    Result(Value),
    /// A JSON-RPC error (its `data.reason` when it is one of the gateway's).
    Error(Value),
    /// Nothing to say (a notification was accepted).
    Accepted,
    /// No answer: the phases refused, or the upstream failed.
    Unavailable(Refusal),
}

pub(super) struct Answer {
    pub member: Arc<Route>,
    pub outcome: Outcome,
    /// The checked response's head (the session a member minted).
    pub headers: HeaderMap,
}

impl Answer {
    /// Why this upstream has no part in a merged answer, as a reason name
    /// (one of the gateway's, or `upstream_error` for the upstream's own
    /// JSON-RPC error), or `None` when it answered.
    pub(super) fn left_out_reason(&self) -> Option<&'static str> {
        match &self.outcome {
            Outcome::Result(_) | Outcome::Accepted => None,
            // A server without that list (no prompts, say) has nothing to add.
            Outcome::Error(e)
                if e.get("code").and_then(Value::as_i64) == Some(METHOD_NOT_FOUND) =>
            {
                None
            }
            Outcome::Unavailable(r) => Some(r.reason.as_str()),
            Outcome::Error(e) => Some(
                e.pointer("/data/reason")
                    .and_then(Value::as_str)
                    .and_then(Reason::parse)
                    .map_or("upstream_error", Reason::as_str),
            ),
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
        let asked = async {
            let resp = gateway.through(member.clone(), inbound).await;
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
    let (head, body) = resp.into_parts();
    let bytes = match Limited::new(body, max).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            let r = Refusal::new(
                Reason::UpstreamResponseTooLarge,
                "the upstream's answer is over max_response_body_bytes",
            );
            return (head.headers, Outcome::Unavailable(r));
        }
    };
    if bytes.is_empty() {
        return (head.headers, Outcome::Accepted);
    }
    let stream = head
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    let message = match stream {
        true => response_event(&bytes, max),
        false => crate::json::parse_value(&bytes).ok(),
    };
    let outcome = match message {
        Some(mut m) => match (m.get_mut("result").map(Value::take), m.get_mut("error")) {
            (Some(result), _) => Outcome::Result(result),
            (None, Some(error)) => Outcome::Error(error.take()),
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

/// Log and count each upstream left out of a merged answer; the note for
/// the answer's `_meta` (`None` when every upstream answered).
pub(super) fn left_out(gateway: &Gateway, method: McpMethod, answers: &[Answer]) -> Option<Value> {
    let mut unavailable = Vec::new();
    for answer in answers {
        let Some(reason) = answer.left_out_reason() else {
            continue;
        };
        let up = &answer.member.upstream.settings;
        tracing::warn!(
            upstream = %up.id,
            method = method.as_str(),
            reason,
            "federated route: upstream left out of a merged answer"
        );
        gateway.metrics.left_out(&up.id, method, reason);
        if let Outcome::Unavailable(r) = &answer.outcome {
            if r.reason.is_upstream_failure() {
                gateway.metrics.upstream_error(&up.id, r.reason);
            }
        }
        unavailable.push(json!({"upstream": up.id, "name": up.name, "reason": reason}));
    }
    (!unavailable.is_empty()).then(|| json!({ "unavailable": unavailable }))
}
