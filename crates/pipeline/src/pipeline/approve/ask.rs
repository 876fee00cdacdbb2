//! The approve phase on the request path: after the arguments are checked
//! and before anything goes upstream, the first `[[approval]]` rule that
//! matches a fresh `tools/call` stops it, and the gateway asks the person
//! with its own question, in the client's generation:
//! - 2026-07-28: the call is answered with the gateway's `input_required`
//!   (its form, its sealed `requestState`); the retry's answer is checked
//!   by the `answer` module and the original call then goes upstream.
//! - 2025-11-25 sessions: the `push` module sends the form on the call's
//!   stream, waits for the answer, then lets the call go on.
//!
//! A retry is never asked about again: its sealed state is bound to the
//! caller, tool and arguments of a call that was already approved (the
//! gateway's own question) or already went upstream (an upstream's).

use http::request::Parts;
use http::{HeaderValue, Response};
use serde_json::{json, Value};

use super::second::OnPage;
use super::steps::{answer_form, record, remembered_for, Recorded, QUESTION_KEY};
use super::{Asking, Rules};
use crate::approval::form::{self, Subject};
use crate::approval::{Annotations, Approver, ArgumentCheck, Circumstances, Facts, Fallback, Step};
use crate::json::MessageKind;
use crate::listings::ItemKind;
use crate::model::{Asked, Generation, McpMethod, Reason, Refusal};
use crate::mrtr::approval::ApprovalQuestion;
use crate::pipeline::body::ProxyBody;
use crate::pipeline::ctx::RequestCtx;

/// What the approve phase decided about a call.
pub enum Approve {
    /// No rule asks, an approval is remembered, or the fallback allows.
    Forward,
    /// The gateway's question, to be answered to the client instead.
    Ask(Response<ProxyBody>),
    /// A 2025-11-25 session's call: the question to push on its stream
    /// before the call goes on ([`super::push`]).
    Push(super::push::Question),
}

/// Whether some rule could ask about this request: a fresh `tools/call`
/// on a route or upstream with approval rules (most calls stop here).
pub fn applies(ctx: &RequestCtx) -> bool {
    ctx.request.method == McpMethod::ToolsCall
        && ctx.request.kind == MessageKind::Request
        && ctx.retry.is_none()
        && !(ctx.route.config.approval.is_empty()
            && ctx.route.upstream.settings.policy.approval.is_empty()
            && ctx.argument_asks.is_empty())
}

/// A call to a tool held for a changed definition goes on only as the
/// answer to the gateway's question under a `changed_listing` rule (a
/// fresh call is asked about by [`check`]); any other retry of it — an
/// approval asked for another reason before the change, the upstream's
/// own next question — is refused as the hold promised.
pub(crate) fn held_listing_approved(ctx: &RequestCtx) -> Result<(), Refusal> {
    let Some(retry) = ctx.retry.as_ref().filter(|_| ctx.listing_held) else {
        return Ok(());
    };
    let asked_for_change = retry.prior.approval.as_ref().is_some_and(|a| {
        let policy = &ctx.route.upstream.settings.policy.approval;
        ctx.route
            .config
            .approval
            .iter()
            .chain(policy.iter())
            .any(|r| r.name == a.rule && r.changed_listing)
    });
    match asked_for_change {
        true => Ok(()),
        false => Err(crate::pipeline::access::listing_changed("tool")),
    }
}

/// The approve phase (when it [`applies`]). The request's head and
/// authority are what the gateway's own fetch of the tool list (as the
/// caller) is made with, when a rule reads listed hints the gateway does
/// not know yet.
pub async fn check(
    ctx: &mut RequestCtx,
    parts: &Parts,
    authority: &HeaderValue,
) -> Result<Approve, Refusal> {
    let path = parts.uri.path();
    let route = ctx.route.clone();
    let policy = route.upstream.settings.policy.clone();
    let rules = Rules {
        route: &route.config.approval,
        policy: &policy.approval,
        policy_name: &policy.name,
    };
    let Some(target) = ctx.request.target.clone() else {
        return Ok(Approve::Forward);
    };
    let exposed = route
        .prefix()
        .map(|p| crate::model::expose(crate::model::TargetKind::Tool, p, &target));
    let tool = exposed.as_deref().unwrap_or(&target);
    let found = ctx.argument_asks.clone();
    let annotations = match rules.read_annotations() {
        true => listed_hints(ctx, parts, authority, &target).await,
        false => None,
    };
    let called = Called {
        path,
        tool,
        upstream_tool: &target,
        annotations,
        found: &found,
    };
    // The arguments are parsed once, for the rules and the form alike.
    let arguments = crate::approval::facts::Arguments::default();
    let Some(asking) = called.asking_with(ctx, &rules, &arguments) else {
        if ctx.listing_held {
            return Err(crate::pipeline::access::listing_changed("tool"));
        }
        return Ok(Approve::Forward);
    };
    // The form says what the tool does from its listed hints: looked up for
    // a call that is asked about, when no rule needed them to match.
    let annotations = match annotations {
        None if !rules.read_annotations() => listed_hints(ctx, parts, authority, &target).await,
        known => known,
    };
    let question = Question {
        asking,
        tool,
        upstream_tool: &target,
        annotations,
        arguments: arguments.get(ctx.request.params_text()),
        found: &found,
    };
    question.decide(ctx, parts, authority).await
}

