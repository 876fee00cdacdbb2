//! The gateway's own `requestState`: an AEAD-sealed token (AES-256-GCM from
//! ring, the provider rustls already uses) carrying everything a retry must
//! be checked against, so that any instance holding the keys can serve it.
//!
//! Token: a purpose prefix (`pcs1.` for a requestState, others for the
//! tokens of 2025-11-25 sessions) + base64url( kid_len | kid | nonce(12) |
//! ciphertext+tag ). The prefix and key id are authenticated as associated
//! data, so a token sealed for one purpose never opens as another.

use std::path::Path;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::model::Asked;

/// The prefix of a sealed `requestState`.
pub const STATE_PREFIX: &str = "pcs1.";
const VERSION: u8 = 1;

/// What a sealed state says about the operation it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SealedState {
    pub v: u8,
    /// The upstream's own requestState, byte for byte (absent when it sent none).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub upstream_state: Option<String>,
    /// `scheme:name` of the principal (`anonymous` when none).
    pub principal: String,
    pub upstream: String,
    pub method: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target: Option<String>,
    /// base64url SHA-256 of the RFC 8785 form of the request's params
    /// without `_meta`, `inputResponses` and `requestState`.
    pub digest: String,
    /// Stays the same across the rounds of one operation.
    pub operation: String,
    pub round: u32,
    /// Unix seconds (read by instances that predate `started_ms`).
    pub started: u64,
    /// Unix milliseconds; 0 in states sealed before it existed.
    #[serde(default)]
    pub started_ms: u64,
    pub expires: u64,
    pub asked: Vec<(String, Asked)>,
    pub answer_bytes: u64,
    /// Set when the question of this round is the gateway's own approval
    /// question (an `[[approval]]` rule), not an upstream's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub approval: Option<SealedApproval>,
}

/// What a sealed state says of the gateway's approval question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedApproval {
    /// The name of the rule that asked.
    pub rule: String,
    /// The input-request key the question was delivered under.
    pub key: String,
    /// Why the rule asked (its audit label: `tool`, `annotation:…`, …).
    pub because: String,
    /// The approval on the gateway's approval page an approver decides
    /// (the question was its link, URL mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the state key file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the environment variable {0} is not set")]
    MissingEnv(String),
    #[error("state key {index}: write keys as KID:BASE64 (32 random bytes); `portcullis keygen` prints one")]
    Format { index: usize },
    #[error("state key id {0:?} is used twice")]
    DuplicateId(String),
    #[error("no state keys given")]
    Empty,
}

/// Why a token did not open. Details never include the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// Not a token of this format, truncated, or not base64.
    Malformed,
    /// Sealed under a key id this instance does not hold.
    UnknownKey,
    /// The AEAD check failed: altered or forged.
    Tampered,
}

struct StateKey {
    id: String,
    key: LessSafeKey,
    /// A key of its own for the operator's requests to the admin listener,
    /// derived from the same secret (never the sealing key itself).
    admin: ring::hmac::Key,
    /// The key of keyed fingerprints (`flows.rs`), derived from this
    /// key's bytes: never the sealing key itself.
    fingerprint: ring::hmac::Key,
}

/// What the admin key is derived with.
const ADMIN_KEY_LABEL: &[u8] = b"portcullis admin request key v1";

/// The keys of this instance: seal with the first, open with any.
pub struct StateKeys {
    keys: Vec<StateKey>,
    generated: bool,
    rng: SystemRandom,
}

impl std::fmt::Debug for StateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        f.debug_struct("StateKeys")
            .field("ids", &ids)
            .field("generated", &self.generated)
            .finish()
    }
}

