//! A 2026-07-28 client in front of an upstream that speaks only
//! 2025-11-25. The gateway opens an upstream session itself (per caller and
//! declared capabilities, on this instance; [`held`](super::held)), sends
//! each request in it as a 2025-11-25 request through every phase (so a
//! request the upstream pushes gets the push policy), and answers the
//! client in 2026-07-28's shape. A push during a call ends the client's
//! call with `input_required` — one question per round — whose sealed
//! `requestState` names the upstream call, held open on this instance; the
//! client's retry delivers its answer to the waiting upstream request
//! (checked as any answer to a push) and the call is read on. A retry that
//! reaches another replica is checked there and handed here through the
//! relay (`handoff.rs` here, `relayed.rs` there).

use http::request::Parts;
use http::{HeaderValue, Response};
use serde_json::{json, Map, Value};

use super::super::body::ProxyBody;
use super::super::ctx::RequestCtx;
use super::super::refuse::Refused;
use super::super::reply::{accepted, json_response, message};
use super::calls::BridgeCalls;
use super::discover::{capabilities, lists_sessions, server_version};
use super::events::Messages;
use super::handoff;
use super::held::{Held, Opened, Origin};
use super::initialize::discovery;
use super::outbound::{params_of, to_sessions_params, to_stateless, Outbound};
use super::rounds::through;
use crate::audit::{AuditEvent, OperationOutcome};
use crate::json::MessageKind;
use crate::model::{Generation, McpMethod, ProtocolVersion, Reason, Refusal};
use crate::mrtr::seal::new_operation_id;
use crate::pipeline::answer::PUSH_KEY;
use crate::pipeline::metrics::bridge::QuestionOutcome;
use crate::sessions::{HoldState, PushState, HOLD_PREFIX};

/// Where a 2026-07-28 result names the server.
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// A 2026-07-28 request on a route whose upstream speaks only 2025-11-25.
pub(super) fn applies(ctx: &RequestCtx) -> bool {
    ctx.request.generation() == Generation::Stateless
        && ctx.route.upstream.speaks.speaks(Generation::Stateless) == Some(false)
}

/// After the upstream refused a 2026-07-28 request with 400 or 404, and
/// nothing is known of what it speaks: whether it is a 2025-11-25 server
/// (an `initialize` of the gateway's own succeeds). Remembered either way.
pub(super) async fn speaks_only_sessions(
    ctx: &RequestCtx,
    head: &Parts,
    authority: &HeaderValue,
) -> bool {
    let speaks = &ctx.route.upstream.speaks;
    if ctx.request.generation() != Generation::Stateless
        || speaks.speaks(Generation::Stateless).is_some()
        || speaks.sessions() == Some(false)
    {
        return false;
    }
    let bridge = Bridge::new(ctx, head, authority);
    // A server that answers server/discover speaks 2026-07-28 (it refused
    // this one request for reasons of its own); one that refuses it, and
    // accepts an initialize, speaks only 2025-11-25.
    if bridge.discovers().await {
        speaks.learn_that(Generation::Stateless, true);
        return false;
    }
    let opened = bridge.open_session().await;
    speaks.learn_that(Generation::Stateless, opened.is_err());
    match opened {
        Ok(opened) => {
            speaks.learn(true);
            bridge.done_with(&opened);
            true
        }
        Err(_) => false,
    }
}

/// Serve the request across.
pub(super) async fn serve(
    ctx: Box<RequestCtx>,
    head: Parts,
    authority: HeaderValue,
) -> Result<Response<ProxyBody>, Refused> {
    let bridge = Bridge::new(&ctx, &head, &authority);
    let within = |r: Refusal| Refused::new(r, ctx.id(), ctx.route.name());
    match ctx.request.kind {
        MessageKind::Notification => {
            bridge.notify().await.map_err(within)?;
            Ok(accepted())
        }
        _ if ctx.request.method == McpMethod::ServerDiscover => bridge.describe().await,
        _ if ctx
            .request
            .request_state
            .as_deref()
            .is_some_and(|s| s.starts_with(HOLD_PREFIX)) =>
        {
            bridge.resume().await
        }
        _ => bridge.call().await,
    }
}

/// One request carried across: the client's, and what carrying it needs.
struct Bridge<'a> {
    ctx: &'a RequestCtx,
    head: &'a Parts,
    authority: &'a HeaderValue,
    outbound: Outbound,
    /// Names the upstream session this caller and its capabilities use.
    session_key: String,
}

