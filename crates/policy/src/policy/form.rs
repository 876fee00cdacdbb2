//! The form schema of an `elicitation/create` request, checked against the
//! restricted JSON Schema subset of 2026-07-28 (a flat object of primitive
//! properties) and reduced to a compact typed [`FormSchema`]: what was asked,
//! enough to validate the answer later, nothing else.

use serde_json::{Map, Value};

pub use crate::model::{printable_name, FieldKind, FormField, FormSchema, TextFormat};

/// Why a schema is outside the allowed subset. `field` is the property name
/// when the problem is inside one property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaProblem {
    pub(crate) field: Option<String>,
    pub(crate) message: String,
}

/// Size limits that apply while reading a schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SchemaLimits {
    pub(crate) max_properties: usize,
    pub(crate) max_enum_options: usize,
    pub(crate) max_string_max_length: u64,
}

/// A limit a schema went over: (limit name, field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SchemaError {
    NotAllowed(SchemaProblem),
    Limit {
        limit: &'static str,
        field: Option<String>,
    },
}

fn problem(field: Option<&str>, message: impl Into<String>) -> SchemaError {
    SchemaError::NotAllowed(SchemaProblem {
        field: field.map(str::to_owned),
        message: message.into(),
    })
}

const TOP_KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "$schema",
    "title",
    "description",
    "additionalProperties",
];

/// Check `schema` and reduce it to a [`FormSchema`].
pub(crate) fn read_form_schema(
    schema: &Value,
    limits: &SchemaLimits,
) -> Result<FormSchema, SchemaError> {
    let obj = schema
        .as_object()
        .ok_or_else(|| problem(None, "requestedSchema must be an object"))?;
    if let Some(k) = obj.keys().find(|k| !TOP_KEYS.contains(&k.as_str())) {
        return Err(problem(
            None,
            format!(
                "keyword \"{}\" is not allowed at the top of a form schema",
                printable_name(k)
            ),
        ));
    }
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        return Err(problem(None, "requestedSchema.type must be \"object\""));
    }
    if obj
        .get("additionalProperties")
        .is_some_and(|v| !v.is_boolean())
    {
        return Err(problem(None, "additionalProperties must be true or false"));
    }
    for k in ["title", "description", "$schema"] {
        if obj.get(k).is_some_and(|v| !v.is_string()) {
            return Err(problem(None, format!("{k} must be a string")));
        }
    }
    let props = obj
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| problem(None, "requestedSchema.properties must be an object"))?;
    if props.len() > limits.max_properties {
        return Err(SchemaError::Limit {
            limit: "max_properties",
            field: None,
        });
    }
    let required = required_names(obj.get("required"), props)?;
    let mut fields = Vec::with_capacity(props.len());
    for (name, prop) in props {
        let kind = read_property(name, prop, limits)?;
        fields.push(FormField {
            name: name.clone(),
            required: required.contains(&name.as_str()),
            kind,
        });
    }
    Ok(FormSchema { fields })
}

fn required_names<'a>(
    required: Option<&'a Value>,
    props: &Map<String, Value>,
) -> Result<Vec<&'a str>, SchemaError> {
    let Some(required) = required else {
        return Ok(Vec::new());
    };
    let list = required
        .as_array()
        .ok_or_else(|| problem(None, "required must be an array of property names"))?;
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let name = item
            .as_str()
            .ok_or_else(|| problem(None, "required must be an array of property names"))?;
        if !props.contains_key(name) {
            return Err(problem(Some(name), "is required but not a property"));
        }
        out.push(name);
    }
    Ok(out)
}

fn allowed_keys(name: &str, prop: &Map<String, Value>, keys: &[&str]) -> Result<(), SchemaError> {
    const COMMON: &[&str] = &["type", "title", "description", "default"];
    match prop
        .keys()
        .find(|k| !COMMON.contains(&k.as_str()) && !keys.contains(&k.as_str()))
    {
        Some(k) => Err(problem(
            Some(name),
            format!("keyword \"{}\" is not allowed here", printable_name(k)),
        )),
        None => Ok(()),
    }
}

