//! What the bridge keeps for a 2026-07-28 client of a 2025-11-25-only
//! upstream, on this instance: the upstream sessions it opened (one per
//! caller and declared capabilities), and each upstream call held open
//! while the client answers the request the upstream pushed in it.

use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use http::request::Parts;
use http::HeaderValue;
use serde_json::Value;

use super::super::ctx::RequestCtx;
use super::super::request::copy_head;
use super::calls::BridgeCalls;
use super::events::Messages;

/// An upstream session the gateway opened.
#[derive(Clone)]
pub(super) struct Opened {
    /// The gateway's session id for it (what its phases open).
    pub(crate) token: HeaderValue,
    /// The version the upstream agreed to.
    pub(crate) version: HeaderValue,
    /// Its `initialize` result, as its policy left it.
    pub(crate) described: Value,
    pub(crate) at: Instant,
    /// Kept for every call of its caller; else (an anonymous caller, whom
    /// the gateway cannot tell from another) opened for one call and ended
    /// with it.
    pub(crate) shared: bool,
}

/// An upstream call held open at a pushed request.
pub(crate) struct Held {
    pub(crate) messages: Messages,
    pub(crate) session: Opened,
    /// The pushed request's (sealed) id.
    pub(crate) push: Value,
    /// Its round: how many pushes the call has had.
    pub(crate) round: u32,
    /// What the call was started with, kept when a relay may hand its
    /// retry here from another replica (whose request the call cannot use).
    pub(crate) origin: Option<Box<Origin>>,
}

/// The request a held call was started with: what resuming it needs.
pub(crate) struct Origin {
    pub(crate) ctx: RequestCtx,
    pub(crate) head: Parts,
    pub(crate) authority: HeaderValue,
}

impl Origin {
    pub(crate) fn of(ctx: &RequestCtx, head: &Parts, authority: &HeaderValue) -> Origin {
        let ctx = RequestCtx {
            gateway: ctx.gateway.clone(),
            route: ctx.route.clone(),
            peer: ctx.peer.clone(),
            request_id: ctx.request_id.clone(),
            started: ctx.started,
            principal: ctx.principal.clone(),
            request: ctx.request.clone(),
            retry: None,
            task: None,
            session: None,
            trace: ctx.trace.clone(),
            subject: ctx.subject.clone(),
            argument_asks: Vec::new(),
            listing_held: false,
            asked_before: None,
        };
        Origin {
            ctx,
            head: copy_head(head),
            authority: authority.clone(),
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BridgeCalls {
    /// The session opened for `key`, when younger than `lifetime`.
    pub(super) fn session(&self, key: &str, lifetime: Duration) -> Option<Opened> {
        let sessions = lock(&self.sessions);
        sessions
            .get(key)
            .filter(|o| o.at.elapsed() < lifetime)
            .cloned()
    }

    pub(super) fn keep_session(&self, key: String, opened: Opened) {
        lock(&self.sessions).insert(key, opened);
    }

    /// The upstream said the session is gone.
    pub(super) fn forget_session(&self, key: &str) {
        lock(&self.sessions).remove(key);
    }

    /// Hold `held` as `call` for at most `timeout`; `expired` is called
    /// when no retry took it by then.
    pub(super) fn hold(
        self: &Arc<Self>,
        call: String,
        held: Held,
        timeout: Duration,
        expired: impl FnOnce() + Send + 'static,
    ) {
        lock(&self.held).insert(call.clone(), held);
        let calls = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            // Dropped: the upstream's stream closes (the gateway has already
            // answered its push with operation_expired by then).
            let left = lock(&calls.held).remove(&call);
            if left.is_some() {
                expired();
            }
        });
    }

    /// The held call `call`, taken (a retry resumes it once).
    pub(super) fn take_held(&self, call: &str) -> Option<Held> {
        lock(&self.held).remove(call)
    }

    /// How many upstream calls are held here.
    pub(crate) fn held_len(&self) -> usize {
        lock(&self.held).len()
    }
}
