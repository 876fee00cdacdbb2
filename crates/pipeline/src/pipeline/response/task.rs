//! A task of the Tasks extension in the upstream's answer: the result that
//! creates it (`resultType: "task"`), a `tasks/get` result, or a
//! `notifications/tasks/status` on any stream. Each goes through the task
//! rule (`policy::inspect::task`: its questions under the question policy,
//! with provenance and the capability check), then gets the gateway's own
//! sealed `requestState`, bound to the caller, the upstream, the task and
//! the questions it delivers, so the `tasks/update` that answers them is
//! checked like an MRTR retry (`pipeline::task`).

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::disposition::Disposition;
use super::exchange::{read_failure, reencode_failed, response_bytes, Exchange};
use crate::audit::{AuditEvent, OperationOutcome};
use crate::config::TaskMode;
use crate::json;
use crate::model::{McpMethod, Reason, Refusal, TASKS_EXTENSION};
use crate::mrtr::mint::{MintInput, Minted};
use crate::mrtr::seal::{new_operation_id, SealedState};
use crate::mrtr::{task_digest, task_operation, Binding};
use crate::policy::inspect::{inspect_task, Report, TaskCarrier};

/// A task that passed: what to deliver, and whether it asks a new round of
/// questions (the rounds limit applies to those, not to polls that show
/// the same ones again).
struct Delivered {
    value: Value,
    new_round: bool,
}

impl Exchange {
    /// A result that is a task: the one a tools/call created, or the task
    /// a `tasks/get` reads.
    pub(super) fn task_result(
        &self,
        id: Option<&RawValue>,
        result: &str,
        carrier: TaskCarrier,
    ) -> Disposition {
        // A task read by a request about one task (`tasks/get`, an
        // acknowledgement that shows it) is that task.
        let asked_about = match carrier {
            TaskCarrier::Status => self.ctx.request.target.as_deref(),
            TaskCarrier::Created => None,
        };
        let delivered = self
            .task_allowed(carrier)
            .and_then(|()| self.police_task(result.as_bytes(), carrier, asked_about));
        match delivered {
            Ok(d) => match response_bytes(id, &d.value) {
                Some(bytes) if d.new_round => Disposition::Ask(bytes),
                Some(bytes) => Disposition::FinalRewritten(bytes),
                None => Disposition::Refuse(reencode_failed()),
            },
            Err(r) => Disposition::Refuse(r),
        }
    }

    /// A list of tasks: each task in it that asks (`inputRequests`, or a
    /// `requestState` of its upstream's) is policed and sealed as a
    /// `tasks/get` of it would be; one the policy refuses refuses the list
    /// (its questions never reach the client). The rest passes as data.
    pub(super) fn task_list(&self, id: Option<&RawValue>, result: &str) -> Disposition {
        let mut value = match json::parse_value(result.as_bytes()) {
            Ok(v) => v,
            Err(e) => return Disposition::Refuse(read_failure(&e)),
        };
        let asks = |t: &Value| t.get("inputRequests").is_some() || t.get("requestState").is_some();
        let Some(tasks) = value.get_mut("tasks").and_then(Value::as_array_mut) else {
            return self.content_result(id, result);
        };
        if !tasks.iter().any(asks) {
            return self.content_result(id, result);
        }
        if let Err(r) = self.tasks_served() {
            return Disposition::Refuse(r);
        }
        let mut new_round = false;
        for task in tasks.iter_mut().filter(|t| asks(t)) {
            let bytes = match serde_json::to_vec(task) {
                Ok(b) => b,
                Err(_) => return Disposition::Refuse(reencode_failed()),
            };
            match self.police_task(&bytes, TaskCarrier::Status, None) {
                Ok(d) => {
                    new_round |= d.new_round;
                    *task = d.value;
                }
                Err(r) => return Disposition::Refuse(r),
            }
        }
        match response_bytes(id, &value) {
            Some(bytes) if new_round => Disposition::Ask(bytes),
            Some(bytes) => Disposition::FinalRewritten(bytes),
            None => Disposition::Refuse(reencode_failed()),
        }
    }

