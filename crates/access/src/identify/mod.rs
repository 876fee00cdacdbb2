//! Who is calling: API keys, JWT bearer tokens, mTLS client certificates, or
//! anonymous where a route allows it (data flow step 2, "Identify").
//!
//! Everything is prepared once from config ([`AuthSchemes::build`]); the
//! request path ([`AuthSchemes::authenticate`]) only reads headers, hashes or
//! verifies, and clones a few `Arc`s. Secrets (API keys, HS256 secrets,
//! tokens) never appear in `Debug` output, errors or logs: failures carry a
//! short static reason such as `"expired"` or `"unknown key"`.
//!
//! ## Which scheme decides
//!
//! A route lists schemes in order. The first scheme that finds a credential
//! it can judge decides: a valid one authenticates, a present-but-bad one
//! fails at once (never a fall-through to anonymous). One refinement: the
//! `Authorization: Bearer` header can be read by an API-key scheme *and* a JWT
//! scheme on the same route, so a bearer API-key scheme that does not know the
//! key, and a JWT scheme that sees something that is not shaped like a JWT,
//! *decline* and let a later scheme try. If nothing accepts a declined
//! credential the request still fails with the first scheme's reason: a
//! credential that was sent but not accepted is never treated as "none".

mod api_key;
mod config;
mod globs;
mod jwt;
mod mtls;
mod oauth;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use http::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use toml::Spanned;

pub use api_key::{generate_key, hash_key};
pub use config::RawAuthScheme;
pub(crate) use config::{secret_from, AuthConfigError};
pub use config::{valid_scope, OneOrMany};
pub use globs::PrincipalGlobs;

use api_key::ApiKeyScheme;
use jwt::JwtScheme;
use mtls::MtlsScheme;
use oauth::OAuthScheme;
pub use oauth::OAuthView;

/// Called once per failed JWKS fetch of a scheme (the gateway counts it in
/// its metrics; identify knows nothing of them).
pub type FetchFailed = std::sync::Arc<dyn Fn() + Send + Sync>;

/// How a principal was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    ApiKey,
    Jwt,
    /// An access token of an `oauth` scheme's authorization server.
    OAuth,
    Mtls,
    Anonymous,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::ApiKey => "api_key",
            AuthMethod::Jwt => "jwt",
            AuthMethod::OAuth => "oauth",
            AuthMethod::Mtls => "mtls",
            AuthMethod::Anonymous => "anonymous",
        }
    }
}

impl std::fmt::Display for AuthMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is calling. Cheap to clone (two `Arc`s and a tag).
///
/// Names and groups are checked to be 1..=256 bytes without control
/// characters, so they are safe to log and to key limits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: Arc<str>,
    pub groups: Arc<[String]>,
    pub method: AuthMethod,
    /// The configured auth scheme that accepted the credential ("" for the
    /// anonymous caller). Part of who the caller is: two schemes (two key
    /// lists, two issuers) may each know an `alice`, and they are not one.
    pub scheme: Arc<str>,
    /// What an OAuth access token granted; `None` for other methods.
    pub grant: Option<Arc<Grant>>,
}

/// What an access token granted its holder (RFC 9068 / RFC 7662 claims).
/// Names only: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grant {
    /// `client_id` (or `azp`): the application the user signed in with.
    pub client_id: Option<String>,
    /// `scope` (space-separated) or `scp` (a list).
    pub scopes: Vec<String>,
}

static ANONYMOUS: LazyLock<Principal> = LazyLock::new(|| Principal {
    name: Arc::from("anonymous"),
    groups: Arc::from(Vec::<String>::new()),
    method: AuthMethod::Anonymous,
    scheme: Arc::from(""),
    grant: None,
});

impl Principal {
    /// The caller on a route that allows anonymous access and sent no
    /// credential. Shares one allocation process-wide.
    pub fn anonymous() -> Principal {
        ANONYMOUS.clone()
    }

    /// The scopes the caller's access token carries (none without one).
    pub fn scopes(&self) -> &[String] {
        self.grant.as_deref().map_or(&[], |g| g.scopes.as_slice())
    }

    /// Whether the caller's token carries every scope of `needed`.
    pub fn has_scopes(&self, needed: &[String]) -> bool {
        needed.iter().all(|s| self.scopes().contains(s))
    }

    /// Who the caller is wherever state is bound to a caller (sealed
    /// states, sessions, remembered approvals, rate limits): `scheme:name`,
    /// or `anonymous`. Qualified by the scheme, not the method, so that
    /// principals of two schemes never share what is bound to either.
    pub fn key(&self) -> String {
        match self.is_anonymous() {
            true => "anonymous".to_owned(),
            false => format!("{}:{}", self.scheme, self.name),
        }
    }

