//! What must happen before an answer reaches the client: a question (an
//! MRTR `input_required` or a pushed 2025-11-25 request, one budget for
//! both) waits for the principal's rounds limit; any answer to a single-use
//! retry consumes the state it answered, and the acknowledgement of a
//! `tasks/update` the questions it answered, so a replay after it is
//! refused, and of concurrent retries only the first answer is delivered.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::exchange::Exchange;
use crate::audit::AuditEvent;
use crate::model::{Reason, Refusal};
use crate::pipeline::access::rate_limited;
use crate::pipeline::Gateway;
use crate::throttle::Scope;

pub(super) type Gate = Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send>>;

/// One question's token of the principal's question budget
/// (`input_required_rounds`).
struct QuestionToken {
    gateway: Arc<Gateway>,
    scheme: Arc<str>,
    principal: Arc<str>,
    upstream: Arc<str>,
}

impl QuestionToken {
    async fn take(&self) -> Result<(), Refusal> {
        let gateway = &self.gateway;
        let scope = Scope::InputRequiredRounds;
        match gateway
            .throttle
            .check_parts(scope, &[&self.scheme, &self.principal])
            .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(limited)) => {
                gateway.metrics.rate_limited(&self.upstream, scope.as_str());
                Err(rate_limited(
                    scope,
                    limited.retry_after_secs(),
                    "the server asked this caller too many questions",
                ))
            }
            Err(_) => Err(Refusal::new(
                Reason::RateLimiterUnavailable,
                "the rate limiter is unavailable; try again",
            )),
        }
    }
}

impl Exchange {
    /// The question budget's token, when a limit is configured.
    fn question_token(&self) -> Option<QuestionToken> {
        let ctx = &self.ctx;
        self.questions_budgeted().then(|| QuestionToken {
            gateway: ctx.gateway.clone(),
            scheme: ctx.principal.scheme.clone(),
            principal: ctx.principal.name.clone(),
            upstream: ctx.route.upstream.label.clone(),
        })
    }

    /// Whether questions spend a budget (`input_required_rounds` is set).
    pub(super) fn questions_budgeted(&self) -> bool {
        self.ctx
            .gateway
            .throttle
            .is_limited(Scope::InputRequiredRounds)
    }

    /// The gate before delivering a pushed question: its token of the
    /// question budget, the one an MRTR question takes.
    pub(super) fn question_gate(&self) -> Option<Gate> {
        let token = self.question_token()?;
        Some(Box::pin(async move { token.take().await }))
    }

    /// The gate before delivering the final message (`asking`: a question).
    pub(super) fn gate(&self, asking: bool) -> Option<Gate> {
        let ctx = &self.ctx;
        let rounds = self.question_token().filter(|_| asking);
        let single_use = &ctx.route.upstream.settings.single_use;
        let consume = ctx
            .retry
            .as_ref()
            .filter(|r| !r.consumed && single_use.applies(ctx.binding().tool()))
            .map(|r| r.prior.clone());
        // A tasks/update's questions are consumed by the acknowledgement.
        let answered = ctx
            .task
            .as_ref()
            .filter(|t| !t.answers.kept.is_empty())
            .map(|t| (t.prior.clone(), t.answers.kept.clone()));
        if rounds.is_none() && consume.is_none() && answered.is_none() {
            return None;
        }
        let gateway = ctx.gateway.clone();
        let upstream = ctx.route.upstream.label.clone();
        let audit_at = consume
            .as_ref()
            .filter(|_| gateway.audit.enabled())
            .map(|p| ctx.audit_context().with_operation(&p.operation, p.round));
        let task_audit_at = answered
            .as_ref()
            .filter(|_| gateway.audit.enabled())
            .map(|(p, _)| ctx.audit_context().with_operation(&p.operation, p.round));
        Some(Box::pin(async move {
            if let Some(token) = rounds {
                token.take().await?;
            }
            if let Some((prior, keys)) = answered {
                if let Err(refusal) = gateway.mrtr.consume_task_answers(&prior, &keys).await {
                    gateway.metrics.state_refused(&upstream, refusal.reason);
                    if let Some(at) = task_audit_at {
                        gateway.audit.emit(&at, AuditEvent::retry_refused(&refusal));
                    }
                    return Err(refusal);
                }
            }
            if let Some(prior) = consume {
                if !gateway.mrtr.consume(&prior).await {
                    let refusal = Refusal::new(
                        Reason::StateReplayed,
                        "another retry with this requestState was answered first; each may be used once",
                    );
                    gateway.metrics.state_refused(&upstream, refusal.reason);
                    if let Some(at) = audit_at {
                        gateway.audit.emit(&at, AuditEvent::retry_refused(&refusal));
                    }
                    return Err(refusal);
                }
            }
            Ok(())
        }))
    }
}
