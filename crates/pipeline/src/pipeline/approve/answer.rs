//! The answer to the gateway's own approval question (2026-07-28): the
//! retry's state was opened and checked by the MRTR boundary
//! (`mrtr::approval`: caller, upstream, tool, arguments, time, single use,
//! the answer against the form); here the decision is acted on. Approved:
//! the original call goes on to the upstream, its state consumed, and the
//! approval remembered when the rule and the person allow. Declined or
//! cancelled: refused `approval_declined`, nothing forwarded.

use bytes::Bytes;

use super::second::{await_retry, About};
use super::steps::{keep, record, Recorded};
use crate::approval::form::{APPROVE_FIELD, REMEMBER_FIELD};
use crate::approval::{Remember, Step};
use crate::model::{Reason, Refusal};
use crate::mrtr::approval::{ApprovalAnswer, Decision, DecisionFields, SealedApproval};
use crate::mrtr::retry::RetryRefused;
use crate::pipeline::ctx::RequestCtx;

/// The form's fields the decision is read from.
pub(crate) const FIELDS: DecisionFields<'static> = DecisionFields {
    approve: APPROVE_FIELD,
    remember: REMEMBER_FIELD,
};

/// Act on a checked decision: the body to forward, or the refusal.
pub(crate) async fn decided(
    ctx: &mut RequestCtx,
    answer: ApprovalAnswer,
) -> Result<Bytes, Refusal> {
    let ApprovalAnswer {
        decision,
        asked,
        accepted,
    } = answer;
    let at = (accepted.prior.operation.clone(), accepted.prior.round);
    let at = Some((at.0.as_str(), at.1));
    if let (Decision::Opened, Some(id)) = (decision, asked.pending.as_deref()) {
        let tool = ctx.request.target.clone().unwrap_or_default();
        let about = About {
            rule: &asked.rule,
            tool: &tool,
            because: &asked.because,
        };
        await_retry(ctx, &about, id).await?;
        let body = accepted.body.clone();
        ctx.retry = Some(Box::new(accepted));
        return Ok(body);
    }
    let step = match decision {
        // A link accepted where no approval waits: nothing was approved.
        Decision::Opened => Step::Declined,
        Decision::Approved { .. } => Step::Approved,
        Decision::Declined => Step::Declined,
        Decision::Cancelled => Step::Cancelled,
    };
    let Decision::Approved { remember } = decision else {
        if let Some(id) = asked.pending.as_deref() {
            // The caller withdrew the call: its approval leaves the page.
            drop(ctx.gateway.pending.waiter(id));
        }
        recorded(ctx, &asked, step, None, at);
        let why = match decision {
            Decision::Cancelled => {
                "the person dismissed the gateway's approval question; nothing was forwarded"
            }
            _ => "the person did not approve the call; nothing was forwarded",
        };
        return Err(Refusal::new(Reason::ApprovalDeclined, why)
            .with_data("rule", asked.rule.clone().into()));
    };
    let kept = keep(ctx, &asked.rule, remember).await;
    recorded(ctx, &asked, step, kept, at);
    let body = accepted.body.clone();
    ctx.retry = Some(Box::new(accepted));
    Ok(body)
}

/// A refused answer to the approval question: one that came too late is
/// a step of the question too.
pub(crate) fn refused(ctx: &RequestCtx, refused: &RetryRefused) {
    if refused.refusal.reason != Reason::ApprovalExpired {
        return;
    }
    let Some(prior) = &refused.opened else {
        return;
    };
    if let Some(asked) = &prior.approval {
        let at = Some((prior.operation.as_str(), prior.round));
        recorded(ctx, asked, Step::Expired, None, at);
    }
}

pub(super) fn recorded(
    ctx: &RequestCtx,
    asked: &SealedApproval,
    step: Step,
    remembered: Option<Remember>,
    at: Option<(&str, u32)>,
) {
    let tool = ctx.request.target.as_deref().unwrap_or("");
    let caller = ctx.principal.key();
    let decided_by = matches!(step, Step::Approved | Step::Declined | Step::Cancelled)
        .then_some(caller.as_str());
    record(
        ctx,
        &Recorded {
            step,
            rule: &asked.rule,
            tool,
            because: &asked.because,
            decided_by,
            remembered,
            at,
        },
    );
}
