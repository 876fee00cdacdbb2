//! JWT bearer tokens: RS*/PS*/ES256/ES384/EdDSA against a JWKS (file or URL,
//! cached and refreshed), or HS256/384/512 against a shared secret; `iss`,
//! `aud`, `exp` required, `nbf` checked when present, with a small leeway.
//!
//! Defences against the classic JWT mistakes:
//! - the token's `alg` must be in the scheme's list, and a scheme cannot mix
//!   HMAC with public-key algorithms (so a public key can never be used as
//!   an HMAC secret: "algorithm confusion");
//! - symmetric (`oct`) keys are never taken from a JWKS;
//! - each key is usable only with the algorithms its type (and its own
//!   `alg`, if given) allows: a P-256 key verifies ES256 and nothing else;
//! - `alg: none` is not an algorithm jsonwebtoken knows, and is refused by name;
//! - the signature is checked before any claim, so a forged token learns
//!   nothing about the claim checks.
//!
//! Nothing is cached per token.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use base64::Engine;
use bytes::Bytes;
use http::header::HeaderMap;
use http::Uri;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use tokio::sync::{watch, Notify};
use toml::Spanned;

use crate::oauth::{discover, IssuerMetadata, OAuthHttp};

use super::config::{duration, printable_name, AuthConfigError, RawAuthScheme};
use super::{bearer, looks_like_jwt, Attempt, AuthMethod, Credential, Principal};

const DEFAULT_REFRESH: Duration = Duration::from_secs(300);
/// How long `/readyz` waits at start for a `jwks_url`'s first key set.
const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(15);
const MIN_REFRESH: Duration = Duration::from_millis(100);
const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
const MAX_LEEWAY: Duration = Duration::from_secs(300);
/// After a failed fetch, retry after at most this long.
const RETRY_CAP: Duration = Duration::from_secs(10);
/// A token naming an unknown `kid` triggers an early refresh, at most this often.
const KICK_GAP: Duration = Duration::from_secs(10);
/// RFC 7518 §3.2: an HMAC key at least as long as the hash output.
const MIN_SECRET_BYTES: usize = 32;
const MAX_GROUPS: usize = 1024;

mod keys;
mod remote;

use keys::*;
use remote::*;

pub(crate) struct JwtScheme {
    /// One `Validation` per allowed algorithm: jsonwebtoken requires every
    /// algorithm in a `Validation` to be of the key's family.
    validations: Vec<(Algorithm, Validation)>,
    principal_claim: String,
    groups_claim: String,
    keys: Arc<ArcSwap<KeySet>>,
    remote: Option<Remote>,
}

impl std::fmt::Debug for JwtScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtScheme")
            .field(
                "algorithms",
                &self.validations.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
            )
            .field("principal_claim", &self.principal_claim)
            .field("groups_claim", &self.groups_claim)
            .field("keys", &self.keys.load().len())
            .field(
                "jwks_url",
                &self.remote.as_ref().map(|r| r.fetch.url.shown()),
            )
            .finish()
    }
}

fn resolve(base: &Path, p: &str) -> std::path::PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    }
}

/// The `algorithms` of a scheme, checked: no `none`, no HMAC mixed with
/// public-key algorithms, and a family that fits the key source.
pub(super) fn algorithms(
    raw: &Option<Spanned<super::config::OneOrMany>>,
    hmac_source: bool,
) -> Result<Vec<Algorithm>, AuthConfigError> {
    let out: Vec<Algorithm> = match raw {
        None if hmac_source => vec![Algorithm::HS256],
        None => vec![Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA],
        Some(list) => {
            let mut out = Vec::new();
            for a in &list.get_ref().0 {
                let alg = Algorithm::from_str(a).map_err(|_| {
                    let msg = if a.eq_ignore_ascii_case("none") {
                        "\"none\" (unsigned tokens) is never accepted".to_owned()
                    } else {
                        format!("unknown algorithm \"{a}\"; supported: {SUPPORTED}")
                    };
                    AuthConfigError::at(list, "auth.algorithms", msg)
                })?;
                if !out.contains(&alg) {
                    out.push(alg);
                }
            }
            if out.is_empty() {
                return Err(AuthConfigError::at(
                    list,
                    "auth.algorithms",
                    "must name at least one algorithm",
                ));
            }
            let hmac = out.iter().filter(|a| is_hmac(**a)).count();
            if hmac != 0 && hmac != out.len() {
                return Err(AuthConfigError::at(
                    list,
                    "auth.algorithms",
                    "mixes HS* with public-key algorithms, which allows algorithm confusion; use two schemes",
                ));
            }
            if hmac != 0 && !hmac_source {
                return Err(AuthConfigError::at(
                    list,
                    "auth.algorithms",
                    "HS* algorithms need hs256_secret_file or hs256_secret_env, not a JWKS",
                ));
            }
            if hmac == 0 && hmac_source {
                return Err(AuthConfigError::at(
                    list,
                    "auth.algorithms",
                    "public-key algorithms need jwks_file or jwks_url, not a shared secret",
                ));
            }
            out
        }
    };
    Ok(out)
}

