//! Validating a client's `inputResponses` against what the gateway let the
//! upstream ask (the `(key, Asked)` pairs sealed into the gateway's
//! `requestState`), before anything is forwarded upstream.
//!
//! # Rules
//!
//! * **Unasked keys** are removed and recorded in
//!   [`AnswerReport::dropped_keys`] (the upstream never sees an answer to a
//!   question it did not ask through the gateway).
//! * **Asked but unanswered keys are allowed.** `InputResponses` is an open
//!   map with no required keys in the 2026-07-28 schema; a server that still
//!   needs an answer asks again in the next round (and round limits stop a
//!   server that never gives up). The gateway does not invent answers.
//! * **Elicitation answers** (`Asked::Form`, `Asked::Url`) must be objects
//!   with `action` ∈ `accept` | `decline` | `cancel` and no members other
//!   than `action`, `content` and `_meta` (an object): a stray member would
//!   be a way to forward values nobody asked for. `content` is only kept on
//!   a form-mode `accept`; on `decline`/`cancel` (either mode) and on a
//!   URL-mode `accept` it is removed and the key recorded in
//!   [`AnswerReport::dropped_content`].
//! * **Form accept**: `content` must be an object (a missing `content` is read
//!   as `{}`, so it passes only when no field is required). Every member must
//!   be a field of the asked schema (an unknown field is refused, naming it),
//!   every required field must be present, and each value must fit its kind:
//!   - text: a string; `minLength`/`maxLength` counted in Unicode scalar
//!     values (JSON Schema counts code points); formats `email` (one `@`, a
//!     dot-atom-like local part of 1–64 characters, a domain of dot-separated
//!     labels with at least one dot, no whitespace or control characters;
//!     quoted local parts and address literals are not accepted), `uri` (an
//!     RFC 3986 absolute URI with a scheme: only the ASCII characters the RFC
//!     allows, `%` only in a valid escape, so an IRI or a raw space is
//!     refused; and one the `url` crate parses), `date` (`YYYY-MM-DD`, a real calendar date, leap years
//!     included), `date-time` (RFC 3339: date `T` time, seconds required,
//!     optional fraction, `Z` or `±hh:mm`; `t`/`z` in lower case accepted as
//!     RFC 3339 allows; a leap second `:60` only at 23:59 UTC);
//!   - number: a JSON number; for an `integer` field a number with a
//!     fractional part is refused, but `2.0` **is accepted** (JSON Schema
//!     defines an integer as a number whose fractional part is zero, and the
//!     value is forwarded unchanged); `minimum`/`maximum` inclusive;
//!   - boolean: `true`/`false`;
//!   - single choice: a string among the offered options;
//!   - multiple choice: an array of distinct strings among the offered
//!     options, `minItems`/`maxItems` inclusive.
//!
//!   `null` is never a valid value (leave an optional field out instead).
//! * **Secret scan** (unless [`AnswerRules::allow_secret_values`]): every
//!   *text* field value of an accepted form is scanned with the
//!   [`SecretValueScanner`]; a hit refuses the answers with reason
//!   `secret_in_answer`, naming the key, the field and the kind of secret.
//!   Choice values are not scanned: they passed the membership check, so
//!   they are strings the upstream itself offered and reveal nothing new.
//! * **Sampling answers** (`Asked::Sampling`, a `CreateMessageResult`): an
//!   object with `role` `"user"` | `"assistant"` and `content` an object or
//!   an array of objects; `model` and `stopReason`, when present, strings.
//!   (`model` is required by the schema but not enforced: sampling is a
//!   deprecated kind and its answer is model output, not something a person
//!   typed into a form.) Unless [`AnswerRules::allow_secret_values`], the
//!   text the client returns is scanned like a form's text field: every
//!   `text` of a text block (also inside a `tool_result`'s content) and every
//!   string in a `tool_use`'s `input`; a hit is `secret_in_answer` naming
//!   the key and `content`. A host's model or person can put a pasted token
//!   into a sampling answer as easily as into a form.
//! * **Roots answers** (`Asked::Roots`, a `ListRootsResult`): an object with a
//!   `roots` array of objects, each with a `uri` string that is a `file://`
//!   URI (required by the schema "for now") and an optional string `name`.
//!
//! # Privacy
//!
//! Problems and reports carry keys, field names and kinds, never a value.
//! Names chosen by the client (unasked keys, unknown fields, stray members)
//! are clipped to 64 characters with control characters removed before they
//! appear anywhere.
//!
//! On `Err` the map may have been partly cleaned; nothing of it may be
//! forwarded.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::sampling_answer::sampling;
use super::value_scan::SecretValueScanner;
use crate::model::{printable_name, Asked, FieldKind, FormSchema, Reason, TextFormat};

/// Why an answer was refused: `key` and `field` name where; `why` says what a
/// person should fix. Never contains the value itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerProblem {
    pub key: String,
    pub field: Option<String>,
    pub why: String,
    /// `InvalidAnswer`, or `SecretInAnswer` for a secret-looking value typed
    /// into an ordinary form field.
    pub reason: Reason,
}

impl std::fmt::Display for AnswerProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(
                f,
                "answer \"{}\", field \"{}\": {}",
                self.key, field, self.why
            ),
            None => write!(f, "answer \"{}\": {}", self.key, self.why),
        }
    }
}

impl std::error::Error for AnswerProblem {}

