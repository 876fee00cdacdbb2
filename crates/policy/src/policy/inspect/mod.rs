//! The inspection of what an upstream asks a person or a model, against the
//! policy of that upstream: an `input_required` result (2026-07-28), or one
//! pushed server-to-client request (2025-11-25). Protocol validity is always
//! enforced; the policy's own rules (limits, secrets, text, URL, deprecated
//! kinds, injection) refuse in `enforce` mode and are only recorded in
//! `monitor` mode. What passes is returned with its human-facing text made
//! safe and the gateway's provenance under `_meta`.
//!
//! One file per rule; [`Run`] carries the policy, the subject and the report
//! through them.

mod capability;
mod content;
mod deprecated;
mod form;
mod fragments;
mod icons;
pub(crate) mod intent;
mod listing;
mod notification;
mod prescan;
mod provenance;
mod redirect;
mod secret;
mod server_info;
mod shape;
mod task;
mod text;
mod url;
mod verdict;
mod whole;

/// Build the shipped tables of this module's parts now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    content::warm();
    fragments::warm();
    prescan::warm();
    provenance::warm();
    redirect::warm();
}

#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use super::config::{Mode, Policy};
use crate::json;
use crate::model::{Asked, ClientCaps, McpMethod, Reason, Refusal, RequestShape};
use crate::policy::intent::Intent;

pub use content::{
    inspect_content, inspect_error, may_need_content, prepare_raw_scan, scan_raw, trace_content,
};
pub use prescan::{Cue, RawScan};
pub use provenance::{is_gateway_key, PROVENANCE_KEY};
pub use redirect::Catalogue;
pub use task::{CheckedTask, TaskCarrier};
pub use verdict::{markdown_table as verdict_table, Action, Rule, Verdict};
pub use whole::{list_members, may_carry_listing};

/// The exchange the inspected message belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The client's request this answers (`tools/call`, …).
    pub method: McpMethod,
    pub client: ClientCaps,
    pub upstream_name: &'a str,
    pub upstream_host: &'a str,
    /// What the gateway delivered to this caller from this upstream, when
    /// the pipeline can say (`redirect.rs`; `None`: nothing is known).
    pub catalogue: Option<&'a dyn Catalogue>,
}

/// What the inspection found: read by the audit trail and the metrics, so
/// nothing downstream parses the message again to describe it.
#[derive(Debug, Default)]
pub struct Report {
    pub verdicts: Vec<Verdict>,
    /// What was asked (after stripping), per key: sealed for the answer.
    pub asked: Vec<(String, Asked)>,
    /// The upstream's own requestState, when it sent one.
    pub request_state: Option<String>,
    /// The questions as the upstream sent them (names only).
    pub received: Vec<RequestShape>,
    /// What the intent detector found on listed items and what was done
    /// (`intent.rs`), for the metric.
    pub intents: Vec<(Intent, Action)>,
    /// Every check that ran, in order, with `action = "pass"` for those
    /// that found nothing: filled only by the `trace_*` functions
    /// (`portcullis explain`), empty on the request path.
    pub trace: Vec<Verdict>,
}

impl Report {
    pub fn stripped(&self) -> impl Iterator<Item = (&str, &str)> {
        self.verdicts
            .iter()
            .filter(|v| v.action == Action::Strip)
            .filter_map(|v| Some((v.key.as_deref()?, v.field.as_deref()?)))
    }

    pub fn sanitised(&self) -> bool {
        self.verdicts
            .iter()
            .any(|v| v.rule == Rule::TextSafety && v.action == Action::Sanitize)
    }
}

/// Inspect the `result` member (raw JSON) of an upstream response known to
/// be `input_required`. On success, the result to deliver.
pub fn inspect_result(
    policy: &Policy,
    subject: &Subject<'_>,
    result: &[u8],
) -> (Result<Value, Refusal>, Report) {
    let mut run = Run::new(policy, subject);
    let outcome = run.result(result);
    (outcome, run.report)
}