/// One `Validation` per algorithm: `iss`, `exp` and (when given) `aud`
/// required, `nbf` checked when present. Without `audience` the caller
/// checks `aud` itself (an `oauth` scheme binds it per route).
fn validations(
    algorithms: &[Algorithm],
    leeway: Duration,
    issuer: &str,
    audience: Option<&[String]>,
) -> Vec<(Algorithm, Validation)> {
    algorithms
        .iter()
        .map(|alg| {
            let mut v = Validation::new(*alg);
            v.leeway = leeway.as_secs();
            v.validate_exp = true;
            v.validate_nbf = true;
            v.set_issuer(&[issuer]);
            match audience {
                Some(aud) => {
                    v.set_required_spec_claims(&["exp", "iss", "aud"]);
                    v.validate_aud = true;
                    v.set_audience(aud);
                }
                None => {
                    v.set_required_spec_claims(&["exp", "iss"]);
                    v.validate_aud = false;
                }
            }
            (*alg, v)
        })
        .collect()
}

/// `leeway`, at most [`MAX_LEEWAY`].
fn leeway(raw: &RawAuthScheme) -> Result<Duration, AuthConfigError> {
    match &raw.leeway {
        None => Ok(DEFAULT_LEEWAY),
        Some(v) => {
            let d = duration(v, "auth.leeway")?;
            if d > MAX_LEEWAY {
                return Err(AuthConfigError::at(v, "auth.leeway", "at most 5m"));
            }
            Ok(d)
        }
    }
}

/// `jwks_refresh` (at least [`MIN_REFRESH`]) and `jwks_ready_timeout`.
fn refresh_timing(raw: &RawAuthScheme) -> Result<(Duration, Duration), AuthConfigError> {
    let refresh = match &raw.jwks_refresh {
        None => DEFAULT_REFRESH,
        Some(v) => {
            let d = duration(v, "auth.jwks_refresh")?;
            if d < MIN_REFRESH {
                return Err(AuthConfigError::at(
                    v,
                    "auth.jwks_refresh",
                    "at least 100ms",
                ));
            }
            d
        }
    };
    let ready_timeout = match &raw.jwks_ready_timeout {
        None => DEFAULT_READY_TIMEOUT,
        Some(v) => duration(v, "auth.jwks_ready_timeout")?,
    };
    Ok((refresh, ready_timeout))
}

fn claim_name(
    raw: &Option<Spanned<String>>,
    field: &str,
    default: &str,
) -> Result<String, AuthConfigError> {
    match raw {
        None => Ok(default.to_owned()),
        Some(v) if v.get_ref().is_empty() => {
            Err(AuthConfigError::at(v, field, "must not be empty"))
        }
        Some(v) => Ok(v.get_ref().clone()),
    }
}