/// What happened to the answers, for the audit trail (names only, never values).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnswerReport {
    /// Keys answered but never asked (removed).
    pub dropped_keys: Vec<String>,
    /// Keys whose `content` came with decline/cancel or a URL-mode accept
    /// and was removed.
    pub dropped_content: Vec<String>,
    /// (key, action) of every elicitation answer, in the client's order.
    pub actions: Vec<(String, String)>,
    /// (key, field names) of every accepted form, in the client's order.
    pub fields_answered: Vec<(String, Vec<String>)>,
    /// Serialized size of the cleaned `inputResponses`, in bytes.
    pub answer_bytes: usize,
    /// The keys forwarded upstream, in the client's order.
    pub kept: Vec<String>,
}

/// What the policy allows in answers.
#[derive(Debug, Clone)]
pub struct AnswerRules {
    /// Let secret-looking values in ordinary form fields through.
    pub allow_secret_values: bool,
    pub scanner: Arc<SecretValueScanner>,
}

/// Check `input_responses` (the JSON object from `params.inputResponses`)
/// against `asked` ((key, Asked) pairs from the sealed state). Mutates it in
/// place: removes unasked keys, removes `content` from decline/cancel (and
/// URL-mode accept) answers. Returns the report, or the first problem.
pub fn check_answers(
    input_responses: &mut Map<String, Value>,
    asked: &[(String, Asked)],
    rules: &AnswerRules,
) -> Result<AnswerReport, AnswerProblem> {
    let mut report = AnswerReport::default();
    let find = |key: &str| asked.iter().find(|(k, _)| k == key).map(|(_, a)| a);

    input_responses.retain(|key, _| {
        let keep = find(key).is_some();
        if !keep {
            report.dropped_keys.push(printable_name(key));
        }
        keep
    });

    for (key, answer) in input_responses.iter_mut() {
        let Some(what) = find(key) else { continue };
        match what {
            Asked::Form(schema) => elicitation(key, answer, Some(schema), rules, &mut report)?,
            Asked::Url { .. } => elicitation(key, answer, None, rules, &mut report)?,
            Asked::Sampling => sampling(key, answer, rules)?,
            Asked::Roots => roots(key, answer)?,
        }
    }

    report.answer_bytes = serialized_len(input_responses);
    report.kept = input_responses.keys().map(|k| printable_name(k)).collect();
    Ok(report)
}

pub(super) fn invalid(key: &str, field: Option<&str>, why: impl Into<String>) -> AnswerProblem {
    AnswerProblem {
        key: key.to_owned(),
        field: field.map(str::to_owned),
        why: why.into(),
        reason: Reason::InvalidAnswer,
    }
}

fn serialized_len(map: &Map<String, Value>) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Serializing a Map of Values into an infallible writer cannot fail.
    let _ = serde_json::to_writer(&mut count, map);
    count.0
}

// ---- elicitation ------------------------------------------------------------

/// `form` is `None` for a URL-mode elicitation.
fn elicitation(
    key: &str,
    answer: &mut Value,
    form: Option<&FormSchema>,
    rules: &AnswerRules,
    report: &mut AnswerReport,
) -> Result<(), AnswerProblem> {
    let obj = answer.as_object_mut().ok_or_else(|| {
        invalid(
            key,
            None,
            "the answer must be an object with an action (accept, decline or cancel)",
        )
    })?;
    if let Some(stray) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "action" | "content" | "_meta"))
    {
        return Err(invalid(
            key,
            None,
            format!(
                "unexpected member \"{}\": an elicitation answer has only action and content",
                printable_name(stray)
            ),
        ));
    }
    if obj.get("_meta").is_some_and(|m| !m.is_object()) {
        return Err(invalid(key, None, "_meta must be an object"));
    }
    let action = match obj.get("action").and_then(Value::as_str) {
        Some(a @ ("accept" | "decline" | "cancel")) => a,
        _ => {
            return Err(invalid(
                key,
                None,
                "action must be \"accept\", \"decline\" or \"cancel\"",
            ))
        }
    };
    report.actions.push((key.to_owned(), action.to_owned()));

    let schema = match form {
        Some(schema) if action == "accept" => schema,
        _ => {
            if obj.remove("content").is_some() {
                report.dropped_content.push(key.to_owned());
            }
            return Ok(());
        }
    };

    let empty = Map::new();
    let content = match obj.get("content") {
        None => &empty,
        Some(Value::Object(c)) => c,
        Some(_) => {
            return Err(invalid(
                key,
                None,
                "content must be an object with one member per form field",
            ))
        }
    };
    check_form(key, schema, content)?;
    if !rules.allow_secret_values {
        scan_form(key, schema, content, &rules.scanner)?;
    }
    report
        .fields_answered
        .push((key.to_owned(), content.keys().cloned().collect()));
    Ok(())
}

fn check_form(
    key: &str,
    schema: &FormSchema,
    content: &Map<String, Value>,
) -> Result<(), AnswerProblem> {
    for (name, value) in content {
        let Some(field) = schema.fields.iter().find(|f| &f.name == name) else {
            return Err(invalid(
                key,
                Some(&printable_name(name)),
                "this field was not asked for; remove it",
            ));
        };
        check_value(&field.kind, value).map_err(|why| invalid(key, Some(name), why))?;
    }
    if let Some(missing) = schema
        .fields
        .iter()
        .find(|f| f.required && !content.contains_key(&f.name))
    {
        return Err(invalid(key, Some(&missing.name), "is required"));
    }
    Ok(())
}