/// Inspect a task of the Tasks extension (raw JSON: a result or a
/// notification's params) wherever it travels: its questions under the
/// question policy, its text and result under the rules for them.
pub fn inspect_task(
    policy: &Policy,
    subject: &Subject<'_>,
    task: &[u8],
    carrier: TaskCarrier,
) -> (Result<CheckedTask, Refusal>, Report) {
    let mut run = Run::new(policy, subject);
    let outcome = run.task(task, carrier);
    (outcome, run.report)
}

/// Inspect one server-to-client request pushed on a 2025-11-25 stream: its
/// method and raw `params`. On success, the params to deliver.
pub fn inspect_request(
    policy: &Policy,
    subject: &Subject<'_>,
    key: &str,
    method: &str,
    params: Option<&[u8]>,
) -> (Result<Value, Refusal>, Report) {
    let mut run = Run::new(policy, subject);
    let outcome = run.pushed(key, method, params);
    (outcome, run.report)
}

/// Inspect the readable text of a notification on a request's stream (its
/// params), or of a server's description of itself (the result of
/// `initialize` or `server/discover`). On success, the value to deliver
/// when the text had to change.
pub fn inspect_notification(
    policy: &Policy,
    subject: &Subject<'_>,
    method: McpMethod,
    params: &[u8],
) -> (Result<Option<Value>, Refusal>, Report) {
    let mut run = Run::new(policy, subject);
    let outcome = run.notification(method, params);
    (outcome, run.report)
}

/// Inspect the text of a list result (tools, prompts, resources, resource
/// templates), already strictly parsed, in place; `items` names its list
/// member. On success, whether the text changed (only when enforcing) and
/// the value must be re-encoded. The gateway inspects a list whole
/// ([`inspect_whole_result`]); the tests reach the list rules alone here.
#[cfg(test)]
pub(crate) fn inspect_listing(
    policy: &Policy,
    subject: &Subject<'_>,
    items: &str,
    result: &mut Value,
) -> (Result<bool, Refusal>, Report) {
    let mut run = Run::new(policy, subject);
    let outcome = run.listing(items, result);
    (outcome, run.report)
}

/// Inspect a complete result whole, already strictly parsed, in place:
/// the server description, every list member present and the `_meta`
/// server identity (`whole.rs`). On success, whether the text changed
/// (only when enforcing) and the value must be re-encoded.
pub fn inspect_whole_result(
    policy: &Policy,
    subject: &Subject<'_>,
    result: &mut Value,
) -> (Result<bool, Refusal>, Report) {
    let mut run = Run::new(policy, subject);
    let outcome = run.whole_result(result);
    (outcome, run.report)
}

/// [`inspect_whole_result`], with every check that ran in [`Report::trace`].
pub fn trace_whole_result(
    policy: &Policy,
    subject: &Subject<'_>,
    result: &mut Value,
) -> (Result<bool, Refusal>, Report) {
    let mut run = Run::traced(policy, subject);
    let outcome = run.whole_result(result);
    (outcome, run.report)
}

/// Inspect the server identity under the `_meta` of any other result,
/// already strictly parsed, in place: whether it changed. The gateway
/// reads it with the result's content ([`inspect_content`]); tests only.
#[cfg(test)]
pub(crate) fn inspect_result_meta(
    policy: &Policy,
    subject: &Subject<'_>,
    result: &mut Value,
) -> (Result<bool, Refusal>, Report) {
    Run::new(policy, subject).result_meta(result)
}

/// [`inspect_result`], with every check that ran in [`Report::trace`].
pub fn trace_result(
    policy: &Policy,
    subject: &Subject<'_>,
    result: &[u8],
) -> (Result<Value, Refusal>, Report) {
    let mut run = Run::traced(policy, subject);
    let outcome = run.result(result);
    (outcome, run.report)
}

/// [`trace_result`] as if the policy only monitored: every rule runs and
/// says what it finds, where enforcing stops at the first refusal. Only
/// protocol violations refuse.
pub fn trace_every_rule(
    policy: &Policy,
    subject: &Subject<'_>,
    result: &[u8],
) -> (Result<Value, Refusal>, Report) {
    let mut run = Run::traced(policy, subject);
    run.monitor_only = true;
    let outcome = run.result(result);
    (outcome, run.report)
}

