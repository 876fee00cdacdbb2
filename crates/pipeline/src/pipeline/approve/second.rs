//! An approver other than the caller decides (`approver = "approvers"`, or
//! `fallback = "approvers"` for a client that cannot be asked): the call
//! is held as a pending approval ([`super::pending`]) that the approver
//! decides on the gateway's approval page, served by the admin listener.
//! The caller's client is given the page's link, in its generation:
//! - 2026-07-28: the call is answered with the gateway's `input_required`
//!   whose question is a URL-mode `elicitation/create`, its sealed state
//!   naming the approval; the retry (the caller accepted the link) waits
//!   for the decision (the `answer` module calls [`await_retry`]).
//! - 2025-11-25 sessions: the link is pushed on the call's stream and the
//!   call waits there (the `push` module, which [`settled`] serves too).
//!
//! A client that declared no URL-mode elicitation (only under
//! `fallback = "approvers"`) is shown nothing: its call waits for the
//! approver, who finds it listed on the page.

use std::sync::Arc;

use http::request::Parts;
use http::{HeaderValue, Response};
use serde_json::{json, Value};

use super::pending::{Deciders, Outcome, Pending, Verdict, Waiter, PAGE_PATH};
use super::shared::{await_elsewhere, publish, Facts};
use super::steps::{keep, record, Recorded, QUESTION_KEY};
use crate::approval::{ApprovalRule, RefusedDecision, RefusedSignIn, Step};
use crate::audit::AuditEvent;
use crate::model::{Asked, Generation, McpMethod, Reason, Refusal};
use crate::mrtr::approval::ApprovalQuestion;
use crate::pipeline::body::ProxyBody;
use crate::pipeline::ctx::RequestCtx;
use crate::pipeline::resource::Protected;

/// The call an approver is asked about, in the gateway's words.
pub(super) struct Held<'a> {
    pub rule: &'a ApprovalRule,
    pub because: String,
    /// The tool as the client called it.
    pub tool: &'a str,
    /// The approval form's message (values shortened, secrets masked).
    pub message: String,
    /// The gateway's provenance, as on its form.
    pub provenance: Value,
}

impl Held<'_> {
    fn about(&self) -> About<'_> {
        About {
            rule: &self.rule.name,
            tool: self.tool,
            because: &self.because,
        }
    }
}

/// What a step of an approval on the page is recorded under.
pub(super) struct About<'a> {
    pub rule: &'a str,
    pub tool: &'a str,
    pub because: &'a str,
}

/// What becomes of a call held for an approver.
pub(super) enum OnPage {
    /// Approved while it waited unseen.
    Forward,
    /// 2026-07-28: the gateway's `input_required` with the link.
    Ask(Response<ProxyBody>),
    /// 2025-11-25: the link to push on the call's stream, and the approval
    /// the call waits on there.
    Push {
        params: Value,
        asked: Asked,
        waiter: Waiter,
    },
}

/// Hold the call for an approver; `link`: the caller's client takes a
/// URL-mode elicitation (it is given the page's link).
pub(super) async fn hold(
    ctx: &mut RequestCtx,
    held: &Held<'_>,
    parts: &Parts,
    authority: &HeaderValue,
    link: bool,
) -> Result<OnPage, Refusal> {
    let gateway = ctx.gateway.clone();
    let Some(base) = gateway
        .pending
        .page_base(gateway.config.approval_url.as_deref())
    else {
        return Err(unavailable(
            ctx,
            held,
            "an approval rule asks an approver about this call, but no [admin] listener serves the approval page; nothing was forwarded",
        ));
    };
    let now_ms = gateway.clock.now_millis();
    let pending = pending(ctx, held, parts, authority);
    let facts = gateway
        .relay
        .is_some()
        .then(|| Facts::of(&pending, &held.rule.approvers_written));
    let Some(waiter) = gateway.pending.open(pending, now_ms) else {
        return Err(unavailable(
            ctx,
            held,
            "too many calls wait for an approver (this caller's, or in all); nothing was forwarded; try again later",
        ));
    };
    if let Some(facts) = facts {
        publish(&gateway, waiter.id(), facts).await;
    }
    let url = format!("{base}{PAGE_PATH}/{}", waiter.id());
    tracing::info!(upstream = %ctx.route.upstream.settings.id, rule = %held.rule.name, page = %url, "approval waits for an approver");
    if !link {
        record_step(ctx, &held.about(), Step::Asked, None, None);
        let outcome = waiter.decision(gateway.clock.now_millis()).await;
        settled(ctx, &held.about(), outcome).await?;
        return Ok(OnPage::Forward);
    }
    let params = link_params(held, &url);
    match ctx.request.generation() {
        Generation::Stateless => linked_stateless(ctx, held, waiter, params, &url).map(OnPage::Ask),
        Generation::Sessions => Ok(OnPage::Push {
            params,
            asked: Asked::Url {
                host: host_of(&url),
            },
            waiter,
        }),
    }
}

