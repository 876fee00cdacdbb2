//! Phase: bridge the two protocol generations, both ways.
//!
//! A 2025-11-25 client of an upstream that speaks only 2026-07-28: its
//! `initialize` is tried as it came, then ([`initialize`]) the upstream's
//! `server/discover` decides; a bridged session's requests are carried as
//! 2026-07-28 requests through every phase again ([`rounds`]), the
//! questions of an `input_required` answer pushed on the call's stream and
//! the client's answers handed to the waiting call ([`calls`]); what
//! 2026-07-28 has no place for (a stream of server messages, `ping`) the
//! gateway answers itself.
//!
//! A 2026-07-28 client of an upstream that speaks only 2025-11-25
//! ([`legacy`]): carried in an upstream session of the gateway's, a pushed
//! request held ([`held`]) and asked as an `input_required` question
//! until the retry answers it.
//!
//! What an upstream speaks is configured (`[[upstream]] generations`) or
//! found out and remembered ([`discover`]); a server that speaks both
//! keeps its native traffic.

pub(crate) mod calls;
mod discover;
mod events;
pub(crate) use events::{stream as event_stream, Messages, Out};
pub(crate) mod handoff;
mod held;
mod initialize;
mod legacy;
mod outbound;
pub(crate) mod relayed;
mod rounds;

pub(crate) use calls::BridgeCalls;

use http::request::Parts;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Map, Value};

use super::answer;
use super::body::ProxyBody;
use super::ctx::RequestCtx;
use super::refuse::Refused;
use super::reply::{accepted, accepted_with, result_response};
use super::request::Transport;
use super::session;
use crate::json::MessageKind;
use crate::model::{Generation, McpMethod, Reason, Refusal};
use calls::CallEvent;
use outbound::{params_of, Outbound};
use rounds::Call;

/// Whether the bridge may have to carry this request: a 2025-11-25
/// `initialize` to an upstream not known to speak it, any request of
/// a bridged session, a 2026-07-28 request to an upstream known to speak
/// only 2025-11-25. (Cheap: every request asks.)
pub(super) fn may_carry(ctx: &RequestCtx) -> bool {
    if ctx.request.generation() != Generation::Sessions {
        return legacy::applies(ctx);
    }
    match &ctx.session {
        Some(s) => s.state.bridged,
        // A federated route's member too: its session joins the route's.
        None => {
            ctx.request.method == McpMethod::Initialize
                && ctx.route.upstream.speaks.sessions() != Some(true)
        }
    }
}

/// Whether a 2026-07-28 request that [`may_carry`] let through is now
/// known to need carrying: a request the gateway made for it (the
/// argument check's own list) found the upstream speaks only 2025-11-25.
pub(super) fn learned_older(ctx: &RequestCtx) -> bool {
    ctx.request.generation() == Generation::Stateless && legacy::applies(ctx)
}

/// Carry the request across (see [`may_carry`]).
pub(super) async fn carry(
    ctx: Box<RequestCtx>,
    parts: Parts,
    authority: HeaderValue,
) -> Result<Response<ProxyBody>, Refused> {
    if ctx.request.generation() == Generation::Stateless {
        return legacy::serve(ctx, parts, authority).await;
    }
    if ctx.session.is_none() {
        return initialize::initialize(ctx, parts, authority).await;
    }
    let name = ctx.route.name().to_owned();
    let id = ctx.id().map(str::to_owned);
    let within = |r: Refusal| Refused::new(r, id.as_deref(), &name);
    in_session(ctx, parts, authority).await.map_err(within)
}

/// Whether the upstream's answer `status` to this request may say it is a
/// server of the older generation; a success says it is not.
pub(super) fn may_be_older(ctx: &RequestCtx, status: StatusCode) -> bool {
    let speaks = &ctx.route.upstream.speaks;
    if ctx.request.generation() != Generation::Stateless
        || speaks.speaks(Generation::Stateless).is_some()
    {
        return false;
    }
    if status.is_success() {
        speaks.learn_that(Generation::Stateless, true);
        return false;
    }
    legacy::refusal_may_be_older_server(status)
}

/// Whether the upstream is a 2025-11-25-only server (see [`may_be_older`]).
pub(super) async fn older(ctx: &RequestCtx, head: &Parts, authority: &HeaderValue) -> bool {
    legacy::speaks_only_sessions(ctx, head, authority).await
}

