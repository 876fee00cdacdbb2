//! API keys: stored in config as SHA-256 hashes only; a presented key is hashed
//! once and its digest looked up in a `HashMap`.
//!
//! Why a plain `HashMap` lookup is safe against timing attacks: what the
//! lookup compares (with non-constant-time hashing and equality) is the
//! SHA-256 digest of the *presented* key, never the stored secret against
//! attacker input. Timing can at best reveal how many leading bytes of the
//! attacker's own digest match a stored digest; turning that into a key would
//! need a SHA-256 preimage, and the digests themselves are not secret enough
//! to matter because keys are high-entropy (`generate_key` makes 256-bit
//! keys), so a known digest cannot be brute-forced back to its key either.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use http::header::{HeaderMap, HeaderName, AUTHORIZATION};
use ring::rand::SecureRandom;
use toml::Spanned;

use super::config::{printable_name, AuthConfigError, RawApiKey, RawAuthScheme};
use super::{bearer, raw_header, Attempt, AuthMethod, Credential, Principal};

/// Where a scheme reads its key from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyLocation {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// `<header>: <key>`.
    Header(HeaderName),
}

pub(crate) struct ApiKeyScheme {
    location: KeyLocation,
    /// SHA-256 of the key → who it belongs to (precomputed, shared Arcs).
    keys: HashMap<[u8; 32], Principal>,
}

impl std::fmt::Debug for ApiKeyScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeyScheme")
            .field("location", &self.location)
            .field("keys", &self.keys.len())
            .finish()
    }
}

const HASH_PREFIX: &str = "sha256:";

