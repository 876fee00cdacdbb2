//! Rule: the kinds 2026-07-28 deprecates, `sampling/createMessage` and
//! `roots/list`, per policy; a sampling request's context and the text a
//! model would read are checked too.

use serde_json::{Map, Value};

use super::Rule;
use super::{Checked, Run};
use crate::model::{printable_name, Asked, McpMethod, Reason};
use crate::policy::config::Action;
use crate::policy::injection::TextContext;

impl Run<'_> {
    fn deprecated_kind(&mut self, key: &str, method: McpMethod) -> Checked<()> {
        let message = format!(
            "{} sent a {} request, a deprecated kind this policy blocks",
            self.subject.upstream_name,
            method.as_str()
        );
        self.violation(
            Reason::DeprecatedRequestKind,
            Rule::Deprecated,
            Some(key),
            None,
            message,
        )
    }

    pub(super) fn check_sampling(&mut self, key: &str, params: &Map<String, Value>) -> Checked<()> {
        if self.policy.sampling == Action::Block {
            self.deprecated_kind(key, McpMethod::SamplingCreateMessage)?;
        } else {
            self.pass(
                Rule::Deprecated,
                Some(key),
                None,
                "sampling allowed by this policy",
            );
        }
        let context = params
            .get("includeContext")
            .and_then(Value::as_str)
            .unwrap_or("none");
        if context != "none" && self.policy.sampling_include_context == Action::Block {
            let message = format!("{} asks to include context (\"{}\") in a sampling request; this policy blocks that", self.subject.upstream_name, printable_name(context));
            self.violation(
                Reason::SamplingContextNotAllowed,
                Rule::Deprecated,
                Some(key),
                None,
                message,
            )?;
        }
        self.check_sampling_size(key, params)?;
        for text in sampling_texts(params) {
            if self.spend(key, None, text.len())? {
                self.scan_injection(key, None, "sampling text", &text, TextContext::Form)?;
            }
        }
        self.report.asked.push((key.to_owned(), Asked::Sampling));
        Ok(())
    }

    /// A model's work an untrusted server may ask for is bounded: tokens,
    /// messages, and the length of what the model reads.
    fn check_sampling_size(&mut self, key: &str, params: &Map<String, Value>) -> Checked<()> {
        let Some(messages) = params.get("messages").and_then(Value::as_array) else {
            return Err(self.malformed(Some(key), "a sampling request needs messages"));
        };
        let Some(max_tokens) = params.get("maxTokens").and_then(Value::as_u64) else {
            return Err(self.malformed(
                Some(key),
                "a sampling request needs maxTokens, a whole number",
            ));
        };
        if max_tokens > self.policy.sampling_max_tokens {
            self.limit("sampling_max_tokens", Some(key), None, "a sampling request")?;
        }
        if messages.len() > self.policy.sampling_max_messages {
            self.limit(
                "sampling_max_messages",
                Some(key),
                None,
                "a sampling request",
            )?;
        }
        let max_chars = self
            .policy
            .limits
            .max_description_chars
            .max(self.policy.limits.max_message_chars);
        if sampling_texts(params)
            .iter()
            .any(|t| t.chars().count() > max_chars)
        {
            self.limit("max_message_chars", Some(key), None, "sampling text")?;
        }
        Ok(())
    }

    pub(super) fn check_roots(&mut self, key: &str) -> Checked<()> {
        if self.policy.roots == Action::Block {
            self.deprecated_kind(key, McpMethod::RootsList)?;
        } else {
            self.pass(
                Rule::Deprecated,
                Some(key),
                None,
                "roots allowed by this policy",
            );
        }
        self.report.asked.push((key.to_owned(), Asked::Roots));
        Ok(())
    }
}

/// The text of a sampling request a model would read: the system prompt
/// and every string in the messages' content, whatever its block type
/// (text, a tool result's content, an embedded resource's text, a resource
/// link's description, a tool use's input) — only base64 payloads and the
/// protocol's own tags are not text.
fn sampling_texts(params: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(s) = params.get("systemPrompt").and_then(Value::as_str) {
        out.push(s.to_owned());
    }
    for message in params
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(content) = message.get("content") {
            strings_of(content, &mut out);
        }
    }
    out
}

/// Members of content blocks that hold no text a model reads as words.
const NOT_TEXT: &[&str] = &["type", "mimeType", "data", "blob", "_meta"];

/// Every string in `value` (depth is bounded by the strict parse).
fn strings_of(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, out)),
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !NOT_TEXT.contains(&k.as_str()))
            .for_each(|(_, v)| strings_of(v, out)),
        _ => {}
    }
}
