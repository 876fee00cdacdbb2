//! Phase: check the answer. Every JSON-RPC message the upstream sends back,
//! whether a JSON body or one event of a stream, passes through
//! [`ResponseContext::inspect`] exactly once, before the client sees it.
//! A JSON body is held whole (up to the inspection limit); a stream is
//! inspected and forwarded event by event as each one completes.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::value::RawValue;
use tokio::time::Sleep;

use super::body::ProxyBody;
use super::sse::{event_for, SseError, SseFramer};
use crate::config::UpstreamRoute;
use crate::headers::{client_response_headers, X_ACCEL_BUFFERING};
use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::record::Metrics;
use crate::audit::{AuditContext, AuditEvent, AuditSink, OperationOutcome};
use crate::config::RouteConfig;
use crate::identify::Principal;
use crate::jsonrpc::{describe_json_error, error_body, same_id, Message, MessageKind};
use crate::mrtr::retry::{mint, Binding, MintInput, MrtrShared};
use crate::mrtr::seal::SealedState;
use crate::policy::inspect::{inspect, ClientCaps, Decision, Report, Subject};
use crate::refusal::{Reason, Refusal};
use crate::throttle::{Scope, Throttle};

/// What the response phase knows of the request it is checking answers to.
pub struct ResponseContext {
    pub request_id: Option<Box<RawValue>>,
    pub request_kind: MessageKind,
    pub method: String,
    pub client: ClientCaps,
    pub upstream: Arc<UpstreamRoute>,
    pub max_message_bytes: usize,
    pub metrics: Option<Arc<Metrics>>,
    /// The MRTR side of the exchange; `None` only in benchmarks.
    pub mrtr: Option<MrtrExchange>,
    /// The route, for filtering list results by permission.
    pub route: Option<Arc<RouteConfig>>,
    pub principal: Principal,
    /// The limit on `input_required` rounds a principal may receive.
    pub rounds: Option<RoundGate>,
    /// Where the provenance events go.
    pub audit: Option<AuditSink>,
    /// The request's X-Request-Id, for its audit events.
    pub trace_id: String,
}

/// Checks the input-required-rounds limit before a question is delivered.
#[derive(Clone)]
pub struct RoundGate {
    pub throttle: Arc<Throttle>,
    pub principal: String,
}

impl RoundGate {
    async fn pass(self) -> Result<(), Refusal> {
        match self
            .throttle
            .check_parts(Scope::InputRequiredRounds, &[&self.principal])
            .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(limited)) => Err(Refusal::new(
                Reason::RateLimited,
                format!(
                    "the server asked this caller too many questions; retry after {} s",
                    limited.retry_after_secs()
                ),
            )
            .with_data("scope", Scope::InputRequiredRounds.as_str().into())
            .with_data("retryAfterSeconds", limited.retry_after_secs().into())),
            Err(_) => Err(Refusal::new(
                Reason::RateLimiterUnavailable,
                "the rate limiter is unavailable; try again",
            )),
        }
    }
}

/// What minting the next round's state needs to know of the request.
pub struct MrtrExchange {
    pub shared: Arc<MrtrShared>,
    pub binding: Binding,
    /// The body as forwarded (its params give the digest).
    pub request_body: Bytes,
    /// The state the request brought back, when it was a retry, and how
    /// the operation ends if this answer is final.
    pub prior: Option<(SealedState, OperationOutcome)>,
    pub answer_bytes: u64,
}

/// The decision on one message from the upstream.
#[derive(Debug)]
pub enum Verdict {
    /// Forward unchanged. `is_final` marks the response to the request, after
    /// which nothing more is read from the upstream.
    Forward { is_final: bool },
    /// Forward this rewritten final response instead (a list filtered to
    /// what the caller may use).
    Replace(Bytes),
    /// Deliver this rewritten `input_required` result (policy passed, text
    /// made safe, provenance and the gateway's state added), once the
    /// rounds limit allows.
    Ask(Bytes),
    /// Refuse: the client gets this error instead, and the exchange ends.
    Refuse(Refusal),
}

