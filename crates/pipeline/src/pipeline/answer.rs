//! Phase: a client's answer to a request the upstream pushed (2025-11-25).
//! The id the client answers is the gateway's sealed push id: it is opened
//! and checked against this session, this caller and this upstream, used
//! once, and the answer is validated against what was asked and scanned for
//! secrets; only then does the upstream get it, under its own id.

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::bridge::calls::CallEvent;
use super::bridge::handoff;
use super::ctx::RequestCtx;
use crate::audit::AuditEvent;
use crate::json;
use crate::model::{Generation, Reason, Refusal};
use crate::mrtr::answers::{check_answers, AnswerReport, AnswerRules};
use crate::sessions::{PushState, TokenError, PUSH_PREFIX};

/// The key an answer to a push is validated under.
pub(crate) const PUSH_KEY: &str = "answer";

fn not_requested(message: &str) -> Refusal {
    Refusal::new(Reason::AnswerNotRequested, message)
}

/// What became of a client's answer to a push.
pub(crate) enum Answered {
    /// The body the upstream gets (the answer to its own request).
    Forward(Bytes),
    /// It answered the gateway's own question (an approval), and was handed
    /// to the call that waits for it (here, or on the replica that holds
    /// it): nothing goes upstream.
    Taken,
}

/// When the request is a client's answer to a push: what becomes of it.
pub(crate) async fn check(ctx: &mut RequestCtx) -> Result<Option<Answered>, Refusal> {
    let request = &ctx.request;
    if request.generation() != Generation::Sessions || !request.kind.is_response() {
        return Ok(None);
    }
    // Boxed: this future is large (the state store's calls) and most
    // requests never get here; inline it would size every request's future.
    let taken = Box::pin(take(ctx, |push| match &push.call {
        None => Ok(()),
        // The gateway's own question, asked by a call of this session: it
        // waits here, or on the replica the relay hands the answer to.
        Some(call) if handoff::may_take(ctx, call) => Ok(()),
        Some(_) => Err(Refusal::new(
            Reason::CallNotWaiting,
            "the call this answers no longer waits on this gateway instance (it ended, or another instance holds it)",
        )),
    }))
    .await?;
    let Some(call) = &taken.push.call else {
        return taken.for_upstream().map(|b| Some(Answered::Forward(b)));
    };
    let event = CallEvent::Answer {
        key: taken.push.id.clone(),
        result: taken.result.clone(),
        error: taken.error.clone(),
    };
    Box::pin(handoff::answer(ctx, call, &taken.push.session, event)).await?;
    Ok(Some(Answered::Taken))
}

/// A client's answer to a push, opened, checked and used up.
pub(crate) struct TakenAnswer {
    pub(crate) push: PushState,
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<Value>,
}

impl TakenAnswer {
    /// The answer as the upstream's own request id gets it.
    fn for_upstream(&self) -> Result<Bytes, Refusal> {
        let id: &RawValue = serde_json::from_str(&self.push.id).map_err(|_| {
            Refusal::new(
                Reason::InternalError,
                "the pushed request's id cannot be restored",
            )
        })?;
        let body = serde_json::to_vec(&Answer {
            jsonrpc: "2.0",
            id,
            result: self.result.as_ref(),
            error: self.error.as_ref(),
        })
        .map_err(|_| Refusal::new(Reason::InternalError, "the answer cannot be re-encoded"))?;
        Ok(Bytes::from(body))
    }
}

/// Open the push the client's response answers, let `claim` say whether
/// this path may take it (before anything is used up), validate the answer
/// against what was asked and use the push once. A refusal is counted and
/// audited.
pub(crate) async fn take(
    ctx: &RequestCtx,
    claim: impl FnOnce(&PushState) -> Result<(), Refusal>,
) -> Result<TakenAnswer, Refusal> {
    let outcome = accept(ctx, claim).await;
    if let Err(r) = &outcome {
        ctx.gateway
            .metrics
            .state_refused(&ctx.route.upstream.label, r.reason);
        let audit = &ctx.gateway.audit;
        if audit.enabled() {
            audit.emit(&ctx.audit_context(), AuditEvent::retry_refused(r));
        }
    }
    outcome
}

#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a Value>,
}

