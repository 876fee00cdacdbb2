//! One upstream message, judged: every JSON-RPC message the upstream sends
//! back, whether a JSON body or one event of a stream, passes through
//! [`Exchange::inspect`] exactly once, before the client sees it. Only the
//! response to the client's request is delivered, and on a stream only the
//! notifications the protocol lets a server send there, their text checked.
//! Everything else (a server-to-client request, a notification or batch in
//! the response's place, an answer to another id) is refused.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::super::ctx::RequestCtx;
use super::super::request::Transport;
use super::disposition::Disposition;
use crate::audit::AuditEvent;
use crate::json::strict::{Failure, Key, WithMember};
use crate::json::{self, same_id, Message, MessageError, MessageKind};
use crate::model::{Generation, McpMethod, Reason, Refusal};
use crate::policy::inspect::{inspect_notification, Report, Subject, TaskCarrier};
use serde::de::IgnoredAny;

mod catalogue;
mod content;
mod secrets;

/// The response phase's view of the exchange: the request context and
/// where the message arrived.
pub struct Exchange {
    pub ctx: Box<RequestCtx>,
    pub(crate) max_message_bytes: usize,
    /// Requests pushed to the client on this stream so far (2025-11-25).
    pub(super) pushes: u32,
    /// The operation the pushes of this stream share, once one is pushed.
    pub(super) operation: Option<String>,
    /// The gateway's own answers to this stream's refused pushes, posted
    /// to the upstream one after another in the order they were decided.
    pub(super) answers: std::sync::OnceLock<tokio::sync::mpsc::Sender<Bytes>>,
}

/// Which rules judge a result the upstream sent back: the response
/// phase's one dispatch (`portcullis explain` follows it too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultRoute {
    /// `input_required`: the question policy, then sealed for the next round.
    Question,
    /// A list the server offers the model: permissions and the text rules.
    Listing,
    /// A task of the Tasks extension (created, or its status).
    Task(TaskCarrier),
    /// The acknowledgement of `tasks/update` or `tasks/cancel` (else content).
    TaskAck,
    /// A list of tasks (2025-11-25's `tasks/list`): every task in it that
    /// asks gets the task inspection, as a `tasks/get` of it would.
    TaskList,
    /// The server's description of itself: the text rules.
    ServerDescription,
    /// Anything else a server hands back: the rules for data.
    Content,
}

/// The rules a result of the request `method` with this `resultType` goes to.
/// A question or a task is one whatever was asked: a list answered with a
/// task carries the task's questions and state, not a list.
pub fn result_route(method: McpMethod, result_type: Option<&str>) -> ResultRoute {
    match result_type {
        Some("input_required") => ResultRoute::Question,
        Some("task") => ResultRoute::Task(TaskCarrier::Created),
        _ if method.catalogue().is_some() => ResultRoute::Listing,
        _ if method == McpMethod::TasksGet => ResultRoute::Task(TaskCarrier::Status),
        _ if matches!(method, McpMethod::TasksUpdate | McpMethod::TasksCancel) => {
            ResultRoute::TaskAck
        }
        _ if method == McpMethod::TasksList => ResultRoute::TaskList,
        _ if method.describes_server() => ResultRoute::ServerDescription,
        _ => ResultRoute::Content,
    }
}

/// A result's text, with its `resultType` when the pass that found it
/// also checked it strictly (`None`: not checked yet).
struct ResultText<'a> {
    text: &'a str,
    result_type: Option<Option<Cow<'a, str>>>,
}

/// Where the message came: a JSON body or one event of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    Body,
    Stream,
}

fn violation(message: impl Into<String>, kind: &str) -> Disposition {
    Disposition::Refuse(
        Refusal::new(Reason::UpstreamProtocolViolation, message)
            .with_data("messageKind", kind.into()),
    )
}

impl Exchange {
    /// The context is boxed: it is moved through every phase's future, and
    /// inline it would be copied (and stored twice) at each of them.
    pub fn new(ctx: impl Into<Box<RequestCtx>>) -> Exchange {
        let ctx = ctx.into();
        let max_message_bytes = ctx.gateway.config.limits.max_response_body_bytes;
        let (pushes, operation) = match &ctx.asked_before {
            Some(asked) => (asked.rounds, Some(asked.operation.clone())),
            None => (0, None),
        };
        Exchange {
            ctx,
            max_message_bytes,
            pushes,
            operation,
            answers: std::sync::OnceLock::new(),
        }
    }

