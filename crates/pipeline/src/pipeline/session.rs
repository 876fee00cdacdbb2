//! Phase: the 2025-11-25 session. A request that carries the gateway's
//! session id has it opened and checked against who is calling and which
//! upstream the route leads to, and against the single-use store: a session
//! the client ended with DELETE stays ended on every instance that shares
//! the store, until its own expiry. The upstream later gets its own session
//! id back. An `initialize` has none yet: the response phase mints one.

use http::{HeaderMap, HeaderValue};

use super::ctx::{OpenSession, RequestCtx};
use crate::headers::MCP_SESSION_ID;
use crate::model::{Generation, McpMethod, Reason, Refusal};
use crate::sessions::{SessionState, TokenError, SESSION_PREFIX};

fn invalid(message: &str) -> Refusal {
    Refusal::new(Reason::SessionInvalid, message)
}

/// Open the client's session id, when the request carries one. A request
/// the bridge `carried` to a federated route's member may carry the
/// session the bridge opened at that upstream alone.
pub(crate) async fn open(
    ctx: &mut RequestCtx,
    headers: &HeaderMap,
    carried: bool,
) -> Result<(), Refusal> {
    if ctx.request.generation() != Generation::Sessions {
        return Ok(());
    }
    let mut values = headers.get_all(&MCP_SESSION_ID).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return match headers.contains_key(&MCP_SESSION_ID) {
            true => Err(invalid("Mcp-Session-Id is given more than once")),
            false => Ok(()),
        };
    };
    if ctx.request.method == McpMethod::Initialize {
        return Err(Refusal::new(
            Reason::InvalidRequest,
            "initialize starts a session; send it without Mcp-Session-Id",
        ));
    }
    let token = value
        .to_str()
        .ok()
        .filter(|t| t.starts_with(SESSION_PREFIX))
        .ok_or_else(|| {
            invalid("this session id was not issued by this gateway; initialize again")
        })?;
    let gateway = &ctx.gateway;
    let state = SessionState::open(&gateway.config.state.keys, token).map_err(|e| match e {
        TokenError::UnknownKey => invalid(
            "this session was sealed with a key this gateway does not hold; initialize again",
        ),
        TokenError::Invalid => invalid(
            "this session id was not issued by this gateway, or was altered; initialize again",
        ),
    })?;
    let id = &ctx.route.upstream.settings.id;
    // A federated route's session holds each upstream's: this request's is
    // the one of the upstream it goes to.
    let state = match &ctx.route.member {
        Some(member) if state.upstream == *member.path => state.member(id).ok_or_else(|| {
            invalid("this upstream did not join the session at initialize; initialize again")
        })?,
        Some(_) if carried && state.upstream == *id && state.members.is_empty() => state,
        None if state.upstream == *id => state,
        _ => {
            return Err(invalid(
                "this session belongs to another caller or MCP server; initialize again",
            ))
        }
    };
    if state.principal != ctx.binding().principal_key() {
        return Err(invalid(
            "this session belongs to another caller or MCP server; initialize again",
        ));
    }
    let lifetime =
        u64::try_from(gateway.config.state.session_lifetime.as_millis()).unwrap_or(u64::MAX);
    if gateway.clock.now_millis().saturating_sub(state.created_ms) > lifetime {
        return Err(Refusal::new(
            Reason::SessionExpired,
            "this session has ended; initialize again",
        ));
    }
    // Boxed: this future is large (the state store's calls) and most
    // requests never get here; inline it would size every request's future.
    match Box::pin(gateway.mrtr.replay.is_consumed(&state.ended_id())).await {
        Ok(false) => {}
        Ok(true) => {
            return Err(Refusal::new(
                Reason::SessionExpired,
                "this session was ended with DELETE; initialize again",
            ))
        }
        Err(_) => return Err(store_unavailable()),
    }
    ctx.request.client = state.caps.into();
    ctx.session = Some(Box::new(OpenSession { state }));
    Ok(())
}

fn store_unavailable() -> Refusal {
    Refusal::new(
        Reason::StateStoreUnavailable,
        "the gateway cannot check whether this session has ended right now; try again",
    )
}

/// After the upstream accepted a DELETE: the session is over for every
/// instance sharing the single-use store, until it would have expired. (A
/// federated route's session ends once all its upstreams were asked:
/// [`end_session`].)
pub(crate) async fn end(ctx: &RequestCtx) -> Result<(), Refusal> {
    match ctx.session.as_ref() {
        Some(session) if ctx.route.member.is_none() => {
            end_session(&ctx.gateway, &session.state).await
        }
        _ => Ok(()),
    }
}

/// The session `state` is over (see [`end`]).
pub(crate) async fn end_session(
    gateway: &super::Gateway,
    state: &SessionState,
) -> Result<(), Refusal> {
    let until = state.expires_secs(gateway.config.state.session_lifetime);
    gateway
        .mrtr
        .replay
        .consume(&state.ended_id(), until)
        .await
        .map_err(|_| {
            Refusal::new(
                Reason::StateStoreUnavailable,
                "the upstream ended the session, but the gateway could not record it; send DELETE again",
            )
        })
}

/// The session header the upstream gets: its own session id, or none.
pub(crate) fn to_upstream(ctx: &RequestCtx, headers: &mut HeaderMap) {
    headers.remove(&MCP_SESSION_ID);
    let upstream = ctx
        .session
        .as_ref()
        .and_then(|s| s.state.upstream_session.as_deref())
        .and_then(|s| HeaderValue::from_str(s).ok());
    if let Some(v) = upstream {
        headers.insert(MCP_SESSION_ID.clone(), v);
    }
}

/// A new gateway session for the answer to `initialize`, carrying the
/// upstream's own session id (when it sent one).
pub(crate) fn mint(
    ctx: &RequestCtx,
    upstream_session: Option<&HeaderValue>,
) -> Option<HeaderValue> {
    let upstream_session = match upstream_session {
        None => None,
        Some(v) => Some(v.to_str().ok()?.to_owned()),
    };
    seal(ctx, new_state(ctx, upstream_session))
}

/// A new bridged session (`pipeline::bridge`): the gateway answered
/// `initialize`; the upstream has no session.
pub(crate) fn mint_bridged(ctx: &RequestCtx) -> Option<HeaderValue> {
    let mut state = new_state(ctx, None);
    state.bridged = true;
    seal(ctx, state)
}

fn seal(ctx: &RequestCtx, state: SessionState) -> Option<HeaderValue> {
    let token = state.seal(&ctx.gateway.config.state.keys)?;
    HeaderValue::from_str(&token).ok()
}

fn new_state(ctx: &RequestCtx, upstream_session: Option<String>) -> SessionState {
    let gateway = &ctx.gateway;
    SessionState::new(
        upstream_session,
        ctx.binding().principal_key(),
        ctx.route.upstream.settings.id.clone(),
        ctx.request
            .requested_version
            .clone()
            .unwrap_or_else(|| ctx.request.version.as_str().to_owned()),
        ctx.request.client,
        gateway.clock.now_millis(),
    )
}
