//! `type = "oauth"`: access tokens of one authorization server, for routes
//! that are OAuth protected resources (the MCP authorization spec; RFC 9728
//! metadata is served by the gateway from [`OAuthView`]).
//!
//! A JWT access token is verified against the keys the issuer's metadata
//! names (`jwks_uri`), found and refreshed in the background; any other
//! token is asked about at the issuer's introspection endpoint (RFC 7662),
//! and the answer cached briefly. Either way the token must be bound to the
//! route: its `aud` must name the route's resource (RFC 8707) or one of the
//! scheme's extra `audience` values. Scopes come from `scope` (a
//! space-separated string) or `scp` (a list, as Entra and Okta write it).

use std::path::Path;
use std::sync::Arc;

use http::header::HeaderMap;
use serde_json::{Map, Value};

use super::config::{scope_list, secret_from, AuthConfigError, RawAuthScheme, OAUTH_FIELDS};
use super::jwt::JwtScheme;
use super::{bearer, looks_like_jwt, Attempt, AuthMethod, Credential, Grant};
use crate::oauth::{check_endpoint, ClientSecret, IssuerMetadata};

mod introspect;

use introspect::Introspection;

/// The most scopes a token may carry (more is refused, not truncated).
const MAX_SCOPES: usize = 256;

/// What the gateway needs of an `oauth` scheme to describe the protected
/// resource and to challenge a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthView {
    pub issuer: String,
    /// `scopes_supported`.
    pub scopes: Vec<String>,
    /// Scopes every token must carry (the 401's `scope`).
    pub required: Vec<String>,
}

pub(crate) struct OAuthScheme {
    view: OAuthView,
    jwt: JwtScheme,
    /// Accepted `aud` values besides the route's resource.
    audiences: Vec<String>,
    introspection: Option<Introspection>,
}

impl std::fmt::Debug for OAuthScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthScheme")
            .field("issuer", &self.view.issuer)
            .field("scopes", &self.view.scopes)
            .field("required", &self.view.required)
            .field("introspection", &self.introspection.is_some())
            .finish()
    }
}

impl OAuthScheme {
    pub(crate) fn build(raw: &RawAuthScheme, base: &Path) -> Result<OAuthScheme, AuthConfigError> {
        raw.only("oauth", OAUTH_FIELDS)?;
        let issuer = raw.issuer.as_ref().ok_or_else(|| {
            AuthConfigError::at(
                &raw.kind,
                "auth.issuer",
                "an oauth scheme needs `issuer` (the authorization server's issuer identifier; its metadata is found from it)",
            )
        })?;
        check_endpoint(issuer.get_ref())
            .map_err(|why| AuthConfigError::at(issuer, "auth.issuer", why))?;
        let scopes = scope_list(&raw.scopes, "auth.scopes")?;
        let required = scope_list(&raw.required_scopes, "auth.required_scopes")?;
        if let Some(missing) = required.iter().find(|r| !scopes.contains(r)) {
            let at = raw
                .required_scopes
                .as_ref()
                .expect("non-empty list was given");
            return Err(AuthConfigError::at(
                at,
                "auth.required_scopes",
                format!("\"{missing}\" is not one of `scopes` (the scopes the resource says it supports)"),
            ));
        }
        let audiences = raw
            .audience
            .as_ref()
            .map(|a| a.get_ref().0.clone())
            .unwrap_or_default();
        if audiences.iter().any(String::is_empty) {
            let at = raw.audience.as_ref().expect("checked");
            return Err(AuthConfigError::at(
                at,
                "auth.audience",
                "must not be empty",
            ));
        }
        let introspection = match &raw.introspection_client_id {
            None => {
                for (field, v) in [
                    (
                        "auth.introspection_client_secret_file",
                        &raw.introspection_client_secret_file,
                    ),
                    (
                        "auth.introspection_client_secret_env",
                        &raw.introspection_client_secret_env,
                    ),
                ] {
                    if let Some(v) = v {
                        return Err(AuthConfigError::at(
                            v,
                            field,
                            "applies only with introspection_client_id",
                        ));
                    }
                }
                None
            }
            Some(id) => {
                let secret = secret_from(
                    base,
                    raw.introspection_client_secret_file.as_ref(),
                    raw.introspection_client_secret_env.as_ref(),
                    "auth.introspection_client_secret",
                    id,
                )?;
                Some(Introspection::new(ClientSecret::new(
                    id.get_ref().clone(),
                    secret,
                )))
            }
        };
        Ok(OAuthScheme {
            jwt: JwtScheme::for_issuer(raw, issuer.get_ref())?,
            view: OAuthView {
                issuer: issuer.get_ref().clone(),
                scopes,
                required,
            },
            audiences,
            introspection,
        })
    }

