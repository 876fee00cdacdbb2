//! The `[[auth]]` tables exactly as written, and the error type every
//! complaint about them is reported with.
//!
//! One flat struct serves all scheme types rather than a serde-tagged enum:
//! tagged enums buffer their content, which loses `toml::Spanned` positions,
//! and a field that does not belong to the scheme's `type` is better reported
//! as "does not apply to type X" at its own line than as an unknown field.

use std::fmt;
use std::ops::Range;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

/// One `[[auth]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuthScheme {
    /// Referenced by `[[route]] auth = [...]`; `[a-z0-9_-]{1,64}`, unique.
    pub name: Spanned<String>,
    /// `api_key` | `jwt` | `mtls`.
    #[serde(rename = "type")]
    pub kind: Spanned<String>,

    // --- api_key ---
    /// Header carrying the key. Default (and `authorization`):
    /// `Authorization: Bearer <key>`; any other header carries the raw key.
    pub header: Option<Spanned<String>>,
    /// `[[auth.key]]` entries.
    #[serde(rename = "key")]
    pub keys: Option<Spanned<Vec<Spanned<RawApiKey>>>>,

    // --- jwt ---
    pub issuer: Option<Spanned<String>>,
    /// One string or an array of strings.
    pub audience: Option<Spanned<OneOrMany>>,
    /// One string or an array of strings; default by key source
    /// (`["RS256", "ES256", "EdDSA"]` for a JWKS, `["HS256"]` for a secret).
    pub algorithms: Option<Spanned<OneOrMany>>,
    pub jwks_file: Option<Spanned<String>>,
    pub jwks_url: Option<Spanned<String>>,
    /// Refresh interval for `jwks_url` (default 5m).
    pub jwks_refresh: Option<Spanned<String>>,
    pub hs256_secret_file: Option<Spanned<String>>,
    pub hs256_secret_env: Option<Spanned<String>>,
    /// Default `sub`.
    pub principal_claim: Option<Spanned<String>>,
    /// Default `groups`.
    pub groups_claim: Option<Spanned<String>>,
    /// Clock skew allowed on `exp`/`nbf` (default 30s, at most 5m).
    pub leeway: Option<Spanned<String>>,

    // --- mtls ---
    /// `subject_cn` (default) | `san_dns` | `san_email` | `san_uri`.
    pub principal_from: Option<Spanned<String>>,
}

/// One `[[auth.key]]` entry of an `api_key` scheme.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawApiKey {
    pub principal: Spanned<String>,
    #[serde(default)]
    pub groups: Option<Spanned<Vec<Spanned<String>>>>,
    /// `sha256:<64 hex>`, the output of `portcullis hash-key`.
    pub hash: Spanned<String>,
}

/// A string or an array of strings (`audience = "x"` or `audience = ["x", "y"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneOrMany(pub Vec<String>);

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany(vec![v.to_owned()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    out.push(s);
                }
                Ok(OneOrMany(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// A problem with an `[[auth]]` table, pinned to the byte span of the value
/// at fault. Never carries a secret: messages name fields, files and
/// environment variables, not their contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct AuthConfigError {
    pub span: Range<usize>,
    /// Dotted path of the field, e.g. `auth.key.hash`.
    pub field: String,
    pub message: String,
}

impl AuthConfigError {
    pub(crate) fn new(
        span: Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> AuthConfigError {
        AuthConfigError {
            span,
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn at<T>(
        value: &Spanned<T>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> AuthConfigError {
        AuthConfigError::new(value.span(), field, message)
    }
}

impl RawAuthScheme {
    /// Every optional field that is set, with its config name and span.
    pub(crate) fn present_fields(&self) -> Vec<(&'static str, Range<usize>)> {
        fn s<T>(
            out: &mut Vec<(&'static str, Range<usize>)>,
            n: &'static str,
            v: &Option<Spanned<T>>,
        ) {
            if let Some(v) = v {
                out.push((n, v.span()));
            }
        }
        let mut out = Vec::new();
        s(&mut out, "header", &self.header);
        s(&mut out, "key", &self.keys);
        s(&mut out, "issuer", &self.issuer);
        s(&mut out, "audience", &self.audience);
        s(&mut out, "algorithms", &self.algorithms);
        s(&mut out, "jwks_file", &self.jwks_file);
        s(&mut out, "jwks_url", &self.jwks_url);
        s(&mut out, "jwks_refresh", &self.jwks_refresh);
        s(&mut out, "hs256_secret_file", &self.hs256_secret_file);
        s(&mut out, "hs256_secret_env", &self.hs256_secret_env);
        s(&mut out, "principal_claim", &self.principal_claim);
        s(&mut out, "groups_claim", &self.groups_claim);
        s(&mut out, "leeway", &self.leeway);
        s(&mut out, "principal_from", &self.principal_from);
        out
    }

    /// Refuses any set field not in `allowed` for this scheme's type.
    pub(crate) fn only(&self, kind: &str, allowed: &[&str]) -> Result<(), AuthConfigError> {
        for (field, span) in self.present_fields() {
            if !allowed.contains(&field) {
                return Err(AuthConfigError::new(
                    span,
                    format!("auth.{field}"),
                    format!("does not apply to an auth scheme of type \"{kind}\""),
                ));
            }
        }
        Ok(())
    }
}

/// Parses a duration like `30s`, `5m`, `200ms`.
pub(crate) fn duration(
    raw: &Spanned<String>,
    field: &str,
) -> Result<std::time::Duration, AuthConfigError> {
    humantime::parse_duration(raw.get_ref().trim()).map_err(|e| {
        AuthConfigError::at(
            raw,
            field,
            format!("not a duration ({e}); write e.g. \"500ms\", \"30s\", \"5m\""),
        )
    })
}

/// A principal or group name that is safe to log and to key limits on:
/// 1..=256 bytes, no control characters, no surrounding whitespace.
pub(crate) fn printable_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && s.trim() == s && !s.chars().any(char::is_control)
}

impl From<AuthConfigError> for crate::model::SettingsError {
    fn from(e: AuthConfigError) -> Self {
        crate::model::SettingsError::new(e.span, e.field, e.message)
    }
}
