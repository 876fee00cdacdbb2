//! 2025-11-25 sessions through a stateless gateway. The `Mcp-Session-Id`
//! a client sees is the gateway's own sealed [`SessionState`] (the
//! upstream's session id, who the caller is, which upstream, what the
//! client declared at `initialize`), so any replica holding the keys can
//! serve the next request, and nothing the client depends on lives in one
//! process. The id of every request an upstream pushes to the client is
//! replaced by a sealed [`PushState`], so a client can answer only a request
//! it was shown, in its own session, once, and the answer is checked against
//! what was asked.

mod cursor;
mod hold;

pub use cursor::{FederatedCursor, PendingList, CURSOR_PREFIX};
pub use hold::{HoldState, HOLD_PREFIX};

use serde::{Deserialize, Serialize};

use crate::model::{Asked, ClientCaps};
use crate::mrtr::seal::{new_operation_id, OpenError, StateKeys};

/// The prefix of a gateway session id.
pub const SESSION_PREFIX: &str = "pss1.";
/// The prefix of the id of a request pushed to a client.
pub const PUSH_PREFIX: &str = "psr1.";

/// What a client declared at `initialize`, compactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedCaps {
    pub(crate) form: bool,
    pub(crate) url: bool,
    pub(crate) sampling: bool,
    pub(crate) context: bool,
    pub(crate) roots: bool,
}

impl From<ClientCaps> for SealedCaps {
    fn from(c: ClientCaps) -> Self {
        SealedCaps {
            form: c.elicitation_form,
            url: c.elicitation_url,
            sampling: c.sampling,
            context: c.sampling_context,
            roots: c.roots,
        }
    }
}

impl From<SealedCaps> for ClientCaps {
    fn from(c: SealedCaps) -> Self {
        ClientCaps {
            elicitation_form: c.form,
            elicitation_url: c.url,
            sampling: c.sampling,
            sampling_context: c.context,
            roots: c.roots,
            // The Tasks extension is a 2026-07-28 per-request declaration.
            tasks: false,
        }
    }
}

/// What a gateway session id carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    pub(crate) v: u8,
    /// The upstream's own `Mcp-Session-Id`, when it issued one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub upstream_session: Option<String>,
    /// `scheme:name` of the principal (`anonymous` when none).
    pub principal: String,
    pub upstream: String,
    /// The protocol version the client asked for at `initialize`.
    pub version: String,
    pub caps: SealedCaps,
    /// Unix milliseconds.
    pub created_ms: u64,
    /// Names this session in the pushes delivered to it.
    pub nonce: String,
    /// A federated route's session (`upstream` is then the route's path):
    /// each upstream's own session, in the route's order.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub members: Vec<MemberSession>,
    /// The upstream speaks only 2026-07-28: the gateway answered
    /// `initialize` itself and carries each request across (no upstream
    /// session exists).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub bridged: bool,
}

/// One upstream's part of a federated route's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSession {
    /// The upstream's configured id.
    pub id: String,
    /// Its own `Mcp-Session-Id`, when it issued one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session: Option<String>,
    /// The gateway carries this upstream's part across (it is served in
    /// 2026-07-28, its questions pushed to the client).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub bridged: bool,
}

/// What the id of a pushed request carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushState {
    pub v: u8,
    /// The upstream's own id of the request, as JSON text.
    pub id: String,
    /// The session's nonce (empty outside a session).
    pub session: String,
    pub principal: String,
    pub upstream: String,
    pub method: String,
    /// What was asked (`None` for `ping`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub asked: Option<Asked>,
    /// Shared by every push of one client request's stream.
    pub operation: String,
    pub round: u32,
    /// Unix milliseconds.
    pub started_ms: u64,
    /// Unix seconds.
    pub expires: u64,
    /// A question of a bridged call: the call that waits for the answer on
    /// the gateway instance that pushed it (`id` is then the question's key
    /// in the upstream's `inputRequests`), instead of an upstream request.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub call: Option<String>,
}

impl PushState {
    /// The single-use store's key for this push.
    pub fn redemption_id(&self) -> String {
        format!("push.{}.{}", self.operation, self.round)
    }
}

