//! A 2025-11-25 `initialize` to an upstream not known to speak 2025-11-25.
//! Its own `initialize` is tried first, so a server that speaks both keeps
//! its own sessions (and is remembered as such); when it refuses, or
//! accepts but keeps no session (a stateless 2025-11-25 server cannot push
//! a question to the client: it has nowhere to receive the answer), its
//! `server/discover` says whether it speaks 2026-07-28, and if it does the
//! gateway answers `initialize` itself with a bridged session, whose
//! questions it asks. An upstream known to speak only 2026-07-28 is asked
//! `server/discover` at once.

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Response};
use serde_json::{Map, Value};

use super::super::body::ProxyBody;
use super::super::ctx::RequestCtx;
use super::super::refuse::Refused;
use super::super::reply::result_response;
use super::super::request::{self, copy_head};
use super::super::{session, Inbound};
use super::discover::{initialize_result, lists_sessions};
use super::events::Messages;
use super::outbound::Outbound;
use super::rounds::through;
use crate::headers::MCP_SESSION_ID;
use crate::model::{Generation, McpMethod, Reason, Refusal};
use crate::sessions::SessionState;

pub(super) async fn initialize(
    ctx: Box<RequestCtx>,
    parts: Parts,
    authority: HeaderValue,
) -> Result<Response<ProxyBody>, Refused> {
    let speaks = &ctx.route.upstream.speaks;
    let mut refused_natively = None;
    if speaks.sessions() != Some(false) {
        match native(&ctx, &parts, &authority).await {
            Ok(answered) if keeps_session(&ctx, &answered) => {
                speaks.learn(true);
                return Ok(answered);
            }
            // Answered, without a session of its own: the bridge, if it
            // can, else this answer.
            Ok(answered) => refused_natively = Some(Ok(answered)),
            Err(failure) => refused_natively = Some(failure),
        }
    }
    let outbound = Outbound::new(copy_head(&parts), authority, &ctx, ctx.request.client);
    let discovered = discovery(&ctx, &outbound).await;
    let result = discovered.as_ref().and_then(|m| m.get("result"));
    let listed = result.and_then(lists_sessions);
    let (Some(result), Some(sessions_too)) = (result, listed) else {
        // Not a 2026-07-28 server either: its own refusal is the answer.
        return refused_natively.unwrap_or_else(|| {
            let r = Refusal::new(
                Reason::UpstreamBadResponse,
                "the upstream did not describe itself (server/discover)",
            );
            Err(Refused::new(r, ctx.id(), ctx.route.name()))
        });
    };
    // One that says it speaks 2025-11-25 too may have refused only this
    // client's version: the next client tries it natively again.
    if !sessions_too {
        speaks.learn(false);
    }
    let metrics = &ctx.gateway.metrics.bridge;
    metrics.session_opened(&ctx.route.upstream.label);
    let requested = ctx.request.requested_version.as_deref();
    let answer = initialize_result(result, requested, ctx.route.name());
    match session::mint_bridged(&ctx) {
        Some(session) => Ok(result_response(ctx.id(), answer, Some(session))),
        None => Err(Refused::new(
            Refusal::new(
                Reason::InternalError,
                "the gateway could not seal a session id",
            ),
            ctx.id(),
            ctx.route.name(),
        )),
    }
}

/// The client's `initialize` through the phases as it came: `Ok` with the
/// answer when the upstream accepted it, else its refusal as the client
/// would have had it.
async fn native(
    ctx: &RequestCtx,
    parts: &Parts,
    authority: &HeaderValue,
) -> Result<Response<ProxyBody>, Result<Response<ProxyBody>, Refused>> {
    let head = copy_head(parts);
    let parsed = request::parse(&head, &ctx.request.body, Generation::ALL).map_err(Err)?;
    let inbound = Inbound {
        parts: head,
        authority: authority.clone(),
        principal: ctx.principal.clone(),
        request: parsed,
        peer: ctx.peer.clone(),
        request_id: ctx.request_id.clone(),
        started: ctx.started,
        trace: ctx.trace.clone(),
        subject: ctx.subject.clone(),
        carried: true,
        own: false,
    };
    let resp = through(ctx.gateway.clone(), ctx.route.clone(), inbound)
        .await
        .map_err(Err)?;
    let (mut head, body) = resp.into_parts();
    let max = ctx.gateway.config.limits.max_response_body_bytes;
    let mut messages = Messages::of(&head.headers, body, max);
    let refused = |r: Refusal| Err(Refused::new(r, ctx.id(), ctx.route.name()));
    let message = match messages.response().await {
        Ok(Some(m)) => m,
        Ok(None) => {
            let r = Refusal::new(Reason::UpstreamBadResponse, "no answer to initialize");
            return Err(refused(r));
        }
        Err(r) => return Err(refused(r)),
    };
    let answered = message.get("result").is_some();
    head.headers.remove(header::CONTENT_LENGTH);
    head.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let resp = Response::from_parts(head, ProxyBody::full(Bytes::from(message.to_string())));
    match answered {
        true => Ok(resp),
        false => Err(Ok(resp)),
    }
}

/// Whether the upstream issued a session of its own in its answer to
/// `initialize` (the gateway's session id seals it).
fn keeps_session(ctx: &RequestCtx, answered: &Response<ProxyBody>) -> bool {
    answered
        .headers()
        .get(&MCP_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(|token| SessionState::open(&ctx.gateway.config.state.keys, token).ok())
        .is_some_and(|state| state.upstream_session.is_some())
}

/// The upstream's answer to `server/discover`, asked through the phases
/// (so checked by its policy); `None` when it gave none.
pub(super) async fn discovery(ctx: &RequestCtx, outbound: &Outbound) -> Option<Value> {
    let method = McpMethod::ServerDiscover.as_str();
    let inbound = outbound.request("\"discover\"", method, Map::new()).ok()?;
    let resp = through(ctx.gateway.clone(), ctx.route.clone(), inbound)
        .await
        .ok()?;
    let max = ctx.gateway.config.limits.max_response_body_bytes;
    Messages::new(resp, max).response().await.ok().flatten()
}
