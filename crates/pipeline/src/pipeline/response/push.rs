//! A request the upstream pushes to the client on a 2025-11-25 stream
//! (`elicitation/create`, `sampling/createMessage`, `roots/list`, `ping`):
//! held to exactly the policy an MRTR question is held to, then delivered
//! under the gateway's sealed id. A refused push never reaches the client:
//! the gateway answers the upstream itself with a JSON-RPC error naming
//! the reason, so the upstream's tool call ends and neither side waits.
//! A push nobody answers within `push_timeout` is answered the same way.
//! A pushed question spends the principal's question budget
//! (`input_required_rounds`) exactly as an MRTR question does: one budget
//! for every question. The budget is asynchronous (it may live in Redis),
//! so a question that passed the policy is handed back as
//! [`Disposition::PushPending`]; the stream awaits the budget's gate and
//! then [`Exchange::admit_push`] delivers it, or withholds it with the
//! rate-limit refusal answered to the upstream.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::disposition::{Disposition, PendingPush};
use super::exchange::Exchange;
use super::in_session::ShownPush;
use crate::audit::{AuditEvent, OperationOutcome};
use crate::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use crate::json::{error_answer, Message};
use crate::model::{McpMethod, Reason, Refusal};
use crate::mrtr::seal::new_operation_id;
use crate::pipeline::answer::PUSH_KEY;
use crate::policy::inspect::{inspect_request, Report};
use crate::sessions::PushState;

/// Answers to refused pushes a stream may have waiting to be posted.
const ANSWER_QUEUE: usize = 64;

#[derive(Serialize)]
struct PushOut<'a> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
}

impl Exchange {
    pub(super) fn push(&mut self, msg: &Message<'_>) -> Disposition {
        let name = msg.method.as_deref().unwrap_or_default();
        let method = McpMethod::parse(name);
        let Some(id) = msg.id else {
            return Disposition::Refuse(Refusal::new(
                Reason::UpstreamBadResponse,
                "a request without an id",
            ));
        };
        if !method.is_input_request() && method != McpMethod::Ping {
            return Disposition::Refuse(
                Refusal::new(
                    Reason::UpstreamProtocolViolation,
                    "the upstream pushed a request a server may not send to a client",
                )
                .with_data("messageKind", "request".into()),
            );
        }
        self.pushes += 1;
        let round = self.pushes;
        let operation = self.operation.get_or_insert_with(new_operation_id).clone();
        self.ctx.trace.operation(&operation, round);
        let (outcome, report) = self.police(method, name, msg);
        match outcome {
            Ok(params) if method != McpMethod::Ping && self.questions_budgeted() => {
                Disposition::PushPending(Box::new(PendingPush {
                    id: id.to_owned(),
                    method,
                    name: name.to_owned(),
                    params,
                    report,
                    operation,
                    round,
                }))
            }
            Ok(params) => self.deliver(id, method, name, params, report, operation, round),
            Err(refusal) => {
                self.withhold(id, &refusal, &report, &operation, round);
                Disposition::Withheld
            }
        }
    }

    /// A pushed question once its budget's gate resolved: delivered with
    /// its token, else withheld (the upstream gets the refusal, the
    /// verdict is recorded).
    pub fn admit_push(&self, push: Box<PendingPush>, budget: Result<(), Refusal>) -> Disposition {
        let PendingPush {
            id,
            method,
            name,
            params,
            report,
            operation,
            round,
        } = *push;
        match budget {
            Ok(()) => self.deliver(&id, method, &name, params, report, operation, round),
            Err(refusal) => {
                self.withhold(&id, &refusal, &report, &operation, round);
                Disposition::Withheld
            }
        }
    }