    fn sessions(&self) -> bool {
        self.ctx.request.generation() == Generation::Sessions
    }

    /// A session's stream of server messages (2025-11-25 GET).
    pub(crate) fn listening(&self) -> bool {
        self.ctx.request.transport == Transport::Listen
    }

    /// A stream that may end before a response and be resumed (2025-11-25).
    pub(crate) fn resumable(&self) -> bool {
        self.sessions()
    }

    pub fn subject(&self) -> Subject<'_> {
        let up = &self.ctx.route.upstream.settings;
        Subject {
            method: self.ctx.request.method,
            client: self.ctx.request.client,
            upstream_name: &up.name,
            upstream_host: &up.endpoint_host,
            catalogue: Some(self),
        }
    }

    /// Inspect one JSON-RPC message from the upstream.
    pub fn inspect(&mut self, message: &[u8], carrier: Carrier) -> Disposition {
        let failure = Failure::default();
        if let Some(read) = self.read_in_one_pass(message, &failure) {
            let result = read.member.map(|(result_type, text)| ResultText {
                text,
                result_type: Some(result_type),
            });
            return self.dispatch(&read.message, result, carrier);
        }
        let msg = match Message::parse(message) {
            Ok(m) => m,
            Err(MessageError::Batch) => {
                return violation("the upstream sent a JSON-RPC batch; MCP over Streamable HTTP has one message per body or event", "batch")
            }
            Err(e) if e.is_duplicate() => {
                return Disposition::Refuse(
                    Refusal::new(
                        Reason::DuplicateMember,
                        format!("the upstream's message cannot be read unambiguously: {e}"),
                    )
                    .with_data("rule", "parse".into()),
                )
            }
            Err(e) => {
                return Disposition::Refuse(Refusal::new(
                    Reason::UpstreamBadResponse,
                    format!("the upstream sent something that is not a JSON-RPC message ({e})"),
                ))
            }
        };
        let result = msg.result.map(|r| ResultText {
            text: r.get(),
            result_type: None,
        });
        self.dispatch(&msg, result, carrier)
    }

    /// The message read with its result (a response's, to a request that
    /// is not a list: a list is read whole, once) checked strictly in the
    /// envelope's own pass; `None` when that pass cannot answer as the
    /// envelope's and the result's own would (`json::Read`).
    fn read_in_one_pass<'m>(
        &self,
        message: &'m [u8],
        failure: &'m Failure,
    ) -> Option<json::Read<'m, Option<Cow<'m, str>>>> {
        if self.ctx.request.method.catalogue().is_some() || self.listening() {
            return None;
        }
        Message::parse_reading(message, failure, "result", |_| {
            Some(WithMember::new(failure, "resultType"))
        })
    }

    fn dispatch(
        &mut self,
        msg: &Message<'_>,
        result: Option<ResultText<'_>>,
        carrier: Carrier,
    ) -> Disposition {
        match msg.kind {
            MessageKind::Request if self.sessions() && carrier == Carrier::Stream => {
                self.push(msg)
            }
            MessageKind::Request => violation(
                "the upstream sent a server-to-client request; under protocol 2026-07-28 a server asks for input with an input_required result",
                "request",
            ),
            MessageKind::Notification => self.notification(msg, carrier),
            MessageKind::Response if self.listening() => self.resumed_response(msg),
            MessageKind::Response => self.response(msg, result),
        }
    }

    fn notification(&mut self, msg: &Message<'_>, carrier: Carrier) -> Disposition {
        let method = McpMethod::parse(msg.method.as_deref().unwrap_or_default());
        let allowed = match self.ctx.request.method {
            _ if self.sessions() => method.is_server_notification(),
            McpMethod::SubscriptionsListen => {
                method.is_server_notification() && !method.is_sessions_only()
            }
            // The Tasks extension sends a task's status on its tasks/get stream.
            McpMethod::TasksGet if method == McpMethod::TasksStatus => true,
            _ => method.is_request_stream_notification() && method != McpMethod::Cancelled,
        };
        if carrier == Carrier::Body {
            return violation(
                "the upstream answered with a notification instead of the response to the request",
                "notification",
            );
        }
        if !allowed {
            return violation(
                format!(
                    "the upstream sent a {} notification, which a server may not send on this stream",
                    if method == McpMethod::Other { "non-MCP" } else { method.as_str() }
                ),
                "notification",
            );
        }
        if method == McpMethod::TasksStatus {
            // A task's status is its params; without them there is no task.
            return match msg.params {
                Some(params) => self.task_notification(params),
                None => Disposition::Refuse(Refusal::new(
                    Reason::InvalidTask,
                    "the upstream sent notifications/tasks/status without a task in its params",
                )),
            };
        }
        let checked = match msg.params {
            None => Disposition::Notify,
            Some(params) => {
                let route = &self.ctx.route.upstream.settings;
                let (outcome, report) = inspect_notification(
                    &route.policy,
                    &self.subject(),
                    method,
                    params.get().as_bytes(),
                );
                self.record_text(&report);
                match outcome {
                    Ok(None) => Disposition::Notify,
                    Ok(Some(params)) => match serde_json::to_vec(&NotificationOut {
                        jsonrpc: "2.0",
                        method: method.as_str(),
                        params: &params,
                    }) {
                        Ok(bytes) => Disposition::NotifyRewritten(Bytes::from(bytes)),
                        Err(_) => Disposition::Refuse(reencode_failed()),
                    },
                    Err(r) => Disposition::Refuse(r),
                }
            }
        };
        // Only an elicitation this gateway showed in this session completes.
        if method == McpMethod::ElicitationComplete {
            return self.elicitation_complete(msg, checked);
        }
        checked
    }

    fn response(&mut self, msg: &Message<'_>, result: Option<ResultText<'_>>) -> Disposition {
        let ours = match (msg.id, self.ctx.id()) {
            (Some(got), Some(want)) => same_id(got.get(), want),
            // An error with a null id answers the request that could not be read.
            (None, _) => msg.error.is_some(),
            (Some(_), None) => false,
        };
        if !ours {
            return violation(
                "the upstream answered with the id of a different request",
                "response",
            );
        }
        if let Some(error) = msg.error {
            if let Err(e) = json::validate(error.get().as_bytes()) {
                return Disposition::Refuse(read_failure(&e));
            }
            self.operation_ended_with_error();
            return self.content_error(msg.id, error);
        }
        match result {
            Some(result) => self.result(msg.id, result),
            None => Disposition::Final,
        }
    }

    /// A result: `input_required` goes to the policy; a server's
    /// description of itself and its lists get the text rules (a list is
    /// also filtered by permissions); everything else passes unchanged.
    fn result(&mut self, id: Option<&RawValue>, read: ResultText<'_>) -> Disposition {
        let result = read.text;
        let bytes = result.as_bytes();
        if let Some(listed) = self.complete_listing(id, bytes) {
            return listed;
        }
        // The common case in one pass (the envelope's, or this one): a valid
        // result and its type. On a failure the two steps run apart, so the
        // refusal is the one they give.
        let checked = read.result_type.map_or_else(
            || json::strict::validate_with_member(result, "resultType"),
            Ok,
        );
        let result_type = match checked {
            Ok(t) => t,
            Err(_) => match checked_in_two_steps(bytes) {
                Ok(t) => t,
                Err(refused) => return refused,
            },
        };
        let method = self.ctx.request.method;
        let route = result_route(method, result_type.as_deref());
        match route {
            ResultRoute::Question => return self.question(id, result),
            ResultRoute::Task(carrier) => return self.task_result(id, result, carrier),
            ResultRoute::TaskList => return self.task_list(id, result),
            ResultRoute::TaskAck => {
                if let Some(d) = self.task_ack(id, result) {
                    return d;
                }
            }
            _ => {}
        }
        self.operation_completed();
        match route {
            ResultRoute::ServerDescription => self.server_description(id, result),
            ResultRoute::Listing => match json::parse_value(result.as_bytes()) {
                Ok(mut value) => self.listing(id, method, &mut value, Disposition::Final),
                Err(e) => Disposition::Refuse(read_failure(&e)),
            },
            _ => self.plain_result(id, result),
        }
    }

    /// Any other result (a tool's result, a resource's contents, a prompt,
    /// completions, …): the rules for data a server hands back
    /// (`policy::inspect::content`, in `exchange/content.rs`).
    fn plain_result(&self, id: Option<&RawValue>, result: &str) -> Disposition {
        self.content_result(id, result)
    }

    /// A complete list result, parsed once for its type, its permissions
    /// and its text, read whole (every list member in it, not only the
    /// method's own). `None` for anything else (another method,
    /// `input_required`, a `resultType` that is not a string, bytes that do
    /// not parse): the general path reads it and gives the refusal.
    fn complete_listing(&mut self, id: Option<&RawValue>, bytes: &[u8]) -> Option<Disposition> {
        let method = self.ctx.request.method;
        method.catalogue()?;
        let mut value = json::parse_value(bytes).ok()?;
        match value.get("resultType") {
            None => {}
            Some(Value::String(t))
                if matches!(result_route(method, Some(t)), ResultRoute::Listing) => {}
            Some(_) => return None,
        }
        self.operation_completed();
        Some(self.listing(id, method, &mut value, Disposition::Final))
    }

    /// The text rules' verdicts: counted, and each decision (not a pass)
    /// written to the audit trail (an item removed from a list names the
    /// item and why, never its text).
    pub(super) fn record_text(&self, report: &Report) {
        let metrics = &self.ctx.gateway.metrics;
        let upstream = &self.ctx.route.upstream.settings.id;
        metrics.record_text_verdicts(upstream, self.ctx.request.generation(), report);
        let sink = &self.ctx.gateway.audit;
        if !sink.enabled() {
            return;
        }
        let mut decided = AuditEvent::verdicts(report).peekable();
        if decided.peek().is_none() {
            return;
        }
        let at = self.ctx.audit_context();
        for event in decided {
            sink.emit(&at, event);
        }
    }

    /// The server's instructions and its name for people go into the
    /// model's context: the text rules apply to them as to a form.
    fn server_description(&self, id: Option<&RawValue>, result: &str) -> Disposition {
        let route = &self.ctx.route.upstream.settings;
        let (outcome, report) = inspect_notification(
            &route.policy,
            &self.subject(),
            self.ctx.request.method,
            result.as_bytes(),
        );
        self.record_text(&report);
        match outcome {
            Ok(None) => Disposition::Final,
            Ok(Some(value)) => match response_bytes(id, &value) {
                Some(bytes) => Disposition::FinalRewritten(bytes),
                None => Disposition::Refuse(reencode_failed()),
            },
            Err(r) => Disposition::Refuse(r),
        }
    }

    /// A response on a resumed session stream replays the answer to an
    /// earlier request, which this exchange did not see: its result is
    /// recognised by its shape and checked as in its own exchange
    /// (`replay.rs`).
    fn resumed_response(&self, msg: &Message<'_>) -> Disposition {
        if !self.ctx.request.resuming {
            return violation(
                "the upstream sent a response on the session's stream of server messages, which only a resumed stream may carry",
                "response",
            );
        }
        let Some(result) = msg.result else {
            return match msg.error.map(|e| json::validate(e.get().as_bytes())) {
                Some(Err(e)) => Disposition::Refuse(read_failure(&e)),
                _ => Disposition::Notify,
            };
        };
        self.replayed(msg.id, result)
    }

    /// A list result keeps only what the caller may use, and its text
    /// gets the text rules: read whole, so a second list member, a server
    /// description or `_meta` identity beside the method's own list is
    /// read too (`Exchange::whole`). `unchanged` is what to deliver when
    /// neither changed it.
    fn listing(
        &self,
        id: Option<&RawValue>,
        method: McpMethod,
        value: &mut Value,
        unchanged: Disposition,
    ) -> Disposition {
        if method.catalogue().is_none() {
            return unchanged;
        }
        self.whole(id, value, unchanged)
    }
}