/// Just enough of a result to know whether policy applies. Derived serde
/// decodes escaped member names and refuses a duplicated `resultType`.
#[derive(Deserialize)]
struct ResultHead<'a> {
    #[serde(default, rename = "resultType", borrow)]
    result_type: Option<Cow<'a, str>>,
}

#[derive(Serialize)]
struct ResponseOut<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    result: &'a serde_json::Value,
}

impl ResponseContext {
    /// Inspect one JSON-RPC message from the upstream.
    pub fn inspect(&self, message: &[u8]) -> Verdict {
        let msg = match Message::parse(message) {
            Ok(m) => m,
            Err(e) => {
                return Verdict::Refuse(Refusal::new(
                    Reason::UpstreamBadResponse,
                    format!("the upstream sent something that is not a JSON-RPC message ({e})"),
                ))
            }
        };
        match msg.kind {
            MessageKind::Notification => Verdict::Forward { is_final: false },
            // 2026-07-28 servers ask for input only through input_required
            // results; a request on the stream would bypass that (and policy).
            MessageKind::Request => Verdict::Refuse(Refusal::new(
                Reason::UpstreamProtocolViolation,
                "the upstream sent a server-to-client request; under protocol 2026-07-28 a server asks for input with an input_required result",
            )),
            MessageKind::Response => {
                let ours = match (&msg.id, &self.request_id) {
                    (Some(got), Some(want)) => same_id(got, want),
                    // An error with a null id answers the request that could not be read.
                    (None, _) => msg.error.is_some(),
                    (Some(_), None) => false,
                };
                if !ours {
                    Verdict::Refuse(Refusal::new(
                        Reason::UpstreamProtocolViolation,
                        "the upstream answered with the id of a different request",
                    ))
                } else if let Some(result) = msg.result {
                    self.check_result(msg.id, result)
                } else {
                    Verdict::Forward { is_final: true }
                }
            }
        }
    }