    /// The principal as `scheme` accepted it.
    fn accepted_by(mut self, scheme: &Arc<str>) -> Principal {
        self.scheme = scheme.clone();
        self
    }

    /// Decided by the method, not the name: a JWT whose `sub` is
    /// "anonymous" is not anonymous.
    pub fn is_anonymous(&self) -> bool {
        self.method == AuthMethod::Anonymous
    }

    #[cfg(test)]
    pub(crate) fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// What the TLS layer learned about the peer.
#[derive(Clone, Default)]
pub struct PeerIdentity {
    /// DER of the client's leaf certificate, already verified by rustls
    /// against the listener's client CA. `None` on plain TCP, or when the
    /// client sent no certificate. Must never be filled from anything rustls
    /// did not verify.
    pub client_cert: Option<Arc<[u8]>>,
}

impl std::fmt::Debug for PeerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerIdentity")
            .field("client_cert", &self.client_cert.as_ref().map(|c| c.len()))
            .finish()
    }
}

/// Index of a configured scheme; routes store these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SchemeId(u32);

/// Why a request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// No credential for any of the route's schemes, and the route does not
    /// allow anonymous callers.
    #[error("authentication required")]
    Missing,
    /// A credential was presented and refused. `why` is a short fixed phrase
    /// (e.g. "expired", "bad signature", "wrong audience", "unknown key");
    /// never the credential or anything taken from it.
    #[error("invalid credentials for auth scheme \"{scheme}\": {why}")]
    Invalid { scheme: String, why: &'static str },
    /// A valid access token without scopes the route needs: the client may
    /// ask for them (step-up) and try again.
    #[error("the access token lacks scope {}", needed.join(" "))]
    InsufficientScope {
        principal: Box<Principal>,
        needed: Vec<String>,
    },
    /// An opaque token could not be checked: the issuer's introspection
    /// endpoint is unknown or did not answer.
    #[error(
        "the authorization server of auth scheme \"{scheme}\" cannot be reached to check the token"
    )]
    Unavailable { scheme: String },
}

/// What a challenge (`WWW-Authenticate`) tells a client of an OAuth
/// protected resource: where its metadata is, and which scopes to ask for.
#[derive(Debug, Clone, Copy)]
pub struct Challenge<'a> {
    pub resource_metadata: &'a str,
    pub scopes: &'a [String],
}

/// A `WWW-Authenticate: Bearer` value from its parameters, each quoted
/// (values here are URLs, scopes and fixed phrases: no quote or backslash).
fn bearer_challenge(params: &[(&str, &str)]) -> HeaderValue {
    let mut out = String::from("Bearer");
    for (i, (k, v)) in params.iter().enumerate() {
        let v: String = v
            .chars()
            .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
            .collect();
        out.push_str(if i == 0 { " " } else { ", " });
        out.push_str(&format!("{k}=\"{v}\""));
    }
    HeaderValue::from_str(&out).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

impl AuthFailure {
    /// The `WWW-Authenticate` value (RFC 6750 syntax). On an OAuth
    /// protected resource (`challenge`), it names the resource metadata
    /// (RFC 9728 §5.1) and the scopes to ask for: the route's required
    /// ones, or for step-up those missing with those already held.
    pub fn www_authenticate(&self, challenge: Option<Challenge<'_>>) -> HeaderValue {
        let mut params: Vec<(&str, &str)> = Vec::new();
        let scope: String;
        if let Some(c) = challenge {
            params.push(("resource_metadata", c.resource_metadata));
            let wanted: Vec<&str> = match self {
                AuthFailure::InsufficientScope { principal, needed } => {
                    let mut all: Vec<&str> =
                        principal.scopes().iter().map(String::as_str).collect();
                    all.extend(
                        needed
                            .iter()
                            .map(String::as_str)
                            .filter(|n| !principal.scopes().iter().any(|s| s == n)),
                    );
                    all
                }
                _ => c.scopes.iter().map(String::as_str).collect(),
            };
            scope = wanted.join(" ");
            if !scope.is_empty() {
                params.push(("scope", &scope));
            }
        } else {
            params.push(("realm", "portcullis"));
        }
        match self {
            AuthFailure::Missing | AuthFailure::Unavailable { .. } => {}
            AuthFailure::Invalid { why, .. } => {
                params.push(("error", "invalid_token"));
                params.push(("error_description", why));
            }
            AuthFailure::InsufficientScope { .. } => params.push(("error", "insufficient_scope")),
        }
        bearer_challenge(&params)
    }

    /// The refusal reason: `authentication_required`, `invalid_credentials`,
    /// `insufficient_scope` or `authorization_server_unavailable`.
    pub fn reason(&self) -> crate::model::Reason {
        match self {
            AuthFailure::Missing => crate::model::Reason::AuthenticationRequired,
            AuthFailure::Invalid { .. } => crate::model::Reason::InvalidCredentials,
            AuthFailure::InsufficientScope { .. } => crate::model::Reason::InsufficientScope,
            AuthFailure::Unavailable { .. } => crate::model::Reason::AuthorizationServerUnavailable,
        }
    }

    /// The short fixed phrase for an `Invalid` failure.
    #[cfg(test)]
    pub(crate) fn why(&self) -> Option<&'static str> {
        match self {
            AuthFailure::Invalid { why, .. } => Some(why),
            _ => None,
        }
    }
}

