//! A complete result read whole, and a response replayed on a resumed
//! 2025-11-25 stream (`GET` with `Last-Event-ID`). A replay answers a
//! request this exchange never saw, so the result is recognised by its
//! shape ([`Shape`]) and gets every check any shape it matches would get in
//! its own exchange: a task goes to the task inspection, a question to the
//! question policy (and is never delivered: no state can be sealed for a
//! request nobody knows), anything else gets the rules for data where it
//! carries a tool's, a resource's or a prompt's content, and is read whole,
//! like every list answer ([`Exchange::whole`]): the server description
//! rules, the listing rules and the permission filter for every list member
//! present, and the `_meta` server identity rules.

use serde_json::value::RawValue;
use serde_json::Value;

use super::disposition::Disposition;
use super::exchange::{read_failure, Exchange};
use crate::json;
use crate::model::{McpMethod, Reason, Refusal};
use crate::policy::inspect::{inspect_content, inspect_result, inspect_whole_result, Subject};

/// What a result is, by its members, when the request it answers is not
/// known (its keys decoded: an escaped `"\u0074askId"` is `taskId`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// A task of the Tasks extension: `resultType: "task"`, `taskId` with
    /// `status`, or a `task` object holding them.
    Task,
    /// `resultType: "input_required"`: a question (MRTR).
    Question,
    /// Anything else: read whole.
    Complete,
}

impl Shape {
    pub(super) fn of(result: &Value) -> Shape {
        let is_task = |v: &Value| v.get("taskId").is_some() && v.get("status").is_some();
        match result.get("resultType").and_then(Value::as_str) {
            Some("task") => Shape::Task,
            _ if is_task(result) || result.get("task").is_some_and(is_task) => Shape::Task,
            Some("input_required") => Shape::Question,
            _ => Shape::Complete,
        }
    }
}

impl Exchange {
    /// The result of a response replayed on a resumed stream. A refusal
    /// answers the replayed id in its place and the stream goes on (the
    /// client's request gets its answer; it may resume after it).
    pub(super) fn replayed(&self, id: Option<&RawValue>, result: &RawValue) -> Disposition {
        let mut value = match json::parse_value(result.get().as_bytes()) {
            Ok(v) => v,
            Err(e) => return self.replay_refused(id, read_failure(&e)),
        };
        let disposition = match Shape::of(&value) {
            // A task's state binds its task id, not the request: policed
            // and sealed as in its own exchange.
            Shape::Task if value.get("taskId").is_some() => {
                let created = value.get("resultType").and_then(Value::as_str) == Some("task");
                self.replayed_task(id, result, created)
            }
            // 2025-11-25's `{"task": {…}}` shape: not bound here, refused.
            Shape::Task => Disposition::Refuse(
                Refusal::new(
                    Reason::UpstreamProtocolViolation,
                    "the upstream replayed a task on a resumed stream; the gateway cannot tell which request it answers",
                )
                .with_data("messageKind", "task".into()),
            ),
            Shape::Question => Disposition::Refuse(self.replayed_question(result)),
            Shape::Complete => match self.replayed_data(&mut value) {
                Ok(rewritten) => self.whole_rewritten(id, &mut value, rewritten, Disposition::Notify),
                Err(r) => Disposition::Refuse(r),
            },
        };
        match disposition {
            Disposition::Refuse(r) => self.replay_refused(id, r),
            other => other,
        }
    }

    /// A replayed question gets the question policy (its verdicts counted
    /// and audited; a rule it breaks is the reason), and is refused even
    /// when it passes: the gateway's `requestState` binds a question to
    /// the request it answers, which a replay does not name.
    fn replayed_question(&self, result: &RawValue) -> Refusal {
        let route = &self.ctx.route.upstream.settings;
        // The three methods that may ask share one question policy.
        let subject = Subject {
            method: McpMethod::ToolsCall,
            ..self.subject()
        };
        let (outcome, report) = inspect_result(&route.policy, &subject, result.get().as_bytes());
        let refusal = match outcome {
            Err(r) => r,
            Ok(_) => Refusal::new(
                Reason::ReplayedQuestion,
                "the upstream replayed a question on a resumed stream; it cannot be bound to the request it answers, so it is not delivered: retry the request",
            ),
        };
        let generation = self.ctx.request.generation();
        let metrics = &self.ctx.gateway.metrics;
        metrics.record_input_required(&route.id, generation, false, &report.verdicts);
        self.audit_question(&report, None, Some(&refusal));
        refusal
    }

