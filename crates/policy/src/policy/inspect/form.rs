//! Rule: a form elicitation's schema is the spec's flat subset, within the
//! limits; option machine values are never altered (an unsafe one refuses
//! the form); every human-facing string is cleaned (see `text`).

use serde_json::{Map, Value};

use super::Rule;
use super::{Checked, Run};
use crate::model::{printable_name, Asked, FieldKind, Reason};
use crate::policy::form::{read_form_schema, SchemaError, SchemaLimits};
use crate::policy::injection::TextContext;
use crate::policy::sanitize::is_unsafe_machine_value;

impl Run<'_> {
    pub(super) fn check_form(&mut self, key: &str, params: &mut Map<String, Value>) -> Checked<()> {
        if let Some(k) = params
            .keys()
            .find(|k| !matches!(k.as_str(), "mode" | "message" | "requestedSchema" | "_meta"))
        {
            let message = format!(
                "member \"{}\" is not part of a form elicitation",
                printable_name(k)
            );
            return Err(self.malformed(Some(key), message));
        }
        if !params.get("message").is_some_and(Value::is_string) {
            return Err(self.malformed(Some(key), "a form elicitation needs a message"));
        }
        let limits = &self.policy.limits;
        let schema_limits = SchemaLimits {
            max_properties: limits.max_properties,
            max_enum_options: limits.max_enum_options,
            max_string_max_length: limits.max_string_max_length,
        };
        // Read in place: the schema is cleaned below, never copied.
        let schema_value = params.get("requestedSchema").unwrap_or(&Value::Null);
        let mut form = match read_form_schema(schema_value, &schema_limits) {
            Ok(f) => {
                self.pass(
                    Rule::Schema,
                    Some(key),
                    None,
                    "flat schema of primitive fields",
                );
                self.pass(
                    Rule::Limit,
                    Some(key),
                    None,
                    "max_properties, max_enum_options, max_string_max_length",
                );
                f
            }
            Err(SchemaError::NotAllowed(p)) => {
                let message = format!(
                    "the form schema is outside what MCP forms allow: {}",
                    p.message
                );
                return Err(self.invalid(
                    Reason::SchemaNotAllowed,
                    Rule::Schema,
                    Some(key),
                    p.field.as_deref(),
                    message,
                ));
            }
            Err(SchemaError::Limit { limit, field }) => {
                self.limit(limit, Some(key), field.as_deref(), "a form")?;
                // Monitoring: the schema is over a limit but otherwise fine; read it without limits.
                let open = SchemaLimits {
                    max_properties: usize::MAX,
                    max_enum_options: usize::MAX,
                    max_string_max_length: u64::MAX,
                };
                read_form_schema(schema_value, &open).map_err(|_| {
                    self.invalid(
                        Reason::SchemaNotAllowed,
                        Rule::Schema,
                        Some(key),
                        None,
                        "the form schema is outside what MCP forms allow".into(),
                    )
                })?
            }
        };
        self.check_secrets(key, params, &mut form)?;
        self.check_option_values(key, params)?;
        self.clean_form_text(key, params)?;
        // An answer is held to a length even where the form declares none:
        // the policy's largest maxLength (what the client is shown is unchanged).
        for field in &mut form.fields {
            if let FieldKind::Text { max_len, .. } = &mut field.kind {
                max_len.get_or_insert(self.policy.limits.max_string_max_length);
            }
        }
        self.report.asked.push((key.to_owned(), Asked::Form(form)));
        Ok(())
    }

    /// Enum machine values are never changed; an unsafe one refuses the form.
    fn check_option_values(&mut self, key: &str, params: &Map<String, Value>) -> Checked<()> {
        let Some(props) = params
            .get("requestedSchema")
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
        else {
            return Ok(());
        };
        for (name, prop) in props {
            if option_values(prop).next().is_none() {
                continue;
            }
            if !option_values(prop).any(is_unsafe_machine_value) {
                self.pass(Rule::TextSafety, Some(key), Some(name), "option values");
            } else {
                let message = format!("an option value or the default of field \"{}\" contains markup or invisible characters; values are never altered, so the form is refused", printable_name(name));
                self.violation(
                    Reason::UnsafeOptionValue,
                    Rule::TextSafety,
                    Some(key),
                    Some(name),
                    message,
                )?;
            }
        }
        Ok(())
    }

    fn clean_form_text(&mut self, key: &str, params: &mut Map<String, Value>) -> Checked<()> {
        let limits = self.policy.limits;
        self.clean(
            key,
            None,
            "message",
            params.get_mut("message"),
            limits.max_message_chars,
        )?;
        let Some(Value::Object(schema)) = params.get_mut("requestedSchema") else {
            return Ok(());
        };
        self.clean(
            key,
            None,
            "title",
            schema.get_mut("title"),
            limits.max_title_chars,
        )?;
        self.clean(
            key,
            None,
            "description",
            schema.get_mut("description"),
            limits.max_description_chars,
        )?;
        let Some(Value::Object(props)) = schema.get_mut("properties") else {
            return Ok(());
        };
        for (name, prop) in props.iter_mut() {
            let Value::Object(prop) = prop else { continue };
            self.clean(
                key,
                Some(name),
                "title",
                prop.get_mut("title"),
                limits.max_title_chars,
            )?;
            self.clean(
                key,
                Some(name),
                "description",
                prop.get_mut("description"),
                limits.max_description_chars,
            )?;
            for labels in option_labels_mut(prop) {
                self.clean(
                    key,
                    Some(name),
                    "option_title",
                    Some(labels),
                    limits.max_title_chars,
                )?;
            }
            // Also read by a person, never altered: the pre-filled default;
            // and a request split between the title and the description.
            let text = |k: &str| prop.get(k).and_then(Value::as_str);
            let default = text("default").map(str::to_owned);
            let joined = match (text("title"), text("description")) {
                (Some(t), Some(d)) => Some(format!("{t} {d}")),
                _ => None,
            };
            if let Some(read) = default {
                self.scan_injection(key, Some(name), "default", &read, TextContext::Form)?;
            }
            if let Some(read) = joined {
                self.scan_injection(
                    key,
                    Some(name),
                    "title+description",
                    &read,
                    TextContext::Form,
                )?;
            }
        }
        Ok(())
    }
}