/// What one scheme made of a request.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// Nothing this scheme reads is present.
    Absent,
    Accepted(Principal),
    /// A credential this scheme owns, and it is bad: the request fails.
    Rejected(&'static str),
    /// A credential is present where this scheme looks, but it may belong to
    /// another scheme reading the same place (the Authorization header).
    Declined(&'static str),
    /// An opaque access token the scheme's issuer must be asked about.
    Introspect(String),
    /// A valid token without scopes every request of the route needs.
    Insufficient(Principal, Vec<String>),
    /// The token cannot be checked now.
    Unavailable,
}

/// A credential read from a header.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Credential<'a> {
    Absent,
    Present(&'a str),
    Malformed(&'static str),
}

/// `Authorization: Bearer <token>` (scheme name case-insensitive).
pub(crate) fn bearer(headers: &HeaderMap) -> Credential<'_> {
    match single(headers, &AUTHORIZATION) {
        Credential::Present(v) => {
            let (scheme, rest) = v.split_once(' ').unwrap_or((v, ""));
            if !scheme.eq_ignore_ascii_case("bearer") {
                return Credential::Malformed("unsupported authorization scheme");
            }
            let token = rest.trim_start_matches(' ');
            if token.is_empty() || token.contains([' ', '\t']) {
                return Credential::Malformed("malformed credential");
            }
            Credential::Present(token)
        }
        other => other,
    }
}

/// The token of a well-formed `Authorization: Bearer` header, read as the
/// schemes read it (one header, one token).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    match bearer(headers) {
        Credential::Present(token) => Some(token),
        _ => None,
    }
}

/// A raw credential in a header of its own (e.g. `X-Api-Key`).
pub(crate) fn raw_header<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Credential<'a> {
    match single(headers, name) {
        Credential::Present(v) if v.contains([' ', '\t']) => {
            Credential::Malformed("malformed credential")
        }
        other => other,
    }
}

fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Credential<'a> {
    let mut values = headers.get_all(name).iter();
    let Some(v) = values.next() else {
        return Credential::Absent;
    };
    if values.next().is_some() {
        return Credential::Malformed("ambiguous credentials");
    }
    match v.to_str() {
        Ok(v) if !v.trim().is_empty() => Credential::Present(v.trim_matches([' ', '\t'])),
        _ => Credential::Malformed("malformed credential"),
    }
}

/// Three dot-separated base64url segments, the first two non-empty (the
/// third is empty for `alg: none`, which must still reach the JWT scheme to
/// be refused by name).
pub(crate) fn looks_like_jwt(t: &str) -> bool {
    let b64 = |s: &str| {
        s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    };
    let mut parts = t.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(p), Some(s), None) => {
            !h.is_empty() && !p.is_empty() && b64(h) && b64(p) && b64(s)
        }
        _ => false,
    }
}

#[derive(Debug)]
enum Kind {
    ApiKey(ApiKeyScheme),
    Jwt(JwtScheme),
    OAuth(Box<OAuthScheme>),
    Mtls(MtlsScheme),
}

impl Kind {
    /// The key set a scheme refreshes from a URL, if any.
    fn jwt(&self) -> Option<&JwtScheme> {
        match self {
            Kind::Jwt(j) => Some(j),
            Kind::OAuth(o) => Some(o.jwt()),
            _ => None,
        }
    }

    fn jwt_mut(&mut self) -> Option<&mut JwtScheme> {
        match self {
            Kind::Jwt(j) => Some(j),
            Kind::OAuth(o) => Some(o.jwt_mut()),
            _ => None,
        }
    }
}

#[derive(Debug)]
struct Scheme {
    name: Arc<str>,
    kind: Kind,
}

impl Scheme {
    async fn attempt(
        &self,
        headers: &HeaderMap,
        peer: &PeerIdentity,
        resource: Option<&str>,
    ) -> Attempt {
        match &self.kind {
            Kind::ApiKey(s) => s.attempt(headers),
            Kind::Jwt(s) => s.attempt(headers),
            // An opaque token is introspected by `authenticate`, once it
            // knows it is no API key of the route's.
            Kind::OAuth(s) => s.attempt(headers, resource),
            Kind::Mtls(s) => s.attempt(peer),
        }
    }
}