    /// The limits of the call, then the upstream's policy.
    fn police(
        &self,
        method: McpMethod,
        name: &str,
        msg: &Message<'_>,
    ) -> (Result<Option<Value>, Refusal>, Report) {
        let settings = &self.ctx.gateway.config.state;
        if self.pushes > settings.max_rounds {
            let message = format!("the server has asked {} rounds of questions in one call; the gateway stops it here", settings.max_rounds);
            let r = Refusal::new(Reason::RoundLimitExceeded, message)
                .with_data("limit", settings.max_rounds.into());
            return (Err(r), Report::default());
        }
        if self.ctx.started.elapsed() > settings.max_operation_time {
            let t = humantime::format_duration(settings.max_operation_time);
            let message = format!("the call has taken longer than {t}; the gateway stops it here");
            return (
                Err(Refusal::new(Reason::OperationExpired, message)),
                Report::default(),
            );
        }
        if method == McpMethod::Ping {
            let params = msg.params.map(|_| Value::Object(Default::default()));
            return (Ok(params), Report::default());
        }
        let policy = &self.ctx.route.upstream.settings.policy;
        let params = msg.params.map(|p| p.get().as_bytes());
        let (outcome, report) = inspect_request(policy, &self.subject(), PUSH_KEY, name, params);
        (outcome.map(Some), report)
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &self,
        id: &RawValue,
        method: McpMethod,
        name: &str,
        params: Option<Value>,
        report: Report,
        operation: String,
        round: u32,
    ) -> Disposition {
        let ctx = &self.ctx;
        let gateway = &ctx.gateway;
        let timeout = gateway.config.state.push_timeout;
        let push = PushState {
            v: 1,
            id: id.get().to_owned(),
            session: ctx
                .session
                .as_ref()
                .map(|s| s.state.nonce.clone())
                .unwrap_or_default(),
            principal: ctx.binding().principal_key(),
            upstream: ctx.route.upstream.settings.id.clone(),
            method: name.to_owned(),
            asked: report.asked.first().map(|(_, a)| a.clone()),
            operation,
            round,
            started_ms: gateway.clock.now_millis(),
            expires: gateway.clock.now_secs().saturating_add(timeout.as_secs()),
            call: None,
        };
        let Some(token) = push.seal(&gateway.config.state.keys) else {
            return Disposition::Refuse(Refusal::new(
                Reason::InternalError,
                "the gateway could not seal a pushed request's id",
            ));
        };
        if method != McpMethod::Ping {
            self.record(&report, true, &push.operation, round, None);
        }
        let shown = ShownPush::of(&push, params.as_ref());
        self.expire_later(push, id, timeout);
        match serde_json::to_vec(&PushOut {
            jsonrpc: "2.0",
            id: &token,
            method: name,
            params: params.as_ref(),
        }) {
            Ok(bytes) => self.push_in_session(Bytes::from(bytes), id, shown),
            Err(_) => Disposition::Refuse(Refusal::new(
                Reason::InternalError,
                "a pushed request could not be re-encoded",
            )),
        }
    }

    /// The client never sees a refused push; the upstream gets the reason.
    fn withhold(
        &self,
        id: &RawValue,
        refusal: &Refusal,
        report: &Report,
        operation: &str,
        round: u32,
    ) {
        tracing::info!(
            request_id = %self.ctx.request_id,
            reason = refusal.reason.as_str(),
            upstream = %self.ctx.route.upstream.settings.id,
            "pushed request refused; the gateway answered the upstream"
        );
        self.record(report, false, operation, round, Some(refusal));
        self.answer_upstream(error_answer(id, refusal, None));
    }

    /// Metrics and audit events of one pushed question (names only).
    fn record(
        &self,
        report: &Report,
        delivered: bool,
        operation: &str,
        round: u32,
        refused: Option<&Refusal>,
    ) {
        let ctx = &self.ctx;
        let route = &ctx.route.upstream.settings;
        ctx.gateway.metrics.record_input_required(
            &route.id,
            ctx.request.generation(),
            delivered,
            &report.verdicts,
        );
        let sink = &ctx.gateway.audit;
        if !sink.enabled() {
            return;
        }
        let at = ctx.audit_context().with_operation(operation, round);
        sink.emit(&at, AuditEvent::received(report));
        for e in AuditEvent::verdicts(report) {
            sink.emit(&at, e);
        }
        match refused {
            None => sink.emit(&at, AuditEvent::delivered(report)),
            Some(r) => {
                sink.emit(&at, AuditEvent::refused(r));
                let outcome = OperationOutcome::from_reason(r.reason);
                sink.emit(
                    &at,
                    AuditEvent::operation_end(
                        outcome,
                        round,
                        ctx.started.elapsed(),
                        Some(r.reason),
                    ),
                );
            }
        }
    }

