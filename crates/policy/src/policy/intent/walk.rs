//! Every string of one listed item (a tool, prompt, resource, template, or
//! an `initialize` result) with where it sits, for the detector's tests and
//! corpora. The gateway reads a list with `inspect/listing.rs` instead.

use serde_json::Value;

use super::{Listed, Place};

/// Members whose strings are not read by a model as instructions: addresses,
/// types, icons.
const SKIPPED: &[&str] = &[
    "uri",
    "uriTemplate",
    "mimeType",
    "icons",
    "$schema",
    "$id",
    "$ref",
];

/// JSON Schema keywords whose string values are the schema's own words.
const SCHEMA_TEXT: &[&str] = &["title", "description"];

/// JSON Schema keywords whose names carry no text of the server's.
const SCHEMA_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "items",
    "required",
    "enum",
    "const",
    "default",
    "examples",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "additionalProperties",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "minItems",
    "maxItems",
    "uniqueItems",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "$defs",
    "definitions",
    "nullable",
    "title",
    "description",
    "$schema",
    "$id",
    "$ref",
    "patternProperties",
    "propertyNames",
    "contentMediaType",
    "contentEncoding",
    "readOnly",
    "writeOnly",
    "deprecated",
    "if",
    "then",
    "else",
];

/// The strings of one item, in document order.
pub(crate) fn listed_strings(item: &Value) -> Vec<Listed<'_>> {
    let mut out = Vec::new();
    let Some(obj) = item.as_object() else {
        if let Some(s) = item.as_str() {
            out.push(Listed {
                place: Place::Instructions,
                text: s,
            });
        }
        return out;
    };
    for (key, value) in obj {
        match (key.as_str(), value) {
            (k, _) if SKIPPED.contains(&k) => {}
            ("name", Value::String(s)) => push(&mut out, Place::Name, s),
            ("title", Value::String(s)) => push(&mut out, Place::Title, s),
            ("description", Value::String(s)) => push(&mut out, Place::Description, s),
            ("instructions", Value::String(s)) => push(&mut out, Place::Instructions, s),
            ("serverInfo", v) => strings(v, Place::ServerIdentity, &mut out),
            ("inputSchema" | "outputSchema", v) => schema(v, &mut out),
            ("arguments", Value::Array(args)) => {
                for a in args {
                    argument(a, &mut out);
                }
            }
            (_, v) => strings(v, Place::SchemaValue, &mut out),
        }
    }
    out
}

fn push<'a>(out: &mut Vec<Listed<'a>>, place: Place, text: &'a str) {
    if !text.is_empty() {
        out.push(Listed { place, text });
    }
}

/// Every string under `v` (object keys too) at `place`.
fn strings<'a>(v: &'a Value, place: Place, out: &mut Vec<Listed<'a>>) {
    match v {
        Value::String(s) => push(out, place, s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, place, out)),
        Value::Object(o) => {
            for (k, x) in o {
                if SKIPPED.contains(&k.as_str()) {
                    continue;
                }
                push(out, place, k);
                strings(x, place, out);
            }
        }
        _ => {}
    }
}

fn argument<'a>(a: &'a Value, out: &mut Vec<Listed<'a>>) {
    let Some(o) = a.as_object() else {
        return strings(a, Place::ArgumentText, out);
    };
    for (k, v) in o {
        match (k.as_str(), v) {
            ("name", Value::String(s)) => push(out, Place::ArgumentName, s),
            (_, v) => strings(v, Place::ArgumentText, out),
        }
    }
}

/// A JSON Schema: property names, its title/description text, and every
/// other string (enum, const, default, examples, required, extra keys).
fn schema<'a>(v: &'a Value, out: &mut Vec<Listed<'a>>) {
    let Some(o) = v.as_object() else {
        return strings(v, Place::SchemaValue, out);
    };
    for (k, x) in o {
        match (k.as_str(), x) {
            (k, _) if SKIPPED.contains(&k) => {}
            (k, Value::String(s)) if SCHEMA_TEXT.contains(&k) => push(out, Place::SchemaText, s),
            ("properties" | "patternProperties" | "$defs" | "definitions", Value::Object(p)) => {
                for (name, sub) in p {
                    push(out, Place::PropertyName, name);
                    schema(sub, out);
                }
            }
            ("items" | "additionalProperties" | "not" | "if" | "then" | "else", sub) => {
                schema(sub, out)
            }
            ("anyOf" | "oneOf" | "allOf", Value::Array(subs)) => {
                subs.iter().for_each(|s| schema(s, out))
            }
            (k, x) => {
                if !SCHEMA_KEYWORDS.contains(&k) {
                    push(out, Place::SchemaValue, k);
                }
                strings(x, Place::SchemaValue, out);
            }
        }
    }
}
