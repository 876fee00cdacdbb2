//! One call of a bridged session, carried round after round: the call goes
//! upstream as a 2026-07-28 request; when the upstream answers
//! `input_required` (its questions already checked by the upstream's
//! policy, its state sealed by the gateway), each question is pushed to the
//! 2025-11-25 client on the call's event stream under a sealed push id, the
//! client's answers are collected, and the call is retried with
//! `inputResponses` and the gateway's `requestState` — through every phase
//! again, so the answers are checked as any retry's — until the result.
//! Decline and cancel are answers the upstream receives; the client's
//! `notifications/cancelled`, a closed stream, `push_timeout` and the
//! round limit end the call.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::super::body::ProxyBody;
use super::super::refuse::{error_bytes, Refused};
use super::super::reply::{json_response, message};
use super::super::route::Route;
use super::super::{Gateway, Inbound};
use super::calls::{CallEvent, Registration};
use super::events::{self, is_response, Messages, Out};
use super::outbound::{to_sessions, Outbound};
use crate::model::{McpMethod, Reason, Refusal};
use crate::pipeline::metrics::bridge::QuestionOutcome;
use crate::policy::inspect::PROVENANCE_KEY;
use crate::sessions::PushState;

/// The elicitation mode whose 2025-11-25 form needs an `elicitationId`.
const URL_MODE: &str = "url";

/// What a bridged call is made of.
pub(super) struct Call {
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) route: Arc<Route>,
    pub(crate) outbound: Outbound,
    /// The client's method and params (without answers).
    pub(crate) method: String,
    pub(crate) params: Map<String, Value>,
    /// The client's JSON-RPC id, as it wrote it.
    pub(crate) client_id: String,
    /// The session's nonce and the caller, as pushes are bound to them.
    pub(crate) session: String,
    pub(crate) principal: String,
}

impl Call {
    /// Send the call upstream. A result or error that needs no question is
    /// answered as one JSON body; otherwise the answer is an event stream
    /// the rest of the call is carried on.
    pub(super) async fn start(self) -> Result<Response<ProxyBody>, Refused> {
        // Registered from the start: the client may cancel the call at any
        // time (`notifications/cancelled`), and the upstream's work with it.
        let (registration, mut events) = self.gateway.bridge.register(
            self.gateway.bridge.new_call_id(),
            &self.session,
            &self.client_id,
        );
        // Listening before any question is out: its answer may reach another replica.
        self.gateway.relay_listen().await;
        let first = tokio::select! {
            sent = self.send(0, self.params.clone()) => sent?,
            () = cancelled(&mut events) => return Ok(events::ended()),
        };
        let max = self.gateway.config.limits.max_response_body_bytes;
        let mut messages = Messages::new(first, max);
        let mut pending = None;
        if !messages.is_stream() {
            let within = |r: Refusal| Refused::new(r, Some(&self.client_id), self.route.name());
            let message = tokio::select! {
                next = messages.next() => next.map_err(within)?,
                () = cancelled(&mut events) => return Ok(events::ended()),
            };
            let message = message.ok_or_else(|| {
                within(Refusal::new(
                    Reason::UpstreamBadResponse,
                    "the upstream answered the request with nothing",
                ))
            })?;
            if !asks(&message) {
                return Ok(json_response(self.to_client(message), None));
            }
            pending = Some(message);
        }
        let (tx, resp) = events::stream();
        tokio::spawn(async move {
            let mut call = Carrying {
                tx: &tx,
                registration: &registration,
                events: &mut events,
                pushed: 0,
            };
            let end = self.carry(&mut call, messages, pending).await;
            let _ = tx.send(Out::End(end)).await;
        });
        Ok(resp)
    }

