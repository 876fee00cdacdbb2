//! `[[admin.sign_in]]`: the approval page's OAuth clients. An approver
//! with a browser signs in at the authorization server of a route's
//! `oauth` scheme (authorization code flow with PKCE, the gateway as a
//! confidential client); the token it gets is checked as the route
//! checks bearer tokens.

use std::path::Path;

use super::locate::Locator;
use super::raw::RawConfig;
use crate::identify::{AuthMethod, AuthSchemes};
use crate::model::ConfigError;
use crate::oauth::ClientSecret;

/// One sign-in client, validated: its scheme is an `oauth` one.
#[derive(Debug, Clone)]
pub struct ApprovalSignIn {
    /// The `[[auth]]` scheme's name.
    pub scheme: String,
    /// The scheme's issuer (its metadata names the endpoints).
    pub issuer: String,
    pub client: ClientSecret,
}

/// Every `[[admin.sign_in]]`, each naming a distinct `oauth` scheme.
pub(super) fn sign_ins(
    raw: &RawConfig,
    auth: &AuthSchemes,
    loc: &Locator<'_>,
    base: &Path,
) -> Result<Vec<ApprovalSignIn>, ConfigError> {
    let Some(admin) = &raw.admin else {
        return Ok(Vec::new());
    };
    let mut out: Vec<ApprovalSignIn> = Vec::new();
    for table in &admin.get_ref().sign_in {
        let r = table.get_ref();
        let name = r.scheme.get_ref();
        let at = |field: &str, why: String| loc.at(r.scheme.span(), field, why);
        let issuer = auth
            .lookup(name)
            .filter(|id| auth.method(*id) == Some(AuthMethod::OAuth))
            .and_then(|id| auth.oauth(id))
            .map(|v| v.issuer.clone())
            .ok_or_else(|| {
                at(
                    "admin.sign_in.scheme",
                    format!("\"{name}\" is no [[auth]] scheme of type \"oauth\""),
                )
            })?;
        if out.iter().any(|s| &s.scheme == name) {
            return Err(at(
                "admin.sign_in.scheme",
                format!("scheme \"{name}\" has two sign-in clients"),
            ));
        }
        if r.client_id.get_ref().is_empty() {
            return Err(loc.at(
                r.client_id.span(),
                "admin.sign_in.client_id",
                "must not be empty",
            ));
        }
        let secret = secret(r, loc, base)?;
        out.push(ApprovalSignIn {
            scheme: name.clone(),
            issuer,
            client: ClientSecret::new(r.client_id.get_ref().clone(), secret),
        });
    }
    Ok(out)
}

/// The client secret, from its file (trimmed) or environment variable.
fn secret(
    r: &super::raw::RawAdminSignIn,
    loc: &Locator<'_>,
    base: &Path,
) -> Result<String, ConfigError> {
    let field = "admin.sign_in.client_secret";
    let value = match (&r.client_secret_file, &r.client_secret_env) {
        (Some(file), None) => std::fs::read_to_string(base.join(file.get_ref())).map_err(|e| {
            loc.at(
                file.span(),
                "admin.sign_in.client_secret_file",
                format!("cannot read it: {e}"),
            )
        })?,
        (None, Some(env)) => crate::model::secret_env::take(env.get_ref())
            .and_then(|v| v.into_string().ok())
            .ok_or_else(|| {
                loc.at(
                    env.span(),
                    "admin.sign_in.client_secret_env",
                    "the variable is not set",
                )
            })?,
        (Some(_), Some(env)) => {
            return Err(loc.at(
                env.span(),
                field,
                "give client_secret_file or client_secret_env, not both",
            ))
        }
        (None, None) => {
            return Err(loc.at(
                r.client_id.span(),
                field,
                "give client_secret_file or client_secret_env",
            ))
        }
    };
    let value = value.trim().to_owned();
    match value.is_empty() {
        true => Err(loc.at(r.client_id.span(), field, "the secret is empty")),
        false => Ok(value),
    }
}