fn read_property(
    name: &str,
    prop: &Value,
    limits: &SchemaLimits,
) -> Result<FieldKind, SchemaError> {
    let prop = prop
        .as_object()
        .ok_or_else(|| problem(Some(name), "a property schema must be an object"))?;
    for k in ["title", "description"] {
        if prop.get(k).is_some_and(|v| !v.is_string()) {
            return Err(problem(Some(name), format!("{k} must be a string")));
        }
    }
    let ty = prop.get("type").and_then(Value::as_str);
    let kind = match ty {
        Some("string") if prop.contains_key("oneOf") => titled_choice(name, prop, limits)?,
        Some("string") if prop.contains_key("enum") => plain_choice(name, prop, limits)?,
        Some("string") => text(name, prop, limits)?,
        Some(t @ ("number" | "integer")) => number(name, prop, t == "integer")?,
        Some("boolean") => {
            allowed_keys(name, prop, &[])?;
            FieldKind::Boolean
        }
        Some("array") => multi_choice(name, prop, limits)?,
        Some("object") => {
            return Err(problem(
                Some(name),
                "nested objects are not allowed in a form",
            ))
        }
        Some(other) => {
            return Err(problem(
                Some(name),
                format!(
                    "type \"{}\" is not a form field type",
                    printable_name(other)
                ),
            ))
        }
        None => {
            return Err(problem(
                Some(name),
                "every property needs a primitive \"type\"",
            ))
        }
    };
    check_default(name, prop.get("default"), &kind)?;
    Ok(kind)
}

fn non_negative(
    name: &str,
    prop: &Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, SchemaError> {
    match prop.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| problem(Some(name), format!("{key} must be a whole number ≥ 0"))),
    }
}

fn text(
    name: &str,
    prop: &Map<String, Value>,
    limits: &SchemaLimits,
) -> Result<FieldKind, SchemaError> {
    allowed_keys(name, prop, &["minLength", "maxLength", "format"])?;
    let min_len = non_negative(name, prop, "minLength")?;
    let max_len = non_negative(name, prop, "maxLength")?;
    if max_len.is_some_and(|m| m > limits.max_string_max_length) {
        return Err(SchemaError::Limit {
            limit: "max_string_max_length",
            field: Some(name.to_owned()),
        });
    }
    if let (Some(lo), Some(hi)) = (min_len, max_len) {
        if lo > hi {
            return Err(problem(Some(name), "minLength is greater than maxLength"));
        }
    }
    let format = match prop.get("format") {
        None => None,
        Some(f) => Some(match f.as_str() {
            Some("email") => TextFormat::Email,
            Some("uri") => TextFormat::Uri,
            Some("date") => TextFormat::Date,
            Some("date-time") => TextFormat::DateTime,
            _ => {
                return Err(problem(
                    Some(name),
                    "format must be one of email, uri, date, date-time",
                ))
            }
        }),
    };
    Ok(FieldKind::Text {
        min_len,
        max_len,
        format,
    })
}

fn number(name: &str, prop: &Map<String, Value>, integer: bool) -> Result<FieldKind, SchemaError> {
    allowed_keys(name, prop, &["minimum", "maximum"])?;
    let get = |key: &str| match prop.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| problem(Some(name), format!("{key} must be a number"))),
    };
    let (min, max) = (get("minimum")?, get("maximum")?);
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            return Err(problem(Some(name), "minimum is greater than maximum"));
        }
    }
    Ok(FieldKind::Number { integer, min, max })
}

/// Whether a list may name the same string twice.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Repeats {
    /// Machine values: each must be distinct.
    Refused,
    /// Labels: only their count and type matter.
    Allowed,
}

