//! Phase: the MRTR retry check. A request that answers questions must bring
//! back the gateway's sealed state; it is checked, its answers validated,
//! and the body the upstream gets is rebuilt with the upstream's own state.
//! A refusal here means nothing was forwarded.

use bytes::Bytes;

use super::ctx::RequestCtx;
use crate::audit::AuditEvent;
use crate::model::{Reason, Refusal};
use crate::mrtr::params_digest;
use crate::mrtr::retry::{RetryRefused, RetryRequest};

/// Check a retry; returns the body to forward (the client's own when the
/// request is not a retry).
pub async fn check(ctx: &mut RequestCtx) -> Result<Bytes, Refusal> {
    let request = &ctx.request;
    let stateless = request.generation() == crate::model::Generation::Stateless;
    if !stateless || !request.method.allows_input_required() || !request.is_retry() {
        return Ok(request.body.clone());
    }
    // Boxed: this future is large (the state store's calls) and most
    // requests never get here; inline it would size every request's future.
    match Box::pin(accept(ctx)).await {
        Ok(body) => Ok(body),
        Err(NotAccepted::State(r)) => {
            super::approve::answer::refused(ctx, &r);
            Err(refused(ctx, r))
        }
        Err(NotAccepted::Decided(r)) => Err(r),
    }
}

/// Why a retry goes no further: its state or answers were refused, or
/// the person declined the gateway's approval question.
enum NotAccepted {
    State(RetryRefused),
    Decided(Refusal),
}

impl From<Refusal> for NotAccepted {
    fn from(r: Refusal) -> Self {
        NotAccepted::State(r.into())
    }
}

impl From<RetryRefused> for NotAccepted {
    fn from(r: RetryRefused) -> Self {
        NotAccepted::State(r)
    }
}

/// A refused state (a retry's, a task request's): counted and audited,
/// then the refusal the client gets.
pub(super) fn refused(ctx: &RequestCtx, refused: RetryRefused) -> Refusal {
    let RetryRefused { refusal, opened } = refused;
    ctx.gateway
        .metrics
        .state_refused(&ctx.route.upstream.label, refusal.reason);
    let audit = &ctx.gateway.audit;
    if audit.enabled() {
        // A state that opened names its operation and round; one that did
        // not open has none to name.
        let at = match &opened {
            Some(s) => ctx.audit_context().with_operation(&s.operation, s.round),
            None => ctx.audit_context(),
        };
        audit.emit(&at, AuditEvent::retry_refused(&refusal));
    }
    refusal
}

async fn accept(ctx: &mut RequestCtx) -> Result<Bytes, NotAccepted> {
    let request = &ctx.request;
    let token = match (&request.request_state, request.request_state_not_string) {
        (_, true) => {
            return Err(Refusal::new(
                Reason::StateInvalid,
                "requestState must be a string",
            )
            .into())
        }
        (None, false) => {
            return Err(Refusal::new(
                Reason::StateMissing,
                "inputResponses came without the requestState this gateway issued with the question; retry with both",
            )
            .into())
        }
        (Some(token), false) => token.as_str(),
    };
    let params = request.params_map();
    let digest = params_digest(&params);
    let id = request
        .id()
        .and_then(|t| serde_json::from_str(t).ok())
        .ok_or_else(|| {
            RetryRefused::from(Refusal::new(
                Reason::InvalidRequest,
                "a retry is a request with an id",
            ))
        })?;
    let retry = RetryRequest {
        id,
        token,
        params,
        digest: &digest,
    };
    let binding = ctx.binding();
    let mrtr = &ctx.gateway.mrtr;
    let prior = mrtr.open_request_state(token)?;
    if prior.approval.is_some() {
        let fields = &super::approve::answer::FIELDS;
        let answer = mrtr.check_approval(&binding, retry, prior, fields).await?;
        ctx.request.set_digest(digest);
        return super::approve::answer::decided(ctx, answer)
            .await
            .map_err(NotAccepted::Decided);
    }
    let single_use = &ctx.route.upstream.settings.single_use;
    let accepted = mrtr
        .check_retry_opened(single_use, &binding, retry, prior)
        .await?;
    ctx.request.set_digest(digest);
    let audit = &ctx.gateway.audit;
    if audit.enabled() {
        let at = ctx
            .audit_context()
            .with_operation(&accepted.prior.operation, accepted.prior.round);
        audit.emit(&at, AuditEvent::retry_ok(&accepted.answers));
        audit.emit(
            &at,
            AuditEvent::forwarded(&accepted.answers, &accepted.prior),
        );
    }
    let body = accepted.body.clone();
    ctx.retry = Some(Box::new(accepted));
    Ok(body)
}