/// All configured schemes, built once from config.
#[derive(Debug, Default)]
pub struct AuthSchemes {
    schemes: Vec<Scheme>,
    by_name: HashMap<String, SchemeId>,
}

fn valid_scheme_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

impl AuthSchemes {
    /// No schemes at all (every route is then anonymous or refused).
    #[cfg(test)]
    pub(crate) fn empty() -> AuthSchemes {
        AuthSchemes::default()
    }

    /// Validates and prepares every `[[auth]]` table. Relative paths are
    /// resolved against `base`. Key files and secrets are read here, so a
    /// config that loads can authenticate (a `jwks_url` is fetched by
    /// [`AuthSchemes::spawn_refresh`]).
    pub fn build(
        raw: &[Spanned<RawAuthScheme>],
        base: &Path,
    ) -> Result<AuthSchemes, AuthConfigError> {
        let mut out = AuthSchemes::default();
        for table in raw {
            let r = table.get_ref();
            let name = r.name.get_ref();
            if !valid_scheme_name(name) {
                return Err(AuthConfigError::at(
                    &r.name,
                    "auth.name",
                    "must be 1 to 64 characters of a-z, 0-9, '_' and '-'",
                ));
            }
            if out.by_name.contains_key(name.as_str()) {
                return Err(AuthConfigError::at(
                    &r.name,
                    "auth.name",
                    format!("auth scheme \"{name}\" is defined twice"),
                ));
            }
            let kind = match r.kind.get_ref().as_str() {
                "api_key" => Kind::ApiKey(ApiKeyScheme::build(r)?),
                "jwt" => Kind::Jwt(JwtScheme::build(r, base)?),
                "oauth" => Kind::OAuth(Box::new(OAuthScheme::build(r, base)?)),
                "mtls" => Kind::Mtls(MtlsScheme::build(r)?),
                other => {
                    return Err(AuthConfigError::at(
                        &r.kind,
                        "auth.type",
                        format!(
                        "unknown auth type \"{other}\"; expected \"api_key\", \"jwt\", \"oauth\" or \"mtls\""
                    ),
                    ))
                }
            };
            let id = SchemeId(u32::try_from(out.schemes.len()).expect("fewer than 2^32 schemes"));
            out.by_name.insert(name.clone(), id);
            out.schemes.push(Scheme {
                name: Arc::from(name.as_str()),
                kind,
            });
        }
        Ok(out)
    }

    /// An `oauth` scheme's description (`None` for other types).
    pub fn oauth(&self, id: SchemeId) -> Option<&OAuthView> {
        match &self.schemes.get(id.0 as usize)?.kind {
            Kind::OAuth(o) => Some(o.view()),
            _ => None,
        }
    }

    /// Index of a scheme by name.
    pub fn lookup(&self, name: &str) -> Option<SchemeId> {
        self.by_name.get(name).copied()
    }

    /// Scheme names in config order.
    pub fn names(&self) -> Vec<&str> {
        self.schemes.iter().map(|s| &*s.name).collect()
    }

    /// A scheme's configured name.
    pub fn name(&self, id: SchemeId) -> Option<&str> {
        self.schemes.get(id.0 as usize).map(|s| &*s.name)
    }

    /// What kind of credential a scheme accepts (e.g. to check that a route
    /// using an `mtls` scheme is served by a listener that asks for client
    /// certificates; what a route's authentication is, compared across
    /// reloads).
    pub fn method(&self, id: SchemeId) -> Option<AuthMethod> {
        self.schemes.get(id.0 as usize).map(|s| match s.kind {
            Kind::ApiKey(_) => AuthMethod::ApiKey,
            Kind::Jwt(_) => AuthMethod::Jwt,
            Kind::OAuth(_) => AuthMethod::OAuth,
            Kind::Mtls(_) => AuthMethod::Mtls,
        })
    }

    /// Whether the scheme named `scheme` may still accept `name` with
    /// `groups` (a sign-in remembered from an earlier config): an API-key
    /// scheme must still hold a key for them; the other types cannot be
    /// asked without a credential, and a scheme that is gone names nobody.
    pub fn still_names(&self, scheme: &str, name: &str, groups: &[String]) -> bool {
        let Some(s) = self
            .lookup(scheme)
            .and_then(|id| self.schemes.get(id.0 as usize))
        else {
            return false;
        };
        match &s.kind {
            Kind::ApiKey(keys) => keys.names(name, groups),
            _ => true,
        }
    }