impl<'a> Bridge<'a> {
    fn new(ctx: &'a RequestCtx, head: &'a Parts, authority: &'a HeaderValue) -> Bridge<'a> {
        let caps = ctx.request.client;
        let session_key = format!(
            "{}\n{}\n{}",
            ctx.route.upstream.settings.id,
            ctx.binding().principal_key(),
            caps.to_value()
        );
        Bridge {
            ctx,
            head,
            authority,
            outbound: Outbound::new(
                super::super::request::copy_head(head),
                authority.clone(),
                ctx,
                caps,
            ),
            session_key,
        }
    }

    fn refused(&self, r: Refusal) -> Refused {
        Refused::new(r, self.ctx.id(), self.ctx.route.name())
    }

    /// The upstream session for this caller: kept, or opened now.
    async fn session(&self) -> Result<Opened, Refused> {
        let gateway = &self.ctx.gateway;
        if self.ctx.principal.is_anonymous() {
            return self.open_session().await;
        }
        // Reopened well before the gateway's own session id would expire.
        let lifetime = gateway.config.state.session_lifetime.mul_f32(0.9);
        match gateway.bridge.session(&self.session_key, lifetime) {
            Some(opened) => Ok(opened),
            None => self.open_session().await,
        }
    }

    /// `initialize` and `notifications/initialized`, as a client of the
    /// upstream that declared what this client declared.
    async fn open_session(&self) -> Result<Opened, Refused> {
        let ctx = self.ctx;
        let version = HeaderValue::from_static(ProtocolVersion::V2025_11_25.as_str());
        let init = json!({"jsonrpc": "2.0", "id": "portcullis-init", "method": McpMethod::Initialize.as_str(),
            "params": {"protocolVersion": ProtocolVersion::V2025_11_25.as_str(),
                "capabilities": ctx.request.client.to_value(),
                "clientInfo": {"name": "portcullis", "version": env!("CARGO_PKG_VERSION")}}});
        // What goes wrong here is the client's call's refusal, under its id.
        let for_client = |r: Refused| r.addressed_to(ctx.id());
        let inbound = self
            .outbound
            .in_session(init, None, &version)
            .map_err(for_client)?;
        let resp = through(ctx.gateway.clone(), ctx.route.clone(), inbound)
            .await
            .map_err(for_client)?;
        let token = resp.headers().get(&crate::headers::MCP_SESSION_ID).cloned();
        let max = ctx.gateway.config.limits.max_response_body_bytes;
        let answer = Messages::new(resp, max).response().await;
        let described = match (answer, token) {
            (Ok(Some(mut m)), Some(token)) if m.get("result").is_some() => {
                (m["result"].take(), token)
            }
            _ => {
                return Err(self.refused(Refusal::new(
                    Reason::UpstreamBadResponse,
                    "the upstream did not open a session (initialize)",
                )))
            }
        };
        let (described, token) = described;
        let agreed = described
            .get("protocolVersion")
            .and_then(Value::as_str)
            .filter(|v| {
                ProtocolVersion::parse(v).is_some_and(|v| v.generation() == Generation::Sessions)
            })
            .and_then(|v| HeaderValue::from_str(v).ok())
            .unwrap_or(version);
        let initialized = json!({"jsonrpc": "2.0", "method": McpMethod::Initialized.as_str()});
        let inbound = self
            .outbound
            .in_session(initialized, Some(&token), &agreed)
            .map_err(for_client)?;
        through(ctx.gateway.clone(), ctx.route.clone(), inbound)
            .await
            .map_err(for_client)?;
        let opened = Opened {
            token,
            version: agreed,
            described,
            at: std::time::Instant::now(),
            shared: !ctx.principal.is_anonymous(),
        };
        if opened.shared {
            ctx.gateway
                .bridge
                .keep_session(self.session_key.clone(), opened.clone());
        }
        let metrics = &ctx.gateway.metrics.bridge;
        metrics.session_opened(&ctx.route.upstream.label);
        Ok(opened)
    }

    /// Whether the upstream answers `server/discover` as a 2026-07-28
    /// server does.
    async fn discovers(&self) -> bool {
        let answer = discovery(self.ctx, &self.outbound).await;
        answer
            .as_ref()
            .and_then(|m| m.get("result"))
            .and_then(lists_sessions)
            .is_some()
    }

    /// A session opened for one call is ended with it.
    /// [`done_with`](Self::done_with) at a call's answer. A local program's
    /// session ends before the client has the answer: its process is free
    /// for the caller's next call (one in-memory request; over the network
    /// the client does not wait for it).
    async fn finish(&self, opened: &Opened) {
        if opened.shared || self.ctx.route.upstream.client.pool().stdio().is_none() {
            return self.done_with(opened);
        }
        let ctx = self.ctx;
        let end = self.outbound.end_session(&opened.token, &opened.version);
        let _ = through(ctx.gateway.clone(), ctx.route.clone(), end).await;
    }

    fn done_with(&self, opened: &Opened) {
        if opened.shared {
            return;
        }
        let ctx = self.ctx;
        let end = self.outbound.end_session(&opened.token, &opened.version);
        let asked = through(ctx.gateway.clone(), ctx.route.clone(), end);
        tokio::spawn(async move {
            let _ = asked.await;
        });
    }

    /// The audit trail's end of the operation the call's pushes made,
    /// once the call that answered `answered` (a push's sealed id) ends.
    fn ended(&self, answered: Option<&Value>, rounds: u32, outcome: OperationOutcome) {
        let ctx = self.ctx;
        let audit = &ctx.gateway.audit;
        let token = answered.and_then(Value::as_str);
        let Some(push) =
            token.and_then(|t| PushState::open(&ctx.gateway.config.state.keys, t).ok())
        else {
            return;
        };
        if audit.enabled() {
            let at = ctx.audit_context().with_operation(&push.operation, rounds);
            let elapsed = ctx
                .gateway
                .clock
                .now_millis()
                .saturating_sub(push.started_ms);
            let took = std::time::Duration::from_millis(elapsed);
            audit.emit(&at, AuditEvent::operation_end(outcome, rounds, took, None));
        }
    }

    fn count(&self, outcome: QuestionOutcome) {
        let ctx = self.ctx;
        let metrics = &ctx.gateway.metrics.bridge;
        metrics.questions(&ctx.route.upstream.label, outcome, 1);
    }

    /// What counts a held call nobody came back for.
    /// (A session opened for the call alone ends with it.)
    fn expiry(&self, opened: &Opened) -> impl FnOnce() + Send + 'static {
        let ctx = self.ctx;
        let metrics = ctx.gateway.metrics.clone();
        let label = ctx.route.upstream.label.clone();
        let end = (!opened.shared).then(|| {
            let end = self.outbound.end_session(&opened.token, &opened.version);
            (ctx.gateway.clone(), ctx.route.clone(), end)
        });
        move || {
            metrics
                .bridge
                .questions(&label, QuestionOutcome::TimedOut, 1);
            if let Some((gateway, route, end)) = end {
                tokio::spawn(through(gateway, route, end));
            }
        }
    }

