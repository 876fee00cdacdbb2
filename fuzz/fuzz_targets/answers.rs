//! The answer validator. From the input: what was asked (forms of every
//! field kind and constraint, URL, sampling, roots), then `inputResponses`
//! built to be near the schema (right kinds, edge lengths, dates, emails,
//! URIs, numbers at the bounds) with random damage, or plain JSON text when
//! the input says so.
//!
//! Property: an answer set `check_answers` accepts fits what was asked,
//! judged by an independent checker (`form_oracle`), and keeps only asked
//! keys; its reported size is the size of what is forwarded.
#![no_main]

use std::sync::{Arc, LazyLock};

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use portcullis::model::{Asked, FieldKind, FormField, FormSchema, TextFormat};
use portcullis::mrtr::answers::{check_answers, AnswerRules};
use portcullis::mrtr::value_scan::SecretValueScanner;
use portcullis_fuzz::form_oracle;
use serde_json::{Map, Number, Value};

static SCANNER: LazyLock<Arc<SecretValueScanner>> =
    LazyLock::new(|| Arc::new(SecretValueScanner::builtin()));

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(asked) = asked_list(&mut u) else {
        return;
    };
    let Ok(mut answers) = answers(&mut u, &asked) else {
        return;
    };
    let original = answers.clone();
    let rules = AnswerRules {
        allow_secret_values: data.first().is_some_and(|b| b & 0x80 != 0),
        scanner: SCANNER.clone(),
    };
    let Ok(report) = check_answers(&mut answers, &asked, &rules) else {
        return;
    };
    if let Err(why) = form_oracle::check(&asked, &answers) {
        panic!("accepted answers that do not fit: {why}\nasked: {asked:?}\nanswers: {original:?}");
    }
    for key in original.keys() {
        let was_asked = asked.iter().any(|(k, _)| k == key);
        assert_eq!(answers.contains_key(key), was_asked, "key {key:?}");
    }
    let size = serde_json::to_vec(&answers).expect("serialises").len();
    assert_eq!(report.answer_bytes, size);
});

const KEYS: &[&str] = &["contact", "room", "signin", "model", "roots", "extra"];
const NAMES: &[&str] = &[
    "name", "email", "when", "seats", "ok", "room", "tags", "site",
];
const OPTIONS: &[&str] = &["atrium", "nook", "studio-b", "", "A", "a"];

