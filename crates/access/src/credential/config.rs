//! `[upstream.credential]` as written, checked and built.

use std::path::Path;

use arc_swap::ArcSwapOption;
use http::{HeaderName, HeaderValue};
use serde::Deserialize;
use toml::Spanned;

use super::{GrantKind, TokenEndpoint, TokenSource, UpstreamCredential};
use crate::identify::{secret_from, OneOrMany};
use crate::model::SettingsError;
use crate::oauth::{check_endpoint, ClientSecret, OAuthHttp};

/// One `[upstream.credential]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCredential {
    /// `static` | `client_credentials` | `token_exchange`.
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    /// `static`: the header (default `authorization`, sent as `Bearer <secret>`).
    pub header: Option<Spanned<String>>,
    pub secret_file: Option<Spanned<String>>,
    pub secret_env: Option<Spanned<String>>,
    /// The token endpoint; or `issuer`, whose metadata names it.
    pub token_url: Option<Spanned<String>>,
    pub issuer: Option<Spanned<String>>,
    pub client_id: Option<Spanned<String>>,
    pub client_secret_file: Option<Spanned<String>>,
    pub client_secret_env: Option<Spanned<String>>,
    /// One scope or a list (sent space-separated).
    pub scope: Option<Spanned<OneOrMany>>,
    /// RFC 8707 `resource` the upstream's token is for.
    pub resource: Option<Spanned<String>>,
    /// RFC 8693 `audience`.
    pub audience: Option<Spanned<String>>,
}

/// Every optional field, with the types it applies to (`s` static, `o` the
/// OAuth grants).
pub const CREDENTIAL_FIELDS: &[(&str, bool, bool)] = &[
    ("header", true, false),
    ("secret_file", true, false),
    ("secret_env", true, false),
    ("token_url", false, true),
    ("issuer", false, true),
    ("client_id", false, true),
    ("client_secret_file", false, true),
    ("client_secret_env", false, true),
    ("scope", false, true),
    ("resource", false, true),
    ("audience", false, true),
];

impl RawCredential {
    fn present(&self) -> [(&'static str, Option<std::ops::Range<usize>>); 11] {
        fn s<T>(v: &Option<Spanned<T>>) -> Option<std::ops::Range<usize>> {
            v.as_ref().map(Spanned::span)
        }
        [
            ("header", s(&self.header)),
            ("secret_file", s(&self.secret_file)),
            ("secret_env", s(&self.secret_env)),
            ("token_url", s(&self.token_url)),
            ("issuer", s(&self.issuer)),
            ("client_id", s(&self.client_id)),
            ("client_secret_file", s(&self.client_secret_file)),
            ("client_secret_env", s(&self.client_secret_env)),
            ("scope", s(&self.scope)),
            ("resource", s(&self.resource)),
            ("audience", s(&self.audience)),
        ]
    }
}

impl UpstreamCredential {
    /// Checks and builds one table; `field` names it in errors (e.g.
    /// `upstream[0].credential`), relative files are read from `base`.
    pub fn build(
        raw: &RawCredential,
        base: &Path,
        field: &str,
    ) -> Result<UpstreamCredential, SettingsError> {
        let kind = raw.kind.get_ref().as_str();
        let is_static = match kind {
            "static" => true,
            "client_credentials" | "token_exchange" => false,
            other => {
                return Err(SettingsError::at(
                    &raw.kind,
                    format!("{field}.type"),
                    format!("unknown credential type \"{other}\"; expected \"static\", \"client_credentials\" or \"token_exchange\""),
                ))
            }
        };
        for ((name, span), (_, for_static, for_oauth)) in
            raw.present().into_iter().zip(CREDENTIAL_FIELDS)
        {
            if let Some(span) = span {
                if (is_static && !for_static) || (!is_static && !for_oauth) {
                    return Err(SettingsError::new(
                        span,
                        format!("{field}.{name}"),
                        format!("does not apply to a credential of type \"{kind}\""),
                    ));
                }
            }
        }
        if is_static {
            return static_header(raw, base, field);
        }
        let endpoint = match (&raw.token_url, &raw.issuer) {
            (Some(u), None) => TokenEndpoint::Fixed(
                check_endpoint(u.get_ref())
                    .map_err(|why| SettingsError::at(u, format!("{field}.token_url"), why))?,
            ),
            (None, Some(i)) => {
                check_endpoint(i.get_ref())
                    .map_err(|why| SettingsError::at(i, format!("{field}.issuer"), why))?;
                TokenEndpoint::Discovered {
                    issuer: i.get_ref().clone(),
                    found: ArcSwapOption::empty(),
                }
            }
            (Some(_), Some(i)) => {
                return Err(SettingsError::at(
                    i,
                    format!("{field}.issuer"),
                    "set token_url or issuer, not both",
                ))
            }
            (None, None) => {
                return Err(SettingsError::at(
                    &raw.kind,
                    format!("{field}.token_url"),
                    "needs token_url, or issuer (its metadata names the token endpoint)",
                ))
            }
        };
        let id = raw.client_id.as_ref().ok_or_else(|| {
            SettingsError::at(
                &raw.kind,
                format!("{field}.client_id"),
                "needs client_id (and client_secret_file or client_secret_env)",
            )
        })?;
        let secret = secret_from(
            base,
            raw.client_secret_file.as_ref(),
            raw.client_secret_env.as_ref(),
            &format!("{field}.client_secret"),
            id,
        )?;
        let scope = raw
            .scope
            .as_ref()
            .map(|s| s.get_ref().0.join(" "))
            .filter(|s| !s.is_empty());
        let http = OAuthHttp::new()
            .map_err(|e| SettingsError::at(&raw.kind, field.to_owned(), e.to_string()))?;
        Ok(UpstreamCredential::Token(Box::new(TokenSource {
            grant: if kind == "token_exchange" {
                GrantKind::TokenExchange
            } else {
                GrantKind::ClientCredentials
            },
            endpoint,
            client: ClientSecret::new(id.get_ref().clone(), secret),
            scope,
            resource: raw.resource.as_ref().map(|r| r.get_ref().clone()),
            audience: raw.audience.as_ref().map(|a| a.get_ref().clone()),
            http,
            cache: Default::default(),
        })))
    }
}

fn static_header(
    raw: &RawCredential,
    base: &Path,
    field: &str,
) -> Result<UpstreamCredential, SettingsError> {
    let secret = secret_from(
        base,
        raw.secret_file.as_ref(),
        raw.secret_env.as_ref(),
        &format!("{field}.secret"),
        &raw.kind,
    )?;
    let header = match &raw.header {
        None => http::header::AUTHORIZATION,
        Some(h) => HeaderName::from_bytes(h.get_ref().as_bytes())
            .map_err(|_| SettingsError::at(h, format!("{field}.header"), "not a header name"))?,
    };
    let text = if header == http::header::AUTHORIZATION {
        format!("Bearer {secret}")
    } else {
        secret
    };
    let mut value = HeaderValue::from_str(&text).map_err(|_| {
        SettingsError::at(
            &raw.kind,
            format!("{field}.secret"),
            "the secret is not a valid header value (control characters?)",
        )
    })?;
    value.set_sensitive(true);
    Ok(UpstreamCredential::Static { header, value })
}
