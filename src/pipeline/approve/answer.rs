//! The answer to the gateway's own approval question (2026-07-28): the
//! retry's state was opened and checked by the MRTR boundary
//! (`mrtr::approval`: caller, upstream, tool, arguments, time, single use,
//! the answer against the form); here the decision is acted on. Approved:
//! the original call goes on to the upstream, its state consumed, and the
//! approval remembered when the rule and the person allow. Declined or
//! cancelled: refused `approval_declined`, nothing forwarded.

use bytes::Bytes;

use super::ask::{record, remembered_for, Recorded};
use crate::approval::form::{APPROVE_FIELD, REMEMBER_FIELD};
use crate::approval::{ApprovalRule, Remember, Step};
use crate::model::{Reason, Refusal};
use crate::mrtr::approval::{ApprovalAnswer, Decision, DecisionFields, SealedApproval};
use crate::mrtr::retry::RetryRefused;
use crate::pipeline::ctx::RequestCtx;

/// The form's fields the decision is read from.
pub const FIELDS: DecisionFields<'static> = DecisionFields {
    approve: APPROVE_FIELD,
    remember: REMEMBER_FIELD,
};

/// Act on a checked decision: the body to forward, or the refusal.
pub async fn decided(ctx: &mut RequestCtx, answer: ApprovalAnswer) -> Result<Bytes, Refusal> {
    let ApprovalAnswer {
        decision,
        asked,
        accepted,
    } = answer;
    let at = (accepted.prior.operation.clone(), accepted.prior.round);
    let at = Some((at.0.as_str(), at.1));
    let step = match decision {
        Decision::Approved { .. } => Step::Approved,
        Decision::Declined => Step::Declined,
        Decision::Cancelled => Step::Cancelled,
    };
    let Decision::Approved { remember } = decision else {
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
pub fn refused(ctx: &RequestCtx, refused: &RetryRefused) {
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
    let decided_by = matches!(step, Step::Approved | Step::Declined | Step::Cancelled)
        .then(|| ctx.principal.name.as_ref());
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

/// Remember an approval when the rule lets it be (always for a first use;
/// otherwise when the person ticked "don't ask again"): how, or `None`.
pub(super) async fn keep(ctx: &RequestCtx, rule_name: &str, ticked: bool) -> Option<Remember> {
    let rule = find_rule(ctx, rule_name)?;
    let how = rule.remembered()?;
    if !(rule.first_use || ticked) {
        return None;
    }
    let tool = ctx.request.target.as_deref()?;
    let what = remembered_for(ctx, rule, tool)?;
    let expires = match how {
        Remember::Session => {
            ctx.gateway.clock.now_secs() + ctx.gateway.config.state.session_lifetime.as_secs()
        }
        _ => ctx.gateway.clock.now_secs() + rule.remember_for.as_secs(),
    };
    match ctx.gateway.approvals.remember(&what, expires).await {
        Ok(()) => Some(how),
        Err(e) => {
            tracing::warn!("{e}: the approval is not remembered");
            None
        }
    }
}

/// The rule of that name the call meets now (the route's, then the
/// upstream policy's): a reload may have removed it.
fn find_rule<'a>(ctx: &'a RequestCtx, name: &str) -> Option<&'a ApprovalRule> {
    let route = ctx.route.config.approval.iter();
    let policy = ctx.route.upstream.settings.policy.approval.iter();
    route.chain(policy).find(|r| r.name == name)
}
