//! Rule: every kind of question must be one the client declared in its
//! capabilities; otherwise -32021 with `data.requiredCapabilities`.

use serde_json::{json, Map, Value};

use super::{Action, Rule};
use super::{Checked, Run};
use crate::model::{printable_name, McpMethod, Reason, Refusal};

impl Run<'_> {
    pub(super) fn check_capabilities(&mut self, requests: &Map<String, Value>) -> Checked<()> {
        let caps = self.subject.client;
        let mut needed = Map::new();
        let mut elicitation = Map::new();
        for (key, request) in requests {
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let params = request.get("params");
            match McpMethod::parse(method) {
                McpMethod::ElicitationCreate => match params
                    .and_then(|p| p.get("mode"))
                    .and_then(Value::as_str)
                    .unwrap_or("form")
                {
                    "url" if !caps.elicitation_url => {
                        drop(elicitation.insert("url".into(), json!({})))
                    }
                    "form" if !caps.elicitation_form => {
                        drop(elicitation.insert("form".into(), json!({})))
                    }
                    "url" | "form" => {}
                    other => {
                        let message = format!(
                            "elicitation mode \"{}\" is not form or url",
                            printable_name(other)
                        );
                        return Err(self.malformed(Some(key), message));
                    }
                },
                McpMethod::SamplingCreateMessage => {
                    let context = params
                        .and_then(|p| p.get("includeContext"))
                        .and_then(Value::as_str)
                        .is_some_and(|c| c != "none");
                    if !caps.sampling || (context && !caps.sampling_context) {
                        let sampling = if context {
                            json!({"context": {}})
                        } else {
                            json!({})
                        };
                        needed.insert("sampling".into(), sampling);
                    }
                }
                McpMethod::RootsList if !caps.roots => {
                    drop(needed.insert("roots".into(), json!({})))
                }
                McpMethod::RootsList => {}
                _ => {
                    let message = format!("input request method \"{}\" is not elicitation/create, sampling/createMessage or roots/list", printable_name(method));
                    return Err(self.invalid(
                        Reason::UnknownInputRequestMethod,
                        Rule::Protocol,
                        Some(key),
                        None,
                        message,
                    ));
                }
            }
        }
        if !elicitation.is_empty() {
            needed.insert("elicitation".into(), Value::Object(elicitation));
        }
        if needed.is_empty() {
            return Ok(());
        }
        self.note(Rule::ClientCapability, Action::Block, None, None, None);
        let message = format!(
            "{} needs client capabilities this request did not declare",
            self.subject.upstream_name
        );
        Err(Refusal::new(Reason::MissingClientCapability, message)
            .with_data("requiredCapabilities", Value::Object(needed))
            .with_data("rule", "client_capability".into()))
    }
}