    /// `server/discover`, answered from the upstream's `initialize`.
    async fn describe(&self) -> Result<Response<ProxyBody>, Refused> {
        let opened = self.session().await?;
        self.done_with(&opened);
        let d = &opened.described;
        let mut result = Map::new();
        result.insert("resultType".into(), "complete".into());
        result.insert(
            "supportedVersions".into(),
            json!([ProtocolVersion::V2026_07_28.as_str()]),
        );
        result.insert("capabilities".into(), capabilities(d));
        if let Some(text) = d.get("instructions") {
            result.insert("instructions".into(), text.clone());
        }
        let version = server_version(d.get("serverInfo").and_then(|i| i.get("version")));
        let info = json!({"name": self.ctx.route.name(), "version": version});
        result.insert("_meta".into(), json!({ SERVER_INFO_KEY: info }));
        result.insert("ttlMs".into(), 0.into());
        result.insert("cacheScope".into(), "private".into());
        let body = message(self.ctx.id(), "result", &Value::Object(result));
        Ok(json_response(body, None))
    }

    /// A notification, in the caller's session (an anonymous caller has
    /// none that outlives its call: nothing to tell).
    async fn notify(&self) -> Result<(), Refusal> {
        if self.ctx.principal.is_anonymous() {
            return Ok(());
        }
        let params = to_sessions_params(params_of(&self.ctx.request)?);
        let body =
            json!({"jsonrpc": "2.0", "method": self.ctx.request.method.as_str(), "params": params});
        let opened = self.session().await.map_err(|r| r.refusal)?;
        let inbound = self
            .outbound
            .in_session(body, Some(&opened.token), &opened.version)
            .map_err(|r| r.refusal)?;
        let ctx = self.ctx;
        through(ctx.gateway.clone(), ctx.route.clone(), inbound)
            .await
            .map(drop)
            .map_err(|r| r.refusal)
    }

