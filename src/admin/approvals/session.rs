//! An approver's browser session on the approval page: after a sign-in the
//! gateway sets a cookie whose value is sealed with its `[state]` keys
//! (the AEAD of sealed requestStates, under a purpose prefix of its own,
//! so neither opens as the other). It says who signed in — the principal
//! as the route's scheme names it, its groups, or the operator — the
//! scheme that checked the credential, and when the session ends; never
//! the credential. Every instance that shares the keys reads it; changing
//! the keys ends every session.
//!
//! A sign-in form carries a token that must match a short-lived sealed
//! cookie of the same browser (sign-in CSRF: a page elsewhere cannot sign a
//! browser in as someone else).

use std::sync::Arc;
use std::time::Duration;

use cookie::{Cookie, SameSite};
use http::{header, HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::identify::{AuthSchemes, Principal, SchemeId};
use crate::mrtr::seal::StateKeys;
use crate::pipeline::approve::pending::{new_token, same_token, Deciders, Pending};
use crate::pipeline::Gateway;

/// The prefixes of the sealed cookie values (their AEAD associated data).
const SESSION_PREFIX: &str = "pcas1.";
const SIGN_IN_PREFIX: &str = "pcai1.";
/// The prefix of the operator's sign-in token (`portcullis approval-token`).
pub(super) const OPERATOR_PREFIX: &str = "pcao1.";
/// How long an operator's sign-in token may be pasted after it was made.
pub const OPERATOR_TOKEN_LIFETIME: Duration = Duration::from_secs(300);
/// The cookies' names; over TLS with the `__Host-` prefix (Secure, Path=/,
/// no Domain: no other host nor path can set or shadow them).
const SESSION_NAME: &str = "portcullis-approver";
const SIGN_IN_NAME: &str = "portcullis-sign-in";
/// How long a sign-in form may be sent after it was shown.
pub(super) const SIGN_IN_WINDOW: Duration = Duration::from_secs(600);

/// Who signed in.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum Who {
    /// The operator (signed in with the `[state]` keys' signature).
    Operator,
    /// A principal of the named `[[auth]]` scheme.
    Principal {
        scheme: String,
        name: String,
        groups: Vec<String>,
    },
}

/// What a session cookie holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Session {
    pub who: Who,
    /// Unix milliseconds.
    pub expires_ms: u64,
    /// The token the sign-out form carries.
    pub csrf: String,
}

/// Why a session cookie did not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Broken {
    /// Altered, forged, or sealed with a key no longer held.
    Tampered,
    /// Past its end; the name of who it was.
    Expired,
    /// Who it names is no longer accepted by the current config (a key
    /// removed, a scheme gone).
    Revoked,
}

/// What a sign-in form's cookie holds: the form's token and its end.
#[derive(Serialize, Deserialize)]
struct SignIn {
    csrf: String,
    expires_ms: u64,
}

/// What the operator's sign-in token holds: only its end. It is sealed
/// with the `[state]` keys, so only who holds them can make one.
#[derive(Serialize, Deserialize)]
struct OperatorToken {
    expires_ms: u64,
}

/// A token the operator pastes into the sign-in form to sign in as the
/// operator, made with the gateway's `[state]` keys (never the keys
/// themselves); it can be pasted for [`OPERATOR_TOKEN_LIFETIME`].
pub fn operator_sign_in_token(keys: &StateKeys, now_ms: u64) -> Option<String> {
    let token = OperatorToken {
        expires_ms: now_ms.saturating_add(millis(OPERATOR_TOKEN_LIFETIME)),
    };
    keys.seal_as(OPERATOR_PREFIX, &token)
}

/// Who asks for the page.
pub(super) enum Viewer {
    /// The operator (a request signed with the `[state]` keys).
    Operator,
    Principal(Principal),
}

impl Viewer {
    pub fn name(&self) -> String {
        match self {
            Viewer::Operator => "admin".to_owned(),
            Viewer::Principal(p) => p.key(),
        }
    }

    pub fn may_decide(&self, pending: &Pending) -> bool {
        match self {
            Viewer::Operator => true,
            Viewer::Principal(p) => pending.may_be_decided_by(p),
        }
    }
}