fn valid_kid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 32
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl StateKeys {
    /// Parse `KID:BASE64` entries separated by commas, whitespace or newlines;
    /// the first is the newest (used to seal).
    pub fn parse(text: &str) -> Result<StateKeys, KeyError> {
        let mut keys: Vec<StateKey> = Vec::new();
        let entries = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|e| !e.is_empty() && !e.starts_with('#'));
        for (index, entry) in entries.enumerate() {
            let (id, b64) = entry.split_once(':').ok_or(KeyError::Format { index })?;
            let bytes = URL_SAFE_NO_PAD
                .decode(b64.trim_end_matches('='))
                .or_else(|_| STANDARD.decode(b64))
                .map_err(|_| KeyError::Format { index })?;
            if !valid_kid(id) || bytes.len() != 32 {
                return Err(KeyError::Format { index });
            }
            if keys.iter().any(|k| k.id == id) {
                return Err(KeyError::DuplicateId(id.to_owned()));
            }
            let unbound =
                UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| KeyError::Format { index })?;
            let derived = ring::hmac::sign(
                &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &bytes),
                ADMIN_KEY_LABEL,
            );
            keys.push(StateKey {
                id: id.to_owned(),
                key: LessSafeKey::new(unbound),
                admin: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, derived.as_ref()),
                fingerprint: fingerprint_key(&bytes),
            });
        }
        if keys.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(StateKeys {
            keys,
            generated: false,
            rng: SystemRandom::new(),
        })
    }

    pub fn from_file(path: &Path) -> Result<StateKeys, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        StateKeys::parse(&text)
    }

    pub fn from_env(var: &str) -> Result<StateKeys, KeyError> {
        let text = crate::model::secret_env::take(var)
            .and_then(|v| v.into_string().ok())
            .ok_or_else(|| KeyError::MissingEnv(var.to_owned()))?;
        StateKeys::parse(&text)
    }

    /// A fresh random key, for a single instance (the demo). A cluster needs
    /// shared keys: a state sealed here cannot be opened anywhere else.
    ///
    /// The key is made once per process, so a config reload (which builds
    /// new settings) does not end the operations in progress.
    pub fn generate() -> StateKeys {
        static GENERATED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        // A random id, so that another process's state is reported as
        // "unknown key" rather than as tampering.
        let text = GENERATED.get_or_init(|| {
            let id = format!("gen-{}", &new_operation_id()[..8]);
            new_key_line(&id)
        });
        let mut keys = StateKeys::parse(text).unwrap_or_else(|_| StateKeys {
            keys: Vec::new(),
            generated: true,
            rng: SystemRandom::new(),
        });
        keys.generated = true;
        keys
    }

    pub fn is_generated(&self) -> bool {
        self.generated
    }

    /// An operator's request to the admin listener, signed with the newest
    /// key: its id and the tag (base64url).
    pub fn admin_sign(&self, message: &[u8]) -> Option<(String, String)> {
        let key = self.keys.first()?;
        let tag = ring::hmac::sign(&key.admin, message);
        Some((key.id.clone(), URL_SAFE_NO_PAD.encode(tag.as_ref())))
    }

    /// Whether `tag` (base64url) signs `message` with the key `kid`.
    pub fn admin_verify(&self, kid: &str, message: &[u8], tag: &str) -> bool {
        let Ok(tag) = URL_SAFE_NO_PAD.decode(tag) else {
            return false;
        };
        self.keys
            .iter()
            .find(|k| k.id == kid)
            .is_some_and(|k| ring::hmac::verify(&k.admin, message, &tag).is_ok())
    }

    /// The key the gateway's keyed fingerprints are made with (derived
    /// from the sealing key; shared by every instance that shares the
    /// keys, so replicas find each other's).
    pub fn fingerprint_key(&self) -> Option<&ring::hmac::Key> {
        self.keys.first().map(|k| &k.fingerprint)
    }

    /// Seal a gateway requestState.
    pub fn seal(&self, state: &SealedState) -> Option<String> {
        self.seal_as(STATE_PREFIX, state)
    }

    /// Open a gateway requestState.
    pub fn open(&self, token: &str) -> Result<SealedState, OpenError> {
        let state: SealedState = self.open_as(STATE_PREFIX, token)?;
        if state.v != VERSION {
            return Err(OpenError::Malformed);
        }
        Ok(state)
    }

    /// Seal `value` (as JSON) into a token that starts with `prefix`.
    pub fn seal_as<T: Serialize>(&self, prefix: &str, value: &T) -> Option<String> {
        let key = self.keys.first()?;
        let mut plain = serde_json::to_vec(value).ok()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let aad = aad(prefix, &key.id);
        key.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&aad),
                &mut plain,
            )
            .ok()?;
        let mut out = Vec::with_capacity(1 + key.id.len() + NONCE_LEN + plain.len());
        out.push(u8::try_from(key.id.len()).ok()?);
        out.extend_from_slice(key.id.as_bytes());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&plain);
        Some(format!("{prefix}{}", URL_SAFE_NO_PAD.encode(out)))
    }

    /// Open a token sealed by [`StateKeys::seal_as`] with the same `prefix`.
    pub fn open_as<T: DeserializeOwned>(&self, prefix: &str, token: &str) -> Result<T, OpenError> {
        let body = token.strip_prefix(prefix).ok_or(OpenError::Malformed)?;
        let mut raw = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| OpenError::Malformed)?;
        let kid_len = usize::from(*raw.first().ok_or(OpenError::Malformed)?);
        if raw.len() < 1 + kid_len + NONCE_LEN + AES_256_GCM.tag_len() {
            return Err(OpenError::Malformed);
        }
        let kid = std::str::from_utf8(&raw[1..1 + kid_len])
            .map_err(|_| OpenError::Malformed)?
            .to_owned();
        let key = self
            .keys
            .iter()
            .find(|k| k.id == kid)
            .ok_or(OpenError::UnknownKey)?;
        let nonce_bytes: [u8; NONCE_LEN] = raw[1 + kid_len..1 + kid_len + NONCE_LEN]
            .try_into()
            .map_err(|_| OpenError::Malformed)?;
        let sealed = &mut raw[1 + kid_len + NONCE_LEN..];
        let aad = aad(prefix, &kid);
        let plain = key
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce_bytes),
                Aad::from(&aad),
                sealed,
            )
            .map_err(|_| OpenError::Tampered)?;
        serde_json::from_slice(plain).map_err(|_| OpenError::Tampered)
    }
}