/// The result's type, then (unless the policy reads it: `input_required`)
/// the result checked strictly.
fn checked_in_two_steps(bytes: &[u8]) -> Result<Option<Cow<'_, str>>, Disposition> {
    let refuse = |e: json::JsonError| Disposition::Refuse(read_failure(&e));
    let result_type = result_type(bytes).map_err(refuse)?;
    if result_type.as_deref() != Some("input_required") {
        json::validate(bytes).map_err(refuse)?;
    }
    Ok(result_type)
}

pub(super) fn read_failure(e: &json::JsonError) -> Refusal {
    let reason = if e.is_duplicate() {
        Reason::DuplicateMember
    } else {
        Reason::UpstreamBadResponse
    };
    Refusal::new(
        reason,
        format!("the upstream's answer cannot be read unambiguously: {e}"),
    )
    .with_data("rule", "parse".into())
}

pub(super) fn reencode_failed() -> Refusal {
    Refusal::new(
        Reason::InternalError,
        "the upstream's answer could not be re-encoded",
    )
}

#[derive(Serialize)]
struct NotificationOut<'a> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a serde_json::Value,
}

#[derive(Serialize)]
struct ResponseOut<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    result: &'a serde_json::Value,
}

pub(super) fn response_bytes(id: Option<&RawValue>, result: &serde_json::Value) -> Option<Bytes> {
    let id = id.unwrap_or(json::null_id());
    serde_json::to_vec(&ResponseOut {
        jsonrpc: "2.0",
        id,
        result,
    })
    .ok()
    .map(Bytes::from)
}

