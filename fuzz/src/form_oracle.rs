//! An independent statement of "this answer fits what was asked", written
//! from the 2026-07-28 schema (ElicitResult, CreateMessageResult,
//! ListRootsResult) and JSON Schema's format definitions, for checking what
//! `check_answers` accepts. Where the gateway is stricter than the standard
//! (a leap second only at 23:59 UTC, say), the oracle follows the standard:
//! the property is "accepted implies fits", never the other way round.

use std::sync::LazyLock;

use chrono::NaiveDate;
use portcullis::model::{Asked, FieldKind, FormSchema, TextFormat};
use regex::Regex;
use serde_json::{Map, Value};

/// Why `answers` (as cleaned and accepted) does not fit `asked`, or `Ok`.
pub fn check(asked: &[(String, Asked)], answers: &Map<String, Value>) -> Result<(), String> {
    for (key, answer) in answers {
        let Some((_, what)) = asked.iter().find(|(k, _)| k == key) else {
            return Err(format!("key {key:?} was never asked but was kept"));
        };
        let fits = match what {
            Asked::Form(schema) => elicit_result(answer, Some(schema)),
            Asked::Url { .. } => elicit_result(answer, None),
            Asked::Sampling => create_message_result(answer),
            Asked::Roots => list_roots_result(answer),
        };
        fits.map_err(|e| format!("key {key:?}: {e}"))?;
    }
    Ok(())
}

fn elicit_result(answer: &Value, form: Option<&FormSchema>) -> Result<(), String> {
    let obj = answer.as_object().ok_or("not an object")?;
    for member in obj.keys() {
        if !["action", "content", "_meta"].contains(&member.as_str()) {
            return Err(format!("stray member {member:?}"));
        }
    }
    if obj.get("_meta").is_some_and(|m| !m.is_object()) {
        return Err("_meta is not an object".into());
    }
    let action = obj
        .get("action")
        .and_then(Value::as_str)
        .ok_or("no action")?;
    if !["accept", "decline", "cancel"].contains(&action) {
        return Err(format!("action {action:?}"));
    }
    let content = obj.get("content");
    match (action, form) {
        ("accept", Some(schema)) => {
            let empty = Map::new();
            let content = match content {
                None => &empty,
                Some(Value::Object(c)) => c,
                Some(_) => return Err("content is not an object".into()),
            };
            fits_form(schema, content)
        }
        _ if content.is_some() => Err(format!("content kept on {action}")),
        _ => Ok(()),
    }
}

fn fits_form(schema: &FormSchema, content: &Map<String, Value>) -> Result<(), String> {
    for field in &schema.fields {
        match content.get(&field.name) {
            None if field.required => return Err(format!("required {:?} missing", field.name)),
            None => {}
            Some(v) => fits_kind(&field.kind, v).map_err(|e| format!("{:?}: {e}", field.name))?,
        }
    }
    let asked: Vec<&str> = schema.fields.iter().map(|f| f.name.as_str()).collect();
    match content.keys().find(|k| !asked.contains(&k.as_str())) {
        Some(extra) => Err(format!("unasked field {extra:?}")),
        None => Ok(()),
    }
}