    /// The rules for data a server hands back, for a replayed result that
    /// carries any (a tool's `content`, a resource's `contents`, a
    /// prompt's `messages`, completions) as in that request's own exchange:
    /// whether they changed it.
    fn replayed_data(&self, value: &mut Value) -> Result<bool, Refusal> {
        let carries = |member: &str| value.get(member).is_some();
        let method = if carries("messages") {
            McpMethod::PromptsGet
        } else if carries("completion") {
            McpMethod::CompletionComplete
        } else if ["content", "structuredContent", "contents"]
            .into_iter()
            .any(carries)
        {
            McpMethod::ToolsCall
        } else {
            return Ok(false);
        };
        let policy = &self.ctx.route.upstream.settings.policy;
        let (outcome, report) = inspect_content(policy, &self.subject(), method, value);
        self.record_text(&report);
        outcome
    }

    fn replay_refused(&self, id: Option<&RawValue>, refusal: Refusal) -> Disposition {
        let id = id.map(RawValue::get);
        let message = json::error_body(id, &refusal, Some(self.ctx.upstream_name()));
        Disposition::ReplayRefused { message, refusal }
    }

    /// A complete result read whole: every list member present keeps only
    /// what the caller may use, then the whole result gets the text rules
    /// (`policy::inspect::whole`), then its items are compared with the
    /// pins (`pins.rs`). `unchanged` is what to deliver when none of them
    /// changed it.
    pub(super) fn whole(
        &self,
        id: Option<&RawValue>,
        value: &mut Value,
        unchanged: Disposition,
    ) -> Disposition {
        self.whole_rewritten(id, value, false, unchanged)
    }

    /// [`Exchange::whole`] of a value other rules already `rewritten`.
    pub(super) fn whole_rewritten(
        &self,
        id: Option<&RawValue>,
        value: &mut Value,
        rewritten: bool,
        unchanged: Disposition,
    ) -> Disposition {
        let permissions = &self.ctx.route.config.permissions;
        let principal = &self.ctx.principal;
        let prefix = self.ctx.route.prefix();
        let mut filtered = false;
        for method in McpMethod::KNOWN.iter().filter(|m| m.list().is_some()) {
            filtered |= permissions.filter_list(principal, *method, value, prefix);
        }
        let settings = &self.ctx.route.upstream.settings;
        let (outcome, report) = inspect_whole_result(&settings.policy, &self.subject(), value);
        self.record_text(&report);
        let cleaned = match outcome {
            Ok(cleaned) => cleaned,
            Err(r) => return Disposition::Refuse(r),
        };
        // What passed is compared with the pins (`pins.rs`).
        self.pinned(id, value, rewritten || filtered || cleaned, unchanged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Shape {
        Shape::of(&json::parse_value(text.as_bytes()).unwrap())
    }

    #[test]
    fn shapes_are_read_by_members_in_any_spelling() {
        for task in [
            r#"{"resultType":"task","taskId":"t"}"#,
            r#"{"taskId":"t","status":"working"}"#,
            r#"{"\u0074askId":"t","st\u0061tus":"input_required","resultType":"input_required"}"#,
            r#"{"task":{"taskId":"t","status":"working"}}"#,
        ] {
            assert_eq!(shape(task), Shape::Task, "{task}");
        }
        for question in [
            r#"{"resultType":"input_required","requestState":"s"}"#,
            r#"{"result\u0054ype":"input_required"}"#,
            r#"{"resultType":"input_required","taskId":"t"}"#,
        ] {
            assert_eq!(shape(question), Shape::Question, "{question}");
        }
        for complete in [
            r#"{"resultType":"complete","tools":[]}"#,
            r#"{"content":[],"status":"ok"}"#,
            r#"{"task":"t","taskId":1}"#,
            r#"[]"#,
        ] {
            assert_eq!(shape(complete), Shape::Complete, "{complete}");
        }
    }
}