/// `resultType` of a result. The name is decoded and a second
/// `resultType` refused; the rest is skipped here and checked strictly by
/// whoever reads it next (the policy for `input_required`, [`json::validate`]
/// for anything else).
fn result_type(result: &[u8]) -> Result<Option<Cow<'_, str>>, json::JsonError> {
    if result.first().is_none_or(|b| *b != b'{') {
        return Ok(None);
    }
    let failure = Failure::default();
    json::strict::run_envelope(result, &failure, ResultHead(&failure))
}

struct ResultHead<'f>(&'f Failure);

impl<'de> DeserializeSeed<'de> for ResultHead<'_> {
    type Value = Option<Cow<'de, str>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ResultHead<'_> {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a result object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut result_type = None;
        while let Some(Key(key)) = map.next_key()? {
            if key == "resultType" {
                if result_type.is_some() {
                    return Err(self.0.duplicate(&key));
                }
                result_type = Some(map.next_value::<Key<'de>>()?.0);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(result_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list answered with a task (its questions, its state) was read as a
    /// list and delivered with the task uninspected (fuzz: upstream_message).
    #[test]
    fn a_question_or_a_task_is_one_whatever_was_asked() {
        use McpMethod::*;
        for method in [
            ToolsList,
            PromptsList,
            ResourcesList,
            ResourcesTemplatesList,
            ToolsCall,
        ] {
            assert!(matches!(
                result_route(method, Some("task")),
                ResultRoute::Task(TaskCarrier::Created)
            ));
            assert!(matches!(
                result_route(method, Some("input_required")),
                ResultRoute::Question
            ));
        }
        assert!(matches!(
            result_route(ToolsList, Some("complete")),
            ResultRoute::Listing
        ));
        assert!(matches!(
            result_route(ToolsList, None),
            ResultRoute::Listing
        ));
    }

    #[test]
    fn result_type_is_read_in_any_spelling_once() {
        assert_eq!(
            result_type(br#"{"content":[],"resultType":"complete"}"#)
                .unwrap()
                .as_deref(),
            Some("complete")
        );
        assert_eq!(result_type(br#"{"content":[]}"#).unwrap(), None);
        assert_eq!(
            result_type(br#"{"result\u0054ype":"input_required"}"#)
                .unwrap()
                .as_deref(),
            Some("input_required")
        );
        assert!(
            result_type(br#"{"resultType":"complete","result\u0054ype":"input_required"}"#)
                .unwrap_err()
                .is_duplicate()
        );
    }
}
