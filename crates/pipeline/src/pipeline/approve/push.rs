//! The gateway's approval question in a 2025-11-25 session: the call's
//! answer becomes an event stream whose first message is the gateway's
//! `elicitation/create`, under a sealed push id bound to the session, the
//! caller, the upstream and this waiting call (`call`), with the form's
//! schema the answer is checked against (`pipeline::answer`, single use).
//! The client's answer arrives as its own POST and is handed to the call
//! waiting here (`bridge::calls`); nothing of it goes upstream. Approved:
//! the original call goes on through the forward and response phases, and
//! the upstream's messages follow on the same stream. Declined, cancelled
//! or not answered within the rule's `timeout`: the gateway's refusal ends
//! the stream, and nothing was forwarded.

use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::pending::{Outcome, Waiter};
use super::second::{settled, About};
use super::steps::{keep, record, Recorded, QUESTION_KEY};
use crate::approval::form::{APPROVE_FIELD, REMEMBER_FIELD};
use crate::approval::{Remember, Step};
use crate::model::{Asked, McpMethod, Reason, Refusal};
use crate::pipeline::body::ProxyBody;

use crate::pipeline::bridge::calls::{CallEvent, Registration};
use crate::pipeline::bridge::{event_stream, Messages, Out};
use crate::pipeline::ctx::{AskedBefore, RequestCtx};
use crate::pipeline::refuse::error_bytes;
use crate::sessions::PushState;

/// What the push asks, decided by the approve phase.
pub struct Question {
    pub(crate) rule: String,
    pub(crate) because: String,
    /// The tool as the client called it.
    pub(crate) tool: String,
    /// The `elicitation/create` params (the gateway's form, or the
    /// approval page's link).
    pub(crate) form: Value,
    /// The question as its answer is checked.
    pub(crate) asked: Asked,
    pub(crate) timeout: Duration,
    /// The approval an approver decides on the page (the question is its link).
    pub(crate) page: Option<Waiter>,
}

/// The call that waits for the person's decision, as the phases left it.
pub(crate) struct Waiting {
    pub ctx: Box<RequestCtx>,
    pub parts: Parts,
    pub authority: HeaderValue,
    pub body: Bytes,
}

/// What the person decided.
enum Decision {
    Approved {
        remember: bool,
    },
    Declined,
    Cancelled,
    /// No answer within the rule's timeout.
    Expired,
    /// The client cancelled the call or went away: nothing more is said.
    Gone,
    /// The approver decided on the approval page (or nobody did in time);
    /// `answered`: the caller's client had answered the link by then.
    Page {
        outcome: Outcome,
        answered: bool,
    },
}

/// Push the question and answer with the call's event stream; a task waits
/// for the decision and carries the call on.
pub(crate) fn start(waiting: Waiting, q: Question) -> Result<Response<ProxyBody>, Refusal> {
    let ctx = &waiting.ctx;
    let gateway = ctx.gateway.clone();
    let session = ctx
        .session
        .as_ref()
        .map(|s| s.state.nonce.clone())
        .ok_or_else(|| Refusal::new(Reason::SessionInvalid, "no session"))?;
    let client_id = ctx.id().unwrap_or("null").to_owned();
    let (registration, events) =
        gateway
            .bridge
            .register(gateway.bridge.new_call_id(), &session, &client_id);
    let now_ms = gateway.clock.now_millis();
    let push = PushState {
        v: 1,
        id: Value::from(QUESTION_KEY).to_string(),
        session,
        principal: ctx.binding().principal_key(),
        upstream: ctx.route.upstream.settings.id.clone(),
        method: McpMethod::ElicitationCreate.as_str().to_owned(),
        asked: Some(q.asked.clone()),
        operation: registration.id.clone(),
        round: 1,
        started_ms: now_ms,
        expires: (now_ms / 1000).saturating_add(q.timeout.as_secs().max(1)),
        call: Some(registration.id.clone()),
    };
    let token = push.seal(&gateway.config.state.keys).ok_or_else(|| {
        Refusal::new(
            Reason::InternalError,
            "the gateway could not seal its question's id",
        )
    })?;
    let mut params = q.form.clone();
    if let (Some(waiter), Some(p)) = (&q.page, params.as_object_mut()) {
        // 2025-11-25 names a URL-mode question; its completion is announced.
        p.insert("elicitationId".into(), waiter.id().into());
    }
    let message = json!({"jsonrpc": "2.0", "id": token, "method": McpMethod::ElicitationCreate.as_str(), "params": params});
    let message = Bytes::from(serde_json::to_vec(&message).unwrap_or_default());
    steps(ctx, &q, Step::Asked, None);
    let (tx, resp) = event_stream();
    tokio::spawn(async move {
        let end = carry(waiting, q, registration, events, message, &tx).await;
        let _ = tx.send(Out::End(end)).await;
    });
    Ok(resp)
}