/// The approval as the page shows and checks it.
fn pending(ctx: &RequestCtx, held: &Held<'_>, parts: &Parts, authority: &HeaderValue) -> Pending {
    let route = &ctx.route;
    let resource = Protected::of(route, &ctx.peer, authority, parts.uri.path()).map(|p| p.resource);
    let caller = ctx.principal.key();
    Pending {
        rule: held.rule.name.clone(),
        because: held.because.clone(),
        tool: held.tool.to_owned(),
        server: ctx.upstream_name().to_owned(),
        message: held.message.clone(),
        caller,
        caller_key: ctx.binding().principal_key(),
        digest: ctx.request.digest().to_owned(),
        deciders: Deciders {
            approvers: Deciders::approvers(
                &held.rule.approvers_written.names,
                &ctx.gateway.config.auth,
            ),
            approver_groups: held.rule.approver_groups.clone(),
            auth: ctx.gateway.config.auth.clone(),
            schemes: route.config.auth.clone(),
            resource,
        },
        csrf: super::pending::new_token(),
        remember: remember_offer(held.rule),
        expires_ms: ctx
            .gateway
            .clock
            .now_millis()
            .saturating_add(u64::try_from(held.rule.timeout.as_millis()).unwrap_or(u64::MAX)),
        upstream: route.upstream.label.to_string(),
        audit: ctx.audit_context(),
    }
}

/// The URL-mode `elicitation/create` params: the link and who decides.
fn link_params(held: &Held<'_>, url: &str) -> Value {
    json!({
        "mode": "url",
        "message": crate::approval::form::link_message(held.server(), held.tool, &held.rule.name),
        "url": url,
        "_meta": { crate::policy::inspect::PROVENANCE_KEY: held.provenance },
    })
}

impl Held<'_> {
    fn server(&self) -> &str {
        self.provenance
            .pointer("/upstream/name")
            .and_then(Value::as_str)
            .unwrap_or("the server")
    }
}

fn host_of(url: &str) -> String {
    url.parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned))
        .unwrap_or_default()
}

/// 2026-07-28: the gateway's `input_required` with the link; the sealed
/// state names the approval, which waits for the retry.
fn linked_stateless(
    ctx: &RequestCtx,
    held: &Held<'_>,
    waiter: Waiter,
    params: Value,
    url: &str,
) -> Result<Response<ProxyBody>, Refusal> {
    let binding = ctx.binding();
    let (token, minted) = ctx.gateway.mrtr.seal_approval(ApprovalQuestion {
        binding: &binding,
        digest: ctx.request.digest(),
        rule: &held.rule.name,
        because: &held.because,
        key: QUESTION_KEY,
        asked: Asked::Url { host: host_of(url) },
        pending: Some(waiter.id()),
        timeout: held.rule.timeout,
    })?;
    ctx.trace.operation(&minted.operation, minted.round);
    record_step(
        ctx,
        &held.about(),
        Step::Asked,
        None,
        Some((&minted.operation, minted.round)),
    );
    // The approval waits for the call to come back with the answer.
    waiter.release();
    let result = json!({
        "resultType": "input_required",
        "inputRequests": {
            QUESTION_KEY: { "method": McpMethod::ElicitationCreate.as_str(), "params": params },
        },
        "requestState": token,
    });
    Ok(crate::pipeline::reply::result_response(
        ctx.id(),
        result,
        None,
    ))
}

/// 2026-07-28: the retry of a call whose caller accepted the link waits
/// for the approver's decision (until the approval's expiry).
pub(super) async fn await_retry(
    ctx: &RequestCtx,
    about: &About<'_>,
    id: &str,
) -> Result<(), Refusal> {
    let gateway = ctx.gateway.clone();
    let Some(waiter) = gateway.pending.waiter(id) else {
        // Behind replicas, the approval may wait on the one that asked.
        if let Some(outcome) = await_elsewhere(ctx, id).await {
            return settled(ctx, about, outcome?).await;
        }
        record_step(ctx, about, Step::Expired, None, None);
        return Err(Refusal::new(
            Reason::ApprovalExpired,
            "the approval no longer waits on this gateway (it expired, or the gateway that asked was restarted); nothing was forwarded; call again to be asked again",
        )
        .with_data("rule", about.rule.to_owned().into()));
    };
    // The sealed state is bound to the caller and the arguments already;
    // the approval is checked against them as well.
    let bound = waiter.pending().is_some_and(|p| {
        p.caller_key == ctx.binding().principal_key() && p.digest == ctx.request.digest()
    });
    if !bound {
        return Err(Refusal::new(
            Reason::StateInvalid,
            "the approval belongs to another call",
        ));
    }
    let outcome = waiter.decision(gateway.clock.now_millis()).await;
    settled(ctx, about, outcome).await
}