/// HMAC-SHA256 key from a state key's bytes, for a purpose of its own.
fn fingerprint_key(bytes: &[u8]) -> ring::hmac::Key {
    let derive = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, bytes);
    let tag = ring::hmac::sign(&derive, b"portcullis keyed fingerprints v1");
    ring::hmac::Key::new(ring::hmac::HMAC_SHA256, tag.as_ref())
}

fn aad(prefix: &str, kid: &str) -> Vec<u8> {
    let mut a = Vec::with_capacity(prefix.len() + kid.len());
    a.extend_from_slice(prefix.as_bytes());
    a.extend_from_slice(kid.as_bytes());
    a
}

impl SealedState {
    /// When the operation started, in Unix milliseconds (whole seconds for
    /// a state sealed before `started_ms` existed).
    pub fn started_millis(&self) -> u64 {
        match self.started_ms {
            0 => self.started.saturating_mul(1000),
            ms => ms,
        }
    }
}

/// `KID:BASE64URL` of 32 fresh random bytes: what `portcullis keygen` prints.
pub fn new_key_line(kid: &str) -> String {
    let mut bytes = [0u8; 32];
    // SystemRandom only fails when the OS has no randomness at all.
    if SystemRandom::new().fill(&mut bytes).is_err() {
        return String::new();
    }
    format!("{kid}:{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// A fresh operation id (128 random bits).
pub fn new_operation_id() -> String {
    let mut bytes = [0u8; 16];
    let _ = SystemRandom::new().fill(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FieldKind, FormField, FormSchema};
    use proptest::prelude::*;

    fn sample() -> SealedState {
        SealedState {
            v: 1,
            upstream_state: Some("eyJoaW50IjoidGhlIGJpZyByb29tIn0=/+\u{e9}".into()),
            principal: "api_key:alice".into(),
            upstream: "rooms".into(),
            method: "tools/call".into(),
            target: Some("book_room".into()),
            digest: "abc".into(),
            operation: "op-1".into(),
            round: 1,
            started: 1_700_000_000,
            started_ms: 1_700_000_000_250,
            expires: 1_700_000_600,
            asked: vec![(
                "room".into(),
                Asked::Form(FormSchema {
                    fields: vec![FormField {
                        name: "room_id".into(),
                        required: true,
                        kind: FieldKind::Choice {
                            options: vec!["atrium".into(), "nook".into()],
                        },
                    }],
                }),
            )],
            answer_bytes: 0,
            approval: None,
        }
    }

    fn keys(text: &str) -> StateKeys {
        StateKeys::parse(text).unwrap()
    }

    #[test]
    fn seal_and_open_round_trip_and_rotation() {
        let old = new_key_line("k1");
        let new = new_key_line("k2");
        let before = keys(&old);
        let token = before.seal(&sample()).unwrap();
        assert!(token.starts_with("pcs1."));
        assert_eq!(before.open(&token).unwrap(), sample());
        // After rotation: seal with the new key, still open the old tokens.
        let rotated = keys(&format!("{new},{old}"));
        assert_eq!(rotated.open(&token).unwrap(), sample());
        let fresh = rotated.seal(&sample()).unwrap();
        assert_eq!(before.open(&fresh), Err(OpenError::UnknownKey));
        assert_eq!(
            keys(&new_key_line("k1")).open(&token),
            Err(OpenError::Tampered),
            "same id, other key"
        );
    }

    #[test]
    fn bad_tokens_and_keys() {
        let k = keys(&new_key_line("k"));
        for bad in [
            "",
            "pcs1.",
            "pcs1.!!!",
            "pcs2.AAAA",
            "eyJ1cHN0cmVhbSI6MX0",
            "pcs1.AQ",
        ] {
            assert!(k.open(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(
            StateKeys::parse("nocolon"),
            Err(KeyError::Format { .. })
        ));
        assert!(matches!(
            StateKeys::parse("k:c2hvcnQ"),
            Err(KeyError::Format { .. })
        ));
        assert!(matches!(StateKeys::parse(""), Err(KeyError::Empty)));
        let line = new_key_line("k");
        assert!(matches!(
            StateKeys::parse(&format!("{line}\n{line}")),
            Err(KeyError::DuplicateId(_))
        ));
        assert!(
            !format!("{k:?}").contains(line.split(':').nth(1).unwrap()),
            "Debug never shows key material"
        );
    }

    #[test]
    fn a_state_sealed_before_millisecond_starts_still_opens() {
        let k = keys(&new_key_line("k"));
        let mut old = serde_json::to_value(sample()).unwrap();
        old.as_object_mut().unwrap().remove("started_ms");
        let token = k.seal_as(STATE_PREFIX, &old).unwrap();
        let opened = k.open(&token).unwrap();
        assert_eq!(opened.started_ms, 0);
        assert_eq!(opened.started_millis(), 1_700_000_000_000);
        assert_eq!(sample().started_millis(), 1_700_000_000_250);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        /// Any single-byte change of a sealed token is refused.
        #[test]
        fn any_single_byte_change_is_refused(pos in 0usize..4096, byte in any::<u8>()) {
            let k = keys(&new_key_line("k"));
            let token = k.seal(&sample()).unwrap();
            let mut bytes = token.clone().into_bytes();
            let i = pos % bytes.len();
            prop_assume!(bytes[i] != byte);
            bytes[i] = byte;
            if let Ok(changed) = String::from_utf8(bytes) {
                prop_assert!(k.open(&changed).is_err());
            }
        }
    }
}
