//! What is worth remembering of a result, and looking up in a call, for
//! the cross-upstream rule. The gateway keeps only keyed fingerprints of
//! these texts (`mrtr::flows`), never the texts.
//!
//! Remembered from a result (any string in it, at any depth): every
//! credential the value scanner finds; the value of a member whose name
//! says it holds a credential (`password`, `client_secret`, `api_key`, …:
//! the one field detector); and the value after such a name in text
//! (`DB_PASSWORD=…`, `"token": "…"`, `secret: …`: an `.env` file or a
//! vault's answer read as text).
//!
//! Looked up in a call: every credential the scanner finds, each whole
//! string, and each word of it, so a remembered value is found wherever
//! the model puts it. Both sides write a text one way ([`normal`]): folded
//! as the scanner reads it, quotes and white space trimmed, a card
//! number's digits only, a private key without its line breaks.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::policy::config::Policy;
use crate::policy::secret_values::{shannon_entropy, Scanned, SecretValueKind, SecretValueScanner};
use crate::policy::secrets::{FieldText, SecretKind};

/// A text to look up, and where the call holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    /// A JSON pointer into the arguments.
    pub path: String,
    /// The text, written one way ([`normal`]).
    pub text: String,
}

/// The shortest value remembered or looked up whole: shorter ones are
/// too common to say where they came from.
const MIN_LEN: usize = 8;
/// The longest value or word remembered or looked up.
const MAX_LEN: usize = 4096;
/// The most texts one call is looked up with, and one result remembers.
pub const MAX_MATERIAL: usize = 256;

/// Secrets a member's name says it holds, whose values are remembered.
const REMEMBERED_KINDS: [SecretKind; 7] = [
    SecretKind::Password,
    SecretKind::ApiKey,
    SecretKind::AccessToken,
    SecretKind::RefreshToken,
    SecretKind::ClientSecret,
    SecretKind::PrivateKey,
    SecretKind::SeedPhrase,
];

/// `NAME = value` or `"NAME": "value"` in text.
static ASSIGNMENT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"["']?([A-Za-z_][A-Za-z0-9_.\-]{0,63})["']?[ \t]*[:=][ \t]*["']?([^\s"',;}]{8,512})"#,
    )
    .ok()
});

/// A text as both sides write it; `None` when it is too short or long.
pub(crate) fn normal(text: &str, kind: Option<SecretValueKind>) -> Option<String> {
    let t = text.trim().trim_matches(|c| matches!(c, '"' | '\'' | '`'));
    let t = match kind {
        Some(SecretValueKind::CardNumber) => t.chars().filter(char::is_ascii_digit).collect(),
        Some(SecretValueKind::PemPrivateKey) => t.chars().filter(|c| !c.is_whitespace()).collect(),
        _ => t.to_owned(),
    };
    let long_enough = t.len() >= MIN_LEN || (kind.is_some() && !t.is_empty());
    (long_enough && t.len() <= MAX_LEN).then_some(t)
}

/// The material of one string of a call at `at`.
pub(crate) fn argument_material(scanned: &Scanned<'_>, at: &str, out: &mut Vec<Material>) {
    let mut push = |t: Option<String>| {
        if let Some(text) = t {
            if out.len() < MAX_MATERIAL && !out.iter().any(|m| m.text == text && m.path == at) {
                out.push(Material {
                    path: at.to_owned(),
                    text,
                });
            }
        }
    };
    for f in &scanned.found {
        push(normal(&scanned.text[f.span.clone()], Some(f.kind)));
    }
    let folded = &scanned.text;
    push(normal(folded, None));
    if folded.len() > MIN_LEN {
        for word in folded.split(is_break) {
            if word.len() != folded.trim().len() {
                push(normal(word, None));
            }
        }
    }
}

fn is_break(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\''
                | '`'
                | ','
                | ';'
                | '('
                | ')'
                | '<'
                | '>'
                | '['
                | ']'
                | '{'
                | '}'
                | '|'
                | '&'
                | '='
        )
}

/// What a result (parsed, any depth) holds that the caller's memory keeps
/// a fingerprint of: credentials found, credential-named members' values,
/// values assigned to credential names in text.
pub fn result_material(
    policy: &Policy,
    scanner: &SecretValueScanner,
    result: &Value,
) -> Vec<String> {
    let mut out = Vec::new();
    remember(policy, scanner, result, None, &mut out);
    out
}

fn remember(
    policy: &Policy,
    scanner: &SecretValueScanner,
    value: &Value,
    key: Option<&str>,
    out: &mut Vec<String>,
) {
    if out.len() >= MAX_MATERIAL {
        return;
    }
    match value {
        Value::String(s) => remember_string(policy, scanner, s, key, out),
        Value::Array(items) => items
            .iter()
            .for_each(|v| remember(policy, scanner, v, key, out)),
        Value::Object(map) => {
            for (k, v) in map {
                // Base64 payloads are not text.
                if k == "blob"
                    || (k == "data"
                        && map
                            .get("type")
                            .and_then(Value::as_str)
                            .is_some_and(|t| t == "image" || t == "audio"))
                {
                    continue;
                }
                remember(policy, scanner, v, Some(k), out);
            }
        }
        _ => {}
    }
}

fn remember_string(
    policy: &Policy,
    scanner: &SecretValueScanner,
    s: &str,
    key: Option<&str>,
    out: &mut Vec<String>,
) {
    let mut push = |t: Option<String>| {
        if let Some(t) = t {
            if out.len() < MAX_MATERIAL && !out.contains(&t) {
                out.push(t);
            }
        }
    };
    let scanned = scanner.find_all(s);
    for f in &scanned.found {
        push(normal(&scanned.text[f.span.clone()], Some(f.kind)));
    }
    if key.is_some_and(|k| credential_name(policy, k)) {
        push(normal(&scanned.text, None));
    }
    if let Some(re) = ASSIGNMENT.as_ref() {
        if scanned.text.contains(['=', ':']) {
            for c in re.captures_iter(&scanned.text) {
                if let (Some(name), Some(v)) = (c.get(1), c.get(2)) {
                    if credential_name(policy, name.as_str()) {
                        push(normal(v.as_str(), None));
                    }
                }
            }
        }
    }
}

/// Whether a name says its value is a credential (the one field detector).
fn credential_name(policy: &Policy, name: &str) -> bool {
    policy
        .secrets
        .property_kind(FieldText::named(name))
        .is_some_and(|k| REMEMBERED_KINDS.contains(&k))
}

/// Whether a value looks like a random key rather than a word, a name or
/// a number: at least 16 characters without white space, letters and
/// digits mixed, and varied.
pub(crate) fn looks_random(value: &str) -> bool {
    let v = value.trim();
    if v.len() < 16 || v.contains(char::is_whitespace) {
        return false;
    }
    let (mut upper, mut lower, mut digit) = (false, false, false);
    for b in v.bytes() {
        upper |= b.is_ascii_uppercase();
        lower |= b.is_ascii_lowercase();
        digit |= b.is_ascii_digit();
    }
    let classes = usize::from(upper) + usize::from(lower) + usize::from(digit);
    classes >= 2 && digit && shannon_entropy(v) >= 3.5
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&ASSIGNMENT);
}
