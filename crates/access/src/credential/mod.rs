//! The gateway's own credential for an upstream: never the client's token
//! (the MCP authorization spec forbids passing it on), but one of
//! - a static secret from a file or environment variable, in
//!   `Authorization: Bearer …` or a header of the operator's choosing;
//! - an OAuth access token from the upstream's authorization server by the
//!   client credentials grant (RFC 6749 §4.4), the gateway's own identity;
//! - an access token from token exchange (RFC 8693): the caller's token as
//!   the subject, so the upstream's token still names the user (`sub`) and
//!   the gateway as the actor (`act`).
//!
//! Tokens are cached per (upstream, principal, scope) until shortly before
//! they expire; one caller fetches while the others of the same key wait for
//! its answer (no stampede). No token or secret is ever logged or put in an
//! error: errors name the upstream, the endpoint and the OAuth error code.

mod cache;
mod config;

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use http::{HeaderName, HeaderValue};

use crate::identify::Principal;
use crate::oauth::{discover, shown, ClientSecret, Endpoint, OAuthHttp, OAuthHttpError};
use cache::TokenCache;
pub use config::{RawCredential, CREDENTIAL_FIELDS};

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The caller's access token, kept only to be exchanged. `Debug` hides it.
#[derive(Clone)]
pub struct SubjectToken(Arc<str>);

impl SubjectToken {
    pub fn new(token: &str) -> SubjectToken {
        SubjectToken(Arc::from(token))
    }

    fn digest(&self) -> String {
        let d = ring::digest::digest(&ring::digest::SHA256, self.0.as_bytes());
        d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubjectToken(..)")
    }
}

/// Why no credential could be had for an upstream.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CredentialError {
    #[error("token exchange needs the caller's OAuth access token, and this caller has none")]
    NoSubjectToken,
    #[error("the authorization server's metadata names no token_endpoint")]
    NoTokenEndpoint,
    #[error("{0}")]
    Endpoint(#[from] OAuthHttpError),
    #[error("{url}: {why}")]
    BadAnswer { url: String, why: &'static str },
}

impl CredentialError {
    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            CredentialError::NoSubjectToken => "no_subject_token",
            CredentialError::NoTokenEndpoint | CredentialError::BadAnswer { .. } => "bad_answer",
            CredentialError::Endpoint(OAuthHttpError::Status { .. }) => "refused",
            CredentialError::Endpoint(_) => "unreachable",
        }
    }
}

/// Which grant obtains the upstream's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    ClientCredentials,
    TokenExchange,
}

/// Where the token endpoint is.
#[derive(Debug)]
enum TokenEndpoint {
    Fixed(Endpoint),
    /// From the issuer's metadata, found on first use and kept.
    Discovered {
        issuer: String,
        found: ArcSwapOption<Endpoint>,
    },
}

/// An upstream's credential, built once from config.
#[derive(Debug)]
pub enum UpstreamCredential {
    Static {
        header: HeaderName,
        value: HeaderValue,
    },
    Token(Box<TokenSource>),
}

/// Obtains and caches OAuth access tokens for one upstream.
pub struct TokenSource {
    grant: GrantKind,
    endpoint: TokenEndpoint,
    client: ClientSecret,
    scope: Option<String>,
    resource: Option<String>,
    audience: Option<String>,
    http: OAuthHttp,
    cache: TokenCache,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("grant", &self.grant)
            .field("endpoint", &self.endpoint)
            .field("client", &self.client)
            .field("scope", &self.scope)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl UpstreamCredential {
    /// The header to send the upstream for a request of `principal` (whose
    /// own access token, for token exchange, is `subject`).
    pub async fn header(
        &self,
        principal: &Principal,
        subject: Option<&SubjectToken>,
    ) -> Result<(HeaderName, HeaderValue), CredentialError> {
        match self {
            UpstreamCredential::Static { header, value } => Ok((header.clone(), value.clone())),
            UpstreamCredential::Token(source) => source
                .bearer(principal, subject)
                .await
                .map(|v| (http::header::AUTHORIZATION, v)),
        }
    }

    /// The upstream refused the token given for this caller (401): it is
    /// dropped, so the next request fetches another instead of sending the
    /// refused one until it would have expired (a revoked or rotated token).
    pub fn refused(&self, principal: &Principal, subject: Option<&SubjectToken>) {
        if let UpstreamCredential::Token(source) = self {
            if let Some(key) = source.key(principal, subject) {
                source.cache.forget(&key);
            }
        }
    }

    /// Whether a request needs the caller's access token kept for this.
    pub fn exchanges(&self) -> bool {
        matches!(self, UpstreamCredential::Token(s) if s.grant == GrantKind::TokenExchange)
    }
}

impl TokenSource {
    async fn bearer(
        &self,
        principal: &Principal,
        subject: Option<&SubjectToken>,
    ) -> Result<HeaderValue, CredentialError> {
        let key = self
            .key(principal, subject)
            .ok_or(CredentialError::NoSubjectToken)?;
        self.cache.get_or_fetch(key, || self.fetch(subject)).await
    }