fn scan_form(
    key: &str,
    schema: &FormSchema,
    content: &Map<String, Value>,
    scanner: &SecretValueScanner,
) -> Result<(), AnswerProblem> {
    for field in &schema.fields {
        if !matches!(field.kind, FieldKind::Text { .. }) {
            continue;
        }
        let Some(text) = content.get(&field.name).and_then(Value::as_str) else {
            continue;
        };
        if let Some(kind) = scanner.scan(text) {
            return Err(AnswerProblem {
                key: key.to_owned(),
                field: Some(field.name.clone()),
                why: format!(
                    "looks like {}; secrets must not be typed into an ordinary form field \
                     (remove it; a service that needs it must ask through a secure link)",
                    kind.describe()
                ),
                reason: Reason::SecretInAnswer,
            });
        }
    }
    Ok(())
}

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Check one value against its field kind; the error says what to fix and
/// never quotes the value.
fn check_value(kind: &FieldKind, v: &Value) -> Result<(), String> {
    if v.is_null() {
        return Err("must not be null (leave an optional field out instead)".into());
    }
    match kind {
        FieldKind::Text {
            min_len,
            max_len,
            format,
        } => {
            let s = v.as_str().ok_or("must be text (a JSON string)")?;
            let len = s.chars().count() as u64;
            if let Some(min) = *min_len {
                if len < min {
                    return Err(format!(
                        "must be at least {} long",
                        plural(min, "character", "characters")
                    ));
                }
            }
            if let Some(max) = *max_len {
                if len > max {
                    return Err(format!(
                        "must be at most {} long",
                        plural(max, "character", "characters")
                    ));
                }
            }
            match format {
                None => Ok(()),
                Some(TextFormat::Email) if !is_email(s) => {
                    Err("must be an email address, like name@example.com".into())
                }
                Some(TextFormat::Uri) if !is_uri(s) => Err(
                    "must be an absolute URI with a scheme, like https://example.com/page".into(),
                ),
                Some(TextFormat::Date) if !is_date(s) => {
                    Err("must be a real date written YYYY-MM-DD, like 2026-09-17".into())
                }
                Some(TextFormat::DateTime) if !is_date_time(s) => Err(
                    "must be a date and time in RFC 3339 form, like 2026-09-17T09:30:00Z or 2026-09-17T09:30:00+02:00"
                        .into(),
                ),
                Some(_) => Ok(()),
            }
        }
        FieldKind::Number { integer, min, max } => {
            let x = v.as_f64().ok_or(if *integer {
                "must be a whole number"
            } else {
                "must be a number"
            })?;
            if *integer && !(v.is_i64() || v.is_u64() || x.fract() == 0.0) {
                return Err("must be a whole number".into());
            }
            if let Some(min) = *min {
                if x < min {
                    return Err(format!("must be at least {min}"));
                }
            }
            if let Some(max) = *max {
                if x > max {
                    return Err(format!("must be at most {max}"));
                }
            }
            Ok(())
        }
        FieldKind::Boolean => {
            if v.is_boolean() {
                Ok(())
            } else {
                Err("must be true or false".into())
            }
        }
        FieldKind::Choice { options } => match v.as_str() {
            Some(s) if options.iter().any(|o| o == s) => Ok(()),
            Some(_) => Err(format!(
                "is not one of the {} offered {}",
                options.len(),
                if options.len() == 1 {
                    "option"
                } else {
                    "options"
                }
            )),
            None => Err("must be one of the offered options (a JSON string)".into()),
        },
        FieldKind::MultiChoice {
            options,
            min_items,
            max_items,
        } => {
            let items = v
                .as_array()
                .ok_or("must be a list of the offered options (a JSON array of strings)")?;
            for (i, item) in items.iter().enumerate() {
                let s = item
                    .as_str()
                    .ok_or("must be a list of the offered options (a JSON array of strings)")?;
                if !options.iter().any(|o| o == s) {
                    return Err(format!(
                        "choice {} is not one of the {} offered {}",
                        i + 1,
                        options.len(),
                        if options.len() == 1 {
                            "option"
                        } else {
                            "options"
                        }
                    ));
                }
                if items[..i].iter().any(|prev| prev.as_str() == Some(s)) {
                    return Err("chooses the same option twice".into());
                }
            }
            let n = items.len() as u64;
            if let Some(min) = *min_items {
                if n < min {
                    return Err(format!(
                        "needs at least {}",
                        plural(min, "choice", "choices")
                    ));
                }
            }
            if let Some(max) = *max_items {
                if n > max {
                    return Err(format!(
                        "allows at most {}",
                        plural(max, "choice", "choices")
                    ));
                }
            }
            Ok(())
        }
    }
}

// ---- formats ------------------------------------------------------------------

fn is_email(s: &str) -> bool {
    if s.len() > 254 || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    if domain.contains('@') || local.is_empty() || local.chars().count() > 64 {
        return false;
    }
    let local_ok = !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local.chars().all(|c| {
            !c.is_ascii() || c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c)
        });
    if !local_ok || domain.len() > 253 || !domain.contains('.') {
        return false;
    }
    domain.split('.').all(is_domain_label)
}