    /// `notifications/tasks/status`: the same task, pushed.
    pub(super) fn task_notification(&self, params: &RawValue) -> Disposition {
        let delivered = self
            .task_allowed(TaskCarrier::Status)
            .and_then(|()| self.police_task(params.get().as_bytes(), TaskCarrier::Status, None));
        let out = delivered.map(|d| {
            let v = json!({"jsonrpc": "2.0", "method": McpMethod::TasksStatus.as_str(), "params": d.value});
            (serde_json::to_vec(&v), d.new_round)
        });
        match out {
            Ok((Ok(bytes), true)) => Disposition::AskNotify(Bytes::from(bytes)),
            Ok((Ok(bytes), false)) => Disposition::NotifyRewritten(Bytes::from(bytes)),
            Ok((Err(_), _)) => Disposition::Refuse(reencode_failed()),
            Err(r) => Disposition::Refuse(r),
        }
    }

    /// A task replayed on a resumed stream: the request it answered is not
    /// known, but a task's state binds the task id, not the request, so it
    /// is policed and sealed like any other; the stream goes on.
    pub(super) fn replayed_task(
        &self,
        id: Option<&RawValue>,
        result: &RawValue,
        created: bool,
    ) -> Disposition {
        let carrier = if created {
            TaskCarrier::Created
        } else {
            TaskCarrier::Status
        };
        let delivered = self
            .tasks_served()
            .and_then(|()| match created {
                true => self.task_declared(),
                false => Ok(()),
            })
            .and_then(|()| self.police_task(result.get().as_bytes(), carrier, None));
        match delivered.map(|d| response_bytes(id, &d.value)) {
            Ok(Some(bytes)) => Disposition::NotifyRewritten(bytes),
            Ok(None) => Disposition::Refuse(reencode_failed()),
            Err(r) => Disposition::Refuse(r),
        }
    }

    /// The answer to a `tasks/update` or `tasks/cancel`: an empty
    /// acknowledgement (2025-11-25's cancel answers with the task). It
    /// carries no questions: a task asks in `tasks/get` and its status
    /// notifications. A task it shows is policed as one; `None` for a
    /// plain acknowledgement, which goes on as any other result.
    pub(super) fn task_ack(&self, id: Option<&RawValue>, result: &str) -> Option<Disposition> {
        let value = match json::parse_value(result.as_bytes()) {
            Ok(v) => v,
            Err(e) => return Some(Disposition::Refuse(read_failure(&e))),
        };
        let asks = |v: &Value| v.get("inputRequests").is_some();
        if asks(&value) || value.get("task").is_some_and(asks) {
            let refusal = Refusal::new(
                Reason::InvalidTask,
                format!(
                    "{} answered {} with questions; it is acknowledged with an empty result, and a task asks in tasks/get",
                    self.ctx.upstream_name(),
                    self.ctx.request.method
                ),
            )
            .with_data("rule", "protocol".into());
            return Some(Disposition::Refuse(refusal));
        }
        let is_task = value.get("taskId").is_some() && value.get("status").is_some();
        is_task.then(|| self.task_result(id, result, TaskCarrier::Status))
    }

    /// The route serves tasks (`tasks = "police"`).
    fn tasks_served(&self) -> Result<(), Refusal> {
        if self.ctx.route.config.tasks == TaskMode::Refuse {
            return Err(Refusal::new(
                Reason::TasksRefused,
                format!(
                    "{} answered with a task; this endpoint does not serve tasks",
                    self.ctx.upstream_name()
                ),
            ));
        }
        Ok(())
    }

    /// Whether a task may come here at all: the route serves tasks, and a
    /// created one answers a tools/call whose client declared the extension
    /// (a server must not create a task for any other).
    fn task_allowed(&self, carrier: TaskCarrier) -> Result<(), Refusal> {
        self.tasks_served()?;
        let ctx = &self.ctx;
        if carrier != TaskCarrier::Created {
            return Ok(());
        }
        if ctx.request.method != McpMethod::ToolsCall {
            return Err(Refusal::new(
                Reason::InvalidTask,
                format!(
                    "{} answered {} with a task; only tools/call may be",
                    ctx.upstream_name(),
                    ctx.request.method
                ),
            ));
        }
        self.task_declared()
    }

    /// The client declared the Tasks extension on this request.
    fn task_declared(&self) -> Result<(), Refusal> {
        let ctx = &self.ctx;
        if !ctx.request.client.tasks {
            let needed = json!({ "extensions": { TASKS_EXTENSION: {} } });
            return Err(Refusal::new(
                Reason::MissingClientCapability,
                format!(
                    "{} answered with a task, which this request did not declare it can follow",
                    ctx.upstream_name()
                ),
            )
            .with_data("requiredCapabilities", needed)
            .with_data("rule", "client_capability".into()));
        }
        Ok(())
    }