fn fits_kind(kind: &FieldKind, v: &Value) -> Result<(), String> {
    match kind {
        FieldKind::Text {
            min_len,
            max_len,
            format,
        } => {
            let Value::String(s) = v else {
                return Err("not a string".into());
            };
            // JSON Schema counts code points.
            let n = s.chars().fold(0u64, |n, _| n + 1);
            if min_len.is_some_and(|m| n < m) || max_len.is_some_and(|m| n > m) {
                return Err(format!("length {n} outside {min_len:?}..{max_len:?}"));
            }
            match format {
                Some(f) if !fits_format(*f, s) => Err(format!("not a {f:?}")),
                _ => Ok(()),
            }
        }
        FieldKind::Number { integer, min, max } => {
            let Value::Number(n) = v else {
                return Err("not a number".into());
            };
            let x = n.as_f64().ok_or("not representable")?;
            if *integer && x.trunc() != x {
                return Err("not an integer".into());
            }
            if min.is_some_and(|m| x < m) || max.is_some_and(|m| x > m) {
                return Err(format!("{x} outside {min:?}..{max:?}"));
            }
            Ok(())
        }
        FieldKind::Boolean => match v {
            Value::Bool(_) => Ok(()),
            _ => Err("not a boolean".into()),
        },
        FieldKind::Choice { options } => match v {
            Value::String(s) if options.contains(s) => Ok(()),
            _ => Err("not an offered option".into()),
        },
        FieldKind::MultiChoice {
            options,
            min_items,
            max_items,
        } => {
            let Value::Array(items) = v else {
                return Err("not an array".into());
            };
            let mut seen: Vec<&str> = Vec::new();
            for item in items {
                let Value::String(s) = item else {
                    return Err("an item is not a string".into());
                };
                if !options.contains(s) || seen.contains(&s.as_str()) {
                    return Err("an item is not offered or repeated".into());
                }
                seen.push(s);
            }
            let n = items.len() as u64;
            if min_items.is_some_and(|m| n < m) || max_items.is_some_and(|m| n > m) {
                return Err(format!("{n} items outside {min_items:?}..{max_items:?}"));
            }
            Ok(())
        }
    }
}

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    // RFC 6531 mailbox without quoted local parts or address literals:
    // dot-atom local part (atext or non-ASCII), a domain of labels (a letter
    // or digit first: a combining mark cannot begin a label).
    Regex::new(r"^(?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]|[^\x00-\x7f])+(?:\.(?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]|[^\x00-\x7f])+)*@(?:[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}-]*[\p{L}\p{M}\p{N}])?\.)+[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}-]*[\p{L}\p{M}\p{N}])?$").unwrap()
});
static URI: LazyLock<Regex> = LazyLock::new(|| {
    // RFC 3986 URI: a scheme, then only unreserved, reserved or
    // percent-encoded characters.
    Regex::new(
        r"^[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$",
    )
    .unwrap()
});
static DATE_TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$")
        .unwrap()
});

fn fits_format(format: TextFormat, s: &str) -> bool {
    match format {
        TextFormat::Email => s.len() <= 254 && EMAIL.is_match(s),
        TextFormat::Uri => URI.is_match(s),
        TextFormat::Date => real_date(s),
        TextFormat::DateTime => {
            let Some(c) = DATE_TIME.captures(s) else {
                return false;
            };
            let num = |i: usize| {
                c.get(i)
                    .map_or(0, |m| m.as_str().parse::<u32>().unwrap_or(99))
            };
            real_date(&s[..10])
                && num(4) <= 23
                && num(5) <= 59
                && num(6) <= 60
                && num(7) <= 23
                && num(8) <= 59
        }
    }
}

fn real_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !s.is_char_boundary(4) {
        return false;
    }
    let part = |r: std::ops::Range<usize>| {
        s.get(r)
            .filter(|p| p.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|p| p.parse::<u32>().ok())
    };
    match (part(0..4), part(5..7), part(8..10)) {
        (Some(y), Some(m), Some(d)) => NaiveDate::from_ymd_opt(y as i32, m, d).is_some(),
        _ => false,
    }
}

fn create_message_result(v: &Value) -> Result<(), String> {
    let obj = v.as_object().ok_or("not an object")?;
    match obj.get("role").and_then(Value::as_str) {
        Some("user" | "assistant") => {}
        _ => return Err("role".into()),
    }
    let content_ok = match obj.get("content") {
        Some(Value::Object(_)) => true,
        Some(Value::Array(items)) => items.iter().all(Value::is_object),
        _ => false,
    };
    if !content_ok {
        return Err("content".into());
    }
    for member in ["model", "stopReason"] {
        if obj.get(member).is_some_and(|m| !m.is_string()) {
            return Err(format!("{member} not a string"));
        }
    }
    Ok(())
}

fn list_roots_result(v: &Value) -> Result<(), String> {
    let roots = v
        .get("roots")
        .and_then(Value::as_array)
        .ok_or("no roots array")?;
    for root in roots {
        let uri = root
            .get("uri")
            .and_then(Value::as_str)
            .ok_or("root without uri")?;
        if !uri.starts_with("file://") {
            return Err("root uri is not file://".into());
        }
        if root.get("name").is_some_and(|n| !n.is_string()) {
            return Err("root name not a string".into());
        }
    }
    Ok(())
}