    /// The policy phase for a final result: `input_required` results are
    /// inspected, everything else passes unchanged.
    fn check_result(&self, id: Option<&RawValue>, result: &RawValue) -> Verdict {
        if !result.get().starts_with('{') {
            return Verdict::Forward { is_final: true };
        }
        let head: ResultHead<'_> = match serde_json::from_str(result.get()) {
            Ok(h) => h,
            Err(e) => {
                let message = format!(
                    "the upstream's result cannot be read unambiguously: {}",
                    describe_json_error(&e)
                );
                return Verdict::Refuse(
                    Refusal::new(Reason::DuplicateMember, message)
                        .with_data("rule", "parse".into()),
                );
            }
        };
        if head.result_type.as_deref() != Some("input_required") {
            self.operation_done();
            return self.filter_list(id, result);
        }
        let route = &self.upstream;
        let subject = Subject {
            method: &self.method,
            client: self.client,
            upstream_name: &route.name,
            upstream_host: &route.endpoint_host,
        };
        let (decision, report) = inspect(&route.policy, &subject, result.get().as_bytes());
        let delivered = matches!(decision, Decision::Deliver(_));
        if let Some(m) = &self.metrics {
            m.record_input_required(&route.id, delivered, &report.verdicts);
        }
        for v in &report.verdicts {
            tracing::info!(upstream = %route.id, rule = v.rule, action = v.action, key = v.key.as_deref().unwrap_or("-"), field = v.field.as_deref().unwrap_or("-"), "elicitation verdict");
        }
        let outcome = match decision {
            Decision::Refuse(r) => Err(r),
            Decision::Deliver(mut value) => self
                .mint_next(&report, &mut value)
                .map(|minted| (value, minted)),
        };
        match outcome {
            Err(r) => {
                self.audit_question(result.get(), &report, None, Some(&r));
                Verdict::Refuse(r)
            }
            Ok((value, minted)) => {
                self.audit_question(result.get(), &report, minted, None);
                let null = RawValue::from_string("null".to_owned()).ok();
                let Some(id) = id.or(null.as_deref()) else {
                    return Verdict::Refuse(Refusal::new(
                        Reason::UpstreamBadResponse,
                        "the upstream's answer has no id",
                    ));
                };
                match serde_json::to_vec(&ResponseOut {
                    jsonrpc: "2.0",
                    id,
                    result: &value,
                }) {
                    Ok(bytes) => Verdict::Ask(Bytes::from(bytes)),
                    Err(_) => Verdict::Refuse(Refusal::new(
                        Reason::UpstreamBadResponse,
                        "the upstream's answer could not be re-encoded",
                    )),
                }
            }
        }
    }

    /// The provenance events of one question: received, each verdict, then
    /// delivered (under the operation and round just minted) or refused.
    fn audit_question(
        &self,
        raw: &str,
        report: &Report,
        minted: Option<(String, u32)>,
        refused: Option<&Refusal>,
    ) {
        let Some(sink) = &self.audit else {
            return;
        };
        let base = self.audit_context();
        let ctx = match (&minted, self.mrtr.as_ref().and_then(|m| m.prior.as_ref())) {
            (Some((op, round)), _) => base.with_operation(op, *round),
            (None, Some((prior, _))) => base.with_operation(&prior.operation, prior.round + 1),
            (None, None) => base,
        };
        sink.emit(&ctx, AuditEvent::received_from_result(raw));
        for e in AuditEvent::verdicts(report) {
            sink.emit(&ctx, e);
        }
        match refused {
            None => sink.emit(&ctx, AuditEvent::delivered(report)),
            Some(r) => {
                sink.emit(&ctx, AuditEvent::refused(r));
                let rounds = ctx.round.unwrap_or(1);
                sink.emit(
                    &ctx,
                    AuditEvent::operation_end(
                        OperationOutcome::from_reason(r.reason),
                        rounds,
                        self.elapsed(),
                        Some(r.reason),
                    ),
                );
            }
        }
    }

    /// The audit context of this request, built only when there is
    /// something to record.
    fn audit_context(&self) -> AuditContext {
        let target = self.mrtr.as_ref().and_then(|m| m.binding.target.as_deref());
        super::audit_context(
            &self.trace_id,
            &self.upstream,
            &self.principal,
            &self.method,
            target,
        )
    }

    /// Time since the operation started (zero for a first round).
    fn elapsed(&self) -> std::time::Duration {
        let started = self
            .mrtr
            .as_ref()
            .and_then(|m| m.prior.as_ref())
            .map(|(p, _)| p.started);
        std::time::Duration::from_secs(
            started.map_or(0, |s| crate::mrtr::seal::now_secs().saturating_sub(s)),
        )
    }

    /// A list result keeps only what the caller may use.
    fn filter_list(&self, id: Option<&RawValue>, result: &RawValue) -> Verdict {
        let Some(route) = &self.route else {
            return Verdict::Forward { is_final: true };
        };
        let Some(filtered) =
            route
                .permissions
                .filter_list(&self.principal, &self.method, result.get())
        else {
            return Verdict::Forward { is_final: true };
        };
        let null = RawValue::from_string("null".to_owned()).ok();
        let Some(id) = id.or(null.as_deref()) else {
            return Verdict::Forward { is_final: true };
        };
        match serde_json::to_vec(&ResponseOut {
            jsonrpc: "2.0",
            id,
            result: &filtered,
        }) {
            Ok(bytes) => Verdict::Replace(Bytes::from(bytes)),
            Err(_) => Verdict::Refuse(Refusal::new(
                Reason::UpstreamBadResponse,
                "the upstream's answer could not be re-encoded",
            )),
        }
    }

    /// Seal the next round's state into a delivered `input_required`;
    /// returns the operation id and round.
    fn mint_next(
        &self,
        report: &Report,
        value: &mut serde_json::Value,
    ) -> Result<Option<(String, u32)>, Refusal> {
        let Some(m) = &self.mrtr else { return Ok(None) };
        let input = MintInput {
            binding: &m.binding,
            request_body: &m.request_body,
            prior: m.prior.as_ref().map(|(p, _)| p),
            answer_bytes: m.answer_bytes,
            upstream_state: report.request_state.clone(),
            asked: report.asked.clone(),
        };
        mint(&m.shared.state, input, value).map(Some)
    }

    /// A retry answered with a final result: the operation is over.
    fn operation_done(&self) {
        let Some((prior, outcome)) = self.mrtr.as_ref().and_then(|m| m.prior.as_ref()) else {
            return;
        };
        if let Some(metrics) = &self.metrics {
            metrics.operation_completed(&self.upstream.id, prior.round);
        }
        if let Some(sink) = &self.audit {
            let base = self.audit_context();
            let ctx = base.with_operation(&prior.operation, prior.round);
            sink.emit(
                &ctx,
                AuditEvent::operation_end(*outcome, prior.round, self.elapsed(), None),
            );
        }
    }

    fn error_bytes(&self, refusal: &Refusal) -> Bytes {
        error_body(
            self.request_id.as_deref(),
            refusal,
            Some(&self.upstream.name),
        )
    }
}