    /// A new call: sent in the session, read up to its result or a push.
    async fn call(&self) -> Result<Response<ProxyBody>, Refused> {
        let ctx = self.ctx;
        let params = to_sessions_params(params_of(&ctx.request).map_err(|r| self.refused(r))?);
        // Its own id upstream: stateless clients number their requests
        // alike, and the calls of many of them share one upstream session.
        let id = format!("portcullis-{}", new_operation_id());
        let body = json!({"jsonrpc": "2.0", "id": id,
            "method": ctx.request.method.as_str(), "params": params});
        let mut opened = self.session().await?;
        let mut sent = self.send(&body, &opened).await;
        // A session the upstream forgot (it restarted): opened again, once.
        if session_gone(&sent) {
            ctx.gateway.bridge.forget_session(&self.session_key);
            opened = self.open_session().await?;
            sent = self.send(&body, &opened).await;
        }
        let sent = match sent {
            Ok(sent) => sent,
            // A call that failed (a timeout, say) ends its own session too.
            Err(refused) => {
                self.done_with(&opened);
                return Err(refused);
            }
        };
        let max = ctx.gateway.config.limits.max_response_body_bytes;
        self.read(Messages::new(sent, max), opened, 0, None).await
    }

    /// `body` in the session; a refusal is the client's request's.
    async fn send(&self, body: &Value, opened: &Opened) -> Result<Response<ProxyBody>, Refused> {
        let ctx = self.ctx;
        let for_client = |r: Refused| r.addressed_to(ctx.id());
        let inbound = self
            .outbound
            .in_session(body.clone(), Some(&opened.token), &opened.version)
            .map_err(for_client)?;
        through(ctx.gateway.clone(), ctx.route.clone(), inbound)
            .await
            .map_err(for_client)
    }

