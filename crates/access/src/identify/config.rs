//! The `[[auth]]` tables exactly as written, and the error type every
//! complaint about them is reported with.
//!
//! One flat struct serves all scheme types rather than a serde-tagged enum:
//! tagged enums buffer their content, which loses `toml::Spanned` positions,
//! and a field that does not belong to the scheme's `type` is better reported
//! as "does not apply to type X" at its own line than as an unknown field.

use std::fmt;
use std::ops::Range;
use std::sync::LazyLock;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

use crate::model::Shape;

/// One `[[auth]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuthScheme {
    /// Referenced by `[[route]] auth = [...]`; `[a-z0-9_-]{1,64}`, unique.
    pub(crate) name: Spanned<String>,
    /// `api_key` | `jwt` | `mtls`.
    #[serde(rename = "type")]
    pub(crate) kind: Spanned<String>,

    // --- api_key ---
    /// Header carrying the key. Default (and `authorization`):
    /// `Authorization: Bearer <key>`; any other header carries the raw key.
    pub(crate) header: Option<Spanned<String>>,
    /// `[[auth.key]]` entries.
    #[serde(rename = "key")]
    pub(crate) keys: Option<Spanned<Vec<Spanned<RawApiKey>>>>,

    // --- jwt ---
    pub(crate) issuer: Option<Spanned<String>>,
    /// One string or an array of strings.
    pub(crate) audience: Option<Spanned<OneOrMany>>,
    /// One string or an array of strings; default by key source
    /// (`["RS256", "ES256", "EdDSA"]` for a JWKS, `["HS256"]` for a secret).
    pub(crate) algorithms: Option<Spanned<OneOrMany>>,
    pub(crate) jwks_file: Option<Spanned<String>>,
    pub(crate) jwks_url: Option<Spanned<String>>,
    /// Refresh interval for `jwks_url` (default 5m).
    pub(crate) jwks_refresh: Option<Spanned<String>>,
    /// How long `/readyz` waits at start for the `jwks_url`'s first key set
    /// (default 15s).
    pub(crate) jwks_ready_timeout: Option<Spanned<String>>,
    pub(crate) hs256_secret_file: Option<Spanned<String>>,
    pub(crate) hs256_secret_env: Option<Spanned<String>>,
    /// Default `sub`.
    pub(crate) principal_claim: Option<Spanned<String>>,
    /// Default `groups`.
    pub(crate) groups_claim: Option<Spanned<String>>,
    /// Clock skew allowed on `exp`/`nbf` (default 30s, at most 5m).
    pub(crate) leeway: Option<Spanned<String>>,

    // --- oauth (also issuer, audience, algorithms, jwks_refresh,
    // jwks_ready_timeout, principal_claim, groups_claim, leeway) ---
    /// `scopes_supported` of the protected resource metadata.
    pub(crate) scopes: Option<Spanned<Vec<Spanned<String>>>>,
    /// Scopes every token must carry on a route using the scheme.
    pub(crate) required_scopes: Option<Spanned<Vec<Spanned<String>>>>,
    /// The gateway's client at the issuer's introspection endpoint (RFC
    /// 7662), for tokens that are not JWTs.
    pub(crate) introspection_client_id: Option<Spanned<String>>,
    pub(crate) introspection_client_secret_file: Option<Spanned<String>>,
    pub(crate) introspection_client_secret_env: Option<Spanned<String>>,

    // --- mtls ---
    /// `subject_cn` (default) | `san_dns` | `san_email` | `san_uri`.
    pub(crate) principal_from: Option<Spanned<String>>,
}

/// One `[[auth.key]]` entry of an `api_key` scheme.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawApiKey {
    pub(crate) principal: Spanned<String>,
    #[serde(default)]
    pub(crate) groups: Option<Spanned<Vec<Spanned<String>>>>,
    /// `sha256:<64 hex>`, the output of `portcullis hash-key`.
    pub(crate) hash: Spanned<String>,
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
/// at fault (the one settings error; its name kept for the scheme readers).
/// Never carries a secret: messages name fields, files and environment
/// variables, not their contents.
pub(crate) type AuthConfigError = crate::model::SettingsError;