/// `sha256:<hex>` of a key, the form stored in config.
pub fn hash_key(key: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let mut out = String::with_capacity(HASH_PREFIX.len() + 64);
    out.push_str(HASH_PREFIX);
    for b in d.as_ref() {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

/// A new random API key: `pcl_` + 32 random bytes (from the OS CSPRNG via
/// `ring::rand`), base64url without padding.
pub fn generate_key() -> String {
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the operating system's random number generator failed");
    format!(
        "pcl_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// Whether `token` has the shape of a key [`generate_key`] makes (`pcl_`
/// and 43 base64url characters): the gateway's own, never an
/// authorization server's token.
pub(crate) fn is_gateway_key(token: &str) -> bool {
    token.strip_prefix("pcl_").is_some_and(|rest| {
        rest.len() == 43
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

fn digest(key: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Parses `sha256:<64 hex>` (either case). `None` for anything else.
fn parse_hash(s: &str) -> Option<[u8; 32]> {
    let hex = s.strip_prefix(HASH_PREFIX)?.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

impl ApiKeyScheme {
    pub(crate) fn build(raw: &RawAuthScheme) -> Result<ApiKeyScheme, AuthConfigError> {
        raw.only("api_key", super::config::API_KEY_FIELDS)?;
        let location = match &raw.header {
            None => KeyLocation::Bearer,
            Some(h) => {
                let name = HeaderName::from_bytes(h.get_ref().trim().as_bytes()).map_err(|_| {
                    AuthConfigError::at(h, "auth.header", "not a valid HTTP header name")
                })?;
                if name == AUTHORIZATION {
                    KeyLocation::Bearer
                } else {
                    KeyLocation::Header(name)
                }
            }
        };
        let mut keys: HashMap<[u8; 32], Principal> = HashMap::new();
        let mut principals: HashMap<&str, ()> = HashMap::new();
        let empty: Vec<Spanned<RawApiKey>> = Vec::new();
        let entries = raw.keys.as_ref().map_or(&empty, |k| k.get_ref());
        for entry in entries {
            let entry = entry.get_ref();
            let principal = entry.principal.get_ref();
            if !printable_name(principal) {
                return Err(AuthConfigError::at(
                    &entry.principal,
                    "auth.key.principal",
                    "must be 1 to 256 characters, without control characters or surrounding spaces",
                ));
            }
            if principal == "anonymous" {
                return Err(AuthConfigError::at(
                    &entry.principal,
                    "auth.key.principal",
                    "\"anonymous\" is reserved for unauthenticated callers",
                ));
            }
            if principals.insert(principal, ()).is_some() {
                return Err(AuthConfigError::at(
                    &entry.principal,
                    "auth.key.principal",
                    format!("principal \"{principal}\" appears twice in this scheme; give each key its own principal"),
                ));
            }
            let mut groups = Vec::new();
            if let Some(g) = &entry.groups {
                for group in g.get_ref() {
                    if !printable_name(group.get_ref()) {
                        return Err(AuthConfigError::at(
                            group,
                            "auth.key.groups",
                            "a group must be 1 to 256 characters, without control characters or surrounding spaces",
                        ));
                    }
                    if !groups.contains(group.get_ref()) {
                        groups.push(group.get_ref().clone());
                    }
                }
            }
            // The message never echoes the value: someone may have pasted the key itself.
            let hash = parse_hash(entry.hash.get_ref().trim()).ok_or_else(|| {
                AuthConfigError::at(
                    &entry.hash,
                    "auth.key.hash",
                    "must be \"sha256:\" followed by 64 hex digits, as printed by `portcullis hash-key`; never put the key itself in the config",
                )
            })?;
            let p = Principal {
                name: Arc::from(principal.as_str()),
                groups: Arc::from(groups),
                method: AuthMethod::ApiKey,
                scheme: Arc::default(),
                grant: None,
            };
            if keys.insert(hash, p).is_some() {
                return Err(AuthConfigError::at(
                    &entry.hash,
                    "auth.key.hash",
                    "the same key hash appears twice in this scheme",
                ));
            }
        }
        Ok(ApiKeyScheme { location, keys })
    }

    /// Whether a key of this scheme still names `name` with `groups`.
    pub(crate) fn names(&self, name: &str, groups: &[String]) -> bool {
        self.keys
            .values()
            .any(|p| &*p.name == name && *p.groups == *groups)
    }

    pub(crate) fn attempt(&self, headers: &HeaderMap) -> Attempt {
        match &self.location {
            KeyLocation::Bearer => match bearer(headers) {
                Credential::Absent => Attempt::Absent,
                Credential::Malformed(why) => Attempt::Declined(why),
                Credential::Present(key) => match self.keys.get(&digest(key)) {
                    Some(p) => Attempt::Accepted(p.clone()),
                    // The Authorization header may be shared with a JWT
                    // scheme later in the list: leave the decision to it
                    // (`authenticate` still fails if no scheme accepts it).
                    None => Attempt::Declined("unknown key"),
                },
            },
            KeyLocation::Header(name) => match raw_header(headers, name) {
                Credential::Absent => Attempt::Absent,
                Credential::Malformed(why) => Attempt::Rejected(why),
                Credential::Present(key) => match self.keys.get(&digest(key)) {
                    Some(p) => Attempt::Accepted(p.clone()),
                    None => Attempt::Rejected("unknown key"),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identify::looks_like_jwt;

    #[test]
    fn hash_format() {
        let h = hash_key("test");
        assert_eq!(
            h,
            "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
        assert_eq!(parse_hash(&h), Some(digest("test")));
        assert_eq!(
            parse_hash(&h.to_uppercase().replace("SHA256", "sha256")),
            Some(digest("test"))
        );
        assert_eq!(parse_hash("sha256:abc"), None);
        assert_eq!(parse_hash("test"), None);
        assert_eq!(parse_hash(&h.replace('9', "g")), None);
    }

    #[test]
    fn generated_keys() {
        let a = generate_key();
        let b = generate_key();
        assert_ne!(a, b);
        assert!(a.starts_with("pcl_"));
        assert_eq!(a.len(), 4 + 43);
        assert!(a[4..]
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert!(!looks_like_jwt(&a));
    }
}
