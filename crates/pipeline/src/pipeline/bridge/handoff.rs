//! The replica that received an answer or a retry for a call another
//! replica holds: what it hands on, once it has checked it exactly as the
//! holder would have, and what the client gets back. (The holder's side is
//! `relayed.rs`; the transport is [`crate::pipeline::relay`].)

use std::sync::Arc;

use http::Response;
use serde_json::Value;

use super::super::body::ProxyBody;
use super::super::ctx::RequestCtx;
use super::super::relay::{holder_of, Hand, HandKind, Relay, RelayError, Reply};
use super::super::reply::json_response;
use super::calls::CallEvent;
use crate::model::{Reason, Refusal};

/// How long the replica that received an answer waits for the holder to
/// say the call took it (the holder only hands it to the waiting call).
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn not_waiting() -> Refusal {
    Refusal::new(
        Reason::CallNotWaiting,
        "the call this answers no longer waits (it ended, or was answered)",
    )
}

/// Whether an answer for `call` may be taken here: the call waits on this
/// instance, or on another replica the relay can hand it to. Checked
/// before the answer is used up.
pub(crate) fn may_take(ctx: &RequestCtx, call: &str) -> bool {
    let calls = &ctx.gateway.bridge;
    calls.is_waiting(call) || (ctx.gateway.relay.is_some() && !calls.holds(call))
}

/// A checked answer to a question pushed on the stream of `call`, in the
/// session `session`: handed to the call here, or to the replica that
/// holds it.
pub(crate) async fn answer(
    ctx: &RequestCtx,
    call: &str,
    session: &str,
    event: CallEvent,
) -> Result<(), Refusal> {
    let gateway = &ctx.gateway;
    let relay = match &gateway.relay {
        Some(relay) if !gateway.bridge.holds(call) => relay,
        _ => {
            return match gateway.bridge.deliver(call, event) {
                true => Ok(()),
                false => Err(not_waiting()),
            }
        }
    };
    let CallEvent::Answer { key, result, error } = event else {
        return Err(not_waiting());
    };
    let holder = holder_of(call).unwrap_or_default();
    let hand = Hand::Answer {
        call: call.to_owned(),
        session: session.to_owned(),
        key,
        result,
        error,
    };
    match counted(ctx, relay, holder, hand, ANSWER_WAIT).await? {
        Reply::Delivered => Ok(()),
        _ => Err(not_waiting()),
    }
}

/// A checked retry of the call `call` held by the replica `holder`: handed
/// there, and the holder's answer (the next question or the call's result)
/// given to the client under this request's id. Waits no longer than the
/// request may take.
pub(crate) async fn retry(
    ctx: &RequestCtx,
    relay: &Arc<Relay>,
    holder: &str,
    call: String,
    answer: Value,
) -> Result<Response<ProxyBody>, Refusal> {
    let hand = Hand::Retry {
        call,
        principal: ctx.binding().principal_key(),
        answer,
    };
    let wait = ctx.gateway.config.limits.request_timeout;
    match counted(ctx, relay, holder, hand, wait).await? {
        Reply::Answered { mut message } => {
            if let Some(m) = message.as_object_mut() {
                let id = ctx.id().and_then(|t| serde_json::from_str(t).ok());
                m.insert("id".into(), id.unwrap_or(Value::Null));
            }
            let body = serde_json::to_vec(&message).unwrap_or_default();
            Ok(json_response(body, None))
        }
        Reply::Refused {
            reason,
            message,
            extra,
            status,
        } => Err(Reply::to_refusal(&reason, message, extra, status)),
        Reply::Delivered | Reply::NotWaiting | Reply::Undecided { .. } | Reply::Decided { .. } => {
            Err(not_waiting())
        }
    }
}

/// A bridged session's call cancelled (`client_id`: the id of the client's
/// request) or the session ended (none): told to the other replicas, one of
/// which may hold the call (without a relay, nothing to tell).
pub(crate) fn cancel(ctx: &RequestCtx, session: &str, client_id: Option<&Value>) {
    if let Some(relay) = &ctx.gateway.relay {
        relay.tell(Hand::Cancel {
            session: session.to_owned(),
            client_id: client_id.cloned(),
        });
    }
}

/// A hand-off, counted by its outcome.
async fn counted(
    ctx: &RequestCtx,
    relay: &Arc<Relay>,
    holder: &str,
    hand: Hand,
    wait: std::time::Duration,
) -> Result<Reply, Refusal> {
    let kind: HandKind = hand.kind();
    let outcome = relay.hand(holder, hand, wait).await;
    let label = match &outcome {
        Ok(Reply::Delivered) => "delivered",
        Ok(Reply::Answered { .. }) => "answered",
        Ok(Reply::NotWaiting) => "not_waiting",
        Ok(Reply::Refused { .. } | Reply::Undecided { .. }) => "refused",
        Ok(Reply::Decided { .. }) => "answered",
        Err(e) => e.as_str(),
    };
    ctx.gateway.metrics.bridge.handoff(kind.as_str(), label);
    if let Err(e) = &outcome {
        tracing::warn!(
            kind = kind.as_str(),
            outcome = label,
            "relay: a hand-off to the replica holding a call failed"
        );
        return Err(e.refusal());
    }
    outcome.map_err(RelayError::refusal)
}