fn content_type_essence(resp: &Response<Incoming>) -> String {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

fn bad_response(status: StatusCode, what: &str) -> Refusal {
    Refusal::new(
        Reason::UpstreamBadResponse,
        format!("the upstream answered HTTP {} {what}", status.as_u16()),
    )
    .with_data("upstreamStatus", status.as_u16().into())
}

/// Check the upstream's response and build the one the client gets.
pub async fn check(
    ctx: ResponseContext,
    resp: Response<Incoming>,
) -> Result<Response<ProxyBody>, Refusal> {
    let status = resp.status();
    if let Some(enc) = resp.headers().get(header::CONTENT_ENCODING) {
        if !enc.as_bytes().eq_ignore_ascii_case(b"identity") {
            return Err(bad_response(
                status,
                "with a compressed body, which cannot be inspected",
            ));
        }
    }
    let essence = content_type_essence(&resp);
    let mut headers = client_response_headers(resp.headers());
    match essence.as_str() {
        "text/event-stream" if status.is_success() => {
            headers.insert(X_ACCEL_BUFFERING.clone(), HeaderValue::from_static("no"));
            headers
                .entry(header::CACHE_CONTROL)
                .or_insert(HeaderValue::from_static("no-cache"));
            let idle = ctx.upstream.stream_idle_timeout;
            let body = SseBody::new(ctx, resp.into_body(), idle);
            Ok(build(status, headers, ProxyBody::sse(body)))
        }
        "application/json" => {
            let bytes = read_whole(&ctx, resp.into_body()).await?;
            if bytes.is_empty()
                && ctx.request_kind == MessageKind::Notification
                && status.is_success()
            {
                return Ok(build(status, headers, ProxyBody::empty()));
            }
            match ctx.inspect(&bytes) {
                Verdict::Forward { .. } => Ok(build(status, headers, ProxyBody::full(bytes))),
                Verdict::Replace(new) => Ok(build(status, headers, ProxyBody::full(new))),
                Verdict::Ask(new) => {
                    if let Some(gate) = ctx.rounds.clone() {
                        gate.pass().await?;
                    }
                    Ok(build(status, headers, ProxyBody::full(new)))
                }
                Verdict::Refuse(r) if !status.is_success() => Err(bad_response(
                    status,
                    &format!("and its body was refused: {}", r.message),
                )),
                Verdict::Refuse(r) => Err(r),
            }
        }
        _ if ctx.request_kind == MessageKind::Notification && status.is_success() => {
            // 202 Accepted with no body is the normal answer to a notification.
            Ok(build(status, headers, ProxyBody::empty()))
        }
        "" => Err(bad_response(status, "without a content type")),
        other => Err(bad_response(
            status,
            &format!("with content type {other}, not a JSON-RPC message"),
        )),
    }
}

fn build(status: StatusCode, headers: http::HeaderMap, body: ProxyBody) -> Response<ProxyBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    resp
}

