//! RFC 7662 token introspection for tokens that are not JWTs: one POST to
//! the issuer's `introspection_endpoint` with the gateway's own client
//! credentials, the answer cached by the token's SHA-256 (never the token)
//! until shortly before it expires, at most [`ACTIVE_TTL`]; an inactive
//! answer for [`INACTIVE_TTL`], so a flood of one bad token is one request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::oauth::{ClientSecret, IssuerMetadata, OAuthHttp};

const ACTIVE_TTL: Duration = Duration::from_secs(30);
const INACTIVE_TTL: Duration = Duration::from_secs(5);
const MAX_CACHED: usize = 10_000;
/// Introspection requests in flight at once per scheme: a flood of made-up
/// opaque tokens is not passed on to the authorization server unbounded.
const MAX_IN_FLIGHT: usize = 32;
/// How long a request waits for one of them before it is refused as
/// `authorization_server_unavailable`.
const QUEUE_WAIT: Duration = Duration::from_secs(2);

pub(super) enum Failed {
    /// The issuer says the token is not good here (a fixed phrase).
    Refused(&'static str),
    /// The issuer could not be asked.
    Unavailable,
}

type Answer = Result<Map<String, Value>, &'static str>;

pub(super) struct Introspection {
    client: ClientSecret,
    http: Option<OAuthHttp>,
    cache: Mutex<HashMap<[u8; 32], (Answer, Instant)>>,
    in_flight: tokio::sync::Semaphore,
}

impl Introspection {
    pub(super) fn new(client: ClientSecret) -> Introspection {
        Introspection {
            client,
            http: OAuthHttp::new().ok(),
            cache: Mutex::new(HashMap::new()),
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
        }
    }

    /// The claims of an active token of `issuer`.
    pub(super) async fn ask(
        &self,
        token: &str,
        metadata: Option<&IssuerMetadata>,
        issuer: &str,
    ) -> Result<Map<String, Value>, Failed> {
        let key = digest(token);
        if let Some(answer) = self.cached(&key) {
            return answer.map_err(Failed::Refused);
        }
        let (Some(http), Some(url)) = (
            &self.http,
            metadata.and_then(|m| m.introspection_endpoint.as_ref()),
        ) else {
            // The metadata is not fetched yet, or names no endpoint.
            return Err(Failed::Unavailable);
        };
        let Ok(Ok(_turn)) = tokio::time::timeout(QUEUE_WAIT, self.in_flight.acquire()).await else {
            return Err(Failed::Unavailable);
        };
        let body = http
            .post_form(
                url,
                Some(&self.client),
                &[("token", token), ("token_type_hint", "access_token")],
            )
            .await
            .map_err(|e| {
                tracing::warn!(issuer, error = %e, "token introspection failed");
                Failed::Unavailable
            })?;
        let (answer, ttl) = judge(&body, issuer, now());
        self.remember(key, answer.clone(), ttl);
        answer.map_err(Failed::Refused)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Answer> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(key)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(a, _)| a.clone())
    }

    fn remember(&self, key: [u8; 32], answer: Answer, ttl: Duration) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED {
            let now = Instant::now();
            cache.retain(|_, (_, until)| *until > now);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (answer, Instant::now() + ttl));
    }
}

fn digest(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What an introspection answer means, and how long to believe it.
fn judge(body: &[u8], issuer: &str, now: u64) -> (Answer, Duration) {
    let refused = |why| (Err(why), INACTIVE_TTL);
    let Ok(Value::Object(claims)) = serde_json::from_slice::<Value>(body) else {
        return refused("malformed introspection answer");
    };
    if claims.get("active") != Some(&Value::Bool(true)) {
        return refused("inactive token");
    }
    if let Some(iss) = claims.get("iss") {
        if iss.as_str() != Some(issuer) {
            return refused("wrong issuer");
        }
    }
    if claims
        .get("token_type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.eq_ignore_ascii_case("refresh_token"))
    {
        return refused("not an access token");
    }
    let exp = claims.get("exp").and_then(Value::as_u64);
    if exp.is_some_and(|e| e <= now) {
        return refused("expired");
    }
    if claims
        .get("nbf")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > now)
    {
        return refused("not yet valid");
    }
    let ttl = exp.map_or(ACTIVE_TTL, |e| {
        ACTIVE_TTL.min(Duration::from_secs(e.saturating_sub(now)))
    });
    (Ok(claims), ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_judged_and_timed() {
        let (a, ttl) = judge(
            br#"{"active":true,"exp":110,"sub":"a","iss":"https://i"}"#,
            "https://i",
            100,
        );
        assert!(a.is_ok());
        assert_eq!(ttl, Duration::from_secs(10));
        let (a, ttl) = judge(br#"{"active":true,"sub":"a"}"#, "https://i", 100);
        assert!(a.is_ok());
        assert_eq!(ttl, ACTIVE_TTL);
        for (body, why) in [
            (&br#"{"active":false}"#[..], "inactive token"),
            (br#"{"active":"true"}"#, "inactive token"),
            (br#"{"active":true,"iss":"https://other"}"#, "wrong issuer"),
            (br#"{"active":true,"exp":100}"#, "expired"),
            (br#"{"active":true,"nbf":200}"#, "not yet valid"),
            (
                br#"{"active":true,"token_type":"refresh_token"}"#,
                "not an access token",
            ),
            (b"[]", "malformed introspection answer"),
        ] {
            let (a, ttl) = judge(body, "https://i", 100);
            assert_eq!(a.unwrap_err(), why);
            assert_eq!(ttl, INACTIVE_TTL);
        }
    }

    #[test]
    fn the_cache_keys_on_a_digest_and_is_bounded() {
        let i = Introspection::new(ClientSecret::new("gw".into(), "s".into()));
        for n in 0..(MAX_CACHED + 5) {
            i.remember(digest(&n.to_string()), Err("inactive token"), INACTIVE_TTL);
        }
        assert!(i.cache.lock().unwrap().len() <= MAX_CACHED);
        assert_eq!(
            i.cached(&digest(&(MAX_CACHED + 4).to_string())),
            Some(Err("inactive token"))
        );
    }
}