impl Who {
    /// Who this is for `pending`: a principal only when its scheme is one
    /// of the approval's route (a key of one route is no sign-in to another).
    pub fn viewer_for(&self, deciders: &Deciders) -> Option<Viewer> {
        match self {
            Who::Operator => Some(Viewer::Operator),
            Who::Principal {
                scheme,
                name,
                groups,
            } => {
                let id = deciders.auth.lookup(scheme)?;
                if !deciders.schemes.contains(&id) {
                    return None;
                }
                Some(Viewer::Principal(Principal {
                    name: Arc::from(name.as_str()),
                    groups: Arc::from(groups.clone()),
                    method: deciders.auth.method(id)?,
                    scheme: Arc::from(scheme.as_str()),
                    grant: None,
                }))
            }
        }
    }

    /// Whether the gateway's current config still knows who this is: a
    /// key removed from an API-key scheme ends its sessions at the next
    /// request, not when the cookie expires.
    pub fn still_known(&self, auth: &AuthSchemes) -> bool {
        match self {
            Who::Operator => true,
            Who::Principal {
                scheme,
                name,
                groups,
            } => auth.still_names(scheme, name, groups),
        }
    }

    /// `scheme:name` as audit events write it (`admin` for the operator).
    pub fn name(&self, deciders: &Deciders) -> String {
        match self.viewer_for(deciders) {
            Some(v) => v.name(),
            None => match self {
                Who::Operator => "admin".to_owned(),
                Who::Principal { scheme, name, .. } => format!("{scheme}:{name}"),
            },
        }
    }

    /// A principal of scheme `id` of `deciders`.
    pub fn principal(deciders: &Deciders, id: SchemeId, p: &Principal) -> Option<Who> {
        Some(Who::Principal {
            scheme: deciders.auth.name(id)?.to_owned(),
            name: p.name.to_string(),
            groups: p.groups.to_vec(),
        })
    }
}

/// The cookies' settings for this gateway: `Secure` and `__Host-` when
/// approvers reach the page over https (`[admin] approval_url`).
pub(super) struct Jar<'a> {
    keys: &'a StateKeys,
    tls: bool,
    lifetime: Duration,
}

impl<'a> Jar<'a> {
    pub fn keys(&self) -> &StateKeys {
        self.keys
    }

    pub fn of(gateway: &'a Gateway) -> Jar<'a> {
        let config = &gateway.config;
        Jar {
            keys: &config.state.keys,
            tls: config
                .approval_url
                .as_deref()
                .is_some_and(|u| u.starts_with("https://")),
            lifetime: config.approval_session,
        }
    }

    fn name(&self, base: &'static str) -> String {
        match self.tls {
            true => format!("__Host-{base}"),
            false => base.to_owned(),
        }
    }

    pub(super) fn set(
        &self,
        name: &'static str,
        value: String,
        max_age: Duration,
    ) -> Option<HeaderValue> {
        self.set_as(name, value, max_age, SameSite::Strict)
    }

    /// A cookie that must come back on a top-level navigation from another
    /// site (the issuer's redirect to the callback): `SameSite=Lax`.
    pub(super) fn set_lax(
        &self,
        name: &'static str,
        value: String,
        max_age: Duration,
    ) -> Option<HeaderValue> {
        self.set_as(name, value, max_age, SameSite::Lax)
    }

    fn set_as(
        &self,
        name: &'static str,
        value: String,
        max_age: Duration,
        same_site: SameSite,
    ) -> Option<HeaderValue> {
        let c = Cookie::build((self.name(name), value))
            .path("/")
            .http_only(true)
            .same_site(same_site)
            .secure(self.tls)
            .max_age(cookie::time::Duration::seconds(
                i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX),
            ))
            .build();
        HeaderValue::from_str(&c.to_string()).ok()
    }

