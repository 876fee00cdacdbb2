//! The `requestState` a 2026-07-28 client holds while the gateway keeps a
//! 2025-11-25 upstream's call open for it (a pushed request turned into an
//! `input_required` question): which held call, on which gateway instance,
//! for whom, for what, until when. Sealed, so a client can neither forge
//! it nor point it at another caller's call.

use serde::{Deserialize, Serialize};

use super::TokenError;
use crate::mrtr::seal::StateKeys;

/// The prefix of a held call's `requestState`.
pub const HOLD_PREFIX: &str = "pbh1.";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldState {
    pub v: u8,
    /// The held call, among the calls held on `instance`.
    pub call: String,
    /// The gateway instance that holds it.
    pub instance: String,
    pub principal: String,
    pub upstream: String,
    /// The method and tool, prompt or resource of the call.
    pub method: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target: Option<String>,
    /// The digest of the call's params (`mrtr::params_digest`): a retry
    /// must not change them.
    pub digest: String,
    /// The question's key in `inputRequests`.
    pub key: String,
    /// Unix seconds.
    pub expires: u64,
}

impl HoldState {
    pub fn seal(&self, keys: &StateKeys) -> Option<String> {
        keys.seal_as(HOLD_PREFIX, self)
    }

    pub fn open(keys: &StateKeys, token: &str) -> Result<HoldState, TokenError> {
        let h: HoldState = keys.open_as(HOLD_PREFIX, token)?;
        if h.v != 1 {
            return Err(TokenError::Invalid);
        }
        Ok(h)
    }
}
