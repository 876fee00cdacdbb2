//! Rule: a task of the Tasks extension (SEP-2663), wherever it travels: the
//! task-creating result of a tools/call (`resultType: "task"`), a `tasks/get`
//! result, a `notifications/tasks/status` notification. A task waiting for
//! input carries `inputRequests` of exactly the MRTR shape, so its questions
//! get exactly the question policy (capabilities, limits, secrets, URLs,
//! text, injection); its `statusMessage` is text a person or model reads;
//! a completed task's `result` is the call's result and gets the rules of
//! one. A task is not a higher-trust channel.

use serde_json::Value;

use super::Rule;
use super::{Checked, Run};
use crate::model::{McpMethod, Reason};
use crate::policy::injection::TextContext;

/// The statuses a task can be in.
const STATUSES: &[&str] = &[
    "working",
    "input_required",
    "completed",
    "failed",
    "cancelled",
];

/// The longest task id the gateway passes (ids are handles, not text).
const MAX_TASK_ID_BYTES: usize = 256;

/// Where a task was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskCarrier {
    /// `resultType: "task"` answering the request: the task is created.
    Created,
    /// A `tasks/get` result, or a `notifications/tasks/status`.
    Status,
}

/// A task that passed: what the response phase seals and delivers.
#[derive(Debug)]
pub struct CheckedTask {
    pub value: Value,
    pub task_id: String,
    /// It carries questions (`inputRequests`).
    pub asks: bool,
}

impl Run<'_> {
    pub(super) fn task(&mut self, bytes: &[u8], carrier: TaskCarrier) -> Checked<CheckedTask> {
        if bytes.len() > self.policy.limits.max_result_bytes {
            self.limit("max_result_bytes", None, None, "a task")?;
        }
        let mut value = self.parse(bytes, "task")?;
        let Some(obj) = value.as_object_mut() else {
            return Err(self.bad_task("a task is an object"));
        };
        let task_id = match obj.get("taskId") {
            Some(Value::String(id))
                if !id.is_empty()
                    && id.len() <= MAX_TASK_ID_BYTES
                    && !id.chars().any(char::is_control) =>
            {
                id.clone()
            }
            _ => {
                return Err(self.bad_task(format!(
                    "a task needs a taskId of 1 to {MAX_TASK_ID_BYTES} printable bytes"
                )))
            }
        };
        let status = obj.get("status").and_then(Value::as_str);
        let Some(status) = status.filter(|s| STATUSES.contains(s)) else {
            return Err(self.bad_task(
                "a task's status is one of working, input_required, completed, failed, cancelled",
            ));
        };
        let asks = obj.contains_key("inputRequests");
        if asks && (carrier == TaskCarrier::Created || status != "input_required") {
            return Err(self.bad_task(
                "inputRequests belong to a task in input_required, and never to the result that creates it",
            ));
        }
        self.check_request_state(obj)?;
        if let Some(requests) = obj.get("inputRequests").and_then(Value::as_object) {
            self.report.received = super::shape::shapes(requests);
        }
        let questions = if asks { self.check_shape(obj)? } else { None };
        if let Some(mut requests) = questions {
            self.check_capabilities(&requests)?;
            for (key, request) in requests.iter_mut() {
                self.check_input_request(key, request)?;
            }
            obj.insert("inputRequests".into(), Value::Object(requests));
        }
        let max = self.policy.limits.max_message_chars;
        let slot = obj.get_mut("statusMessage");
        self.clean_in("task", None, "statusMessage", slot, max, TextContext::Form)?;
        if let Some(result) = obj.get_mut("result") {
            self.task_result(result)?;
        }
        self.strip_namespace(&mut value);
        if let (true, Some(obj)) = (asks, value.as_object_mut()) {
            self.annotate(obj);
        }
        self.check_meta_server_info(&mut value)?;
        Ok(CheckedTask {
            value,
            task_id,
            asks,
        })
    }

    /// A completed task's result is the call's result: the rules of one.
    /// It is the call's final answer, so it asks nothing: a result that is
    /// itself a question (`input_required`) or another task would reach a
    /// client that surfaces it as the call's outcome without the question
    /// policy.
    fn task_result(&mut self, result: &mut Value) -> Checked<()> {
        let Some(obj) = result.as_object_mut() else {
            return Err(self.bad_task("a completed task's result is an object"));
        };
        let final_type = match obj.get("resultType") {
            None => true,
            Some(t) => t == "complete",
        };
        if !final_type || obj.contains_key("inputRequests") {
            return Err(self.bad_task(
                "a completed task's result is the call's final result; it cannot ask again or be another task",
            ));
        }
        // The rules for data a server hands back, as the call's own result
        // would get them (its text, links, the gateway's namespace).
        self.content(McpMethod::ToolsCall, result).map(drop)
    }

    fn bad_task(&mut self, message: impl Into<String>) -> crate::model::Refusal {
        self.invalid(
            Reason::InvalidTask,
            Rule::Protocol,
            None,
            None,
            message.into(),
        )
    }
}
