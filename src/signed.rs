//! The operator's requests to the admin listener's `/listings`: signed with
//! a key derived from the gateway's `[state]` keys, which only whoever
//! holds them (the operator, with the config) can make. A program the
//! gateway started reaches loopback, and may send any header; it does not
//! hold the keys (they are not in its environment, the gateway's memory and
//! environment are closed to it, a sandbox does not show it the keys file),
//! and a page in a browser that rebinds a name to loopback holds nothing.
//!
//! `Authorization: Portcullis-Admin kid=K, t=T, sig=S`: S is the
//! base64url HMAC-SHA256 of `portcullis-admin-v1`, the method, the path
//! with its query, T (Unix seconds) and the SHA-256 of the body, one per
//! line. T must be within five minutes of the gateway's clock; within them
//! the same request may be sent again (an acceptance names the digest it
//! accepts, so a replay changes nothing).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderValue;

use crate::mrtr::seal::StateKeys;

pub const SCHEME: &str = "Portcullis-Admin";
/// How far a request's time may be from the gateway's.
pub const WINDOW: Duration = Duration::from_secs(300);

/// Why a request to `/listings` was not taken as the operator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unsigned {
    #[error("the gateway runs with generated keys: give it [state] keys_file or keys_env, and the same to `portcullis listings --config`")]
    NoKeys,
    #[error(
        "no Authorization: Portcullis-Admin signature (use portcullis listings --config FILE)"
    )]
    Missing,
    #[error("the signature is not one of this gateway's [state] keys")]
    Wrong,
    #[error("the signed time is more than five minutes from the gateway's clock")]
    Stale,
}

fn message(method: &str, path: &str, time: u64, body: &[u8]) -> Vec<u8> {
    let digest = ring::digest::digest(&ring::digest::SHA256, body);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("portcullis-admin-v1\n{method}\n{path}\n{time}\n{hex}").into_bytes()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The Authorization header for a request.
pub fn sign(keys: &StateKeys, method: &str, path: &str, body: &[u8]) -> Option<HeaderValue> {
    let time = now();
    let (kid, sig) = keys.admin_sign(&message(method, path, time, body))?;
    HeaderValue::from_str(&format!("{SCHEME} kid={kid}, t={time}, sig={sig}")).ok()
}

/// Whether `authorization` signs this request with one of `keys`.
pub fn verify(
    keys: &StateKeys,
    authorization: Option<&HeaderValue>,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<(), Unsigned> {
    if keys.is_generated() {
        return Err(Unsigned::NoKeys);
    }
    let text = authorization
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix(SCHEME))
        .and_then(|v| v.strip_prefix(' '))
        .ok_or(Unsigned::Missing)?;
    let mut kid = None;
    let mut time = None;
    let mut sig = None;
    for part in text.split(',') {
        match part.trim().split_once('=') {
            Some(("kid", v)) => kid = Some(v),
            Some(("t", v)) => time = v.parse::<u64>().ok(),
            Some(("sig", v)) => sig = Some(v),
            _ => return Err(Unsigned::Missing),
        }
    }
    let (Some(kid), Some(time), Some(sig)) = (kid, time, sig) else {
        return Err(Unsigned::Missing);
    };
    if !keys.admin_verify(kid, &message(method, path, time, body), sig) {
        return Err(Unsigned::Wrong);
    }
    if now().abs_diff(time) > WINDOW.as_secs() {
        return Err(Unsigned::Stale);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> StateKeys {
        StateKeys::parse(&crate::mrtr::seal::new_key_line("k1")).unwrap()
    }

    #[test]
    fn a_signed_request_verifies_and_nothing_else_does() {
        let k = keys();
        let body = br#"{"upstream":"u","all":true}"#;
        let auth = sign(&k, "POST", "/listings/accept", body).unwrap();
        assert_eq!(
            verify(&k, Some(&auth), "POST", "/listings/accept", body),
            Ok(())
        );
        // Another body, path, method, key: refused.
        assert_eq!(
            verify(&k, Some(&auth), "POST", "/listings/accept", b"{}"),
            Err(Unsigned::Wrong)
        );
        assert_eq!(
            verify(&k, Some(&auth), "GET", "/listings/accept", body),
            Err(Unsigned::Wrong)
        );
        assert_eq!(
            verify(&keys(), Some(&auth), "POST", "/listings/accept", body),
            Err(Unsigned::Wrong)
        );
        assert_eq!(
            verify(&k, None, "POST", "/listings/accept", body),
            Err(Unsigned::Missing)
        );
        let generated = StateKeys::generate();
        assert_eq!(
            verify(&generated, Some(&auth), "POST", "/listings/accept", body),
            Err(Unsigned::NoKeys)
        );
    }

    #[test]
    fn an_old_signature_is_refused() {
        let k = keys();
        let time = now() - WINDOW.as_secs() - 5;
        let (kid, sig) = k
            .admin_sign(&message("GET", "/listings?upstream=u", time, b""))
            .unwrap();
        let auth =
            HeaderValue::from_str(&format!("{SCHEME} kid={kid}, t={time}, sig={sig}")).unwrap();
        assert_eq!(
            verify(&k, Some(&auth), "GET", "/listings?upstream=u", b""),
            Err(Unsigned::Stale)
        );
    }
}