impl JwtScheme {
    pub(crate) fn build(raw: &RawAuthScheme, base: &Path) -> Result<JwtScheme, AuthConfigError> {
        raw.only("jwt", super::config::JWT_FIELDS)?;
        let issuer = raw.issuer.as_ref().ok_or_else(|| {
            AuthConfigError::at(
                &raw.kind,
                "auth.issuer",
                "a jwt scheme needs `issuer` (the exact `iss` of accepted tokens)",
            )
        })?;
        if issuer.get_ref().is_empty() {
            return Err(AuthConfigError::at(
                issuer,
                "auth.issuer",
                "must not be empty",
            ));
        }
        let audience = raw.audience.as_ref().ok_or_else(|| {
            AuthConfigError::at(
                &raw.kind,
                "auth.audience",
                "a jwt scheme needs `audience` (one or more accepted `aud` values)",
            )
        })?;
        if audience.get_ref().0.is_empty() || audience.get_ref().0.iter().any(String::is_empty) {
            return Err(AuthConfigError::at(
                audience,
                "auth.audience",
                "must be one or more non-empty strings",
            ));
        }

        // Exactly one key source.
        let sources = [
            ("jwks_file", &raw.jwks_file),
            ("jwks_url", &raw.jwks_url),
            ("hs256_secret_file", &raw.hs256_secret_file),
            ("hs256_secret_env", &raw.hs256_secret_env),
        ];
        let mut set = sources
            .iter()
            .filter_map(|(n, v)| v.as_ref().map(|v| (*n, v)));
        let (source, source_value) = set.next().ok_or_else(|| {
            AuthConfigError::at(
                &raw.kind,
                "auth.jwks_file",
                "a jwt scheme needs exactly one key source: jwks_file, jwks_url, hs256_secret_file or hs256_secret_env",
            )
        })?;
        if let Some((other, v)) = set.next() {
            return Err(AuthConfigError::at(
                v,
                format!("auth.{other}"),
                format!("only one key source per scheme; `{source}` is already set"),
            ));
        }
        let hmac_source = source.starts_with("hs256_");

        let algorithms = algorithms(&raw.algorithms, hmac_source)?;

        let principal_claim = claim_name(&raw.principal_claim, "auth.principal_claim", "sub")?;
        let groups_claim = claim_name(&raw.groups_claim, "auth.groups_claim", "groups")?;
        let leeway = leeway(raw)?;
        for (field, value) in [
            ("auth.jwks_refresh", &raw.jwks_refresh),
            ("auth.jwks_ready_timeout", &raw.jwks_ready_timeout),
        ] {
            if let Some(r) = value.as_ref().filter(|_| raw.jwks_url.is_none()) {
                return Err(AuthConfigError::at(r, field, "applies only with jwks_url"));
            }
        }

        // Keys.
        let mut remote = None;
        let keys = match source {
            "jwks_file" => {
                let path = resolve(base, source_value.get_ref());
                let text = std::fs::read(&path).map_err(|e| {
                    AuthConfigError::at(
                        source_value,
                        "auth.jwks_file",
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                parse_jwks(&text, &algorithms, true)
                    .map_err(|e| {
                        AuthConfigError::at(
                            source_value,
                            "auth.jwks_file",
                            format!("{}: {e}", path.display()),
                        )
                    })?
                    .0
            }
            "jwks_url" => {
                let url = check_jwks_url(source_value.get_ref())
                    .map_err(|e| AuthConfigError::at(source_value, "auth.jwks_url", e))?;
                let (refresh, ready_timeout) = refresh_timing(raw)?;
                remote = Some(Remote {
                    fetch: Fetch {
                        url: KeySource::Jwks(url),
                        refresh,
                        allowed: algorithms.clone(),
                    },
                    issuer: issuer.get_ref().clone(),
                    ready_timeout,
                    live: Arc::new(Live::default()),
                });
                // Empty until the first fetch (or a key set kept from the
                // previous config): tokens fail with "unknown key".
                KeySet::default()
            }
            _ => {
                let secret = if source == "hs256_secret_file" {
                    let path = resolve(base, source_value.get_ref());
                    let mut bytes = std::fs::read(&path).map_err(|e| {
                        AuthConfigError::at(
                            source_value,
                            "auth.hs256_secret_file",
                            format!("cannot read {}: {e}", path.display()),
                        )
                    })?;
                    // A trailing newline from `echo > file` is not part of the secret.
                    while bytes.last().is_some_and(|b| b.is_ascii_whitespace()) {
                        bytes.pop();
                    }
                    bytes
                } else {
                    let var = source_value.get_ref();
                    crate::model::secret_env::take(var)
                        .ok_or_else(|| {
                            AuthConfigError::at(
                                source_value,
                                "auth.hs256_secret_env",
                                format!("environment variable {var} is not set"),
                            )
                        })?
                        .into_encoded_bytes()
                };
                if secret.len() < MIN_SECRET_BYTES {
                    return Err(AuthConfigError::at(
                        source_value,
                        format!("auth.{source}"),
                        format!(
                            "the shared secret is {} bytes; at least {MIN_SECRET_BYTES} are required",
                            secret.len()
                        ),
                    ));
                }
                let key = DecodingKey::from_secret(&secret);
                drop(secret);
                KeySet {
                    keys: vec![VerifyKey {
                        kid: None,
                        key,
                        algs: algorithms.clone(),
                    }],
                    by_kid: HashMap::new(),
                    any_kid: true,
                }
            }
        };

        let validations = validations(
            &algorithms,
            leeway,
            issuer.get_ref(),
            Some(&audience.get_ref().0),
        );

        Ok(JwtScheme {
            validations,
            principal_claim,
            groups_claim,
            keys: Arc::new(ArcSwap::from_pointee(keys)),
            remote,
        })
    }

    /// The verifier of an `oauth` scheme: keys from the `jwks_uri` of
    /// `issuer`'s metadata; `iss`, `exp` (and `nbf`) required here, the
    /// audience checked per route against its resource by the caller.
    pub(super) fn for_issuer(
        raw: &RawAuthScheme,
        issuer: &str,
    ) -> Result<JwtScheme, AuthConfigError> {
        let algorithms = algorithms(&raw.algorithms, false)?;
        let principal_claim = claim_name(&raw.principal_claim, "auth.principal_claim", "sub")?;
        let groups_claim = claim_name(&raw.groups_claim, "auth.groups_claim", "groups")?;
        let leeway = leeway(raw)?;
        let (refresh, ready_timeout) = refresh_timing(raw)?;
        let validations = validations(&algorithms, leeway, issuer, None);
        Ok(JwtScheme {
            validations,
            principal_claim,
            groups_claim,
            keys: Arc::new(ArcSwap::from_pointee(KeySet::default())),
            remote: Some(Remote {
                fetch: Fetch {
                    url: KeySource::Issuer(issuer.to_owned()),
                    refresh,
                    allowed: algorithms,
                },
                issuer: issuer.to_owned(),
                ready_timeout,
                live: Arc::new(Live::default()),
            }),
        })
    }

    /// The claim naming the caller (`sub` unless configured).
    pub(super) fn principal_claim(&self) -> &str {
        &self.principal_claim
    }

    /// The issuer's metadata, once the refresh task has fetched it.
    pub(super) fn metadata(&self) -> Option<Arc<IssuerMetadata>> {
        self.remote
            .as_ref()
            .and_then(|r| r.live.metadata.load_full())
    }

    pub(crate) fn attempt(&self, headers: &HeaderMap) -> Attempt {
        match bearer(headers) {
            Credential::Absent => Attempt::Absent,
            Credential::Malformed(why) => Attempt::Declined(why),
            // Not a JWT: maybe an API key for another scheme on this route.
            Credential::Present(t) if !looks_like_jwt(t) => Attempt::Declined("malformed token"),
            Credential::Present(t) => match self.verify(t) {
                Ok(p) => Attempt::Accepted(p),
                Err(why) => Attempt::Rejected(why),
            },
        }
    }

    fn verify(&self, token: &str) -> Result<Principal, &'static str> {
        let claims = self.verify_claims(token)?;
        self.principal(&claims, AuthMethod::Jwt, None)
    }

    /// The claims of a token whose signature, algorithm, issuer, expiry and
    /// `nbf` (and audience, for a `jwt` scheme) check out.
    pub(super) fn verify_claims(&self, token: &str) -> Result<Map<String, Value>, &'static str> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| header_problem(token))?;
        let validation = self
            .validations
            .iter()
            .find(|(a, _)| *a == header.alg)
            .map(|(_, v)| v)
            .ok_or("algorithm not allowed")?;
        let set = self.keys.load();
        let Some(key) = set.select(header.kid.as_deref()) else {
            if let Some(r) = &self.remote {
                r.live.kick.notify_one(); // maybe the IdP rotated its keys
            }
            return Err("unknown key");
        };
        if !key.algs.contains(&header.alg) {
            return Err("algorithm not allowed for this key");
        }
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, validation)
            .map_err(|e| why(e.kind()))?;
        drop(set);
        Ok(data.claims)
    }