fn string_list(
    name: &str,
    v: Option<&Value>,
    what: &str,
    limits: &SchemaLimits,
    repeats: Repeats,
) -> Result<Vec<String>, SchemaError> {
    let list = v
        .and_then(Value::as_array)
        .ok_or_else(|| problem(Some(name), format!("{what} must be an array of strings")))?;
    if list.is_empty() {
        return Err(problem(Some(name), format!("{what} is empty")));
    }
    if list.len() > limits.max_enum_options {
        return Err(SchemaError::Limit {
            limit: "max_enum_options",
            field: Some(name.to_owned()),
        });
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for item in list {
        let s = item
            .as_str()
            .ok_or_else(|| problem(Some(name), format!("{what} must be an array of strings")))?;
        if repeats == Repeats::Refused && out.iter().any(|o| o == s) {
            return Err(problem(
                Some(name),
                format!("{what} lists the same value twice"),
            ));
        }
        out.push(s.to_owned());
    }
    Ok(out)
}

/// `[{const, title}, ...]` → the const values.
fn titled_options(
    name: &str,
    v: Option<&Value>,
    what: &str,
    limits: &SchemaLimits,
) -> Result<Vec<String>, SchemaError> {
    let list = v.and_then(Value::as_array).ok_or_else(|| {
        problem(
            Some(name),
            format!("{what} must be an array of {{const, title}}"),
        )
    })?;
    if list.is_empty() {
        return Err(problem(Some(name), format!("{what} is empty")));
    }
    if list.len() > limits.max_enum_options {
        return Err(SchemaError::Limit {
            limit: "max_enum_options",
            field: Some(name.to_owned()),
        });
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for item in list {
        let o = item.as_object().ok_or_else(|| {
            problem(
                Some(name),
                format!("{what} items must be {{const, title}} objects"),
            )
        })?;
        if let Some(k) = o.keys().find(|k| *k != "const" && *k != "title") {
            return Err(problem(
                Some(name),
                format!(
                    "keyword \"{}\" is not allowed in an option",
                    printable_name(k)
                ),
            ));
        }
        let value = o
            .get("const")
            .and_then(Value::as_str)
            .ok_or_else(|| problem(Some(name), "an option's const must be a string"))?;
        if o.get("title").is_some_and(|t| !t.is_string()) {
            return Err(problem(Some(name), "an option's title must be a string"));
        }
        if out.iter().any(|x| x == value) {
            return Err(problem(
                Some(name),
                format!("{what} lists the same value twice"),
            ));
        }
        out.push(value.to_owned());
    }
    Ok(out)
}

fn plain_choice(
    name: &str,
    prop: &Map<String, Value>,
    limits: &SchemaLimits,
) -> Result<FieldKind, SchemaError> {
    allowed_keys(name, prop, &["enum", "enumNames"])?;
    let options = string_list(name, prop.get("enum"), "enum", limits, Repeats::Refused)?;
    if let Some(names) = prop.get("enumNames") {
        let names = string_list(name, Some(names), "enumNames", limits, Repeats::Allowed)?;
        if names.len() != options.len() {
            return Err(problem(
                Some(name),
                "enumNames must have one label per enum value",
            ));
        }
    }
    Ok(FieldKind::Choice { options })
}

fn titled_choice(
    name: &str,
    prop: &Map<String, Value>,
    limits: &SchemaLimits,
) -> Result<FieldKind, SchemaError> {
    allowed_keys(name, prop, &["oneOf"])?;
    Ok(FieldKind::Choice {
        options: titled_options(name, prop.get("oneOf"), "oneOf", limits)?,
    })
}

fn multi_choice(
    name: &str,
    prop: &Map<String, Value>,
    limits: &SchemaLimits,
) -> Result<FieldKind, SchemaError> {
    allowed_keys(name, prop, &["items", "minItems", "maxItems"])?;
    let items = prop
        .get("items")
        .and_then(Value::as_object)
        .ok_or_else(|| problem(Some(name), "an array field needs items"))?;
    let options = if items.contains_key("anyOf") {
        if let Some(k) = items.keys().find(|k| *k != "anyOf") {
            return Err(problem(
                Some(name),
                format!("keyword \"{}\" is not allowed in items", printable_name(k)),
            ));
        }
        titled_options(name, items.get("anyOf"), "items.anyOf", limits)?
    } else {
        if let Some(k) = items.keys().find(|k| *k != "type" && *k != "enum") {
            return Err(problem(
                Some(name),
                format!(
                    "keyword \"{}\" is not allowed in items (only string enums)",
                    printable_name(k)
                ),
            ));
        }
        if items.get("type").and_then(Value::as_str) != Some("string") {
            return Err(problem(
                Some(name),
                "array items must be string enums (arrays of objects are not allowed)",
            ));
        }
        string_list(
            name,
            items.get("enum"),
            "items.enum",
            limits,
            Repeats::Refused,
        )?
    };
    let min_items = non_negative(name, prop, "minItems")?;
    let max_items = non_negative(name, prop, "maxItems")?;
    if let (Some(lo), Some(hi)) = (min_items, max_items) {
        if lo > hi {
            return Err(problem(Some(name), "minItems is greater than maxItems"));
        }
    }
    Ok(FieldKind::MultiChoice {
        options,
        min_items,
        max_items,
    })
}

fn check_default(name: &str, default: Option<&Value>, kind: &FieldKind) -> Result<(), SchemaError> {
    let Some(d) = default else { return Ok(()) };
    let ok = match kind {
        FieldKind::Text { .. } => d.is_string(),
        FieldKind::Number { integer: true, .. } => d.is_i64() || d.is_u64(),
        FieldKind::Number { .. } => d.is_number(),
        FieldKind::Boolean => d.is_boolean(),
        FieldKind::Choice { options } => d.as_str().is_some_and(|s| options.iter().any(|o| o == s)),
        FieldKind::MultiChoice { options, .. } => d.as_array().is_some_and(|a| {
            a.iter()
                .all(|v| v.as_str().is_some_and(|s| options.iter().any(|o| o == s)))
        }),
    };
    if ok {
        Ok(())
    } else {
        Err(problem(Some(name), "default does not fit the field"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIMITS: SchemaLimits = SchemaLimits {
        max_properties: 16,
        max_enum_options: 50,
        max_string_max_length: 4096,
    };

    fn read(v: Value) -> Result<FormSchema, SchemaError> {
        read_form_schema(&v, &LIMITS)
    }

    fn not_allowed(v: Value) -> SchemaProblem {
        match read(v) {
            Err(SchemaError::NotAllowed(p)) => p,
            other => panic!("expected NotAllowed, got {other:?}"),
        }
    }

    #[test]
    fn every_primitive_kind_of_the_spec_reads() {
        let s = read(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 80},
                "email": {"type": "string", "format": "email"},
                "age": {"type": "integer", "minimum": 18, "maximum": 130, "default": 30},
                "ratio": {"type": "number", "minimum": 0.5},
                "ok": {"type": "boolean", "default": false},
                "room": {"type": "string", "oneOf": [{"const": "atrium", "title": "Atrium"}, {"const": "nook", "title": "Nook"}]},
                "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1, "maxItems": 2},
                "extras": {"type": "array", "items": {"anyOf": [{"const": "tea", "title": "Tea"}]}}
            },
            "required": ["name", "email"]
        }))
        .unwrap();
        assert_eq!(s.fields.len(), 9);
        assert!(s.fields[0].required && !s.fields[2].required);
        assert_eq!(
            s.fields[5].kind,
            FieldKind::Choice {
                options: vec!["atrium".into(), "nook".into()]
            }
        );
        assert!(matches!(
            s.fields[2].kind,
            FieldKind::Number {
                integer: true,
                min: Some(_),
                ..
            }
        ));
        let round_trip: FormSchema =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(round_trip, s);
    }

    #[test]
    fn anything_outside_the_subset_is_refused_with_its_field() {
        let nested = not_allowed(
            json!({"type": "object", "properties": {"addr": {"type": "object", "properties": {}}}}),
        );
        assert_eq!(nested.field.as_deref(), Some("addr"));
        let r = not_allowed(json!({"type": "object", "properties": {"x": {"$ref": "#/defs/x"}}}));
        assert_eq!(r.field.as_deref(), Some("x"));
        let r = not_allowed(
            json!({"type": "object", "properties": {"x": {"type": "string", "$ref": "#/defs/x"}}}),
        );
        assert!(r.message.contains("$ref"));
        let arr = not_allowed(
            json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "object"}}}}),
        );
        assert_eq!(arr.field.as_deref(), Some("xs"));
        not_allowed(json!({"type": "object", "properties": {"x": {"type": "null"}}}));
        not_allowed(
            json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "^a"}}}),
        );
        not_allowed(
            json!({"type": "object", "properties": {"x": {"type": "string", "format": "ipv4"}}}),
        );
        not_allowed(json!({"type": "object", "properties": {}, "$defs": {}}));
        not_allowed(json!({"type": "array", "properties": {}}));
        not_allowed(
            json!({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["y"]}),
        );
        not_allowed(
            json!({"type": "object", "properties": {"x": {"type": "string", "enum": ["a", "a"]}}}),
        );
        not_allowed(
            json!({"type": "object", "properties": {"x": {"type": "boolean", "default": "yes"}}}),
        );
        not_allowed(
            json!({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}),
        );
    }

    #[test]
    fn limits_name_the_limit() {
        let many: Map<String, Value> = (0..17)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect();
        assert_eq!(
            read(json!({"type": "object", "properties": many})),
            Err(SchemaError::Limit {
                limit: "max_properties",
                field: None
            })
        );
        let options: Vec<String> = (0..51).map(|i| format!("o{i}")).collect();
        let r = read(
            json!({"type": "object", "properties": {"x": {"type": "string", "enum": options}}}),
        );
        assert_eq!(
            r,
            Err(SchemaError::Limit {
                limit: "max_enum_options",
                field: Some("x".into())
            })
        );
        let r = read(
            json!({"type": "object", "properties": {"x": {"type": "string", "maxLength": 1_000_000}}}),
        );
        assert_eq!(
            r,
            Err(SchemaError::Limit {
                limit: "max_string_max_length",
                field: Some("x".into())
            })
        );
    }
}