/// A call as the approval rules read it.
pub struct Called<'a> {
    /// The route's path.
    pub path: &'a str,
    /// As the client called it, and at its upstream.
    pub tool: &'a str,
    pub upstream_tool: &'a str,
    pub annotations: Option<Annotations>,
    /// What `[arguments]` rules set to `ask` found, and where.
    pub found: &'a [(ArgumentCheck, String)],
}

impl Called<'_> {
    /// The rule that asks about the call: the first that matches, and for
    /// a tool held for a changed definition the first about changed
    /// listings (no other may let it on); `None` when none asks.
    pub fn asking<'r>(&self, ctx: &RequestCtx, rules: &Rules<'r>) -> Option<super::Asking<'r>> {
        self.asking_with(ctx, rules, &crate::approval::facts::Arguments::default())
    }

    /// As [`Called::asking`], the arguments read through `arguments` (the
    /// phase reads them once for the rules and the form).
    pub(crate) fn asking_with<'r>(
        &self,
        ctx: &RequestCtx,
        rules: &Rules<'r>,
        arguments: &crate::approval::facts::Arguments,
    ) -> Option<super::Asking<'r>> {
        let asks: Vec<ArgumentCheck> = self.found.iter().map(|(check, _)| *check).collect();
        let verdicts: Vec<&str> = asks.iter().map(|c| c.as_str()).collect();
        let facts = Facts {
            caller: crate::approval::facts::caller(&ctx.principal),
            route: self.path,
            upstream: &ctx.route.upstream.settings.id,
            tool: self.tool,
            upstream_tool: self.upstream_tool,
            arguments: rules
                .read_arguments()
                .then(|| arguments.get(ctx.request.params_text())),
            annotations: self.annotations,
            verdicts: &verdicts,
            listing_changed: ctx.listing_held,
        };
        let circumstances = Circumstances {
            ask_verdicts: &asks,
        };
        match ctx.listing_held {
            true => rules.asking_about_change(&facts, &circumstances),
            false => rules.asking(&facts, &circumstances),
        }
    }
}

/// The hints the upstream listed for `tool`, from the definitions the
/// gateway delivered to this caller, fetched as the caller when it has
/// none (`None`: the upstream lists no such tool, or no list could be had).
async fn listed_hints(
    ctx: &RequestCtx,
    parts: &Parts,
    authority: &HeaderValue,
    tool: &str,
) -> Option<Annotations> {
    let kind = ItemKind::of_kind("tool")?;
    let found = Box::pin(crate::pipeline::arguments::definition(
        ctx, parts, authority, kind, tool,
    ))
    .await;
    found.and_then(|contract| contract.hints())
}

/// One call a rule asks about.
struct Question<'a> {
    asking: Asking<'a>,
    /// As the client called it, and at its upstream.
    tool: &'a str,
    upstream_tool: &'a str,
    annotations: Option<Annotations>,
    arguments: &'a Value,
    /// What `[arguments]` rules set to `ask` found, and where.
    found: &'a [(ArgumentCheck, String)],
}