    /// The call's rounds until its end; the reason when the gateway ended it.
    async fn carry(
        self,
        call: &mut Carrying<'_>,
        mut messages: Messages,
        mut pending: Option<Value>,
    ) -> Option<Reason> {
        let tx = call.tx;
        for round in 1u32.. {
            let last = match pending.take() {
                Some(m) => m,
                None => match self.last_message(call, &mut messages).await {
                    Ok(m) => m,
                    Err(end) => return end,
                },
            };
            if !asks(&last) {
                let gateway_cut = messages.refused();
                let _ = tx.send(Out::Message(self.to_client_bytes(last))).await;
                return gateway_cut;
            }
            let result = &last["result"];
            let answers = match self.ask(call, result).await {
                Ok(answers) => answers,
                Err(end) => return end,
            };
            let mut params = self.params.clone();
            params.insert("inputResponses".into(), Value::Object(answers));
            if let Some(state) = result.get("requestState") {
                params.insert("requestState".into(), state.clone());
            }
            let sent = tokio::select! {
                sent = self.send(round, params) => sent,
                () = tx.closed() => return None,
                () = cancelled(call.events) => return None,
            };
            match sent {
                Ok(resp) => {
                    let max = self.gateway.config.limits.max_response_body_bytes;
                    messages = Messages::new(resp, max);
                }
                Err(refused) => return self.fail(tx, refused.refusal).await,
            }
        }
        None
    }