    /// The caller the verified `claims` name.
    pub(super) fn principal(
        &self,
        claims: &Map<String, Value>,
        method: AuthMethod,
        grant: Option<Arc<super::Grant>>,
    ) -> Result<Principal, &'static str> {
        let name = match claims.get(&self.principal_claim) {
            Some(Value::String(s)) if printable_name(s) => s.as_str(),
            Some(Value::String(_)) => return Err("unusable principal claim"),
            _ => return Err("missing principal claim"),
        };
        let groups: Vec<String> = match claims.get(&self.groups_claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|g| match g {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err("malformed groups claim"),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("malformed groups claim"),
        };
        if groups.len() > MAX_GROUPS || !groups.iter().all(|g| printable_name(g)) {
            return Err("malformed groups claim");
        }
        Ok(Principal {
            name: Arc::from(name),
            groups: Arc::from(groups),
            method,
            scheme: Arc::default(),
            grant,
        })
    }

    /// Starts the background refresh of a `jwks_url` (once per key set:
    /// a set kept from the previous config is already being refreshed).
    pub(crate) fn spawn_refresh(&self, scheme: &str, failures: super::FetchFailed) {
        let Some(remote) = &self.remote else { return };
        if remote.live.started.swap(true, Ordering::SeqCst) {
            return;
        }
        tokio::spawn(refresh_loop(
            Arc::downgrade(&self.keys),
            remote.live.clone(),
            remote.fetch.clone(),
            scheme.to_owned(),
            failures,
        ));
    }