/// [`inspect_notification`], with every check that ran in [`Report::trace`].
pub fn trace_notification(
    policy: &Policy,
    subject: &Subject<'_>,
    method: McpMethod,
    params: &[u8],
) -> (Result<Option<Value>, Refusal>, Report) {
    let mut run = Run::traced(policy, subject);
    let outcome = run.notification(method, params);
    (outcome, run.report)
}

pub(crate) type Checked<T> = Result<T, Refusal>;

/// What one string, listed item, icon or schema member or element costs of
/// `max_text_bytes` besides its text: reading an empty string costs about
/// what reading 16 bytes of text does.
pub(crate) const COST_PER_THING: usize = 16;

pub(crate) struct Run<'a> {
    pub(crate) policy: &'a Policy,
    pub(crate) subject: &'a Subject<'a>,
    pub(crate) report: Report,
    /// Record passes too (`trace_*`); off on the request path, where a
    /// pass costs one branch.
    tracing: bool,
    /// Treat an enforcing policy as monitoring ([`trace_every_rule`]).
    monitor_only: bool,
    /// Text bytes still to read in this message (`limits.max_text_bytes`).
    text_left: usize,
    /// The budget ran out while monitoring: the rest is not read.
    over_budget: bool,
    /// Reading one listed item, whose budget is its own: running out
    /// removes the item instead of refusing the list (`listing.rs`).
    per_item: bool,
    /// Reading a tool's result marked `isError`: an error's text, as a
    /// JSON-RPC error's `message` is (`content.rs`).
    error_result: bool,
}

fn refusal(
    reason: Reason,
    message: String,
    rule: Rule,
    key: Option<&str>,
    field: Option<&str>,
) -> Refusal {
    let mut r = Refusal::new(reason, message).with_data("rule", rule.as_str().into());
    if let Some(k) = key {
        r = r.with_data("key", k.into());
    }
    if let Some(f) = field {
        r = r.with_data("field", f.into());
    }
    r
}

impl<'a> Run<'a> {
    fn new(policy: &'a Policy, subject: &'a Subject<'a>) -> Self {
        Run {
            policy,
            subject,
            report: Report::default(),
            tracing: false,
            monitor_only: false,
            text_left: policy.limits.max_text_bytes,
            over_budget: false,
            per_item: false,
            error_result: false,
        }
    }

    /// Spend the message's text budget on one thing read: a string of
    /// `bytes` bytes, or (with 0) one listed item, icon or schema member or
    /// element. The sanitiser and the rules cost per byte and per thing,
    /// and a hostile upstream chooses how many, so each costs
    /// [`COST_PER_THING`] on top of its bytes: an empty string is not free.
    /// `false` when it is not to be read (the budget ran out while
    /// monitoring); over it when enforcing, the message is refused.
    pub(crate) fn spend(&mut self, key: &str, field: Option<&str>, bytes: usize) -> Checked<bool> {
        if self.over_budget {
            return Ok(false);
        }
        let cost = bytes.saturating_add(COST_PER_THING);
        if let Some(left) = self.text_left.checked_sub(cost) {
            self.text_left = left;
            return Ok(true);
        }
        self.over_budget = true;
        if self.per_item {
            return Ok(false);
        }
        let what = "more text than the gateway reads in one message";
        self.limit("max_text_bytes", Some(key), field, what)?;
        Ok(false)
    }

    /// A run that records every check in [`Report::trace`].
    fn traced(policy: &'a Policy, subject: &'a Subject<'a>) -> Self {
        Run {
            tracing: true,
            ..Run::new(policy, subject)
        }
    }

    /// A notification's (or server description's) text, cleaned: the value
    /// to deliver when enforcing changed it.
    fn notification(&mut self, method: McpMethod, params: &[u8]) -> Checked<Option<Value>> {
        let mut v = self.parse(params, "notification")?;
        let stripped = self.strip_namespace_in(params, &mut v);
        let changed = self.check_notification(method, &mut v)?;
        Ok(((changed && self.enforcing()) || stripped).then_some(v))
    }

    /// A result's `_meta` server identity, cleaned in place: whether it changed.
    #[cfg(test)]
    fn result_meta(mut self, result: &mut Value) -> (Checked<bool>, Report) {
        let outcome = self
            .check_meta_server_info(result)
            .map(|()| self.report.verdicts.iter().any(Verdict::rewrites));
        (outcome, self.report)
    }