    /// The task rule, then the gateway's state sealed into the task.
    /// `asked_about`: the task id the request named, which the task must be
    /// (another task's questions would be sealed as a fresh operation).
    fn police_task(
        &self,
        bytes: &[u8],
        carrier: TaskCarrier,
        asked_about: Option<&str>,
    ) -> Result<Delivered, Refusal> {
        let settings = &self.ctx.route.upstream.settings;
        let (outcome, report) = inspect_task(&settings.policy, &self.subject(), bytes, carrier);
        let asking = !report.received.is_empty();
        let outcome = outcome.and_then(|c| match asked_about {
            Some(want) if c.task_id != want => Err(Refusal::new(
                Reason::InvalidTask,
                format!(
                    "{} answered a request about one task with another task",
                    self.ctx.upstream_name()
                ),
            )
            .with_data("rule", "protocol".into())),
            _ => Ok(c),
        });
        let checked = match outcome {
            Ok(c) => c,
            Err(r) => {
                if asking {
                    self.record_task_question(&report, None, Some(&r));
                }
                return Err(r);
            }
        };
        let mut value = checked.value;
        match self.mint_task(&checked.task_id, checked.asks, &report, &mut value) {
            Ok(minted) => {
                if checked.asks {
                    self.record_task_question(&report, Some(&minted), None);
                }
                let before = self.prior(&checked.task_id).map_or(0, |p| p.round);
                Ok(Delivered {
                    value,
                    new_round: minted.round > before,
                })
            }
            Err(r) => {
                if asking {
                    self.record_task_question(&report, None, Some(&r));
                }
                Err(r)
            }
        }
    }

    /// The state the request brought back for this task, if any.
    fn prior(&self, task_id: &str) -> Option<&SealedState> {
        self.ctx
            .task
            .as_ref()
            .map(|t| &t.prior)
            .filter(|p| p.target.as_deref() == Some(task_id))
    }

    /// Seal the task's state: its upstream's own, the caller, the task, and
    /// the questions outstanding (a new round when any is new).
    fn mint_task(
        &self,
        task_id: &str,
        asks: bool,
        report: &Report,
        value: &mut Value,
    ) -> Result<Minted, Refusal> {
        let ctx = &self.ctx;
        let prior = self.prior(task_id);
        let new_questions = asks
            && report.asked.iter().any(|(key, _)| {
                prior.is_none_or(|p| !p.asked.iter().any(|(asked, _)| asked == key))
            });
        let binding = Binding {
            method: McpMethod::TasksUpdate,
            target: Some(task_id),
            ..ctx.binding()
        };
        let operation = task_operation(&binding, task_id);
        let input = MintInput {
            binding: &binding,
            digest: &task_digest(task_id),
            prior,
            operation: Some(&operation),
            answer_bytes: 0,
            upstream_state: report.request_state.clone(),
            asked: report.asked.clone(),
            asks: new_questions,
        };
        ctx.gateway.mrtr.mint(input, value)
    }

    /// Metrics and the provenance events of a task's questions (names only).
    fn record_task_question(
        &self,
        report: &Report,
        minted: Option<&Minted>,
        refused: Option<&Refusal>,
    ) {
        let ctx = &self.ctx;
        let route = &ctx.route.upstream.settings;
        ctx.gateway.metrics.record_input_required(
            &route.id,
            ctx.request.generation(),
            refused.is_none(),
            &report.verdicts,
        );
        let sink = &ctx.gateway.audit;
        if !sink.enabled() {
            return;
        }
        let prior = ctx.task.as_ref().map(|t| &t.prior);
        let at = match (minted, prior) {
            (Some(m), _) => ctx.audit_context().with_operation(&m.operation, m.round),
            (None, Some(p)) => ctx
                .audit_context()
                .with_operation(&p.operation, p.round + 1),
            (None, None) => ctx.audit_context().with_operation(&new_operation_id(), 1),
        };
        sink.emit(&at, AuditEvent::received(report));
        for e in AuditEvent::verdicts(report) {
            sink.emit(&at, e);
        }
        match refused {
            None => sink.emit(&at, AuditEvent::delivered(report)),
            Some(r) => {
                sink.emit(&at, AuditEvent::refused(r));
                let outcome = OperationOutcome::from_reason(r.reason);
                let rounds = at.round.unwrap_or(1);
                let end = AuditEvent::operation_end(
                    outcome,
                    rounds,
                    ctx.started.elapsed(),
                    Some(r.reason),
                );
                sink.emit(&at, end);
            }
        }
    }
}
