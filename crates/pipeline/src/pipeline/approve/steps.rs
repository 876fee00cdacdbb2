//! What the approve phase's parts share: the question's key, how each
//! step is recorded (audit event and metric), how an approval is
//! remembered, and the form's schema as its answer is checked.

use crate::approval::form::{APPROVE_FIELD, REMEMBER_FIELD};
use crate::approval::memory::{Remembered, Scope};
use crate::approval::{ApprovalRule, Remember, Step};
use crate::audit::AuditEvent;
use crate::model::{FieldKind, FormField, FormSchema};
use crate::pipeline::ctx::RequestCtx;

/// The input-request key of the gateway's own question (never an
/// upstream's: the upstream never sees this exchange).
pub(crate) const QUESTION_KEY: &str = "dev.portcullis/approval";

/// One approval step, as recorded.
pub(super) struct Recorded<'a> {
    pub step: Step,
    pub rule: &'a str,
    pub tool: &'a str,
    pub because: &'a str,
    pub decided_by: Option<&'a str>,
    pub remembered: Option<Remember>,
    /// The operation and round of the question, when it was sealed.
    pub at: Option<(&'a str, u32)>,
}

/// An `approval` audit event (never a value) and its count.
pub(super) fn record(ctx: &RequestCtx, r: &Recorded<'_>) {
    ctx.gateway
        .metrics
        .approval
        .step(&ctx.route.upstream.label, r.rule, r.step);
    tracing::info!(upstream = %ctx.route.upstream.settings.id, rule = r.rule, step = r.step.as_str(), "approval");
    let sink = &ctx.gateway.audit;
    if !sink.enabled() {
        return;
    }
    let base = ctx.audit_context();
    let at = match r.at {
        Some((operation, round)) => base.with_operation(operation, round),
        None => base,
    };
    let event = AuditEvent::approval(
        r.step,
        r.rule,
        r.tool,
        r.because,
        ctx.request.digest(),
        r.decided_by,
        r.remembered,
    );
    sink.emit(&at, event);
}

/// What a remembered approval of `rule` for this call is kept under:
/// `None` when the rule keeps none, or the call has no scope to keep it
/// for (an anonymous caller; a stateless client for `session`).
pub(super) fn remembered_for<'a>(
    ctx: &'a RequestCtx,
    rule: &'a crate::approval::ApprovalRule,
    upstream_tool: &'a str,
) -> Option<Remembered<'a>> {
    let scope = match rule.remembered()? {
        Remember::Call => return None,
        Remember::Session => Scope::Session(ctx.session.as_ref()?.state.nonce.as_str()),
        Remember::Caller if ctx.principal.is_anonymous() => return None,
        Remember::Caller => Scope::Caller(&ctx.principal.scheme, &ctx.principal.name),
    };
    Some(Remembered {
        rule: &rule.name,
        upstream: &ctx.route.upstream.settings.id,
        tool: upstream_tool,
        scope,
    })
}

/// The form's schema as its answer is checked: `approve` (required) and,
/// when the rule lets a decision be remembered, `remember`.
pub(super) fn answer_form(remember: bool) -> FormSchema {
    let boolean = |name: &str, required| FormField {
        name: name.to_owned(),
        required,
        kind: FieldKind::Boolean,
    };
    let mut fields = vec![boolean(APPROVE_FIELD, true)];
    if remember {
        fields.push(boolean(REMEMBER_FIELD, false));
    }
    FormSchema { fields }
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