    /// A list's text, cleaned in place: whether it changed.
    #[cfg(test)]
    fn listing(&mut self, items: &str, result: &mut Value) -> Checked<bool> {
        self.strip_namespace(result);
        self.check_listing(items, result)?;
        self.check_meta_server_info(result)?;
        Ok(self.annotate_listing(result))
    }

    pub(crate) fn enforcing(&self) -> bool {
        self.policy.mode == Mode::Enforce && !self.monitor_only
    }

    pub(crate) fn note(
        &mut self,
        rule: Rule,
        action: Action,
        key: Option<&str>,
        field: Option<&str>,
        detail: Option<String>,
    ) {
        self.record(rule, action, key, field, detail, None);
    }

    /// Something the rule takes out of the message (an icon, a link, a listed
    /// item): recorded as `remove` when enforcing, `monitor` otherwise;
    /// `true` when it is to be removed.
    pub(crate) fn removal(&mut self, rule: Rule, key: &str, detail: String) -> bool {
        let enforcing = self.enforcing();
        let action = if enforcing {
            Action::Remove
        } else {
            Action::Monitor
        };
        self.note(rule, action, Some(key), None, Some(detail));
        enforcing
    }

    /// A verdict; the trace gets `why` (the refusal's words) as its detail
    /// when the verdict has none of its own.
    fn record(
        &mut self,
        rule: Rule,
        action: Action,
        key: Option<&str>,
        field: Option<&str>,
        detail: Option<String>,
        why: Option<&str>,
    ) {
        let verdict = Verdict {
            rule,
            action,
            key: key.map(str::to_owned),
            field: field.map(str::to_owned),
            detail,
        };
        if self.tracing {
            let mut traced = verdict.clone();
            if traced.detail.is_none() {
                traced.detail = why.map(str::to_owned);
            }
            self.report.trace.push(traced);
        }
        self.report.verdicts.push(verdict);
    }

    /// A check that ran and found nothing: recorded only when tracing.
    /// `what` names what was checked (a part, a limit).
    pub(crate) fn pass(&mut self, rule: Rule, key: Option<&str>, field: Option<&str>, what: &str) {
        if self.tracing {
            self.report.trace.push(Verdict {
                rule,
                action: Action::Pass,
                key: key.map(str::to_owned),
                field: field.map(str::to_owned),
                detail: Some(what.to_owned()),
            });
        }
    }

    /// A protocol violation: refused in every mode.
    pub(crate) fn invalid(
        &mut self,
        reason: Reason,
        rule: Rule,
        key: Option<&str>,
        field: Option<&str>,
        message: String,
    ) -> Refusal {
        self.record(rule, Action::Block, key, field, None, Some(&message));
        refusal(reason, message, rule, key, field)
    }

    /// A malformed question: refused in every mode.
    pub(crate) fn malformed(&mut self, key: Option<&str>, message: impl Into<String>) -> Refusal {
        self.invalid(
            Reason::InvalidInputRequired,
            Rule::Protocol,
            key,
            None,
            message.into(),
        )
    }

    /// A policy rule broken: refused when enforcing, recorded when monitoring.
    pub(crate) fn violation(
        &mut self,
        reason: Reason,
        rule: Rule,
        key: Option<&str>,
        field: Option<&str>,
        message: String,
    ) -> Checked<()> {
        if self.enforcing() {
            return Err(self.invalid(reason, rule, key, field, message));
        }
        self.record(rule, Action::Monitor, key, field, None, Some(&message));
        Ok(())
    }

    pub(crate) fn limit(
        &mut self,
        limit: &'static str,
        key: Option<&str>,
        field: Option<&str>,
        what: &str,
    ) -> Checked<()> {
        let upstream = self.subject.upstream_name;
        let message = format!("{upstream} sent {what} over the gateway's limit ({limit})");
        let r = self.violation(Reason::LimitExceeded, Rule::Limit, key, field, message);
        r.map_err(|e| e.with_data("limit", limit.into()))
    }