/// The shape of `[[auth]]`, read once from [`RawAuthScheme`]'s own serde
/// names: the config names of its fields are not typed again.
static SHAPE: LazyLock<Shape> = LazyLock::new(Shape::of::<RawAuthScheme>);

/// The fields an `api_key` scheme takes beside `name` and `type`.
pub(crate) const API_KEY_FIELDS: &[&str] = &["header", "key"];
/// The fields a `jwt` scheme takes beside `name` and `type`.
pub(crate) const JWT_FIELDS: &[&str] = &[
    "issuer",
    "audience",
    "algorithms",
    "jwks_file",
    "jwks_url",
    "jwks_refresh",
    "jwks_ready_timeout",
    "hs256_secret_file",
    "hs256_secret_env",
    "principal_claim",
    "groups_claim",
    "leeway",
];
/// The fields an `oauth` scheme takes beside `name` and `type`.
pub(crate) const OAUTH_FIELDS: &[&str] = &[
    "issuer",
    "audience",
    "algorithms",
    "jwks_refresh",
    "jwks_ready_timeout",
    "principal_claim",
    "groups_claim",
    "leeway",
    "scopes",
    "required_scopes",
    "introspection_client_id",
    "introspection_client_secret_file",
    "introspection_client_secret_env",
];
/// The fields an `mtls` scheme takes beside `name` and `type`.
pub(crate) const MTLS_FIELDS: &[&str] = &["principal_from"];

impl RawAuthScheme {
    /// Where each field is, in declaration order (the order serde names
    /// them in; a test holds the two together).
    fn spans(&self) -> [Option<Range<usize>>; 22] {
        fn s<T>(v: &Option<Spanned<T>>) -> Option<Range<usize>> {
            v.as_ref().map(Spanned::span)
        }
        [
            Some(self.name.span()),
            Some(self.kind.span()),
            s(&self.header),
            s(&self.keys),
            s(&self.issuer),
            s(&self.audience),
            s(&self.algorithms),
            s(&self.jwks_file),
            s(&self.jwks_url),
            s(&self.jwks_refresh),
            s(&self.jwks_ready_timeout),
            s(&self.hs256_secret_file),
            s(&self.hs256_secret_env),
            s(&self.principal_claim),
            s(&self.groups_claim),
            s(&self.leeway),
            s(&self.scopes),
            s(&self.required_scopes),
            s(&self.introspection_client_id),
            s(&self.introspection_client_secret_file),
            s(&self.introspection_client_secret_env),
            s(&self.principal_from),
        ]
    }

    /// Every optional field that is set, with its config name and span.
    pub(crate) fn present_fields(&self) -> Vec<(&'static str, Range<usize>)> {
        SHAPE
            .fields()
            .iter()
            .zip(self.spans())
            .filter(|(f, _)| !f.required)
            .filter_map(|(f, span)| Some((f.name, span?)))
            .collect()
    }