/// The rest of the call: the push, the decision, then the forward.
async fn carry(
    waiting: Waiting,
    q: Question,
    registration: Registration,
    mut events: mpsc::UnboundedReceiver<CallEvent>,
    message: Bytes,
    tx: &mpsc::Sender<Out>,
) -> Option<Reason> {
    // Listening before the question is out: its answer may reach another replica.
    waiting.ctx.gateway.relay_listen().await;
    if tx.send(Out::Message(message)).await.is_err() {
        return None;
    }
    let decision = match &q.page {
        None => tokio::select! {
            event = events.recv() => decision(event),
            () = tokio::time::sleep(q.timeout) => Decision::Expired,
            () = tx.closed() => Decision::Gone,
        },
        Some(waiter) => {
            let now = waiting.ctx.gateway.clock.now_millis();
            on_page(waiter, now, &mut events, tx).await
        }
    };
    let operation = registration.id.clone();
    match decision {
        // The approver decided before the caller's client answered the
        // link (it answers once the person is done with the page): that
        // answer is still to come, and is taken when it does.
        Decision::Page {
            answered: false, ..
        } => await_link_answer(registration, events, q.timeout),
        // The call waits no more: a late answer is refused `call_not_waiting`.
        _ => drop(registration),
    }
    let Waiting {
        mut ctx,
        parts,
        authority,
        body,
    } = waiting;
    // The upstream's own questions follow in the same operation, under the
    // same round budget: the gateway's question was its first round.
    ctx.asked_before = Some(Box::new(AskedBefore {
        operation,
        rounds: 1,
    }));
    let (step, refusal) = match decision {
        Decision::Page { outcome, .. } => {
            let about = About {
                rule: &q.rule,
                tool: &q.tool,
                because: &q.because,
            };
            if let (Some(waiter), Outcome::Decided { .. }) = (&q.page, &outcome) {
                let done = json!({"jsonrpc": "2.0", "method": McpMethod::ElicitationComplete.as_str(), "params": {"elicitationId": waiter.id()}});
                let done = Bytes::from(serde_json::to_vec(&done).unwrap_or_default());
                let _ = tx.send(Out::Message(done)).await;
            }
            return match settled(&ctx, &about, outcome).await {
                Ok(()) => forward(ctx, parts, authority, body, tx).await,
                Err(refusal) => fail(&ctx, tx, &refusal).await,
            };
        }
        Decision::Approved { remember } => {
            let kept = keep(&ctx, &q.rule, remember).await;
            steps(&ctx, &q, Step::Approved, kept);
            return forward(ctx, parts, authority, body, tx).await;
        }
        Decision::Gone => {
            steps(&ctx, &q, Step::Cancelled, None);
            return None;
        }
        Decision::Declined => (Step::Declined, declined(&q, "the person did not approve the call; nothing was forwarded")),
        Decision::Cancelled => (Step::Cancelled, declined(&q, "the person dismissed the gateway's approval question; nothing was forwarded")),
        Decision::Expired => (
            Step::Expired,
            Refusal::new(
                Reason::ApprovalExpired,
                "the approval question was not answered in time; nothing was forwarded; call again to be asked again",
            )
            .with_data("rule", q.rule.clone().into()),
        ),
    };
    steps(&ctx, &q, step, None);
    fail(&ctx, tx, &refusal).await
}

/// The caller's answer to the link, after the approver decided: taken
/// (and dropped: it only says the person was shown the link) until the
/// question's own timeout, so the client's answer is not refused
/// `call_not_waiting` for coming after the decision it led to.
fn await_link_answer(
    registration: Registration,
    mut events: mpsc::UnboundedReceiver<CallEvent>,
    timeout: Duration,
) {
    tokio::spawn(async move {
        let _ = tokio::time::timeout(timeout, events.recv()).await;
        drop(registration);
    });
}