    /// The value of our cookie `name` in the request, if it sent exactly one.
    pub(super) fn read<'h>(&self, headers: &'h HeaderMap, name: &'static str) -> Option<&'h str> {
        let wanted = self.name(name);
        let mut found = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(n, _)| *n == wanted)
            .map(|(_, v)| v);
        let first = found.next()?;
        // Two cookies of one name: one was planted; trust neither.
        found.next().is_none().then_some(first)
    }

    /// A new session for `who`: the Set-Cookie value.
    pub fn start(&self, who: Who, now_ms: u64) -> Option<HeaderValue> {
        let session = Session {
            who,
            expires_ms: now_ms.saturating_add(millis(self.lifetime)),
            csrf: new_token(),
        };
        let sealed = self.keys.seal_as(SESSION_PREFIX, &session)?;
        self.set(SESSION_NAME, sealed, self.lifetime)
    }

    /// Whether the request carries a session cookie (not yet opened).
    pub fn has_session(&self, headers: &HeaderMap) -> bool {
        self.read(headers, SESSION_NAME).is_some()
    }

    /// The session the request's cookie holds; `None` without one.
    pub fn session(
        &self,
        headers: &HeaderMap,
        now_ms: u64,
    ) -> Option<Result<Session, (Broken, Option<Who>)>> {
        let value = self.read(headers, SESSION_NAME)?;
        Some(match self.keys.open_as::<Session>(SESSION_PREFIX, value) {
            Err(_) => Err((Broken::Tampered, None)),
            Ok(s) if s.expires_ms <= now_ms => Err((Broken::Expired, Some(s.who))),
            Ok(s) => Ok(s),
        })
    }

    /// The Set-Cookie value that ends the session in the browser.
    pub fn end(&self) -> Option<HeaderValue> {
        self.set(SESSION_NAME, String::new(), Duration::ZERO)
    }

    /// A sign-in form's token and the cookie that binds it to this browser.
    pub fn sign_in_form(&self, now_ms: u64) -> Option<(String, HeaderValue)> {
        let form = SignIn {
            csrf: new_token(),
            expires_ms: now_ms.saturating_add(millis(SIGN_IN_WINDOW)),
        };
        let sealed = self.keys.seal_as(SIGN_IN_PREFIX, &form)?;
        let cookie = self.set(SIGN_IN_NAME, sealed, SIGN_IN_WINDOW)?;
        Some((form.csrf, cookie))
    }

    /// Whether `csrf` is the token of the sign-in form this browser was shown.
    pub fn sign_in_matches(&self, headers: &HeaderMap, csrf: &str, now_ms: u64) -> bool {
        self.read(headers, SIGN_IN_NAME)
            .and_then(|v| self.keys.open_as::<SignIn>(SIGN_IN_PREFIX, v).ok())
            .is_some_and(|f| f.expires_ms > now_ms && same_token(&f.csrf, csrf))
    }

    /// Whether `token` is an operator's sign-in token of these keys, in time.
    pub fn operator_token_holds(&self, token: &str, now_ms: u64) -> bool {
        self.keys
            .open_as::<OperatorToken>(OPERATOR_PREFIX, token)
            .is_ok_and(|t| t.expires_ms > now_ms)
    }

    /// The Set-Cookie value that removes the sign-in form's cookie.
    pub fn sign_in_done(&self) -> Option<HeaderValue> {
        self.set(SIGN_IN_NAME, String::new(), Duration::ZERO)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jar(keys: &StateKeys) -> Jar<'_> {
        Jar {
            keys,
            tls: false,
            lifetime: Duration::from_secs(60),
        }
    }

    #[test]
    fn an_operator_token_holds_for_its_lifetime_under_its_keys_only() {
        let keys = StateKeys::parse(&crate::mrtr::seal::new_key_line("k1")).unwrap();
        let other = StateKeys::parse(&crate::mrtr::seal::new_key_line("k1")).unwrap();
        let token = operator_sign_in_token(&keys, 1_000).unwrap();
        assert!(jar(&keys).operator_token_holds(&token, 1_000));
        assert!(!jar(&keys).operator_token_holds(&token, 1_000 + 300_000));
        assert!(!jar(&other).operator_token_holds(&token, 1_000));
        // A session sealed by the same keys is no operator token.
        let session = jar(&keys).start(Who::Operator, 1_000).unwrap();
        let value = session.to_str().unwrap().split(['=', ';']).nth(1).unwrap();
        assert!(!jar(&keys).operator_token_holds(value, 1_000));
    }
}