/// What the page says an approval is remembered for, when the rule lets
/// it be (a first-use rule remembers every approval by itself).
fn remember_offer(rule: &ApprovalRule) -> Option<String> {
    let how = rule.remembered()?;
    if rule.first_use {
        return None;
    }
    Some(match how {
        crate::approval::Remember::Session => "for this session".to_owned(),
        _ => format!(
            "for {} s, for this caller and tool",
            rule.remember_for.as_secs()
        ),
    })
}

/// The approver's decision (or its absence), recorded and acted on; an
/// approval the approver asked to remember is kept as a person's is.
pub(super) async fn settled(
    ctx: &RequestCtx,
    about: &About<'_>,
    outcome: Outcome,
) -> Result<(), Refusal> {
    match outcome {
        Outcome::Decided {
            verdict: Verdict::Approved,
            by,
            remember,
        } => {
            let kept = keep(ctx, about.rule, remember).await;
            record(
                ctx,
                &Recorded {
                    step: Step::Approved,
                    rule: about.rule,
                    tool: about.tool,
                    because: about.because,
                    decided_by: Some(&by),
                    remembered: kept,
                    at: None,
                },
            );
            Ok(())
        }
        Outcome::Decided {
            verdict: Verdict::Declined,
            by,
            ..
        } => {
            record_step(ctx, about, Step::Declined, Some(&by), None);
            Err(Refusal::new(
                Reason::ApprovalDeclined,
                "the approver declined the call on the gateway's approval page; nothing was forwarded",
            )
            .with_data("rule", about.rule.to_owned().into()))
        }
        Outcome::Expired => {
            record_step(ctx, about, Step::Expired, None, None);
            Err(expired(about.rule))
        }
    }
}

fn expired(rule: &str) -> Refusal {
    Refusal::new(
        Reason::ApprovalExpired,
        "no approver decided on the gateway's approval page in time; nothing was forwarded; call again to be asked again",
    )
    .with_data("rule", rule.to_owned().into())
}

fn unavailable(ctx: &RequestCtx, held: &Held<'_>, why: &str) -> Refusal {
    record_step(ctx, &held.about(), Step::Unavailable, None, None);
    Refusal::new(Reason::ApprovalUnavailable, why).with_data("rule", held.rule.name.clone().into())
}

/// A decision sent to the approval page and not taken: an audit event
/// under the waiting call's context (its principal is the caller) and its
/// count. `attempted_by`: who tried, when they were authenticated.
pub fn refused_decision(
    gateway: &crate::pipeline::Gateway,
    pending: &Pending,
    attempted_by: Option<&str>,
    why: RefusedDecision,
) {
    gateway
        .metrics
        .approval
        .refused(&pending.upstream, &pending.rule, why);
    tracing::warn!(rule = %pending.rule, who = attempted_by.unwrap_or("unauthenticated"), why = why.as_str(), "approval page: a decision was refused");
    if gateway.audit.enabled() {
        let event = AuditEvent::approval_decision_refused(
            &pending.rule,
            &pending.tool,
            &pending.digest,
            attempted_by,
            why,
        );
        gateway.audit.emit(&pending.audit, event);
    }
}

/// A sign-in to the approval page refused (or a session cookie that did
/// not hold) for `pending`: an audit event under the waiting call's
/// context and its count, like a refused decision.
pub fn refused_sign_in(
    gateway: &crate::pipeline::Gateway,
    pending: &Pending,
    attempted_by: Option<&str>,
    why: RefusedSignIn,
) {
    gateway
        .metrics
        .approval
        .sign_in_refused(&pending.upstream, &pending.rule, why);
    tracing::warn!(rule = %pending.rule, who = attempted_by.unwrap_or("unknown"), why = why.as_str(), "approval page: a sign-in was refused");
    if gateway.audit.enabled() {
        let event = AuditEvent::approval_sign_in_refused(
            &pending.rule,
            &pending.tool,
            &pending.digest,
            attempted_by,
            why,
        );
        gateway.audit.emit(&pending.audit, event);
    }
}

/// An `approval` audit event and its count; `by`: the approver.
pub(super) fn record_step(
    ctx: &RequestCtx,
    about: &About<'_>,
    step: Step,
    by: Option<&Arc<str>>,
    at: Option<(&str, u32)>,
) {
    record(
        ctx,
        &Recorded {
            step,
            rule: about.rule,
            tool: about.tool,
            because: about.because,
            decided_by: by.map(|b| &**b),
            remembered: None,
            at,
        },
    );
}