    /// Tries `schemes` in order; see the module documentation for which one
    /// decides. With no credential for any of them: the anonymous principal
    /// when `allow_anonymous`, else [`AuthFailure::Missing`]. `resource`:
    /// the route's resource identifier, which an `oauth` scheme's tokens
    /// must name in `aud`. Awaits only to introspect an opaque token.
    pub async fn authenticate(
        &self,
        schemes: &[SchemeId],
        allow_anonymous: bool,
        headers: &HeaderMap,
        peer: &PeerIdentity,
        resource: Option<&str>,
    ) -> Result<Principal, AuthFailure> {
        let mut declined: Option<(&Scheme, &'static str)> = None;
        for id in schemes {
            let Some(scheme) = self.schemes.get(id.0 as usize) else {
                // A SchemeId from another AuthSchemes: a wiring bug. Fail closed.
                debug_assert!(false, "SchemeId {id:?} out of range");
                return Err(AuthFailure::Invalid {
                    scheme: String::new(),
                    why: "misconfigured route",
                });
            };
            let attempt = match scheme.attempt(headers, peer, resource).await {
                // Boxed: only an opaque token asks the authorization server;
                // inline, that exchange would size every request's future.
                Attempt::Introspect(token) => {
                    Box::pin(self.introspect_unless_key(scheme, schemes, headers, &token, resource))
                        .await
                }
                other => other,
            };
            match attempt {
                Attempt::Absent => {}
                Attempt::Accepted(p) => return Ok(p.accepted_by(&scheme.name)),
                Attempt::Insufficient(p, needed) => {
                    return Err(AuthFailure::InsufficientScope {
                        principal: Box::new(p.accepted_by(&scheme.name)),
                        needed,
                    })
                }
                Attempt::Unavailable => {
                    return Err(AuthFailure::Unavailable {
                        scheme: scheme.name.to_string(),
                    })
                }
                Attempt::Introspect(_) => {
                    debug_assert!(false, "introspection is done by introspect_unless_key");
                    return Err(AuthFailure::Unavailable {
                        scheme: scheme.name.to_string(),
                    });
                }
                Attempt::Rejected(why) => {
                    return Err(AuthFailure::Invalid {
                        scheme: scheme.name.to_string(),
                        why,
                    })
                }
                Attempt::Declined(why) => {
                    declined.get_or_insert((scheme, why));
                }
            }
        }
        if let Some((scheme, why)) = declined {
            return Err(AuthFailure::Invalid {
                scheme: scheme.name.to_string(),
                why,
            });
        }
        if allow_anonymous {
            Ok(Principal::anonymous())
        } else {
            Err(AuthFailure::Missing)
        }
    }

    /// An opaque bearer token goes to `scheme`'s authorization server only
    /// when it can be that server's token: an API key one of the route's
    /// schemes knows is that scheme's (whatever their order), and a key of
    /// the gateway's own shape (`pcl_…`, known or not) is never sent.
    async fn introspect_unless_key(
        &self,
        scheme: &Scheme,
        schemes: &[SchemeId],
        headers: &HeaderMap,
        token: &str,
        resource: Option<&str>,
    ) -> Attempt {
        for id in schemes {
            if let Some(Kind::ApiKey(keys)) = self.schemes.get(id.0 as usize).map(|s| &s.kind) {
                if let accepted @ Attempt::Accepted(_) = keys.attempt(headers) {
                    return accepted;
                }
            }
        }
        if api_key::is_gateway_key(token) {
            return Attempt::Declined("unknown key");
        }
        match &scheme.kind {
            Kind::OAuth(s) => s.introspect(token, resource).await,
            _ => Attempt::Declined("malformed token"),
        }
    }

    /// [`AuthSchemes::authenticate`] without a resource, for schemes that
    /// never await (every type but an introspecting `oauth` one).
    #[cfg(test)]
    pub(crate) fn authenticate_now(
        &self,
        schemes: &[SchemeId],
        allow_anonymous: bool,
        headers: &HeaderMap,
        peer: &PeerIdentity,
    ) -> Result<Principal, AuthFailure> {
        use futures_util::FutureExt;
        self.authenticate(schemes, allow_anonymous, headers, peer, None)
            .now_or_never()
            .expect("no scheme here awaits")
    }

    /// Starts the background JWKS refresh of every `jwks_url` scheme (call
    /// inside a tokio runtime; a key set already being refreshed, e.g. kept
    /// from the previous config, is left to its task). Each task holds only
    /// a weak reference to its key set and ends once no config uses it.
    /// `failures` gives what counts the failed fetches of an issuer.
    pub fn spawn_refresh(&self, failures: impl Fn(&str) -> FetchFailed) {
        for s in &self.schemes {
            if let Some(j) = s.kind.jwt() {
                if let Some(issuer) = j.remote_issuer() {
                    j.spawn_refresh(&s.name, failures(issuer));
                }
            }
        }
    }

    /// Takes over the JWKS key sets of `old` (the running config's schemes)
    /// for the schemes of the same name: see `JwtScheme::keep_keys`. A
    /// reload therefore neither re-fetches an unchanged `jwks_url` nor
    /// starts a changed one empty.
    pub fn keep_keys(&mut self, old: &AuthSchemes) {
        for s in &mut self.schemes {
            let was = old
                .lookup(&s.name)
                .and_then(|id| old.schemes.get(id.0 as usize));
            let Some(was) = was else { continue };
            // Only from a scheme of the same type: a `jwt` scheme's keys are
            // not an `oauth` issuer's.
            if std::mem::discriminant(&s.kind) != std::mem::discriminant(&was.kind) {
                continue;
            }
            if let (Some(new), Some(was)) = (s.kind.jwt_mut(), was.kind.jwt()) {
                new.keep_keys(was);
            }
        }
    }

    /// Whether any scheme fetches its keys from a `jwks_url`.
    pub fn fetches_keys(&self) -> bool {
        self.schemes
            .iter()
            .any(|s| s.kind.jwt().is_some_and(|j| j.remote_issuer().is_some()))
    }

    /// Waits until every `jwks_url` scheme has a key set, each at most its
    /// `jwks_ready_timeout` from `started`. Returns the schemes (name, URL
    /// as logs show it) still without one.
    pub async fn wait_for_keys(&self, started: std::time::Instant) -> Vec<(String, String)> {
        let mut missing = Vec::new();
        for s in &self.schemes {
            if let Some(j) = s.kind.jwt() {
                if let Err(url) = j.wait_for_keys(started).await {
                    missing.push((s.name.to_string(), url));
                }
            }
        }
        missing
    }

    /// Fetches every `jwks_url` once, now (the tests' way to load keys without
    /// the background task). A failure keeps the previous keys; the error names
    /// the scheme and the cause.
    #[cfg(test)]
    pub(crate) async fn refresh_jwks_now(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        for s in &self.schemes {
            if let Some(j) = s.kind.jwt() {
                if let Err(e) = j.refresh_now(&s.name).await {
                    errors.push(format!("auth scheme \"{}\": {e}", s.name));
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Doc {
        auth: Vec<Spanned<RawAuthScheme>>,
    }

    /// Parses `[[auth]]` tables and builds them.
    pub(crate) fn build(text: &str, base: &Path) -> Result<AuthSchemes, AuthConfigError> {
        let doc: Doc = toml::from_str(text).expect("test TOML parses");
        AuthSchemes::build(&doc.auth, base)
    }

    /// The 1-based line a config error points at.
    pub(crate) fn line_of(text: &str, e: &AuthConfigError) -> usize {
        text[..e.span.start].matches('\n').count() + 1
    }

    pub(crate) fn build_err(text: &str) -> (usize, AuthConfigError) {
        let e = build(text, Path::new("/nonexistent")).expect_err("config must be refused");
        (line_of(text, &e), e)
    }

    pub(crate) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn keys_config() -> String {
        format!(
            r#"
[[auth]]
name = "keys"
type = "api_key"

[[auth.key]]
principal = "alice"
groups = ["dev", "ops"]
hash = "{}"

[[auth.key]]
principal = "bob"
hash = "{}"

[[auth]]
name = "hdr"
type = "api_key"
header = "X-Api-Key"

[[auth.key]]
principal = "carol"
groups = ["ci"]
hash = "{}"
"#,
            hash_key("alice-key"),
            hash_key("bob-key"),
            hash_key("carol-key")
        )
    }

    #[test]
    fn api_key_bearer_and_custom_header() {
        let s = build(&keys_config(), Path::new("/")).unwrap();
        assert_eq!(s.names(), vec!["keys", "hdr"]);
        let keys = s.lookup("keys").unwrap();
        let hdr = s.lookup("hdr").unwrap();
        assert_eq!(s.lookup("nope"), None);
        assert_eq!(s.method(keys), Some(AuthMethod::ApiKey));
        let peer = PeerIdentity::default();

        let p = s
            .authenticate_now(
                &[keys],
                false,
                &headers(&[("authorization", "Bearer alice-key")]),
                &peer,
            )
            .unwrap();
        assert_eq!(&*p.name, "alice");
        assert_eq!(&*p.groups, &["dev".to_string(), "ops".to_string()]);
        assert_eq!(p.method, AuthMethod::ApiKey);
        assert!(p.in_group("ops") && !p.is_anonymous());

        // Scheme name is case-insensitive; extra spaces tolerated.
        let p = s
            .authenticate_now(
                &[keys],
                false,
                &headers(&[("authorization", "bearer   bob-key")]),
                &peer,
            )
            .unwrap();
        assert_eq!(&*p.name, "bob");
        assert!(p.groups.is_empty());

        let p = s
            .authenticate_now(
                &[keys, hdr],
                false,
                &headers(&[("x-api-key", "carol-key")]),
                &peer,
            )
            .unwrap();
        assert_eq!(&*p.name, "carol");
        assert!(s.still_names("hdr", "carol", &["ci".to_string()]));
        assert!(!s.still_names("hdr", "carol", &[]), "other groups");
        assert!(
            !s.still_names("keys", "carol", &["ci".to_string()]),
            "another scheme"
        );
        assert!(!s.still_names("gone", "carol", &["ci".to_string()]));
        assert_eq!(&*p.scheme, "hdr");
        assert_eq!(p.key(), "hdr:carol");
        assert_eq!(Principal::anonymous().key(), "anonymous");

        // A key is only valid in its own scheme.
        let e = s
            .authenticate_now(
                &[hdr],
                false,
                &headers(&[("authorization", "Bearer alice-key")]),
                &peer,
            )
            .unwrap_err();
        assert_eq!(e, AuthFailure::Missing);
    }

    #[test]
    fn api_key_wrong_missing_anonymous() {
        let s = build(&keys_config(), Path::new("/")).unwrap();
        let keys = s.lookup("keys").unwrap();
        let hdr = s.lookup("hdr").unwrap();
        let peer = PeerIdentity::default();
        let invalid = |scheme: &str, why: &'static str| AuthFailure::Invalid {
            scheme: scheme.into(),
            why,
        };

        let wrong = headers(&[("authorization", "Bearer not-a-key")]);
        assert_eq!(
            s.authenticate_now(&[keys], false, &wrong, &peer),
            Err(invalid("keys", "unknown key"))
        );
        // A bad credential is never downgraded to anonymous.
        assert_eq!(
            s.authenticate_now(&[keys], true, &wrong, &peer),
            Err(invalid("keys", "unknown key"))
        );
        assert_eq!(
            s.authenticate_now(
                &[hdr, keys],
                true,
                &headers(&[("x-api-key", "nope")]),
                &peer
            ),
            Err(invalid("hdr", "unknown key"))
        );
        // First scheme with a credential decides, even if a later one would accept.
        assert_eq!(
            s.authenticate_now(
                &[hdr, keys],
                false,
                &headers(&[("x-api-key", "nope"), ("authorization", "Bearer alice-key")]),
                &peer
            ),
            Err(invalid("hdr", "unknown key"))
        );

        let none = HeaderMap::new();
        assert_eq!(
            s.authenticate_now(&[keys, hdr], false, &none, &peer),
            Err(AuthFailure::Missing)
        );
        let anon = s
            .authenticate_now(&[keys, hdr], true, &none, &peer)
            .unwrap();
        assert!(anon.is_anonymous());
        assert_eq!(anon, Principal::anonymous());
        assert_eq!(&*anon.name, "anonymous");
        assert_eq!(anon.method.as_str(), "anonymous");
        // No schemes at all.
        assert_eq!(
            s.authenticate_now(&[], false, &wrong, &peer),
            Err(AuthFailure::Missing)
        );

        // Malformed or ambiguous headers are refusals, not absences.
        for h in [
            headers(&[("authorization", "Basic YWxpY2U6eA==")]),
            headers(&[("authorization", "Bearer")]),
            headers(&[("authorization", "Bearer a b")]),
            headers(&[
                ("authorization", "Bearer alice-key"),
                ("authorization", "Bearer bob-key"),
            ]),
        ] {
            let e = s.authenticate_now(&[keys], true, &h, &peer).unwrap_err();
            assert_eq!(e.reason().as_str(), "invalid_credentials", "{h:?}");
        }
        let e = s
            .authenticate_now(
                &[hdr],
                true,
                &headers(&[("x-api-key", "a"), ("x-api-key", "b")]),
                &peer,
            )
            .unwrap_err();
        assert_eq!(e, invalid("hdr", "ambiguous credentials"));
    }

    #[test]
    fn failure_rendering() {
        let m = AuthFailure::Missing;
        assert_eq!(m.reason().as_str(), "authentication_required");
        assert_eq!(m.www_authenticate(None), r#"Bearer realm="portcullis""#);
        let i = AuthFailure::Invalid {
            scheme: "keys".into(),
            why: "expired",
        };
        assert_eq!(i.reason().as_str(), "invalid_credentials");
        assert_eq!(
            i.www_authenticate(None),
            r#"Bearer realm="portcullis", error="invalid_token", error_description="expired""#
        );
        assert_eq!(
            i.to_string(),
            r#"invalid credentials for auth scheme "keys": expired"#
        );
        for m in [
            AuthMethod::ApiKey,
            AuthMethod::Jwt,
            AuthMethod::Mtls,
            AuthMethod::Anonymous,
        ] {
            assert_eq!(m.to_string(), m.as_str());
        }
    }

    #[test]
    fn api_key_config_errors() {
        let h = hash_key("k");
        // Bad hash: points at the hash line and never echoes the value.
        let text = "[[auth]]\nname = \"k\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"a\"\nhash = \"my-secret-key\"\n";
        let (line, e) = build_err(text);
        assert_eq!((line, e.field.as_str()), (6, "auth.key.hash"));
        assert!(!e.to_string().contains("my-secret-key"), "{e}");
        assert!(e.message.contains("hash-key"));

        let (line, e) = build_err("[[auth]]\nname = \"k\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"a\"\nhash = \"sha256:abcd\"\n");
        assert_eq!((line, e.field.as_str()), (6, "auth.key.hash"));

        // Duplicate principal.
        let text = format!("[[auth]]\nname = \"k\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"a\"\nhash = \"{h}\"\n[[auth.key]]\nprincipal = \"a\"\nhash = \"{}\"\n", hash_key("other"));
        let (line, e) = build_err(&text);
        assert_eq!((line, e.field.as_str()), (8, "auth.key.principal"));

        // Duplicate hash.
        let text = format!("[[auth]]\nname = \"k\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"a\"\nhash = \"{h}\"\n[[auth.key]]\nprincipal = \"b\"\nhash = \"{h}\"\n");
        let (line, e) = build_err(&text);
        assert_eq!((line, e.field.as_str()), (9, "auth.key.hash"));
        assert!(e.message.contains("twice"));

        // Reserved / unprintable principal.
        let (line, e) = build_err(&format!("[[auth]]\nname = \"k\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"anonymous\"\nhash = \"{h}\"\n"));
        assert_eq!((line, e.field.as_str()), (5, "auth.key.principal"));
        let (line, _) = build_err(&format!("[[auth]]\nname = \"k\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"a\\nb\"\nhash = \"{h}\"\n"));
        assert_eq!(line, 5);

        // Bad header name.
        let (line, e) =
            build_err("[[auth]]\nname = \"k\"\ntype = \"api_key\"\nheader = \"x api key\"\n");
        assert_eq!((line, e.field.as_str()), (4, "auth.header"));

        // A field of another type.
        let (line, e) = build_err("[[auth]]\nname = \"k\"\ntype = \"api_key\"\nissuer = \"x\"\n");
        assert_eq!((line, e.field.as_str()), (4, "auth.issuer"));
        assert!(e.message.contains("api_key"));
    }

    #[test]
    fn scheme_name_errors() {
        let (line, e) = build_err("[[auth]]\nname = \"Bad Name\"\ntype = \"api_key\"\n");
        assert_eq!((line, e.field.as_str()), (2, "auth.name"));
        let (line, e) = build_err(&format!(
            "[[auth]]\nname = \"{}\"\ntype = \"api_key\"\n",
            "a".repeat(65)
        ));
        assert_eq!((line, e.field.as_str()), (2, "auth.name"));
        let (line, e) = build_err("[[auth]]\nname = \"a\"\ntype = \"api_key\"\n\n[[auth]]\nname = \"a\"\ntype = \"mtls\"\n");
        assert_eq!((line, e.field.as_str()), (6, "auth.name"));
        let (line, e) = build_err("[[auth]]\nname = \"a\"\ntype = \"basic\"\n");
        assert_eq!((line, e.field.as_str()), (3, "auth.type"));
        // Unknown fields are refused by serde (the lead's loader reports them).
        let doc: Result<Doc, _> =
            toml::from_str("[[auth]]\nname = \"a\"\ntype = \"mtls\"\nfoo = 1\n");
        assert!(doc.is_err());
        assert!(AuthSchemes::empty().names().is_empty());
    }

    #[test]
    fn credential_parsing() {
        assert_eq!(bearer(&HeaderMap::new()), Credential::Absent);
        assert_eq!(
            bearer(&headers(&[("authorization", "Bearer  tok ")])),
            Credential::Present("tok")
        );
        assert_eq!(
            bearer(&headers(&[("authorization", "Token tok")])),
            Credential::Malformed("unsupported authorization scheme")
        );
        assert!(looks_like_jwt("eyJh.eyJi.c2ln"));
        assert!(looks_like_jwt("eyJh.eyJi."));
        assert!(!looks_like_jwt("eyJh.eyJi"));
        assert!(!looks_like_jwt(".eyJi.sig"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a+b.c.d"));
    }

    #[test]
    fn debug_output_has_no_secrets() {
        let s = build(&keys_config(), Path::new("/")).unwrap();
        let d = format!("{s:?}");
        assert!(!d.contains(&hash_key("alice-key")[7..]), "{d}");
        assert!(d.contains("keys"));
    }
}
