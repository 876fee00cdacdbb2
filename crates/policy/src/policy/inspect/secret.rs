//! Rule: a form must not ask for a secret (password, key, token, card,
//! …): the spec sends sensitive data through URL mode. By name, title,
//! description and message; `strip` drops an optional field instead.

use serde_json::{Map, Value};

use super::form::remove_fields;
use super::Action as Did;
use super::Rule;
use super::{Checked, Run};
use crate::model::{printable_name, FormSchema, Reason};
use crate::policy::config::Action;
use crate::policy::secrets::FieldText;

impl Run<'_> {
    pub(super) fn check_secrets(
        &mut self,
        key: &str,
        params: &mut Map<String, Value>,
        form: &mut FormSchema,
    ) -> Checked<()> {
        let action = self.policy.secret_fields;
        let upstream = self.subject.upstream_name.to_owned();
        let advice = "sensitive data must be collected through URL mode (an elicitation with mode \"url\"), never a form";
        let props = params
            .get("requestedSchema")
            .and_then(|s| s.get("properties"));
        let texts: Vec<FieldText<'_>> = form
            .fields
            .iter()
            .map(|f| match props.and_then(|p| p.get(&f.name)) {
                Some(prop) => FieldText::of_property(&f.name, prop),
                None => FieldText::named(&f.name),
            })
            .collect();
        let message = params.get("message").and_then(Value::as_str);
        let found = self.policy.secrets.check_form(key, message, &texts);
        if found.message.is_none() {
            self.pass(Rule::SecretField, Some(key), None, "message");
        }
        if let Some(hit) = found.message {
            let detail = Some(format!("{} in {}", hit.kind.as_str(), hit.source.as_str()));
            if action == Action::Allow {
                self.note(Rule::SecretField, Did::Allow, Some(key), None, detail);
            } else {
                let message = format!(
                    "{upstream} asks for a {} in a form message; {advice}",
                    hit.kind.as_str().replace('_', " ")
                );
                self.violation(
                    Reason::SecretFieldRequested,
                    Rule::SecretField,
                    Some(key),
                    None,
                    message,
                )?;
            }
        }
        let mut stripped = Vec::new();
        for (field, hit) in form.fields.iter().zip(found.fields) {
            let Some(hit) = hit else {
                self.pass(
                    Rule::SecretField,
                    Some(key),
                    Some(&field.name),
                    "key, name, title, description, default, examples, option labels",
                );
                continue;
            };
            let detail = Some(format!("{} in {}", hit.kind.as_str(), hit.source.as_str()));
            match action {
                Action::Allow => self.note(
                    Rule::SecretField,
                    Did::Allow,
                    Some(key),
                    Some(&field.name),
                    detail,
                ),
                Action::Strip if !field.required && self.enforcing() => {
                    self.note(
                        Rule::SecretField,
                        Did::Strip,
                        Some(key),
                        Some(&field.name),
                        detail,
                    );
                    stripped.push(field.name.clone());
                }
                _ => {
                    let what = hit.kind.as_str().replace('_', " ");
                    let message = format!(
                        "{upstream} asks for a {what} in form field \"{}\"; {advice}",
                        printable_name(&field.name)
                    );
                    self.violation(
                        Reason::SecretFieldRequested,
                        Rule::SecretField,
                        Some(key),
                        Some(&field.name),
                        message,
                    )?;
                }
            }
        }
        if !stripped.is_empty() {
            remove_fields(params, &stripped);
            form.fields.retain(|f| !stripped.contains(&f.name));
        }
        Ok(())
    }
}