    /// Read the upstream's answer on: its response ends the client's call;
    /// a request it pushes (already through the push policy) is held and
    /// asked as `input_required`.
    async fn read(
        &self,
        mut messages: Messages,
        opened: Opened,
        round: u32,
        answered: Option<&Value>,
    ) -> Result<Response<ProxyBody>, Refused> {
        let ctx = self.ctx;
        let upstream_failed = |r: Refusal| {
            self.done_with(&opened);
            self.refused(r)
        };
        loop {
            let m = messages.next().await.map_err(upstream_failed)?;
            let Some(m) = m else {
                return Err(upstream_failed(Refusal::new(
                    Reason::UpstreamBadResponse,
                    "the upstream's stream ended without a response",
                )));
            };
            if let Some(result) = m.get("result") {
                // A 2025-11-25 server asks by pushing; an MRTR question from
                // it has no answer path here.
                if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
                    return Err(upstream_failed(Refusal::new(
                        Reason::UpstreamProtocolViolation,
                        "a 2025-11-25 server answered input_required, which its generation does not have",
                    )));
                }
                self.ended(answered, round, OperationOutcome::Complete);
                self.finish(&opened).await;
                let mut result = result.clone();
                to_stateless(&mut result, ctx.request.method);
                return Ok(json_response(message(ctx.id(), "result", &result), None));
            }
            if let Some(error) = m.get("error") {
                self.ended(answered, round, OperationOutcome::Error);
                self.finish(&opened).await;
                return Ok(json_response(message(ctx.id(), "error", error), None));
            }
            // A ping asks nothing of a person: the gateway answers it.
            let method = m
                .get("method")
                .and_then(Value::as_str)
                .map(McpMethod::parse);
            if let (Some(push), Some(McpMethod::Ping)) = (m.get("id"), method) {
                let pong = json!({"jsonrpc": "2.0", "id": push, "result": {}});
                self.send(&pong, &opened).await?;
                continue;
            }
            if let (Some(push), Some(method)) = (m.get("id"), m.get("method")) {
                let held = Held {
                    messages,
                    session: opened,
                    push: push.clone(),
                    round: round + 1,
                    origin: None,
                };
                let params = m.get("params").cloned().unwrap_or_else(|| json!({}));
                // Listening before the question is out: its retry may reach
                // another replica.
                ctx.gateway.relay_listen().await;
                return self.hold(held, method, params);
            }
            // A notification (progress, a log line) has no place in the
            // one JSON answer a 2026-07-28 client gets here.
        }
    }

    /// Hold the call at a push; answer the client with the question.
    fn hold(
        &self,
        held: Held,
        method: &Value,
        params: Value,
    ) -> Result<Response<ProxyBody>, Refused> {
        let ctx = self.ctx;
        let gateway = &ctx.gateway;
        // A held call keeps an upstream stream open with no client
        // connection behind it: they count against the requests in flight.
        if gateway.bridge.held_len() >= gateway.config.limits.max_in_flight_requests {
            self.done_with(&held.session);
            return Err(self.refused(Refusal::new(
                Reason::Overloaded,
                "this gateway instance holds as many calls for an answer as it serves requests at once; retry shortly",
            )));
        }
        let timeout = gateway.config.state.push_timeout;
        // The key the push policy and the audit trail name a pushed
        // question by: the client answers under the same.
        let key = PUSH_KEY.to_owned();
        let call = new_operation_id();
        let state = HoldState {
            v: 1,
            call: call.clone(),
            instance: gateway.bridge.instance.clone(),
            principal: ctx.binding().principal_key(),
            upstream: ctx.route.upstream.settings.id.clone(),
            method: ctx.request.method.as_str().to_owned(),
            target: ctx.request.target.clone(),
            digest: ctx.request.digest().to_owned(),
            key: key.clone(),
            expires: gateway.clock.now_secs().saturating_add(timeout.as_secs()),
        };
        let sealed = state.seal(&gateway.config.state.keys).ok_or_else(|| {
            self.refused(Refusal::new(
                Reason::InternalError,
                "the gateway could not seal a state",
            ))
        })?;
        self.keep(call, held);
        self.count(QuestionOutcome::Pushed);
        let result = json!({"resultType": "input_required",
            "inputRequests": {key: {"method": method, "params": params}},
            "requestState": sealed});
        Ok(json_response(message(ctx.id(), "result", &result), None))
    }

    /// The client's retry: its answer to the held call's push, delivered;
    /// the call read on.
    async fn resume(&self) -> Result<Response<ProxyBody>, Refused> {
        let ctx = self.ctx;
        let gateway = &ctx.gateway;
        let token = ctx.request.request_state.as_deref().unwrap_or_default();
        let invalid = |why: &str| self.refused(Refusal::new(Reason::StateInvalid, why.to_owned()));
        let state = HoldState::open(&gateway.config.state.keys, token).map_err(|_| {
            invalid("this requestState was not issued by this gateway, or was altered")
        })?;
        let mismatch =
            |reason: Reason, why: &str| self.refused(Refusal::new(reason, why.to_owned()));
        if state.principal != ctx.binding().principal_key() {
            return Err(mismatch(
                Reason::StatePrincipalMismatch,
                "this requestState was issued to another caller",
            ));
        }
        if state.upstream != ctx.route.upstream.settings.id {
            return Err(mismatch(
                Reason::StateUpstreamMismatch,
                "this requestState was issued for another MCP server",
            ));
        }
        if state.method != ctx.request.method.as_str() || state.target != ctx.request.target {
            return Err(mismatch(
                Reason::StateTargetMismatch,
                "this requestState was issued for another tool, prompt or resource",
            ));
        }
        if state.digest != ctx.request.digest() {
            return Err(mismatch(
                Reason::StateArgumentsMismatch,
                "the retry changed the arguments of the call it answers",
            ));
        }
        if gateway.clock.now_secs() > state.expires {
            return Err(self.refused(Refusal::new(
                Reason::StateExpired,
                "the question this answers has expired",
            )));
        }
        let params = params_of(&ctx.request).map_err(|r| self.refused(r))?;
        let answer = params
            .get("inputResponses")
            .and_then(|r| r.get(&state.key))
            .cloned();
        let no_answer = || {
            self.refused(
                Refusal::new(
                    Reason::InvalidAnswer,
                    "inputResponses has no answer to the question asked",
                )
                .with_data("key", state.key.clone().into()),
            )
        };
        let not_waiting =
            |why: &str| self.refused(Refusal::new(Reason::CallNotWaiting, why.to_owned()));
        if state.instance != gateway.bridge.instance {
            let Some(relay) = &gateway.relay else {
                return Err(not_waiting(
                    "another gateway instance holds the call this answers: send the retry to the instance that asked",
                ));
            };
            let answer = answer.ok_or_else(no_answer)?;
            return handoff::retry(ctx, relay, &state.instance, state.call, answer)
                .await
                .map_err(|r| self.refused(r));
        }
        let held = gateway.bridge.take_held(&state.call).ok_or_else(|| {
            not_waiting("the call this answers no longer waits (it ended, or was answered)")
        })?;
        let Some(answer) = answer else {
            self.keep(state.call, held);
            return Err(no_answer());
        };
        self.answer_held(state.call, held, answer).await
    }

    /// Hold `held` as `call` until its retry or `push_timeout`; with what
    /// resuming it needs when a relay may hand the retry here.
    fn keep(&self, call: String, mut held: Held) {
        let gateway = &self.ctx.gateway;
        if gateway.relay.is_some() {
            held.origin = Some(Box::new(Origin::of(self.ctx, self.head, self.authority)));
        }
        let timeout = gateway.config.state.push_timeout;
        let expiry = self.expiry(&held.session);
        gateway.bridge.hold(call, held, timeout, expiry);
    }

    /// `answer` to the push `held` waits on, sent; the call read on.
    async fn answer_held(
        &self,
        call: String,
        held: Held,
        answer: Value,
    ) -> Result<Response<ProxyBody>, Refused> {
        let ctx = self.ctx;
        let body = json!({"jsonrpc": "2.0", "id": held.push, "result": answer});
        if let Err(refused) = self.send(&body, &held.session).await {
            // The answer was refused (not what was asked, a secret): the
            // upstream still waits; the client may answer again.
            self.keep(call, held);
            return Err(refused.within(ctx.id(), ctx.route.name()));
        }
        self.count(QuestionOutcome::Answered);
        let Held {
            messages,
            session,
            round,
            push,
            origin: _,
        } = held;
        self.read(messages, session, round, Some(&push)).await
    }
}