    /// The cache key of a caller's token: one for the gateway's own (client
    /// credentials), one per caller and caller's token for an exchange.
    fn key(&self, principal: &Principal, subject: Option<&SubjectToken>) -> Option<String> {
        match self.grant {
            GrantKind::ClientCredentials => Some(String::new()),
            GrantKind::TokenExchange => {
                subject.map(|s| format!("{}\u{0}{}", principal.key(), s.digest()))
            }
        }
    }

    async fn token_endpoint(&self) -> Result<Endpoint, CredentialError> {
        match &self.endpoint {
            TokenEndpoint::Fixed(u) => Ok(u.clone()),
            TokenEndpoint::Discovered { issuer, found } => {
                if let Some(u) = found.load_full() {
                    return Ok((*u).clone());
                }
                let meta = discover(&self.http, issuer).await?;
                let url = meta
                    .token_endpoint
                    .ok_or(CredentialError::NoTokenEndpoint)?;
                found.store(Some(Arc::new(url.clone())));
                Ok(url)
            }
        }
    }

    /// One request to the token endpoint: the access token and its lifetime.
    async fn fetch(
        &self,
        subject: Option<&SubjectToken>,
    ) -> Result<(HeaderValue, Option<u64>), CredentialError> {
        let url = self.token_endpoint().await?;
        let mut form: Vec<(&str, &str)> = Vec::with_capacity(8);
        match self.grant {
            GrantKind::ClientCredentials => form.push(("grant_type", "client_credentials")),
            GrantKind::TokenExchange => {
                let subject = subject.ok_or(CredentialError::NoSubjectToken)?;
                form.push(("grant_type", TOKEN_EXCHANGE));
                form.push(("subject_token", &subject.0));
                form.push(("subject_token_type", ACCESS_TOKEN_TYPE));
                form.push(("requested_token_type", ACCESS_TOKEN_TYPE));
            }
        }
        for (k, v) in [
            ("scope", &self.scope),
            ("resource", &self.resource),
            ("audience", &self.audience),
        ] {
            if let Some(v) = v {
                form.push((k, v));
            }
        }
        let body = self.http.post_form(&url, Some(&self.client), &form).await?;
        answer(&body).map_err(|why| CredentialError::BadAnswer {
            url: shown(&url),
            why,
        })
    }
}

/// The access token of a token endpoint's answer (RFC 6749 §5.1), as an
/// `Authorization` value, and its `expires_in`.
fn answer(body: &[u8]) -> Result<(HeaderValue, Option<u64>), &'static str> {
    #[derive(serde::Deserialize)]
    struct Answer {
        access_token: String,
        token_type: Option<String>,
        expires_in: Option<u64>,
    }
    let a: Answer = serde_json::from_slice(body).map_err(|_| "not a token answer")?;
    // RFC 8693 answers say `N_A` for tokens that are not for HTTP auth schemes.
    if let Some(t) = &a.token_type {
        if !t.eq_ignore_ascii_case("bearer") && !t.eq_ignore_ascii_case("n_a") {
            return Err("the token is not a bearer token");
        }
    }
    if a.access_token.is_empty() || a.access_token.contains([' ', '\t']) {
        return Err("the access token is empty or malformed");
    }
    let mut v = HeaderValue::from_str(&format!("Bearer {}", a.access_token))
        .map_err(|_| "the access token is not a valid header value")?;
    v.set_sensitive(true);
    Ok((v, a.expires_in))
}

#[cfg(test)]
mod tests;