/// The approver's decision on the page; the caller's answer to the link
/// only withdraws the call (declined or cancelled) or lets it wait on.
async fn on_page(
    waiter: &Waiter,
    now_ms: u64,
    events: &mut mpsc::UnboundedReceiver<CallEvent>,
    tx: &mpsc::Sender<Out>,
) -> Decision {
    let decided = waiter.decision(now_ms);
    tokio::pin!(decided);
    let mut answered = false;
    loop {
        tokio::select! {
            outcome = &mut decided => return Decision::Page { outcome, answered },
            event = events.recv(), if !answered => match link_answer(event) {
                // Accepted: the caller opened (or was shown) the link.
                None => answered = true,
                Some(withdrawn) => return withdrawn,
            },
            () = tx.closed() => return Decision::Gone,
        }
    }
}

/// The caller's answer to the link: `None` when accepted (the call waits
/// on for the approver), else what ends the call.
fn link_answer(event: Option<CallEvent>) -> Option<Decision> {
    let Some(CallEvent::Answer { result, .. }) = event else {
        return Some(Decision::Gone);
    };
    let Some(result) = result else {
        return Some(Decision::Declined);
    };
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => None,
        Some("cancel") => Some(Decision::Cancelled),
        _ => Some(Decision::Declined),
    }
}

fn declined(q: &Question, why: &str) -> Refusal {
    Refusal::new(Reason::ApprovalDeclined, why).with_data("rule", q.rule.clone().into())
}

/// The decision in the client's answer (already checked against the form).
fn decision(event: Option<CallEvent>) -> Decision {
    let Some(CallEvent::Answer { result, .. }) = event else {
        return Decision::Gone;
    };
    let Some(result) = result else {
        // A JSON-RPC error instead of an answer: not an approval.
        return Decision::Declined;
    };
    let ticked = |field: &str| {
        result
            .get("content")
            .and_then(|c| c.get(field))
            .and_then(Value::as_bool)
            == Some(true)
    };
    match result.get("action").and_then(Value::as_str) {
        Some("accept") if ticked(APPROVE_FIELD) => Decision::Approved {
            remember: ticked(REMEMBER_FIELD),
        },
        Some("cancel") => Decision::Cancelled,
        _ => Decision::Declined,
    }
}

/// The approved call through the forward and response phases; the
/// upstream's messages follow on the stream.
async fn forward(
    ctx: Box<RequestCtx>,
    parts: Parts,
    authority: HeaderValue,
    body: Bytes,
    tx: &mpsc::Sender<Out>,
) -> Option<Reason> {
    let gateway = ctx.gateway.clone();
    let client_id = ctx.id().map(str::to_owned);
    let name = ctx.route.name().to_owned();
    let resp = match gateway.forward(ctx, parts, authority, body, false).await {
        Ok(resp) => resp,
        Err(refused) => {
            let bytes = error_bytes(client_id.as_deref(), &refused.refusal, Some(&name));
            let _ = tx.send(Out::Message(bytes)).await;
            return Some(refused.refusal.reason);
        }
    };
    let mut messages = Messages::new(resp, gateway.config.limits.max_response_body_bytes);
    loop {
        match messages.next().await {
            Ok(Some(message)) => {
                let bytes = Bytes::from(serde_json::to_vec(&message).unwrap_or_default());
                if tx.send(Out::Message(bytes)).await.is_err() {
                    return None;
                }
            }
            Ok(None) => return messages.refused(),
            Err(refusal) => {
                let bytes = error_bytes(client_id.as_deref(), &refusal, Some(&name));
                let _ = tx.send(Out::Message(bytes)).await;
                return Some(refusal.reason);
            }
        }
    }
}

async fn fail(ctx: &RequestCtx, tx: &mpsc::Sender<Out>, refusal: &Refusal) -> Option<Reason> {
    let bytes = error_bytes(ctx.id(), refusal, Some(ctx.route.name()));
    let _ = tx.send(Out::Message(bytes)).await;
    Some(refusal.reason)
}

fn steps(ctx: &RequestCtx, q: &Question, step: Step, remembered: Option<Remember>) {
    let caller = ctx.principal.key();
    let decided_by = matches!(step, Step::Approved | Step::Declined | Step::Cancelled)
        .then_some(caller.as_str());
    record(
        ctx,
        &Recorded {
            step,
            rule: &q.rule,
            tool: &q.tool,
            because: &q.because,
            decided_by,
            remembered,
            at: None,
        },
    );
}