/// Why a session id or push id did not open. Never carries the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("not issued by this gateway, or altered")]
    Invalid,
    #[error("sealed with a key this gateway does not hold")]
    UnknownKey,
}

impl From<OpenError> for TokenError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::UnknownKey => TokenError::UnknownKey,
            OpenError::Malformed | OpenError::Tampered => TokenError::Invalid,
        }
    }
}

impl SessionState {
    /// When the session ends by age (unix seconds): what the single-use
    /// store's entries about it live for.
    pub fn expires_secs(&self, lifetime: std::time::Duration) -> u64 {
        (self.created_ms / 1000).saturating_add(lifetime.as_secs())
    }

    /// The single-use store's key that says the session was ended (DELETE).
    pub fn ended_id(&self) -> String {
        format!("session-ended.{}", self.nonce)
    }

    /// The single-use store's key that says this session was shown the
    /// URL-mode elicitation `elicitation_id` (the upstream's id, digested:
    /// it is the upstream's text and any length).
    pub fn elicitation_id(&self, elicitation_id: &str) -> String {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        let digest = ring::digest::digest(&ring::digest::SHA256, elicitation_id.as_bytes());
        format!(
            "elicitation.{}.{}",
            self.nonce,
            URL_SAFE_NO_PAD.encode(digest.as_ref())
        )
    }

    pub fn new(
        upstream_session: Option<String>,
        principal: String,
        upstream: String,
        version: String,
        caps: ClientCaps,
        created_ms: u64,
    ) -> SessionState {
        SessionState {
            v: 1,
            upstream_session,
            principal,
            upstream,
            version,
            caps: caps.into(),
            created_ms,
            nonce: new_operation_id(),
            members: Vec::new(),
            bridged: false,
        }
    }

    pub fn seal(&self, keys: &StateKeys) -> Option<String> {
        keys.seal_as(SESSION_PREFIX, self)
    }

    /// The session of upstream `id` within a federated route's session:
    /// this one's caller, version, capabilities and nonce (so ending one
    /// ends all), that upstream's own session id. `None` when that upstream
    /// is not part of it.
    pub fn member(&self, id: &str) -> Option<SessionState> {
        let m = self.members.iter().find(|m| m.id == id)?;
        Some(SessionState {
            upstream_session: m.session.clone(),
            upstream: m.id.clone(),
            members: Vec::new(),
            bridged: m.bridged,
            ..self.clone()
        })
    }

    pub fn open(keys: &StateKeys, token: &str) -> Result<SessionState, TokenError> {
        let s: SessionState = keys.open_as(SESSION_PREFIX, token)?;
        if s.v != 1 {
            return Err(TokenError::Invalid);
        }
        Ok(s)
    }
}

impl PushState {
    pub fn seal(&self, keys: &StateKeys) -> Option<String> {
        keys.seal_as(PUSH_PREFIX, self)
    }

    pub fn open(keys: &StateKeys, token: &str) -> Result<PushState, TokenError> {
        let p: PushState = keys.open_as(PUSH_PREFIX, token)?;
        if p.v != 1 {
            return Err(TokenError::Invalid);
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrtr::seal::new_key_line;

    fn keys() -> StateKeys {
        StateKeys::parse(&new_key_line("k")).unwrap()
    }

    #[test]
    fn sessions_and_pushes_seal_and_never_open_as_each_other() {
        let k = keys();
        let s = SessionState::new(
            Some("up-1".into()),
            "anonymous".into(),
            "rooms".into(),
            "2025-11-25".into(),
            ClientCaps::default(),
            5,
        );
        let token = s.seal(&k).unwrap();
        assert!(token.starts_with(SESSION_PREFIX));
        assert!(
            token.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "a visible-ASCII header value"
        );
        assert_eq!(SessionState::open(&k, &token).unwrap(), s);
        assert_eq!(PushState::open(&k, &token), Err(TokenError::Invalid));
        let forged = format!("{PUSH_PREFIX}{}", &token[SESSION_PREFIX.len()..]);
        assert_eq!(PushState::open(&k, &forged), Err(TokenError::Invalid));
        let other = keys();
        assert_eq!(SessionState::open(&other, &token), Err(TokenError::Invalid));
    }
}