/// A domain label of a mailbox (RFC 5890, 5891): letters, marks, digits and
/// hyphens, at most 63 characters, beginning with a letter or a digit (a
/// combining mark cannot begin a label) and not ending with a hyphen. Told
/// by general category: `char::is_alphanumeric` also admits symbols such
/// as circled letters, and marks only where they count as alphabetic.
fn is_domain_label(label: &str) -> bool {
    let mut chars = label.chars();
    let first = chars.next().map(label_char);
    let last = label.chars().next_back();
    matches!(first, Some(LabelChar::LetterOrDigit))
        && last != Some('-')
        && label.chars().count() <= 63
        && chars.all(|c| label_char(c) != LabelChar::Other)
}

#[derive(PartialEq)]
enum LabelChar {
    LetterOrDigit,
    MarkOrHyphen,
    Other,
}

fn label_char(c: char) -> LabelChar {
    use unicode_general_category::{get_general_category, GeneralCategory as Gc};
    match get_general_category(c) {
        Gc::UppercaseLetter
        | Gc::LowercaseLetter
        | Gc::TitlecaseLetter
        | Gc::ModifierLetter
        | Gc::OtherLetter
        | Gc::DecimalNumber
        | Gc::LetterNumber
        | Gc::OtherNumber => LabelChar::LetterOrDigit,
        Gc::NonspacingMark | Gc::SpacingMark | Gc::EnclosingMark => LabelChar::MarkOrHyphen,
        _ if c == '-' => LabelChar::MarkOrHyphen,
        _ => LabelChar::Other,
    }
}

fn is_uri(s: &str) -> bool {
    has_only_uri_chars(s.as_bytes()) && url::Url::parse(s).is_ok()
}

/// RFC 3986 section 2: unreserved and reserved characters, and `%HH`.
fn has_only_uri_chars(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(i + 1) && hex(i + 2)) {
                    return false;
                }
                i += 3;
                continue;
            }
            c if c.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&c) => {}
            _ => return false,
        }
        i += 1;
    }
    true
}

/// Parse `n` ASCII digits.
fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |a, d| a * 10 + u32::from(d - b'0')))
}

fn is_leap(y: u32) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

/// `YYYY-MM-DD`, a real calendar date.
fn parse_date(b: &[u8]) -> Option<()> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (digits(&b[..4])?, digits(&b[5..7])?, digits(&b[8..])?);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days).contains(&d).then_some(())
}

fn is_date(s: &str) -> bool {
    parse_date(s.as_bytes()).is_some()
}

/// RFC 3339 `date-time`.
fn is_date_time(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 || !matches!(b[10], b'T' | b't') {
        return false;
    }
    parse_date(&b[..10]).is_some() && parse_time(&b[11..]).is_some()
}

