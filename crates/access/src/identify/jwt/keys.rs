//! The keys a JWT scheme verifies with: parsed from a JWKS or a secret,
//! each usable only with the algorithms its type allows.

use super::*;

pub(super) const RSA_ALGS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];
pub(super) const HMAC_ALGS: &[Algorithm] = &[Algorithm::HS256, Algorithm::HS384, Algorithm::HS512];
pub(super) const SUPPORTED: &str =
    "RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA, HS256, HS384, HS512";

pub(super) fn is_hmac(a: Algorithm) -> bool {
    HMAC_ALGS.contains(&a)
}

/// One verification key.
pub(super) struct VerifyKey {
    pub(super) kid: Option<String>,
    pub(super) key: DecodingKey,
    /// Algorithms this key may verify (its type's, narrowed by its own `alg`
    /// and by the scheme's list).
    pub(super) algs: Vec<Algorithm>,
}

impl std::fmt::Debug for VerifyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyKey")
            .field("kid", &self.kid)
            .field("algs", &self.algs)
            .finish_non_exhaustive()
    }
}

/// The keys a scheme currently trusts.
#[derive(Debug, Default)]
pub(crate) struct KeySet {
    pub(super) keys: Vec<VerifyKey>,
    pub(super) by_kid: HashMap<String, usize>,
    /// A shared secret: the token's `kid` is not consulted.
    pub(super) any_kid: bool,
}

impl KeySet {
    pub(super) fn select(&self, kid: Option<&str>) -> Option<&VerifyKey> {
        if self.any_kid {
            return self.keys.first();
        }
        if let Some(i) = kid.and_then(|k| self.by_kid.get(k)) {
            return Some(&self.keys[*i]);
        }
        // No kid, or one the set does not name: only a lone key, and only if
        // it does not carry a different kid of its own.
        match self.keys.as_slice() {
            [only] if kid.is_none() || only.kid.is_none() => Some(only),
            _ => None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

pub(super) fn b64url(v: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(v.trim_end_matches('='))
        .map_err(|_| "not base64url".to_owned())
}

/// Turns one JWK into a key. `Ok(None)`: a key we do not use (encryption
/// key, symmetric key, unsupported curve, no algorithm in common with the
/// scheme); `Err`: a key that claims to be for signatures but is broken.
pub(super) fn jwk_to_key(k: &Value, allowed: &[Algorithm]) -> Result<Option<VerifyKey>, String> {
    let obj = k.as_object().ok_or("not a JSON object")?;
    let field = |n: &str| -> Result<Option<&str>, String> {
        match obj.get(n) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(format!("\"{n}\" is not a string")),
        }
    };
    let required = |n: &str| -> Result<Vec<u8>, String> {
        b64url(field(n)?.ok_or_else(|| format!("no \"{n}\""))?)
            .map_err(|e| format!("\"{n}\" is {e}"))
    };
    let kty = field("kty")?.ok_or("no \"kty\"")?;
    let kid = field("kid")?.map(str::to_owned);
    if field("use")?.is_some_and(|u| u != "sig") {
        return Ok(None);
    }
    if let Some(ops) = obj.get("key_ops") {
        let ops = ops.as_array().ok_or("\"key_ops\" is not an array")?;
        if !ops.iter().any(|o| o == "verify") {
            return Ok(None);
        }
    }
    // Which algorithms the key's type allows, narrowed by its own `alg` and
    // by the scheme's list; a key with none left is not ours to judge.
    let candidates: &[Algorithm] = match (kty, field("crv")?) {
        ("RSA", _) => RSA_ALGS,
        ("EC", Some("P-256")) => &[Algorithm::ES256],
        ("EC", Some("P-384")) => &[Algorithm::ES384],
        ("OKP", Some("Ed25519")) => &[Algorithm::EdDSA],
        // Symmetric keys are never taken from a JWKS; other types and
        // curves are skipped.
        _ => return Ok(None),
    };
    let mut algs: Vec<Algorithm> = candidates
        .iter()
        .copied()
        .filter(|a| allowed.contains(a))
        .collect();
    if let Some(declared) = field("alg")? {
        match Algorithm::from_str(declared) {
            Ok(a) if candidates.contains(&a) => algs.retain(|x| *x == a),
            Ok(_) => return Err(format!("\"alg\" {declared} does not fit key type {kty}")),
            Err(_) => return Ok(None), // e.g. RSA-OAEP: not a signing algorithm
        }
    }
    let Some(first) = algs.first().copied() else {
        return Ok(None);
    };
    let key = match kty {
        "RSA" => {
            let n = required("n")?;
            let e = required("e")?;
            let n_start = n.iter().position(|b| *b != 0).unwrap_or(n.len());
            let bits = (n.len() - n_start) * 8;
            if !(2048..=4096).contains(&bits) {
                return Err(format!(
                    "RSA modulus of about {bits} bits; 2048 to 4096 are accepted"
                ));
            }
            let e_val = if e.len() <= 8 {
                e.iter().fold(0u64, |acc, b| acc << 8 | u64::from(*b))
            } else {
                0
            };
            if e_val < 3 || e_val % 2 == 0 || e_val > (1 << 33) - 1 {
                return Err("unusable RSA exponent".into());
            }
            DecodingKey::from_rsa_raw_components(&n[n_start..], &e)
        }
        "EC" => {
            let len = if first == Algorithm::ES256 { 32 } else { 48 };
            let x = required("x")?;
            let y = required("y")?;
            if x.len() != len || y.len() != len {
                return Err("EC coordinates of the wrong length for the curve".into());
            }
            let mut point = Vec::with_capacity(1 + 2 * len);
            point.push(0x04);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            DecodingKey::from_ec_der(&point)
        }
        _ => {
            let x = required("x")?;
            if x.len() != 32 {
                return Err("Ed25519 key that is not 32 bytes".into());
            }
            DecodingKey::from_ed_der(&x)
        }
    };
    // Building a verifier checks the key material (an EC point on its curve,
    // a valid Ed25519 point); the empty signature itself just fails.
    if jsonwebtoken::crypto::verify("", b"", &key, first).is_err() {
        return Err("key material rejected".into());
    }
    Ok(Some(VerifyKey { kid, key, algs }))
}

/// Parses a JWKS. Returns the usable keys and a note per skipped broken key.
/// `strict` (a file the operator controls): a broken key is an error.
pub(crate) fn parse_jwks(
    bytes: &[u8],
    allowed: &[Algorithm],
    strict: bool,
) -> Result<(KeySet, Vec<String>), String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON ({e})"))?;
    let list = v
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("not a JWKS: no \"keys\" array")?;
    let mut set = KeySet::default();
    let mut broken = Vec::new();
    for (i, k) in list.iter().enumerate() {
        match jwk_to_key(k, allowed) {
            Ok(Some(key)) => {
                if let Some(kid) = &key.kid {
                    if set.by_kid.insert(kid.clone(), set.keys.len()).is_some() {
                        return Err(format!("key id \"{kid}\" appears twice"));
                    }
                }
                set.keys.push(key);
            }
            Ok(None) => {}
            Err(why) if strict => return Err(format!("key #{}: {why}", i + 1)),
            Err(why) => broken.push(format!("key #{}: {why}", i + 1)),
        }
    }
    if set.keys.is_empty() {
        let algs: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
        return Err(format!(
            "no usable signature key for {}{}",
            algs.join("/"),
            if broken.is_empty() {
                String::new()
            } else {
                format!(" ({})", broken.join("; "))
            }
        ));
    }
    Ok((set, broken))
}