/// A retry another replica received and checked, for the call `call` held
/// here: answered as [`Bridge::resume`] would, with the request that
/// started the call. The caller is checked again against that request.
pub(super) async fn resume_relayed(
    calls: &BridgeCalls,
    call: String,
    principal: &str,
    answer: Value,
) -> Result<Value, Refusal> {
    let not_waiting = || {
        Refusal::new(
            Reason::CallNotWaiting,
            "the call this answers no longer waits (it ended, or was answered)",
        )
    };
    let mut held = calls.take_held(&call).ok_or_else(not_waiting)?;
    let Some(origin) = held.origin.take() else {
        return Err(not_waiting());
    };
    let bridge = Bridge::new(&origin.ctx, &origin.head, &origin.authority);
    if origin.ctx.binding().principal_key() != principal {
        bridge.keep(call, held);
        return Err(Refusal::new(
            Reason::StatePrincipalMismatch,
            "this requestState was issued to another caller",
        ));
    }
    let resp = bridge
        .answer_held(call, held, answer)
        .await
        .map_err(|r| r.refusal)?;
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    serde_json::from_slice(&body).map_err(|_| {
        Refusal::new(
            Reason::InternalError,
            "the held call's answer could not be read back",
        )
    })
}

/// Whether the upstream answered as a server that no longer knows the
/// session (it restarted): 404, as the spec has it say.
fn session_gone(sent: &Result<Response<ProxyBody>, Refused>) -> bool {
    match sent {
        Ok(resp) => resp.status() == http::StatusCode::NOT_FOUND,
        Err(r) => {
            matches!(
                r.refusal.reason,
                Reason::SessionInvalid | Reason::SessionExpired
            ) || (r.refusal.reason == Reason::UpstreamRefused
                && r.refusal.data("upstreamStatus").and_then(Value::as_u64) == Some(404))
        }
    }
}

/// Whether the upstream's refusal of a 2026-07-28 request may be an older
/// server's refusal of a request without a session.
pub(super) fn refusal_may_be_older_server(status: http::StatusCode) -> bool {
    status == http::StatusCode::BAD_REQUEST || status == http::StatusCode::NOT_FOUND
}