/// `hh:mm:ss[.frac](Z|±hh:mm)`.
fn parse_time(b: &[u8]) -> Option<()> {
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let (h, m, sec) = (digits(&b[..2])?, digits(&b[3..5])?, digits(&b[6..8])?);
    if h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let mut rest = &b[8..];
    if rest.first() == Some(&b'.') {
        let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        rest = &rest[1 + n..];
    }
    // Offset in minutes east of UTC.
    let offset: i64 = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), oh1, oh2, b':', om1, om2] => {
            let (oh, om) = (digits(&[*oh1, *oh2])?, digits(&[*om1, *om2])?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = i64::from(oh * 60 + om);
            if *sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    if sec == 60 {
        // A leap second is inserted at 23:59:60 UTC only.
        let utc = (i64::from(h * 60 + m) - offset).rem_euclid(24 * 60);
        if utc != 23 * 60 + 59 {
            return None;
        }
    }
    Some(())
}

// ---- sampling and roots -----------------------------------------------------

fn roots(key: &str, answer: &Value) -> Result<(), AnswerProblem> {
    let list = answer
        .as_object()
        .and_then(|o| o.get("roots"))
        .and_then(Value::as_array)
        .ok_or_else(|| {
            invalid(
                key,
                Some("roots"),
                "the answer to a roots request must be an object with a roots array",
            )
        })?;
    for (i, root) in list.iter().enumerate() {
        let n = i + 1;
        let root = root
            .as_object()
            .ok_or_else(|| invalid(key, Some("roots"), format!("root {n} must be an object")))?;
        let uri_ok = root
            .get("uri")
            .and_then(Value::as_str)
            .is_some_and(|u| u.starts_with("file://") && is_uri(u));
        if !uri_ok {
            return Err(invalid(
                key,
                Some("roots"),
                format!("root {n} needs a uri starting with file://"),
            ));
        }
        if root.get("name").is_some_and(|v| !v.is_string()) {
            return Err(invalid(
                key,
                Some("roots"),
                format!("root {n}: name must be a string"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FormField;
    use crate::mrtr::value_scan::SecretValueKind;
    use serde_json::json;

    fn text(min_len: Option<u64>, max_len: Option<u64>, format: Option<TextFormat>) -> FieldKind {
        FieldKind::Text {
            min_len,
            max_len,
            format,
        }
    }

    fn field(name: &str, required: bool, kind: FieldKind) -> FormField {
        FormField {
            name: name.into(),
            required,
            kind,
        }
    }

    fn rules(allow_secret_values: bool) -> AnswerRules {
        AnswerRules {
            allow_secret_values,
            scanner: Arc::new(SecretValueScanner::builtin()),
        }
    }

    fn booking() -> Asked {
        Asked::Form(FormSchema {
            fields: vec![
                field("name", true, text(Some(1), Some(20), None)),
                field("email", false, text(None, None, Some(TextFormat::Email))),
                field("notes", false, text(None, None, None)),
                field(
                    "room",
                    false,
                    FieldKind::Choice {
                        options: vec!["atrium".into(), "nook".into()],
                    },
                ),
                field(
                    "people",
                    false,
                    FieldKind::Number {
                        integer: true,
                        min: Some(1.0),
                        max: Some(12.0),
                    },
                ),
            ],
        })
    }

    fn asked() -> Vec<(String, Asked)> {
        vec![
            ("book".into(), booking()),
            (
                "login".into(),
                Asked::Url {
                    host: "auth.example.com".into(),
                },
            ),
            ("sample".into(), Asked::Sampling),
            ("roots".into(), Asked::Roots),
        ]
    }

    fn check(v: Value) -> Result<(AnswerReport, Map<String, Value>), AnswerProblem> {
        check_with(v, false)
    }

    fn check_with(
        v: Value,
        allow: bool,
    ) -> Result<(AnswerReport, Map<String, Value>), AnswerProblem> {
        let Value::Object(mut m) = v else {
            panic!("test input must be an object")
        };
        let r = check_answers(&mut m, &asked(), &rules(allow))?;
        Ok((r, m))
    }

    fn fake_github_token() -> String {
        // Built at run time so no well-formed token sits in the source.
        let body: String = (0..36)
            .map(|i| {
                let cs = b"aB3dE5fG7hJ9kLmN2pQ4rS6tU8vW0xYz1Ac";
                cs[(i * 7) % cs.len()] as char
            })
            .collect();
        format!("ghp_{body}")
    }

    // ---- per-kind value checks ------------------------------------------------

    #[test]
    fn values_are_checked_against_their_kind() {
        let email = text(None, None, Some(TextFormat::Email));
        let uri = text(None, None, Some(TextFormat::Uri));
        let date = text(None, None, Some(TextFormat::Date));
        let dt = text(None, None, Some(TextFormat::DateTime));
        let len = text(Some(2), Some(4), None);
        let int = FieldKind::Number {
            integer: true,
            min: Some(1.0),
            max: Some(10.0),
        };
        let num = FieldKind::Number {
            integer: false,
            min: Some(0.5),
            max: Some(2.5),
        };
        let choice = FieldKind::Choice {
            options: vec!["a".into(), "b".into()],
        };
        let multi = FieldKind::MultiChoice {
            options: vec!["a".into(), "b".into(), "c".into()],
            min_items: Some(1),
            max_items: Some(2),
        };
        let cases: Vec<(&FieldKind, Value, bool)> = vec![
            // text and lengths (counted in characters, not bytes)
            (&len, json!("ab"), true),
            (&len, json!("abcd"), true),
            (&len, json!("ééé"), true),
            (&len, json!("a"), false),
            (&len, json!("abcde"), false),
            (&len, json!(12), false),
            (&len, json!(null), false),
            // email
            (&email, json!("octocat@github.com"), true),
            (&email, json!("first.last+tag@mail.example.co.uk"), true),
            (&email, json!("octocat@localhost"), false),
            (&email, json!("@github.com"), false),
            (&email, json!("a@b@c.com"), false),
            (&email, json!("octo cat@github.com"), false),
            (&email, json!("octocat@github..com"), false),
            (&email, json!("octocat@-github.com"), false),
            (&email, json!(".octocat@github.com"), false),
            (&email, json!("octocat"), false),
            // Found by the `answers` fuzz target: a combining mark cannot
            // begin a domain label; marks inside one are fine (Hindi).
            (&email, json!("++a@m1.\u{6e4}"), false),
            (
                &email,
                json!("user@\u{939}\u{93f}\u{928}\u{94d}\u{926}\u{940}.example"),
                true,
            ),
            (&email, json!("user@\u{24d0}bc.example"), false),
            (&email, json!("user@github.com-"), false),
            // uri
            (&uri, json!("https://example.com/a?b=c"), true),
            (&uri, json!("mailto:octocat@github.com"), true),
            (&uri, json!("urn:isbn:0451450523"), true),
            (&uri, json!("example.org/page"), false),
            (&uri, json!("/relative/path"), false),
            (&uri, json!(" https://example.net"), false),
            (&uri, json!("https://exa mple.com"), false),
            // Found by the `answers` fuzz target: an IRI is not a `uri`.
            (&uri, json!("http://\u{fc}.example/"), false),
            (&uri, json!("https://example.com/%C3%BC"), true),
            (&uri, json!("https://example.com/100%"), false),
            (&uri, json!("https://example.com/<x>"), false),
            // date
            (&date, json!("2026-09-17"), true),
            (&date, json!("2024-02-29"), true),
            (&date, json!("2000-02-29"), true),
            (&date, json!("2023-02-29"), false),
            (&date, json!("1900-02-29"), false),
            (&date, json!("2024-13-01"), false),
            (&date, json!("2024-00-10"), false),
            (&date, json!("2024-04-31"), false),
            (&date, json!("2024-4-1"), false),
            (&date, json!("17/09/2026"), false),
            (&date, json!("2026-09-17T09:00:00Z"), false),
            // date-time
            (&dt, json!("2026-09-17T09:30:00Z"), true),
            (&dt, json!("2026-09-17T09:30:00.123456Z"), true),
            (&dt, json!("2026-09-17T09:30:00+02:00"), true),
            (&dt, json!("2026-09-17T09:30:00-05:30"), true),
            (&dt, json!("2026-09-17t09:30:00z"), true),
            (&dt, json!("2016-12-31T23:59:60Z"), true),
            (&dt, json!("2016-12-31T15:59:60-08:00"), true),
            (&dt, json!("2016-12-31T23:58:60Z"), false),
            (&dt, json!("2025-01-02T09:30:00"), false),
            (&dt, json!("2025-01-02T09:30Z"), false),
            (&dt, json!("2025-01-02 09:30:00Z"), false),
            (&dt, json!("2025-01-02T24:00:00Z"), false),
            (&dt, json!("2025-01-02T09:60:00Z"), false),
            (&dt, json!("2025-01-02T09:30:00.Z"), false),
            (&dt, json!("2025-01-02T09:30:00+0200"), false),
            (&dt, json!("2025-01-02T09:30:00+24:00"), false),
            (&dt, json!("2023-02-29T09:30:00Z"), false),
            (&dt, json!("2025-01-02"), false),
            // integer
            (&int, json!(1), true),
            (&int, json!(10), true),
            (&int, json!(2.0), true),
            (&int, json!(1.5), false),
            (&int, json!(0), false),
            (&int, json!(11), false),
            (&int, json!("5"), false),
            (&int, json!(true), false),
            // number
            (&num, json!(0.5), true),
            (&num, json!(2.5), true),
            (&num, json!(1), true),
            (&num, json!(0.49), false),
            (&num, json!(2.51), false),
            (&num, json!("1.0"), false),
            // boolean
            (&FieldKind::Boolean, json!(true), true),
            (&FieldKind::Boolean, json!(false), true),
            (&FieldKind::Boolean, json!("true"), false),
            (&FieldKind::Boolean, json!(1), false),
            // single choice
            (&choice, json!("a"), true),
            (&choice, json!("c"), false),
            (&choice, json!("A"), false),
            (&choice, json!(["a"]), false),
            // multiple choice
            (&multi, json!(["a"]), true),
            (&multi, json!(["c", "a"]), true),
            (&multi, json!([]), false),
            (&multi, json!(["a", "b", "c"]), false),
            (&multi, json!(["a", "a"]), false),
            (&multi, json!(["d"]), false),
            (&multi, json!([1]), false),
            (&multi, json!("a"), false),
        ];
        for (kind, value, ok) in cases {
            let r = check_value(kind, &value);
            assert_eq!(r.is_ok(), ok, "{kind:?} with {value} gave {r:?}");
            // No message quotes the value ("true" for a boolean is the
            // one value the fixed wording itself contains).
            if let (Err(why), Some(s)) = (r, value.as_str()) {
                if s.len() > 1 && *kind != FieldKind::Boolean {
                    assert!(!why.contains(s), "message {why:?} quotes the value");
                }
            }
        }
    }

    #[test]
    fn messages_say_what_to_fix() {
        let len = text(Some(1), Some(3), None);
        assert_eq!(
            check_value(&len, &json!("")).unwrap_err(),
            "must be at least 1 character long"
        );
        assert_eq!(
            check_value(&len, &json!("abcd")).unwrap_err(),
            "must be at most 3 characters long"
        );
        let n = FieldKind::Number {
            integer: true,
            min: Some(18.0),
            max: None,
        };
        assert_eq!(
            check_value(&n, &json!(3)).unwrap_err(),
            "must be at least 18"
        );
        assert_eq!(
            check_value(&n, &json!(18.5)).unwrap_err(),
            "must be a whole number"
        );
    }

    // ---- check_answers ------------------------------------------------------------

    #[test]
    fn a_valid_round_passes_unchanged_with_a_report() {
        let input = json!({
            "book": {"action": "accept", "content": {"name": "Ada", "email": "ada@example.com", "people": 4, "room": "nook"}},
            "login": {"action": "accept"},
            "sample": {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m", "stopReason": "endTurn"},
            "roots": {"roots": [{"uri": "file:///home/user/project", "name": "Project"}]}
        });
        let (report, out) = check(input.clone()).unwrap();
        assert_eq!(Value::Object(out.clone()), input);
        assert_eq!(
            report.actions,
            vec![
                ("book".to_string(), "accept".to_string()),
                ("login".to_string(), "accept".to_string())
            ]
        );
        assert_eq!(
            report.fields_answered,
            vec![(
                "book".to_string(),
                vec![
                    "name".into(),
                    "email".into(),
                    "people".into(),
                    "room".into()
                ]
            )]
        );
        assert!(report.dropped_keys.is_empty() && report.dropped_content.is_empty());
        assert_eq!(report.answer_bytes, serde_json::to_vec(&out).unwrap().len());
    }

    #[test]
    fn the_spec_example_passes() {
        // spec/examples/InputResponses/elicitation-and-sampling-input-responses.json
        let Value::Object(mut m) = json!({
            "github_login": {"action": "accept", "content": {"name": "octocat"}},
            "capital_of_france": {
                "role": "assistant",
                "content": {"type": "text", "text": "The capital of France is Paris."},
                "model": "claude-3-sonnet-20240307",
                "stopReason": "endTurn"
            }
        }) else {
            panic!()
        };
        let asked = vec![
            (
                "github_login".to_string(),
                Asked::Form(FormSchema {
                    fields: vec![field("name", true, text(None, None, None))],
                }),
            ),
            ("capital_of_france".to_string(), Asked::Sampling),
        ];
        let before = m.clone();
        check_answers(&mut m, &asked, &rules(false)).unwrap();
        assert_eq!(m, before);
    }

    #[test]
    fn unasked_keys_are_dropped_and_recorded() {
        let (report, out) = check(json!({
            "book": {"action": "decline"},
            "sneaky": {"action": "accept", "content": {"x": "y"}},
            "also\nsneaky": {"action": "accept"}
        }))
        .unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), vec!["book"]);
        assert_eq!(report.dropped_keys, vec!["sneaky", "alsosneaky"]);
    }

    #[test]
    fn asked_keys_may_go_unanswered() {
        let (report, out) = check(json!({})).unwrap();
        assert!(out.is_empty());
        assert_eq!(report.answer_bytes, 2);
        let (_, out) = check(json!({"login": {"action": "cancel"}})).unwrap();
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn content_is_dropped_from_decline_cancel_and_url_accept() {
        let (report, out) = check(json!({
            "book": {"action": "decline", "content": {"name": "Ada"}},
            "login": {"action": "accept", "content": {"password": "hunter2"}}
        }))
        .unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"book": {"action": "decline"}, "login": {"action": "accept"}})
        );
        assert_eq!(report.dropped_content, vec!["book", "login"]);
        let (report, out) =
            check(json!({"book": {"action": "cancel", "content": {"anything": [1, 2]}}})).unwrap();
        assert_eq!(Value::Object(out), json!({"book": {"action": "cancel"}}));
        assert_eq!(report.dropped_content, vec!["book"]);
        assert_eq!(report.actions, vec![("book".into(), "cancel".into())]);
        assert!(report.fields_answered.is_empty());
    }

    #[test]
    fn bad_elicitation_answers_are_refused_naming_key_and_field() {
        // (answers, key, field, words in `why`)
        let cases: Vec<(Value, &str, Option<&str>, &str)> = vec![
            (json!({"book": "accept"}), "book", None, "must be an object"),
            (json!({"book": {}}), "book", None, "action must be"),
            (
                json!({"book": {"action": "ACCEPT"}}),
                "book",
                None,
                "action must be",
            ),
            (
                json!({"book": {"action": "maybe"}}),
                "book",
                None,
                "action must be",
            ),
            (
                json!({"login": {"action": null}}),
                "login",
                None,
                "action must be",
            ),
            (
                json!({"book": {"action": "accept", "extra": "x"}}),
                "book",
                None,
                "unexpected member \"extra\"",
            ),
            (
                json!({"book": {"action": "accept", "_meta": 1}}),
                "book",
                None,
                "_meta",
            ),
            (
                json!({"book": {"action": "accept", "content": ["Ada"]}}),
                "book",
                None,
                "content must be an object",
            ),
            (
                json!({"book": {"action": "accept"}}),
                "book",
                Some("name"),
                "is required",
            ),
            (
                json!({"book": {"action": "accept", "content": {"email": "ada@example.com"}}}),
                "book",
                Some("name"),
                "is required",
            ),
            (
                json!({"book": {"action": "accept", "content": {"name": "Ada", "password": "pw"}}}),
                "book",
                Some("password"),
                "not asked for",
            ),
            (
                json!({"book": {"action": "accept", "content": {"name": ""}}}),
                "book",
                Some("name"),
                "at least 1 character",
            ),
            (
                json!({"book": {"action": "accept", "content": {"name": "Ada", "email": "ada"}}}),
                "book",
                Some("email"),
                "email address",
            ),
            (
                json!({"book": {"action": "accept", "content": {"name": "Ada", "people": 13}}}),
                "book",
                Some("people"),
                "at most 12",
            ),
            (
                json!({"book": {"action": "accept", "content": {"name": "Ada", "people": 1.5}}}),
                "book",
                Some("people"),
                "whole number",
            ),
            (
                json!({"book": {"action": "accept", "content": {"name": "Ada", "room": "roof"}}}),
                "book",
                Some("room"),
                "not one of the 2 offered options",
            ),
            (
                json!({"book": {"action": "accept", "content": {"name": "Ada", "notes": null}}}),
                "book",
                Some("notes"),
                "null",
            ),
        ];
        for (input, key, field, words) in cases {
            let p = check(input.clone()).unwrap_err();
            assert_eq!(p.reason, Reason::InvalidAnswer, "{input}");
            assert_eq!(p.key, key, "{input}");
            assert_eq!(p.field.as_deref(), field, "{input}");
            assert!(p.why.contains(words), "{input}: {:?}", p.why);
        }
    }

    #[test]
    fn bad_sampling_and_roots_answers_are_refused() {
        let bad = [
            json!({"sample": {"action": "accept"}}),
            json!({"sample": "Paris"}),
            json!({"sample": {"role": "system", "content": {"type": "text", "text": "x"}}}),
            json!({"sample": {"role": "assistant"}}),
            json!({"sample": {"role": "assistant", "content": "Paris"}}),
            json!({"sample": {"role": "assistant", "content": ["Paris"]}}),
            json!({"sample": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": 3}}),
            json!({"roots": {"action": "accept"}}),
            json!({"roots": {"roots": "file:///x"}}),
            json!({"roots": {"roots": ["file:///x"]}}),
            json!({"roots": {"roots": [{"name": "x"}]}}),
            json!({"roots": {"roots": [{"uri": "https://example.com/x"}]}}),
            json!({"roots": {"roots": [{"uri": "file:///x", "name": 7}]}}),
        ];
        for input in bad {
            let p = check(input.clone()).unwrap_err();
            assert_eq!(p.reason, Reason::InvalidAnswer, "{input}");
        }
        // Content arrays (tool use) and an empty roots list are fine.
        check(json!({
            "sample": {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "w", "input": {}}], "model": "m"},
            "roots": {"roots": []}
        }))
        .unwrap();
    }

    #[test]
    fn a_secret_in_an_ordinary_field_is_refused_without_the_value() {
        let token = fake_github_token();
        assert_eq!(
            SecretValueScanner::builtin().scan(&token),
            Some(SecretValueKind::GithubToken)
        );
        let input = json!({"book": {"action": "accept", "content": {"name": "Ada", "notes": format!("my token: {token}")}}});
        let p = check(input.clone()).unwrap_err();
        assert_eq!(p.reason, Reason::SecretInAnswer);
        assert_eq!(p.key, "book");
        assert_eq!(p.field.as_deref(), Some("notes"));
        assert!(p.why.contains("looks like a GitHub token"), "{}", p.why);
        let shown = format!("{p} {p:?}");
        assert!(!shown.contains(&token) && !shown.contains(&token[4..20]));

        // A card number too.
        let p = check(
            json!({"book": {"action": "accept", "content": {"name": "4111 1111 1111 1111"}}}),
        )
        .unwrap_err();
        assert_eq!(p.reason, Reason::SecretInAnswer);
        assert!(p.why.contains("payment card"));
        assert!(!p.why.contains("4111"));

        // The policy may allow it.
        let (report, out) = check_with(input.clone(), true).unwrap();
        assert_eq!(Value::Object(out), input);
        assert_eq!(report.fields_answered[0].1, vec!["name", "notes"]);

        // Declined content is dropped, not scanned.
        let (_, out) =
            check(json!({"book": {"action": "decline", "content": {"notes": token}}})).unwrap();
        assert_eq!(Value::Object(out), json!({"book": {"action": "decline"}}));
    }

    #[test]
    fn a_secret_in_a_sampling_answer_is_refused_in_every_carrier() {
        let token = fake_github_token();
        let card = "4111 1111 1111 1111".to_owned();
        let text = |t: &str| json!({"type": "text", "text": format!("sure, here: {t}")});
        // Every place a sampling answer carries text a client chose.
        type Carrier = Box<dyn Fn(&str) -> Value>;
        let carriers: Vec<Carrier> = vec![
            Box::new(move |t| text(t)),
            Box::new(move |t| json!([{"type": "text", "text": "ok"}, text(t)])),
            Box::new(
                move |t| json!([{"type": "tool_result", "toolUseId": "c1", "content": [text(t)]}]),
            ),
            Box::new(
                |t| json!([{"type": "tool_use", "id": "c1", "name": "w", "input": {"q": {"deep": [t]}}}]),
            ),
        ];
        for (n, carrier) in carriers.iter().enumerate() {
            for secret in [&token, &card] {
                let answer = json!({"sample": {"role": "assistant", "content": carrier(secret), "model": "m"}});
                let p = check(answer.clone()).unwrap_err();
                assert_eq!(p.reason, Reason::SecretInAnswer, "carrier {n}");
                assert_eq!(
                    (p.key.as_str(), p.field.as_deref()),
                    ("sample", Some("content"))
                );
                let shown = format!("{p} {p:?}");
                assert!(
                    !shown.contains(secret.as_str()) && !shown.contains("4111"),
                    "{shown}"
                );
                // The same switch as forms: a policy may allow it.
                check_with(answer, true).unwrap();
                // Ordinary model text passes.
                let plain = json!({"sample": {"role": "assistant", "content": carrier("Paris, 4 rooms"), "model": "m"}});
                check(plain).unwrap();
            }
        }
        // An image's data or an unknown block's members are not text a person chose.
        check(json!({"sample": {"role": "assistant", "content": {"type": "image", "data": token, "mimeType": "image/png"}}})).unwrap();
    }

    #[test]
    fn validation_comes_before_the_secret_scan() {
        let token = fake_github_token();
        let p =
            check(json!({"book": {"action": "accept", "content": {"notes": token}}})).unwrap_err();
        assert_eq!(p.reason, Reason::InvalidAnswer);
        assert_eq!(p.field.as_deref(), Some("name"));
    }

    #[test]
    fn unknown_field_names_are_clipped() {
        let long = format!("{}\u{7}", "f".repeat(200));
        let p = check(json!({"book": {"action": "accept", "content": {"name": "Ada", long: 1}}}))
            .unwrap_err();
        assert_eq!(p.field.as_deref().map(str::len), Some(64));
        assert!(!p.field.unwrap().contains('\u{7}'));
    }

    #[test]
    fn an_optional_only_form_accepts_without_content() {
        let asked = vec![(
            "opt".to_string(),
            Asked::Form(FormSchema {
                fields: vec![field("x", false, FieldKind::Boolean)],
            }),
        )];
        let mut m = json!({"opt": {"action": "accept"}})
            .as_object()
            .unwrap()
            .clone();
        let r = check_answers(&mut m, &asked, &rules(false)).unwrap();
        assert_eq!(r.fields_answered, vec![("opt".to_string(), vec![])]);
    }
}