async fn accept(
    ctx: &RequestCtx,
    claim: impl FnOnce(&PushState) -> Result<(), Refusal>,
) -> Result<TakenAnswer, Refusal> {
    let push = open_push(ctx)?;
    claim(&push)?;
    let gateway = ctx.gateway.clone();
    let message = json::parse_value(&ctx.request.body)
        .map_err(|e| Refusal::new(Reason::InvalidJson, e.to_string()))?;
    let mut message = match message {
        Value::Object(m) => m,
        _ => {
            return Err(Refusal::new(
                Reason::InvalidRequest,
                "not a JSON-RPC response",
            ))
        }
    };
    let error = message.remove("error");
    let mut result = message.remove("result");
    let report = match (&mut result, &push.asked) {
        (Some(answer), Some(asked)) => validate(ctx, answer, asked)?,
        (Some(answer), None) if !answer.is_object() => {
            return Err(Refusal::new(
                Reason::InvalidAnswer,
                "the answer to a ping is an object",
            ))
        }
        _ => AnswerReport::default(),
    };
    let settings = &gateway.config.state;
    let total = gateway
        .mrtr
        .replay
        .add_bytes(&push.operation, report.answer_bytes as u64, push.expires)
        .await
        .map_err(|_| store_unavailable())?;
    if total > settings.max_answer_bytes {
        return Err(Refusal::new(
            Reason::AnswerLimitExceeded,
            format!(
                "the answers in this operation exceed {} bytes; the gateway stops it here",
                settings.max_answer_bytes
            ),
        ));
    }
    match gateway
        .mrtr
        .replay
        .consume_once(&push.redemption_id(), push.expires)
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            return Err(Refusal::new(
                Reason::StateReplayed,
                "this request has been answered already",
            ))
        }
        Err(_) => return Err(store_unavailable()),
    }
    audit_answer(ctx, &push, &report);
    Ok(TakenAnswer {
        push,
        result,
        error,
    })
}

fn store_unavailable() -> Refusal {
    Refusal::new(
        Reason::StateStoreUnavailable,
        "the gateway cannot check single-use state right now; try again",
    )
}

/// The push this response answers, opened and checked.
fn open_push(ctx: &RequestCtx) -> Result<PushState, Refusal> {
    let token: Option<String> = ctx.request.id().and_then(|t| serde_json::from_str(t).ok());
    let token = token
        .filter(|t| t.starts_with(PUSH_PREFIX))
        .ok_or_else(|| not_requested("this response answers no request this gateway delivered"))?;
    let gateway = &ctx.gateway;
    let push = PushState::open(&gateway.config.state.keys, &token).map_err(|e| match e {
        TokenError::UnknownKey => not_requested(
            "this request was delivered by a gateway whose key this one does not hold",
        ),
        TokenError::Invalid => {
            not_requested("this response answers no request this gateway delivered")
        }
    })?;
    let session = ctx.session.as_ref().map_or("", |s| s.state.nonce.as_str());
    if push.session != session
        || push.principal != ctx.binding().principal_key()
        || push.upstream != ctx.route.upstream.settings.id
    {
        return Err(not_requested(
            "this request was delivered in another session, to another caller or by another MCP server",
        ));
    }
    if gateway.clock.now_secs() > push.expires {
        return Err(Refusal::new(
            Reason::StateExpired,
            "the request this answers has expired",
        ));
    }
    Ok(push)
}

fn validate(
    ctx: &RequestCtx,
    answer: &mut Value,
    asked: &crate::model::Asked,
) -> Result<AnswerReport, Refusal> {
    let rules = AnswerRules {
        allow_secret_values: ctx.gateway.config.state.allow_secret_values,
        scanner: ctx.gateway.mrtr.scanner.clone(),
    };
    let mut map = Map::new();
    map.insert(PUSH_KEY.to_owned(), answer.take());
    let report =
        check_answers(&mut map, &[(PUSH_KEY.to_owned(), asked.clone())], &rules).map_err(|p| {
            let mut r = Refusal::new(p.reason, p.why).with_data("key", p.key.into());
            if let Some(f) = p.field {
                r = r.with_data("field", f.into());
            }
            r
        })?;
    *answer = map.remove(PUSH_KEY).unwrap_or(Value::Null);
    Ok(report)
}

fn audit_answer(ctx: &RequestCtx, push: &PushState, report: &AnswerReport) {
    let audit = &ctx.gateway.audit;
    if !audit.enabled() {
        return;
    }
    let at = ctx
        .audit_context()
        .with_operation(&push.operation, push.round);
    audit.emit(&at, AuditEvent::retry_ok(report));
}
