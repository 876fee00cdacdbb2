//! What the single-use store knows about a 2025-11-25 session, and what the
//! stream waits for it to say:
//!
//! * **A session ended by DELETE** (`session.rs` refuses its id from then
//!   on): a request the upstream pushes on a stream that is still open is not
//!   delivered; the gateway answers the upstream itself (`session_expired`).
//! * **URL-mode elicitations it was shown**: when one is delivered, the
//!   store remembers its `elicitationId` under the session, for as long as
//!   the session lives, on every instance that shares the store; a
//!   `notifications/elicitation/complete` is delivered only for such an id
//!   (the client acts on it: closes the browser step, retries the call).
//!   Anything else (no session, no `elicitationId`, an id this session was
//!   never shown) is an upstream protocol violation. 2026-07-28 has no such
//!   notification: the exchange refuses it on its streams before it gets
//!   here.
//!
//! A store that cannot answer refuses (fail closed), and every wait is bounded
//! by the store's own timeouts.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::disposition::{Disposition, Held};
use super::exchange::Exchange;
use crate::json::{error_answer, Message};
use crate::model::{Asked, Fallback, Reason, Refusal, StoreUser};
use crate::sessions::PushState;

/// What the notification's `params` must hold.
#[derive(Deserialize)]
struct CompleteParams {
    #[serde(rename = "elicitationId")]
    elicitation_id: String,
}

/// What a delivered push leaves for the session check.
pub(super) struct ShownPush {
    /// The single-use key of the push and its expiry (unix seconds).
    redemption: (String, u64),
    /// The `elicitationId` of a URL-mode elicitation.
    elicitation: Option<String>,
}

impl ShownPush {
    pub(super) fn of(push: &PushState, params: Option<&Value>) -> ShownPush {
        let elicitation = match push.asked {
            Some(Asked::Url { .. }) => params
                .and_then(|p| p.get("elicitationId"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        };
        ShownPush {
            redemption: (push.redemption_id(), push.expires),
            elicitation,
        }
    }
}

fn not_shown(message: &str) -> Disposition {
    Disposition::Refuse(
        Refusal::new(Reason::UpstreamProtocolViolation, message)
            .with_data("messageKind", "notification".into()),
    )
}

impl Exchange {
    /// A push outside a session is delivered as it is. In a session it
    /// waits for the store: not at all once the session has ended (the
    /// upstream gets the gateway's answer), and a URL-mode elicitation is
    /// remembered as shown before the client can see it.
    pub(super) fn push_in_session(
        &self,
        bytes: Bytes,
        upstream_id: &RawValue,
        shown: ShownPush,
    ) -> Disposition {
        let Some(session) = self.ctx.session.as_ref() else {
            return Disposition::Pushed(bytes);
        };
        let gateway = &self.ctx.gateway;
        let store = gateway.mrtr.replay.clone();
        let ended_key = session.state.ended_id();
        let expires = session
            .state
            .expires_secs(gateway.config.state.session_lifetime);
        let remember = shown
            .elicitation
            .as_deref()
            .map(|e| session.state.elicitation_id(e));
        let ended = Refusal::new(
            Reason::SessionExpired,
            "the session was ended; the gateway delivers no more of its requests",
        );
        let unavailable = Refusal::new(
            Reason::StateStoreUnavailable,
            "the gateway cannot check the session right now",
        );
        let answers = (
            error_answer(upstream_id, &ended, None),
            error_answer(upstream_id, &unavailable, None),
        );
        let send = self.upstream_sender();
        let upstream = self.ctx.route.upstream.label.clone();
        let metrics = gateway.metrics.clone();
        Disposition::Held(Held::new(async move {
            let refused = match store.is_consumed(&ended_key).await {
                Ok(false) => None,
                Ok(true) => Some((answers.0, Reason::SessionExpired)),
                Err(_) => Some((answers.1, Reason::StateStoreUnavailable)),
            };
            if let Some((answer, reason)) = refused {
                tracing::info!(%upstream, reason = reason.as_str(), "pushed request withheld: its session has ended or cannot be checked");
                if reason == Reason::StateStoreUnavailable {
                    // The store failed, not the upstream.
                    metrics.store_fell_back(StoreUser::Replay, Fallback::Refused);
                } else {
                    metrics.upstream_error(&upstream, reason);
                }
                // Answered once: the push's own timeout finds it consumed.
                let (id, until) = &shown.redemption;
                if matches!(store.consume_once(id, *until).await, Ok(true)) {
                    send.send(answer).await;
                }
                return Disposition::Withheld;
            }
            if let Some(key) = remember {
                if store.consume(&key, expires).await.is_err() {
                    // Its completion will be refused; the question itself may go.
                    metrics.store_fell_back(StoreUser::Replay, Fallback::Unchecked);
                    tracing::warn!(%upstream, "the gateway could not remember a URL-mode elicitation it delivered");
                }
            }
            Disposition::Pushed(bytes)
        }))
    }

    /// `checked` is what the text rules made of the notification; it is
    /// delivered once the store confirms the elicitation was shown here.
    pub(super) fn elicitation_complete(
        &self,
        msg: &Message<'_>,
        checked: Disposition,
    ) -> Disposition {
        if matches!(checked, Disposition::Refuse(_)) {
            return checked;
        }
        let Some(session) = self.ctx.session.as_ref() else {
            return not_shown(
                "the upstream completed an elicitation outside a session; only one this gateway delivered in the session may be completed",
            );
        };
        let params = msg
            .params
            .and_then(|p| serde_json::from_str::<CompleteParams>(p.get()).ok());
        let Some(params) = params else {
            return not_shown(
                "the upstream sent notifications/elicitation/complete without an elicitationId",
            );
        };
        let key = session.state.elicitation_id(&params.elicitation_id);
        let store = self.ctx.gateway.mrtr.replay.clone();
        Disposition::Held(Held::new(async move {
            match store.is_consumed(&key).await {
                Ok(true) => checked,
                Ok(false) => not_shown(
                    "the upstream completed an elicitation this gateway did not deliver in this session",
                ),
                Err(_) => Disposition::Refuse(Refusal::new(
                    Reason::StateStoreUnavailable,
                    "the gateway cannot check which elicitations this session was shown right now",
                )),
            }
        }))
    }
}