fn asked_list(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<(String, Asked)>> {
    let mut out: Vec<(String, Asked)> = Vec::new();
    for _ in 0..u.int_in_range(1..=3)? {
        let key = (*u.choose(KEYS)?).to_owned();
        if out.iter().any(|(k, _)| *k == key) {
            continue;
        }
        let asked = match u.int_in_range(0..=5)? {
            0..=2 => Asked::Form(form(u)?),
            3 => Asked::Url {
                host: "mcp.example.com".into(),
            },
            4 => Asked::Sampling,
            _ => Asked::Roots,
        };
        out.push((key, asked));
    }
    Ok(out)
}

fn form(u: &mut Unstructured<'_>) -> arbitrary::Result<FormSchema> {
    let mut fields: Vec<FormField> = Vec::new();
    for _ in 0..u.int_in_range(0..=4)? {
        let name = (*u.choose(NAMES)?).to_owned();
        if fields.iter().any(|f| f.name == name) {
            continue;
        }
        fields.push(FormField {
            name,
            required: bool::arbitrary(u)?,
            kind: kind(u)?,
        });
    }
    Ok(FormSchema { fields })
}

fn small(u: &mut Unstructured<'_>) -> arbitrary::Result<Option<u64>> {
    Ok(if bool::arbitrary(u)? {
        Some(u.int_in_range(0..=12)?)
    } else {
        None
    })
}

fn bound(u: &mut Unstructured<'_>) -> arbitrary::Result<Option<f64>> {
    Ok(match u.int_in_range(0..=3)? {
        0 => None,
        1 => Some(f64::from(u.int_in_range(-5i32..=50)?)),
        2 => Some(f64::from(u.int_in_range(-20i32..=20)?) / 4.0),
        _ => Some(f64::from(i32::arbitrary(u)?)),
    })
}

fn options(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for _ in 0..u.int_in_range(0..=4)? {
        let o = (*u.choose(OPTIONS)?).to_owned();
        if !out.contains(&o) {
            out.push(o);
        }
    }
    Ok(out)
}

fn kind(u: &mut Unstructured<'_>) -> arbitrary::Result<FieldKind> {
    Ok(match u.int_in_range(0..=4)? {
        0 => FieldKind::Text {
            min_len: small(u)?,
            max_len: small(u)?,
            format: match u.int_in_range(0..=4)? {
                0 => Some(TextFormat::Email),
                1 => Some(TextFormat::Uri),
                2 => Some(TextFormat::Date),
                3 => Some(TextFormat::DateTime),
                _ => None,
            },
        },
        1 => FieldKind::Number {
            integer: bool::arbitrary(u)?,
            min: bound(u)?,
            max: bound(u)?,
        },
        2 => FieldKind::Boolean,
        3 => FieldKind::Choice {
            options: options(u)?,
        },
        _ => FieldKind::MultiChoice {
            options: options(u)?,
            min_items: small(u)?,
            max_items: small(u)?,
        },
    })
}

fn answers(
    u: &mut Unstructured<'_>,
    asked: &[(String, Asked)],
) -> arbitrary::Result<Map<String, Value>> {
    if u.ratio(1, 8)? {
        // Raw JSON text: whatever the fuzzer writes.
        let text = <&str>::arbitrary(u)?;
        return match serde_json::from_str(text) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(arbitrary::Error::IncorrectFormat),
        };
    }
    let mut out = Map::new();
    for (key, what) in asked {
        if u.ratio(1, 10)? {
            continue;
        }
        out.insert(key.clone(), answer(u, what)?);
    }
    if u.ratio(1, 6)? {
        out.insert("unasked".into(), Value::from("x"));
    }
    Ok(out)
}

fn answer(u: &mut Unstructured<'_>, what: &Asked) -> arbitrary::Result<Value> {
    let mut obj = Map::new();
    match what {
        Asked::Form(_) | Asked::Url { .. } => {
            let action =
                *u.choose(&["accept", "accept", "accept", "decline", "cancel", "Accept"])?;
            obj.insert("action".into(), action.into());
            if let Asked::Form(schema) = what {
                if u.ratio(7, 8)? {
                    obj.insert("content".into(), content(u, schema)?);
                }
            } else if u.ratio(1, 4)? {
                obj.insert("content".into(), Value::Object(Map::new()));
            }
            if u.ratio(1, 8)? {
                obj.insert("_meta".into(), any(u, 2)?);
            }
            if u.ratio(1, 16)? {
                obj.insert("stray".into(), Value::Bool(true));
            }
        }
        Asked::Sampling => {
            obj.insert(
                "role".into(),
                (*u.choose(&["user", "assistant", "system"])?).into(),
            );
            let content = match u.int_in_range(0..=2)? {
                0 => serde_json::json!({"type": "text", "text": "Paris"}),
                1 => serde_json::json!([{"type": "text", "text": "Paris"}]),
                _ => any(u, 2)?,
            };
            obj.insert("content".into(), content);
            if u.ratio(1, 2)? {
                obj.insert("model".into(), any(u, 1)?);
            }
        }
        Asked::Roots => {
            let roots: Vec<Value> = (0..u.int_in_range(0..=2)?)
                .map(|_| {
                    let uri = *u.choose(&["file:///home/a", "https://x", "file://"])?;
                    let mut r = serde_json::json!({"uri": uri});
                    if u.ratio(1, 3)? {
                        r["name"] = any(u, 1)?;
                    }
                    Ok(r)
                })
                .collect::<arbitrary::Result<_>>()?;
            obj.insert("roots".into(), Value::Array(roots));
        }
    }
    if u.ratio(1, 16)? {
        return any(u, 3);
    }
    Ok(Value::Object(obj))
}

