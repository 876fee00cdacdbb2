//! The `nextCursor` of a federated route's merged list: which upstreams
//! still have pages and each one's own cursor, sealed, so a client can
//! neither choose the upstream nor forge the cursor it is sent.

use serde::{Deserialize, Serialize};

use super::TokenError;
use crate::mrtr::seal::StateKeys;

/// The prefix of a federated list cursor.
pub const CURSOR_PREFIX: &str = "pfc1.";

/// One upstream whose list goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingList {
    /// The upstream's configured id.
    pub upstream: String,
    /// Its own `nextCursor`, byte for byte.
    pub cursor: String,
}

/// What a federated list cursor carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FederatedCursor {
    pub v: u8,
    /// The federated route's path.
    pub route: String,
    /// `scheme:name` of the principal (`anonymous` when none).
    pub principal: String,
    /// The list method.
    pub method: String,
    pub pending: Vec<PendingList>,
}

impl FederatedCursor {
    pub fn new(
        route: String,
        principal: String,
        method: String,
        pending: Vec<PendingList>,
    ) -> Self {
        FederatedCursor {
            v: 1,
            route,
            principal,
            method,
            pending,
        }
    }

    pub fn seal(&self, keys: &StateKeys) -> Option<String> {
        keys.seal_as(CURSOR_PREFIX, self)
    }

    pub fn open(keys: &StateKeys, token: &str) -> Result<FederatedCursor, TokenError> {
        let c: FederatedCursor = keys.open_as(CURSOR_PREFIX, token)?;
        if c.v != 1 {
            return Err(TokenError::Invalid);
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrtr::seal::new_key_line;

    #[test]
    fn a_cursor_opens_only_unaltered() {
        let keys = StateKeys::parse(&new_key_line("k1")).unwrap();
        let c = FederatedCursor::new(
            "/mcp".into(),
            "anonymous".into(),
            "tools/list".into(),
            vec![PendingList {
                upstream: "gh".into(),
                cursor: "opaque\u{0}2".into(),
            }],
        );
        let token = c.seal(&keys).unwrap();
        assert!(token.starts_with(CURSOR_PREFIX));
        assert_eq!(FederatedCursor::open(&keys, &token).unwrap(), c);
        let mut altered = token.clone().into_bytes();
        let last = altered.len() - 3;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).unwrap();
        assert!(FederatedCursor::open(&keys, &altered).is_err());
        // A session id is not a cursor, even sealed with the same keys.
        let session = super::super::SessionState::new(
            None,
            "anonymous".into(),
            "gh".into(),
            "2025-11-25".into(),
            Default::default(),
            0,
        );
        let sid = session.seal(&keys).unwrap();
        assert!(FederatedCursor::open(&keys, &sid).is_err());
        let other = StateKeys::parse(&new_key_line("k2")).unwrap();
        assert!(FederatedCursor::open(&other, &token).is_err());
    }
}