    /// Read the answer up to its response, passing its notifications on.
    async fn last_message(
        &self,
        call: &mut Carrying<'_>,
        messages: &mut Messages,
    ) -> Result<Value, Option<Reason>> {
        let tx = call.tx;
        loop {
            let next = tokio::select! {
                next = messages.next() => next,
                () = tx.closed() => return Err(None),
                () = cancelled(call.events) => return Err(None),
            };
            match next {
                Ok(Some(m)) if is_response(&m) => return Ok(m),
                // A notification (progress, a log line) reaches the client
                // as it is; 2026-07-28 has no request a server may send.
                Ok(Some(m)) if m.get("id").is_none() && m.get("method").is_some() => {
                    let bytes = Bytes::from(m.to_string());
                    if tx.send(Out::Message(bytes)).await.is_err() {
                        return Err(None);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    let r = Refusal::new(
                        Reason::UpstreamBadResponse,
                        "the upstream's stream ended without a response",
                    );
                    return Err(self.fail(tx, r).await);
                }
                Err(r) => return Err(self.fail(tx, r).await),
            }
        }
    }

    /// Push each question to the client; its answers, by key.
    async fn ask(
        &self,
        call: &mut Carrying<'_>,
        result: &Value,
    ) -> Result<Map<String, Value>, Option<Reason>> {
        let tx = call.tx;
        let Some(requests) = result.get("inputRequests").and_then(Value::as_object) else {
            return Ok(Map::new());
        };
        let mut waiting: HashMap<&str, (McpMethod, String)> = HashMap::new();
        let provenance = result.get("_meta").and_then(|m| m.get(PROVENANCE_KEY));
        // The operation the question policy recorded these questions under
        // (in the gateway's own requestState): the answers are recorded
        // under it too, so the audit trail shows one operation per call.
        let keys = &self.gateway.config.state.keys;
        let operation = result
            .get("requestState")
            .and_then(Value::as_str)
            .and_then(|token| keys.open(token).ok())
            .map(|state| state.operation);
        for (key, request) in requests {
            call.pushed += 1;
            let question = Question {
                key,
                request,
                provenance,
                number: call.pushed,
                operation: operation.as_deref(),
            };
            let (method, token, push) = match self.push(question, call.registration) {
                Ok(p) => p,
                Err(r) => return Err(self.fail(tx, r).await),
            };
            if tx.send(Out::Message(push)).await.is_err() {
                self.count(QuestionOutcome::Abandoned, waiting.len() + 1);
                return Err(None);
            }
            self.count(QuestionOutcome::Pushed, 1);
            waiting.insert(key, (method, token));
        }
        let timeout = self.gateway.config.state.push_timeout;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut answers = Map::new();
        while !waiting.is_empty() {
            let event = tokio::select! {
                event = call.events.recv() => event,
                () = &mut deadline => {
                    self.count(QuestionOutcome::TimedOut, waiting.len());
                    self.withdraw(tx, &waiting, "timeout").await;
                    let r = Refusal::new(
                        Reason::OperationExpired,
                        "the client did not answer the server's question within the gateway's push_timeout",
                    );
                    return Err(self.fail(tx, r).await);
                }
                () = tx.closed() => {
                    self.count(QuestionOutcome::Abandoned, waiting.len());
                    return Err(None);
                }
            };
            match event {
                Some(CallEvent::Answer { key, result, error }) => {
                    let Some((method, _)) = waiting.remove(key.as_str()) else {
                        continue;
                    };
                    self.count(QuestionOutcome::Answered, 1);
                    match answer_value(method, result, error) {
                        Ok(v) => answers.insert(key, v),
                        Err(r) => return Err(self.fail(tx, r).await),
                    };
                }
                // The client gave the call up: no response is sent for it.
                Some(CallEvent::Cancelled) | None => {
                    self.count(QuestionOutcome::Cancelled, waiting.len());
                    self.withdraw(tx, &waiting, "cancelled").await;
                    return Err(None);
                }
            }
        }
        Ok(answers)
    }

    /// The pushed request for the question `key`, under a sealed id that
    /// names this call.
    fn push(
        &self,
        question: Question<'_>,
        registration: &Registration,
    ) -> Result<(McpMethod, String, Bytes), Refusal> {
        let Question {
            key,
            request,
            provenance,
            number: pushed,
            operation,
        } = question;
        let name = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let method = McpMethod::parse(name);
        let mut params = request.get("params").cloned().unwrap_or_else(|| json!({}));
        if let Value::Object(p) = &mut params {
            if p.get("mode").and_then(Value::as_str) == Some(URL_MODE)
                && !p.contains_key("elicitationId")
            {
                p.insert(
                    "elicitationId".into(),
                    format!("{}.{pushed}", registration.id).into(),
                );
            }
            // Who asks, as a pushed request of a native session says it.
            if let Some(provenance) = provenance {
                let meta = p.entry("_meta").or_insert_with(|| json!({}));
                if let Value::Object(meta) = meta {
                    meta.insert(PROVENANCE_KEY.to_owned(), provenance.clone());
                }
            }
        }
        let gateway = &self.gateway;
        let timeout = gateway.config.state.push_timeout;
        let push = PushState {
            v: 1,
            id: Value::from(key).to_string(),
            session: self.session.clone(),
            principal: self.principal.clone(),
            upstream: self.route.upstream.settings.id.clone(),
            method: name.to_owned(),
            asked: None,
            operation: operation.unwrap_or(&registration.id).to_owned(),
            round: pushed,
            started_ms: gateway.clock.now_millis(),
            expires: gateway.clock.now_secs().saturating_add(timeout.as_secs()),
            call: Some(registration.id.clone()),
        };
        let token = push.seal(&gateway.config.state.keys).ok_or_else(|| {
            Refusal::new(
                Reason::InternalError,
                "the gateway could not seal a pushed request's id",
            )
        })?;
        let out = json!({"jsonrpc": "2.0", "id": token, "method": name, "params": params});
        Ok((method, token, Bytes::from(out.to_string())))
    }

    fn count(&self, outcome: QuestionOutcome, n: usize) {
        let metrics = &self.gateway.metrics.bridge;
        metrics.questions(&self.route.upstream.label, outcome, n);
    }

    /// Tell the client the questions still open are withdrawn.
    async fn withdraw(
        &self,
        tx: &mpsc::Sender<Out>,
        waiting: &HashMap<&str, (McpMethod, String)>,
        why: &str,
    ) {
        for (_, token) in waiting.values() {
            let note = json!({"jsonrpc": "2.0", "method": McpMethod::Cancelled.as_str(),
                              "params": {"requestId": token, "reason": why}});
            let _ = tx.send(Out::Message(Bytes::from(note.to_string()))).await;
        }
    }

    /// End the call with the gateway's refusal, to the client's id.
    async fn fail(&self, tx: &mpsc::Sender<Out>, refusal: Refusal) -> Option<Reason> {
        let body = error_bytes(Some(&self.client_id), &refusal, Some(self.route.name()));
        let _ = tx.send(Out::Message(body)).await;
        Some(refusal.reason)
    }

    /// The request of `round` (0: the client's own) through every phase.
    async fn send(
        &self,
        round: u32,
        params: Map<String, Value>,
    ) -> Result<Response<ProxyBody>, Refused> {
        let id = match round {
            0 => self.client_id.clone(),
            n => Value::from(format!("bridge-{n}")).to_string(),
        };
        let inbound = self
            .outbound
            .request(&id, &self.method, params)
            .map_err(|r| r.within(Some(&self.client_id), self.route.name()))?;
        through(self.gateway.clone(), self.route.clone(), inbound).await
    }

    /// The upstream's response, to the client's id, in 2025-11-25's shape.
    fn to_client(&self, mut m: Value) -> Vec<u8> {
        match m.get_mut("result") {
            Some(result) => {
                to_sessions(result);
                message(Some(&self.client_id), "result", result)
            }
            None => message(Some(&self.client_id), "error", &m["error"]),
        }
    }

    fn to_client_bytes(&self, m: Value) -> Bytes {
        Bytes::from(self.to_client(m))
    }
}

/// What a call being carried holds: the client's stream, its place among
/// the waiting calls, what reaches it there, how many questions it pushed.
struct Carrying<'a> {
    tx: &'a mpsc::Sender<Out>,
    registration: &'a Registration,
    events: &'a mut mpsc::UnboundedReceiver<CallEvent>,
    pushed: u32,
}