    /// Strict parse of the inspected bytes; a duplicate is its own reason.
    fn parse(&mut self, bytes: &[u8], what: &str) -> Checked<Value> {
        let parsed = json::parse_value(bytes);
        if parsed.is_ok() {
            self.pass(
                Rule::Parse,
                None,
                None,
                "one reading: no duplicate members, depth within 128",
            );
        }
        parsed.map_err(|e| {
            let reason = if e.is_duplicate() {
                Reason::DuplicateMember
            } else {
                Reason::InvalidInputRequired
            };
            let message = format!("the {what} cannot be read unambiguously: {e}");
            self.invalid(reason, Rule::Parse, None, None, message)
        })
    }

    fn result(&mut self, bytes: &[u8]) -> Checked<Value> {
        if bytes.len() > self.policy.limits.max_result_bytes {
            self.limit("max_result_bytes", None, None, "an input_required result")?;
        } else {
            self.pass(Rule::Limit, None, None, "max_result_bytes");
        }
        let mut result = self.parse(bytes, "input_required result")?;
        self.strip_namespace_in(bytes, &mut result);
        if !self.subject.method.allows_input_required() {
            let message = format!("input_required is only allowed in answers to tools/call, prompts/get and resources/read, not {}", self.subject.method);
            return Err(self.invalid(
                Reason::InputRequiredNotAllowed,
                Rule::Protocol,
                None,
                None,
                message,
            ));
        }
        self.pass(
            Rule::Protocol,
            None,
            None,
            "input_required allowed on this method",
        );
        let obj = result
            .as_object_mut()
            .ok_or_else(|| self.malformed(None, "the result is not an object"))?;
        if let Some(requests) = obj.get("inputRequests").and_then(Value::as_object) {
            self.report.received = shape::shapes(requests);
        }
        self.check_request_state(obj)?;
        if let Some(mut requests) = self.check_shape(obj)? {
            self.check_capabilities(&requests)?;
            if self.tracing {
                for key in requests.keys() {
                    self.pass(
                        Rule::ClientCapability,
                        Some(key),
                        None,
                        "the kind is declared",
                    );
                }
            }
            for (key, request) in requests.iter_mut() {
                self.check_input_request(key, request)?;
            }
            obj.insert("inputRequests".into(), Value::Object(requests));
        }
        self.annotate(obj);
        self.check_meta_server_info(&mut result)?;
        Ok(result)
    }

    fn pushed(&mut self, key: &str, method: &str, params: Option<&[u8]>) -> Checked<Value> {
        let size = params.map_or(0, <[u8]>::len);
        if size > self.policy.limits.max_result_bytes {
            self.limit("max_result_bytes", None, None, "a server request")?;
        }
        let params = match params {
            Some(bytes) => {
                let mut parsed = self.parse(bytes, "server request")?;
                self.strip_namespace_in(bytes, &mut parsed);
                parsed
            }
            None => Value::Object(Map::new()),
        };
        if !params.is_object() {
            return Err(self.malformed(Some(key), "params must be an object"));
        }
        let mut one = Map::new();
        one.insert(
            key.to_owned(),
            serde_json::json!({ "method": method, "params": params }),
        );
        self.report.received = shape::shapes(&one);
        self.check_capabilities(&one)?;
        let mut request = one.remove(key).unwrap_or(Value::Null);
        self.check_input_request(key, &mut request)?;
        let mut params = request
            .get_mut("params")
            .map(Value::take)
            .unwrap_or_else(|| Value::Object(Map::new()));
        if let Value::Object(p) = &mut params {
            self.annotate(p);
        }
        Ok(params)
    }

    fn check_input_request(&mut self, key: &str, request: &mut Value) -> Checked<()> {
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .map(McpMethod::parse)
            .unwrap_or(McpMethod::Other);
        let mut empty = Map::new();
        let params = match request.get_mut("params") {
            Some(Value::Object(p)) => p,
            _ => &mut empty,
        };
        match method {
            McpMethod::ElicitationCreate => match params.get("mode").and_then(Value::as_str) {
                Some("url") => self.check_url_mode(key, params),
                _ => self.check_form(key, params),
            },
            McpMethod::SamplingCreateMessage => self.check_sampling(key, params),
            _ => self.check_roots(key),
        }
    }
}