fn content(u: &mut Unstructured<'_>, schema: &FormSchema) -> arbitrary::Result<Value> {
    let mut c = Map::new();
    for field in &schema.fields {
        if u.ratio(1, 6)? {
            continue;
        }
        c.insert(field.name.clone(), value(u, &field.kind)?);
    }
    if u.ratio(1, 12)? {
        c.insert((*u.choose(NAMES)?).to_owned(), any(u, 1)?);
    }
    Ok(Value::Object(c))
}

const TEXTS: &[&str] = &[
    "",
    "a",
    "Alice",
    "ab\u{e9}",
    "\u{1f600}\u{1f600}",
    "name@example.com",
    "a.b+c@mail.example.org",
    "a..b@example.com",
    "a@b",
    "\u{fc}ser@\u{e9}xample.com",
    "x@-bad.com",
    "https://example.com/page?q=1#f",
    "mailto:a@b.c",
    "urn:isbn:0451450523",
    "http://\u{fc}.example/",
    "http://a b",
    "foo:",
    "2026-09-17",
    "2024-02-29",
    "2023-02-29",
    "2026-13-01",
    "2026-09-17T09:30:00Z",
    "2026-09-17t09:30:00.123z",
    "2026-09-17T09:30:00+02:00",
    "2026-12-31T23:59:60Z",
    "2026-06-30T23:59:60+00:00",
    "2026-09-17T24:00:00Z",
    "2026-09-17T09:30Z",
    "atrium",
    "nook",
    "sk-live-0123456789abcdefghijklmnop",
];

fn value(u: &mut Unstructured<'_>, kind: &FieldKind) -> arbitrary::Result<Value> {
    if u.ratio(1, 10)? {
        return any(u, 1);
    }
    Ok(match kind {
        FieldKind::Text { .. } => {
            if u.ratio(3, 4)? {
                Value::from(*u.choose(TEXTS)?)
            } else {
                Value::from(String::arbitrary(u)?)
            }
        }
        FieldKind::Number { min, max, .. } => number(u, *min, *max)?,
        FieldKind::Boolean => Value::Bool(bool::arbitrary(u)?),
        FieldKind::Choice { options } => match options.is_empty() || u.ratio(1, 8)? {
            true => Value::from(*u.choose(OPTIONS)?),
            false => Value::from(u.choose(options)?.as_str()),
        },
        FieldKind::MultiChoice { options, .. } => {
            let mut items = Vec::new();
            for _ in 0..u.int_in_range(0..=4)? {
                let pick = match options.is_empty() || u.ratio(1, 8)? {
                    true => *u.choose(OPTIONS)?,
                    false => u.choose(options)?.as_str(),
                };
                items.push(Value::from(pick));
            }
            Value::Array(items)
        }
    })
}

fn number(
    u: &mut Unstructured<'_>,
    min: Option<f64>,
    max: Option<f64>,
) -> arbitrary::Result<Value> {
    let pick = match u.int_in_range(0..=6)? {
        0 => min.unwrap_or(0.0),
        1 => max.unwrap_or(1.0),
        2 => min.unwrap_or(0.0) - 0.5,
        3 => max.unwrap_or(1.0) + 0.25,
        4 => return Ok(Value::from(i64::arbitrary(u)?)),
        5 => return Ok(Value::from(u64::arbitrary(u)?)),
        _ => f64::from(u.int_in_range(-100i32..=100)?) / 2.0,
    };
    Ok(Number::from_f64(pick).map_or(Value::Null, Value::Number))
}

/// Any JSON value, at most `depth` levels deep.
fn any(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=if depth == 0 { 4 } else { 6 })? {
        0 => Value::Null,
        1 => Value::Bool(bool::arbitrary(u)?),
        2 => Value::from(i64::arbitrary(u)?),
        3 => Number::from_f64(f64::arbitrary(u)?).map_or(Value::Null, Value::Number),
        4 => Value::from(String::arbitrary(u)?),
        5 => Value::Array(
            (0..u.int_in_range(0..=3)?)
                .map(|_| any(u, depth - 1))
                .collect::<arbitrary::Result<_>>()?,
        ),
        _ => Value::Object(
            (0..u.int_in_range(0..=3)?)
                .map(|_| Ok((String::arbitrary(u)?, any(u, depth - 1)?)))
                .collect::<arbitrary::Result<_>>()?,
        ),
    })
}