/// One question of an `input_required` answer, to push.
struct Question<'a> {
    key: &'a str,
    request: &'a Value,
    /// The gateway's provenance block of the answer that asked it.
    provenance: Option<&'a Value>,
    /// Its number among the call's pushes (from 1).
    number: u32,
    /// The operation the question policy recorded it under.
    operation: Option<&'a str>,
}

/// Until the client cancels the call. Answers are read where questions
/// wait for them ([`Call::ask`]); one that comes later is one too many.
async fn cancelled(events: &mut mpsc::UnboundedReceiver<CallEvent>) {
    loop {
        match events.recv().await {
            Some(CallEvent::Cancelled) | None => return,
            Some(CallEvent::Answer { .. }) => {}
        }
    }
}

/// Whether an upstream's message asks the client something.
fn asks(m: &Value) -> bool {
    m.get("result")
        .and_then(|r| r.get("resultType"))
        .and_then(Value::as_str)
        == Some("input_required")
}

/// What the upstream gets under the question's key: the client's result;
/// a client's error to an elicitation is its cancel (it could not ask its
/// user); to any other request, the end of the call.
fn answer_value(
    method: McpMethod,
    result: Option<Value>,
    error: Option<Value>,
) -> Result<Value, Refusal> {
    match (result, error) {
        (Some(result), _) => Ok(result),
        (None, _) if method == McpMethod::ElicitationCreate => Ok(json!({"action": "cancel"})),
        _ => Err(Refusal::new(
            Reason::InvalidAnswer,
            "the client answered the server's request with an error",
        )),
    }
}

/// [`Gateway::through`], boxed: a bridged call goes through the phases
/// again from inside them.
pub(super) fn through(
    gateway: Arc<Gateway>,
    route: Arc<Route>,
    inbound: Inbound,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response<ProxyBody>, Refused>> + Send>>
{
    Box::pin(async move { gateway.through(route, Box::new(inbound)).await })
}