impl Question<'_> {
    async fn decide(
        &self,
        ctx: &mut RequestCtx,
        parts: &Parts,
        authority: &HeaderValue,
    ) -> Result<Approve, Refusal> {
        let rule = self.asking.rule;
        if self.remembered(ctx).await {
            self.record(ctx, Step::Remembered, None);
            return Ok(Approve::Forward);
        }
        let generation = ctx.request.generation();
        let caps = match generation {
            Generation::Stateless => ctx.request.client,
            Generation::Sessions => ctx
                .session
                .as_ref()
                .map(|s| crate::model::ClientCaps::from(s.state.caps))
                .unwrap_or_default(),
        };
        // An approver other than the caller decides on the approval page:
        // the rule's own approver, or its fallback for a client that
        // cannot be asked (given the link when it takes URL mode, else
        // waiting unseen while the approver finds it on the page).
        let on_page = match rule.approver {
            Approver::Approvers => caps.elicitation_url || rule.fallback == Fallback::Approvers,
            Approver::Caller => !caps.elicitation_form && rule.fallback == Fallback::Approvers,
        };
        if on_page {
            let held = self.held(ctx);
            let link = caps.elicitation_url;
            return match super::second::hold(ctx, &held, parts, authority, link).await? {
                OnPage::Forward => Ok(Approve::Forward),
                OnPage::Ask(resp) => Ok(Approve::Ask(resp)),
                OnPage::Push {
                    params,
                    asked,
                    waiter,
                } => Ok(Approve::Push(super::push::Question {
                    rule: rule.name.clone(),
                    because: held.because,
                    tool: self.tool.to_owned(),
                    form: params,
                    asked,
                    timeout: rule.timeout,
                    page: Some(waiter),
                })),
            };
        }
        if !caps.elicitation_form || rule.approver == Approver::Approvers {
            return self.fallback(ctx);
        }
        match generation {
            Generation::Stateless => self.ask_stateless(ctx).map(Approve::Ask),
            Generation::Sessions => Ok(Approve::Push(self.pushed(ctx))),
        }
    }

    /// A client that cannot be asked: the rule's fallback.
    fn fallback(&self, ctx: &RequestCtx) -> Result<Approve, Refusal> {
        let rule = self.asking.rule;
        if rule.fallback == Fallback::Allow {
            self.record(ctx, Step::FallbackAllowed, None);
            return Ok(Approve::Forward);
        }
        self.record(ctx, Step::Unavailable, None);
        let why = match rule.approver {
            Approver::Approvers => "an approval rule asks an approver about this call on the gateway's approval page, but the client declared no URL-mode elicitation to be given its link, and the rule names no fallback; nothing was forwarded",
            Approver::Caller => "an approval rule asks about this call, but the client declared no form elicitation to be asked with; nothing was forwarded",
        };
        Err(Refusal::new(Reason::ApprovalUnavailable, why)
            .with_data("rule", rule.name.clone().into()))
    }

    /// Whether an approval this rule lets be remembered covers the call.
    async fn remembered(&self, ctx: &RequestCtx) -> bool {
        let Some(what) = remembered_for(ctx, self.asking.rule, self.upstream_tool) else {
            return false;
        };
        match ctx.gateway.approvals.recall(&what).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!("{e}: the call is asked about");
                false
            }
        }
    }

    /// The form: the gateway's words alone.
    pub(super) fn form(&self, ctx: &RequestCtx) -> Value {
        self.with_subject(ctx, form::form)
    }

    /// The call as an approver on the page is shown it: the form's words.
    fn held(&self, ctx: &RequestCtx) -> super::second::Held<'_> {
        let (message, provenance) =
            self.with_subject(ctx, |s| (form::message(s), form::provenance(s)));
        super::second::Held {
            rule: self.asking.rule,
            because: self.asking.because.label(),
            tool: self.tool,
            message,
            provenance,
        }
    }

    fn with_subject<T>(&self, ctx: &RequestCtx, make: impl FnOnce(&Subject<'_>) -> T) -> T {
        let policy = &ctx.route.upstream.settings.policy;
        let secret = |name: &str, value: &str| -> Option<&'static str> {
            policy.secret_named(name).or_else(|| {
                ctx.gateway
                    .mrtr
                    .scanner
                    .scan(value)
                    .map(|kind| kind.as_str())
            })
        };
        let written = match self.asking.written {
            super::Written::Route => "route",
            super::Written::Policy(name) => name,
            super::Written::Arguments => &policy.name,
        };
        make(&Subject {
            server: ctx.upstream_name(),
            tool: self.tool,
            annotations: self.annotations,
            arguments: self.arguments,
            rule: self.asking.rule,
            policy: written,
            found: self.found,
            secret: &secret,
        })
    }

    /// 2025-11-25: what the push carries and its answer is read against.
    fn pushed(&self, ctx: &RequestCtx) -> super::push::Question {
        let rule = self.asking.rule;
        super::push::Question {
            rule: rule.name.clone(),
            because: self.asking.because.label(),
            tool: self.tool.to_owned(),
            form: self.form(ctx),
            asked: Asked::Form(answer_form(rule.remembered().is_some() && !rule.first_use)),
            timeout: rule.timeout,
            page: None,
        }
    }

    /// 2026-07-28: the gateway's `input_required`, its state sealed.
    fn ask_stateless(&self, ctx: &RequestCtx) -> Result<Response<ProxyBody>, Refusal> {
        let rule = self.asking.rule;
        let because = self.asking.because.label();
        let binding = ctx.binding();
        let (token, minted) = ctx.gateway.mrtr.seal_approval(ApprovalQuestion {
            binding: &binding,
            digest: ctx.request.digest(),
            rule: &rule.name,
            because: &because,
            key: QUESTION_KEY,
            asked: Asked::Form(answer_form(rule.remembered().is_some() && !rule.first_use)),
            pending: None,
            timeout: rule.timeout,
        })?;
        ctx.trace.operation(&minted.operation, minted.round);
        self.record(ctx, Step::Asked, Some((&minted.operation, minted.round)));
        let result = json!({
            "resultType": "input_required",
            "inputRequests": {
                QUESTION_KEY: { "method": McpMethod::ElicitationCreate.as_str(), "params": self.form(ctx) },
            },
            "requestState": token,
        });
        Ok(crate::pipeline::reply::result_response(
            ctx.id(),
            result,
            None,
        ))
    }

    /// An `approval` audit event and its count.
    pub(super) fn record(&self, ctx: &RequestCtx, step: Step, at: Option<(&str, u32)>) {
        let rule = self.asking.rule;
        let remembered = matches!(step, Step::Remembered)
            .then(|| rule.remembered())
            .flatten();
        record(
            ctx,
            &Recorded {
                step,
                rule: &rule.name,
                tool: self.tool,
                because: &self.asking.because.label(),
                decided_by: None,
                remembered,
                at,
            },
        );
    }
}