    /// Refuses any set field not in `allowed` for this scheme's type.
    pub(crate) fn only(&self, kind: &str, allowed: &[&str]) -> Result<(), AuthConfigError> {
        debug_assert!(allowed.iter().all(|a| SHAPE.field(a).is_some()));
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

/// A secret from exactly one of a file (trailing whitespace dropped, as
/// `echo > file` leaves a newline) or an environment variable. Errors name
/// the field, file or variable, never the secret.
pub(crate) fn secret_from(
    base: &std::path::Path,
    file: Option<&Spanned<String>>,
    env: Option<&Spanned<String>>,
    field: &str,
    anchor: &Spanned<String>,
) -> Result<String, AuthConfigError> {
    match (file, env) {
        (Some(f), None) => {
            let path = base.join(f.get_ref());
            let mut text = std::fs::read_to_string(&path).map_err(|e| {
                AuthConfigError::at(
                    f,
                    format!("{field}_file"),
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            text.truncate(text.trim_end().len());
            if text.is_empty() {
                return Err(AuthConfigError::at(
                    f,
                    format!("{field}_file"),
                    format!("{} is empty", path.display()),
                ));
            }
            Ok(text)
        }
        (None, Some(v)) => match crate::model::secret_env::take(v.get_ref())
            .ok_or(())
            .and_then(|v| v.into_string().map_err(|_| ()))
        {
            Ok(s) if !s.trim().is_empty() => Ok(s.trim_end().to_owned()),
            Ok(_) => Err(AuthConfigError::at(
                v,
                format!("{field}_env"),
                format!("environment variable {} is empty", v.get_ref()),
            )),
            Err(_) => Err(AuthConfigError::at(
                v,
                format!("{field}_env"),
                format!(
                    "environment variable {} is not set (or not UTF-8)",
                    v.get_ref()
                ),
            )),
        },
        (Some(_), Some(v)) => Err(AuthConfigError::at(
            v,
            format!("{field}_env"),
            format!("set one of {field}_file and {field}_env, not both"),
        )),
        (None, None) => Err(AuthConfigError::at(
            anchor,
            format!("{field}_file"),
            format!("needs {field}_file or {field}_env"),
        )),
    }
}

/// An OAuth scope name: 1 to 128 printable ASCII characters without spaces,
/// quotes or backslashes (RFC 6749 §3.3; safe inside a quoted challenge).
pub fn valid_scope(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 128
        && v.bytes()
            .all(|c| c.is_ascii_graphic() && c != b'"' && c != b'\\')
}

/// A list of OAuth scope names: each non-empty, printable ASCII without
/// spaces, quotes or backslashes (RFC 6749 §3.3), unique.
pub(crate) fn scope_list(
    raw: &Option<Spanned<Vec<Spanned<String>>>>,
    field: &str,
) -> Result<Vec<String>, AuthConfigError> {
    let mut out: Vec<String> = Vec::new();
    for s in raw.iter().flat_map(|l| l.get_ref()) {
        let v = s.get_ref();
        if !valid_scope(v) {
            return Err(AuthConfigError::at(s, field, "a scope is 1 to 128 printable ASCII characters without spaces, quotes or backslashes"));
        }
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    Ok(out)
}

/// A principal or group name that is safe to log and to key limits on:
/// 1..=256 bytes, no control characters, no surrounding whitespace.
pub(crate) fn printable_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && s.trim() == s && !s.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ShapeField;

    /// A value of the given shape, as TOML.
    fn sample(shape: &Shape) -> String {
        match shape {
            Shape::Bool => "true".into(),
            Shape::Integer | Shape::Float => "1".into(),
            Shape::List(inner) => format!("[{}]", sample(inner)),
            Shape::Table(fields) => {
                let members: Vec<String> = fields
                    .iter()
                    .filter(|f| f.required)
                    .map(|f| format!("{} = {}", f.name, sample(&f.shape)))
                    .collect();
                format!("{{ {} }}", members.join(", "))
            }
            _ => "\"x\"".into(),
        }
    }

    #[test]
    fn every_optional_field_is_named_by_serde_and_belongs_to_one_scheme_type() {
        let optional: Vec<&ShapeField> = SHAPE.fields().iter().filter(|f| !f.required).collect();
        let required: Vec<&str> = SHAPE
            .fields()
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name)
            .collect();
        assert_eq!(required, ["name", "type"]);
        let bare: RawAuthScheme = toml::from_str("name = \"a\"\ntype = \"jwt\"\n").unwrap();
        assert_eq!(
            SHAPE.fields().len(),
            bare.spans().len(),
            "spans() lists every field"
        );
        for field in &optional {
            let text = format!(
                "name = \"a\"\ntype = \"jwt\"\n{} = {}\n",
                field.name,
                sample(&field.shape)
            );
            let raw: RawAuthScheme = toml::from_str(&text).expect(&text);
            let named: Vec<&str> = raw.present_fields().iter().map(|(n, _)| *n).collect();
            assert_eq!(named, [field.name], "{text}");
            let owners = [API_KEY_FIELDS, JWT_FIELDS, OAUTH_FIELDS, MTLS_FIELDS]
                .iter()
                .filter(|list| list.contains(&field.name))
                .count();
            assert!(owners >= 1, "{} belongs to a scheme type", field.name);
        }
        let mut listed: Vec<&str> =
            [API_KEY_FIELDS, JWT_FIELDS, OAUTH_FIELDS, MTLS_FIELDS].concat();
        listed.sort_unstable();
        listed.dedup();
        assert_eq!(listed.len(), optional.len(), "every listed name is a field");
    }
}