pub(super) fn remove_fields(params: &mut Map<String, Value>, names: &[String]) {
    let Some(Value::Object(schema)) = params.get_mut("requestedSchema") else {
        return;
    };
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.retain(|k, _| !names.contains(k));
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| r.as_str().is_none_or(|n| !names.iter().any(|x| x == n)));
    }
}

/// The machine values of a property: its options (`enum`, `oneOf[].const`,
/// `items.enum`, `items.anyOf[].const`) and a string `default`, which the
/// client shows filled in (a multi-select's default must be among its
/// options, checked already).
fn option_values(prop: &Value) -> impl Iterator<Item = &str> {
    let lists = [
        prop.get("enum"),
        prop.get("items").and_then(|i| i.get("enum")),
    ];
    let titled = [
        prop.get("oneOf"),
        prop.get("items").and_then(|i| i.get("anyOf")),
    ];
    let plain = lists
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_str);
    let consts = titled
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|o| o.get("const"))
        .filter_map(Value::as_str);
    let default = prop.get("default").and_then(Value::as_str);
    plain.chain(consts).chain(default)
}

/// Every option label of a property: `oneOf[].title`, `items.anyOf[].title`, `enumNames[]`.
fn option_labels_mut(prop: &mut Map<String, Value>) -> Vec<&mut Value> {
    let mut out = Vec::new();
    let mut titled: Vec<&mut Value> = Vec::new();
    for (k, v) in prop.iter_mut() {
        match k.as_str() {
            "oneOf" => titled.push(v),
            "enumNames" => {
                if let Value::Array(names) = v {
                    out.extend(names.iter_mut());
                }
            }
            "items" => {
                if let Some(any_of) = v.get_mut("anyOf") {
                    titled.push(any_of);
                }
            }
            _ => {}
        }
    }
    for list in titled {
        if let Value::Array(options) = list {
            out.extend(options.iter_mut().filter_map(|o| o.get_mut("title")));
        }
    }
    out
}