    /// After `timeout`, a push nobody answered is answered with an error.
    fn expire_later(&self, push: PushState, id: &RawValue, timeout: Duration) {
        let gateway = self.ctx.gateway.clone();
        let refusal = Refusal::new(
            Reason::OperationExpired,
            "the client did not answer within the gateway's push_timeout",
        );
        let body = error_answer(id, &refusal, None);
        let send = self.upstream_sender();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let first = gateway
                .mrtr
                .replay
                .consume_once(&push.redemption_id(), push.expires.saturating_add(60))
                .await;
            if matches!(first, Ok(true)) {
                send.send(body).await;
            }
        });
    }

    /// Queues an answer to a refused push; one task per stream posts them
    /// in order, so the upstream learns of its refusals as they were
    /// decided. An upstream that keeps pushing past a full queue loses
    /// the surplus answers (logged): it is flooding, not waiting.
    fn answer_upstream(&self, body: Bytes) {
        let queue = self.answers.get_or_init(|| {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(ANSWER_QUEUE);
            let send = self.upstream_sender();
            tokio::spawn(async move {
                while let Some(body) = rx.recv().await {
                    send.send(body).await;
                }
            });
            tx
        });
        if queue.try_send(body).is_err() {
            tracing::warn!(
                request_id = %self.ctx.request_id,
                upstream = %self.ctx.route.upstream.settings.id,
                "the upstream's refused pushes outran the gateway's answers; this answer is not sent"
            );
        }
    }

    /// What posting a message to the upstream, in this session, needs.
    pub(super) fn upstream_sender(&self) -> UpstreamSender {
        let ctx = &self.ctx;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if let Some(s) = &ctx.session {
            if let Some(v) = s
                .state
                .upstream_session
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                headers.insert(MCP_SESSION_ID.clone(), v);
            }
            if let Ok(v) = HeaderValue::from_str(&s.state.version) {
                headers.insert(MCP_PROTOCOL_VERSION.clone(), v);
            }
        }
        UpstreamSender {
            route: ctx.route.clone(),
            headers,
            principal: ctx.principal.clone(),
            subject: ctx.subject.clone(),
        }
    }
}

/// Posts the gateway's own answer to an upstream.
pub(super) struct UpstreamSender {
    route: std::sync::Arc<crate::pipeline::route::Route>,
    headers: HeaderMap,
    /// For the upstream's credential (`[upstream.credential]`).
    principal: crate::identify::Principal,
    subject: Option<crate::credential::SubjectToken>,
}

impl UpstreamSender {
    pub(super) async fn send(&self, body: Bytes) {
        let upstream = &self.route.upstream;
        let mut headers = self.headers.clone();
        if let Some(credential) = &upstream.settings.credential {
            match credential
                .header(&self.principal, self.subject.as_ref())
                .await
            {
                Ok((name, value)) => {
                    headers.insert(name, value);
                }
                Err(e) => {
                    tracing::warn!(upstream = %upstream.settings.id, error = %e, "no credential for the upstream; the gateway's answer to its pushed request is not sent");
                    return;
                }
            }
        }
        match upstream.client.send(Method::POST, headers, body).await {
            Ok(resp) if resp.status().is_success() => {}
            Ok(resp) => {
                tracing::warn!(upstream = %upstream.settings.id, status = resp.status().as_u16(), "the upstream refused the gateway's answer to its pushed request")
            }
            Err(r) => {
                tracing::warn!(upstream = %upstream.settings.id, reason = r.reason.as_str(), "the gateway could not answer the upstream's pushed request")
            }
        }
    }
}