async fn read_whole(ctx: &ResponseContext, body: Incoming) -> Result<Bytes, Refusal> {
    let max = ctx.max_message_bytes;
    let timeout = ctx.upstream.response_timeout;
    match tokio::time::timeout(timeout, Limited::new(body, max).collect()).await {
        Err(_) => Err(Refusal::new(
            Reason::UpstreamTimeout,
            "the upstream's response body did not arrive in time",
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(Refusal::new(
            Reason::UpstreamResponseTooLarge,
            format!("the upstream's response is larger than the inspection limit of {max} bytes"),
        )),
        Ok(Err(_)) => Err(Refusal::new(
            Reason::UpstreamConnectionClosed,
            "the upstream closed the connection in the middle of its response",
        )),
    }
}

/// An upstream event stream, inspected event by event. Ends after the final
/// response, or with a JSON-RPC error event when anything goes wrong.
/// A question waiting for the rounds limit, and the question.
type PendingGate = (
    Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send>>,
    Bytes,
);

pub struct SseBody {
    ctx: ResponseContext,
    gate: Option<PendingGate>,
    upstream: Option<Incoming>,
    framer: SseFramer,
    out: std::collections::VecDeque<Bytes>,
    idle: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    refused: Option<Reason>,
}

impl SseBody {
    fn new(ctx: ResponseContext, upstream: Incoming, idle_timeout: Duration) -> Self {
        let framer = SseFramer::new(ctx.max_message_bytes);
        SseBody {
            ctx,
            gate: None,
            upstream: Some(upstream),
            framer,
            out: Default::default(),
            idle: Box::pin(tokio::time::sleep(idle_timeout)),
            idle_timeout,
            refused: None,
        }
    }

    pub fn refused(&self) -> Option<Reason> {
        self.refused
    }

    /// End the stream with an error event and let go of the upstream, which
    /// closes its connection: that is how MCP cancels the upstream request.
    fn fail(&mut self, refusal: Refusal) {
        self.refused = Some(refusal.reason);
        self.out
            .push_back(event_for(&self.ctx.error_bytes(&refusal)));
        self.upstream = None;
    }

    fn take_events(&mut self) {
        loop {
            match self.framer.next_event() {
                Ok(None) => return,
                Err(e) => {
                    let reason = match e {
                        SseError::TooLarge(_) => Reason::UpstreamResponseTooLarge,
                        SseError::NotUtf8 => Reason::UpstreamBadResponse,
                    };
                    return self.fail(Refusal::new(
                        reason,
                        format!("the upstream's event stream was refused: {e}"),
                    ));
                }
                Ok(Some(ev)) => {
                    let Some(data) = ev.data.as_deref() else {
                        self.out.push_back(ev.raw);
                        continue;
                    };
                    match self.ctx.inspect(data.as_bytes()) {
                        Verdict::Forward { is_final } => {
                            self.out.push_back(ev.raw);
                            if is_final {
                                self.upstream = None;
                                return;
                            }
                        }
                        Verdict::Replace(message) => {
                            self.out.push_back(event_for(&message));
                            self.upstream = None;
                            return;
                        }
                        Verdict::Ask(message) => {
                            self.upstream = None;
                            match self.ctx.rounds.clone() {
                                None => self.out.push_back(event_for(&message)),
                                Some(gate) => self.gate = Some((Box::pin(gate.pass()), message)),
                            }
                            return;
                        }
                        Verdict::Refuse(r) => return self.fail(r),
                    }
                }
            }
        }
    }

    pub fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Poll::Ready(Some(b));
            }
            if let Some((gate, _)) = self.gate.as_mut() {
                let passed = std::task::ready!(gate.as_mut().poll(cx));
                if let Some((_, message)) = self.gate.take() {
                    match passed {
                        Ok(()) => self.out.push_back(event_for(&message)),
                        Err(r) => self.fail(r),
                    }
                }
                continue;
            }
            let Some(upstream) = self.upstream.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(upstream).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let deadline = tokio::time::Instant::now() + self.idle_timeout;
                    self.idle.as_mut().reset(deadline);
                    if let Ok(data) = frame.into_data() {
                        self.framer.push(&data);
                        self.take_events();
                    }
                }
                Poll::Ready(Some(Err(_))) => self.fail(Refusal::new(
                    Reason::UpstreamConnectionClosed,
                    "the upstream closed the connection in the middle of its event stream",
                )),
                Poll::Ready(None) => self.fail(Refusal::new(
                    Reason::UpstreamBadResponse,
                    "the upstream ended its event stream without a response",
                )),
                Poll::Pending => {
                    if self.idle.as_mut().poll(cx).is_ready() {
                        let t = humantime::format_duration(self.idle_timeout);
                        self.fail(Refusal::new(
                            Reason::UpstreamTimeout,
                            format!("the upstream's event stream was silent for {t}"),
                        ));
                    } else {
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}

use std::future::Future;