/// A request head for what the bridge sends for a request whose own head
/// went upstream already.
pub(super) fn head_for(uri: &http::Uri) -> Parts {
    let (mut head, ()) = http::Request::new(()).into_parts();
    head.method = http::Method::POST;
    head.uri = uri.clone();
    head
}

/// A request of a bridged session.
async fn in_session(
    ctx: Box<RequestCtx>,
    parts: Parts,
    authority: HeaderValue,
) -> Result<Response<ProxyBody>, Refusal> {
    match ctx.request.transport {
        Transport::End => {
            if let Some(s) = &ctx.session {
                session::end_session(&ctx.gateway, &s.state).await?;
                ctx.gateway.bridge.end_session(&s.state.nonce);
                handoff::cancel(&ctx, &s.state.nonce, None);
            }
            return Ok(accepted_with(StatusCode::OK));
        }
        Transport::Listen => {
            return Err(Refusal::new(
                Reason::MethodNotAllowed,
                "this session's server speaks 2026-07-28, which sends no messages outside a call: there is no stream to open",
            ))
        }
        Transport::Post => {}
    }
    match ctx.request.kind {
        MessageKind::Response => take_answer(&ctx).await,
        MessageKind::Notification => {
            if ctx.request.method == McpMethod::Cancelled {
                cancel(&ctx)?;
            }
            Ok(accepted())
        }
        // `ping`, and `logging/setLevel`, which 2026-07-28 does not have
        // (its servers log on a call's stream as they choose; those lines
        // reach the client).
        MessageKind::Request
            if matches!(
                ctx.request.method,
                McpMethod::Ping | McpMethod::LoggingSetLevel
            ) =>
        {
            Ok(result_response(ctx.id(), Value::Object(Map::new()), None))
        }
        MessageKind::Request => call(ctx, parts, authority).await,
    }
}

async fn call(
    ctx: Box<RequestCtx>,
    parts: Parts,
    authority: HeaderValue,
) -> Result<Response<ProxyBody>, Refusal> {
    let params = params_of(&ctx.request)?;
    let (session, caps) = match &ctx.session {
        Some(s) => (s.state.nonce.clone(), s.state.caps.into()),
        None => return Err(Refusal::new(Reason::SessionInvalid, "no session")),
    };
    let call = Call {
        gateway: ctx.gateway.clone(),
        route: ctx.route.clone(),
        outbound: Outbound::new(parts, authority, &ctx, caps),
        method: ctx.request.method.as_str().to_owned(),
        params,
        client_id: ctx.id().unwrap_or("null").to_owned(),
        session,
        principal: ctx.binding().principal_key(),
    };
    call.start().await.map_err(|refused| refused.refusal)
}

/// The client's answer to a pushed question: checked as any answer to a
/// push, then handed to the call that waits for it, here or (through the
/// relay) on the replica that holds it.
async fn take_answer(ctx: &RequestCtx) -> Result<Response<ProxyBody>, Refusal> {
    let taken = answer::take(ctx, |push| match &push.call {
        Some(call) if handoff::may_take(ctx, call) => Ok(()),
        Some(_) => Err(Refusal::new(
            Reason::CallNotWaiting,
            "the call this answers no longer waits on this gateway instance (it ended, or another instance holds it)",
        )),
        None => Err(Refusal::new(
            Reason::AnswerNotRequested,
            "this response answers no request this gateway delivered",
        )),
    })
    .await?;
    let key: String = serde_json::from_str(&taken.push.id).map_err(|_| {
        Refusal::new(
            Reason::InternalError,
            "the question's key cannot be restored",
        )
    })?;
    let call = taken.push.call.as_deref().unwrap_or_default();
    let event = CallEvent::Answer {
        key,
        result: taken.result,
        error: taken.error,
    };
    handoff::answer(ctx, call, &taken.push.session, event).await?;
    Ok(accepted())
}

/// `notifications/cancelled` for one of the session's calls.
fn cancel(ctx: &RequestCtx) -> Result<(), Refusal> {
    let params = params_of(&ctx.request)?;
    if let (Some(id), Some(s)) = (params.get("requestId"), &ctx.session) {
        ctx.gateway.bridge.cancel(&s.state.nonce, id);
        handoff::cancel(ctx, &s.state.nonce, Some(id));
    }
    Ok(())
}