    pub(crate) fn view(&self) -> &OAuthView {
        &self.view
    }

    pub(crate) fn jwt(&self) -> &JwtScheme {
        &self.jwt
    }

    pub(crate) fn jwt_mut(&mut self) -> &mut JwtScheme {
        &mut self.jwt
    }

    fn metadata(&self) -> Option<Arc<IssuerMetadata>> {
        self.jwt.metadata()
    }

    pub(crate) fn attempt(&self, headers: &HeaderMap, resource: Option<&str>) -> Attempt {
        match bearer(headers) {
            Credential::Absent => Attempt::Absent,
            Credential::Malformed(why) => Attempt::Declined(why),
            Credential::Present(t) if looks_like_jwt(t) => match self.jwt.verify_claims(t) {
                Ok(claims) => self.judge(&claims, resource),
                Err(why) => Attempt::Rejected(why),
            },
            Credential::Present(t) if self.introspection.is_some() => {
                Attempt::Introspect(t.to_owned())
            }
            // Not a JWT, and nowhere to ask: maybe an API key of another scheme.
            Credential::Present(_) => Attempt::Declined("malformed token"),
        }
    }

    /// An opaque token, judged by what the issuer says of it.
    pub(crate) async fn introspect(&self, token: &str, resource: Option<&str>) -> Attempt {
        let Some(intro) = &self.introspection else {
            return Attempt::Declined("malformed token");
        };
        match intro
            .ask(token, self.metadata().as_deref(), &self.view.issuer)
            .await
        {
            Ok(claims) => self.judge(&claims, resource),
            Err(introspect::Failed::Refused(why)) => Attempt::Rejected(why),
            Err(introspect::Failed::Unavailable) => Attempt::Unavailable,
        }
    }

    /// A verified token's claims, against the route.
    fn judge(&self, claims: &Map<String, Value>, resource: Option<&str>) -> Attempt {
        if !self.bound(claims, resource) {
            return Attempt::Rejected("token not issued for this resource");
        }
        let scopes = match scopes(claims) {
            Ok(s) => s,
            Err(why) => return Attempt::Rejected(why),
        };
        let client_id = ["client_id", "azp"]
            .iter()
            .find_map(|c| claims.get(*c).and_then(Value::as_str))
            .filter(|c| super::config::printable_name(c))
            .map(str::to_owned);
        let missing: Vec<String> = self
            .view
            .required
            .iter()
            .filter(|r| !scopes.contains(r))
            .cloned()
            .collect();
        // A client's own token (client credentials) may name no subject
        // (RFC 7662 makes `sub` optional): the client is then the caller.
        let with_client;
        let claims = match (&client_id, claims.contains_key(self.jwt.principal_claim())) {
            (Some(c), false) => {
                with_client = {
                    let mut m = claims.clone();
                    m.insert(
                        self.jwt.principal_claim().to_owned(),
                        Value::String(c.clone()),
                    );
                    m
                };
                &with_client
            }
            _ => claims,
        };
        let grant = Arc::new(Grant { client_id, scopes });
        match self.jwt.principal(claims, AuthMethod::OAuth, Some(grant)) {
            Ok(p) if missing.is_empty() => Attempt::Accepted(p),
            Ok(p) => Attempt::Insufficient(p, missing),
            Err(why) => Attempt::Rejected(why),
        }
    }

    /// `aud` names the route's resource or an extra accepted audience.
    fn bound(&self, claims: &Map<String, Value>, resource: Option<&str>) -> bool {
        let accepts = |a: &str| resource == Some(a) || self.audiences.iter().any(|x| x == a);
        match claims.get("aud") {
            Some(Value::String(a)) => accepts(a),
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).any(accepts),
            _ => false,
        }
    }
}

/// The token's scopes: `scope` (RFC 9068, RFC 7662) or `scp`.
fn scopes(claims: &Map<String, Value>) -> Result<Vec<String>, &'static str> {
    let list: Vec<String> = match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => {
            s.split_ascii_whitespace().map(str::to_owned).collect()
        }
        (None, Some(Value::Array(a))) => a
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or("malformed scope claim"))
            .collect::<Result<_, _>>()?,
        (None, None) | (Some(Value::Null), _) => Vec::new(),
        _ => return Err("malformed scope claim"),
    };
    if list.len() > MAX_SCOPES || list.iter().any(|s| s.len() > 128 || !s.is_ascii()) {
        return Err("malformed scope claim");
    }
    Ok(list)
}

#[cfg(test)]
mod tests;