    /// The configured issuer of a `jwks_url` scheme (the label of its
    /// fetch-failure metric).
    pub(crate) fn remote_issuer(&self) -> Option<&str> {
        self.remote.as_ref().map(|r| r.issuer.as_str())
    }

    #[cfg(test)]
    pub(crate) async fn refresh_now(&self, scheme: &str) -> Result<(), String> {
        let Some(remote) = &self.remote else {
            return Ok(());
        };
        let client = OAuthHttp::new().map_err(|e| e.to_string())?;
        let (set, broken) = fetch(&client, &remote.fetch.url, &remote.live)
            .await
            .and_then(|b| parse_jwks(&b, &remote.fetch.allowed, false))?;
        for b in broken {
            tracing::warn!(auth_scheme = scheme, url = %remote.fetch.url.shown(), "JWKS {b}; key skipped");
        }
        self.keys.store(Arc::new(set));
        remote.live.loaded.send_replace(true);
        Ok(())
    }

    /// Takes over what `old` (the same scheme in the running config) has:
    /// fetched alike, its key set and refresh task; fetched differently (a
    /// new URL, interval or algorithms), its keys as the start, so callers
    /// are not refused while the new URL is slow or down (the new task
    /// replaces them on its first good fetch).
    pub(crate) fn keep_keys(&mut self, old: &JwtScheme) {
        let (Some(new), Some(was)) = (&mut self.remote, &old.remote) else {
            return;
        };
        if new.fetch == was.fetch {
            self.keys = old.keys.clone();
            new.live = was.live.clone();
        } else if *was.live.loaded.borrow() {
            self.keys.store(old.keys.load_full());
            new.live.loaded.send_replace(true);
        }
    }

    /// Waits (until `deadline`) for a `jwks_url` scheme's first key set.
    /// `Err` names the URL (as logs show it) when there is none by then.
    pub(crate) async fn wait_for_keys(&self, started: Instant) -> Result<(), String> {
        let Some(remote) = &self.remote else {
            return Ok(());
        };
        let mut loaded = remote.live.loaded.subscribe();
        let deadline = started + remote.ready_timeout;
        let waited = tokio::time::timeout_at(deadline.into(), loaded.wait_for(|l| *l))
            .await
            .is_ok_and(|r| r.is_ok());
        if waited {
            Ok(())
        } else {
            Err(remote.fetch.url.shown())
        }
    }
}

/// Why `decode_header` failed: an `alg` we do not support (e.g. `none`), or
/// a malformed token.
fn header_problem(token: &str) -> &'static str {
    let alg = token
        .split('.')
        .next()
        .and_then(|h| b64url(h).ok())
        .and_then(|h| serde_json::from_slice::<Value>(&h).ok())
        .and_then(|h| h.get("alg").and_then(Value::as_str).map(str::to_owned));
    match alg {
        Some(a) if Algorithm::from_str(&a).is_err() => "unsupported algorithm",
        _ => "malformed token",
    }
}

fn why(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "expired",
        ErrorKind::ImmatureSignature => "not yet valid",
        ErrorKind::InvalidIssuer => "wrong issuer",
        ErrorKind::InvalidAudience => "wrong audience",
        ErrorKind::InvalidSignature => "bad signature",
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => "algorithm not allowed",
        ErrorKind::MissingRequiredClaim(_) => "missing required claim",
        ErrorKind::InvalidClaimFormat(_) => "malformed claims",
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => "malformed token",
        _ => "invalid token",
    }
}

#[cfg(test)]
mod tests;
