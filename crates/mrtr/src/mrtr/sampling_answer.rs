//! The answer to a `sampling/createMessage` (a `CreateMessageResult`), as
//! [`super::answers::check_answers`] holds it: its shape, then (unless the
//! policy allows secret values) the text the client chose, scanned for
//! secrets like a form's text field. See the rules in [`super::answers`].

use serde_json::Value;

use super::answers::{invalid, AnswerProblem, AnswerRules};
use super::value_scan::{SecretValueKind, SecretValueScanner};
use crate::model::Reason;

pub(super) fn sampling(
    key: &str,
    answer: &Value,
    rules: &AnswerRules,
) -> Result<(), AnswerProblem> {
    let obj = answer.as_object().ok_or_else(|| {
        invalid(
            key,
            None,
            "the answer to a sampling request must be an object with role, content and model",
        )
    })?;
    match obj.get("role").and_then(Value::as_str) {
        Some("user" | "assistant") => {}
        _ => {
            return Err(invalid(
                key,
                Some("role"),
                "must be \"user\" or \"assistant\"",
            ))
        }
    }
    let content_ok = match obj.get("content") {
        Some(Value::Object(_)) => true,
        Some(Value::Array(items)) => items.iter().all(Value::is_object),
        _ => false,
    };
    if !content_ok {
        return Err(invalid(
            key,
            Some("content"),
            "must be a content block object or an array of content blocks",
        ));
    }
    for member in ["model", "stopReason"] {
        if obj.get(member).is_some_and(|m| !m.is_string()) {
            return Err(invalid(key, Some(member), "must be a string"));
        }
    }
    if rules.allow_secret_values {
        return Ok(());
    }
    match obj
        .get("content")
        .and_then(|c| sampled_secret(c, &rules.scanner, 0))
    {
        None => Ok(()),
        Some(kind) => Err(AnswerProblem {
            key: key.to_owned(),
            field: Some("content".to_owned()),
            why: format!(
                "the sampled text contains what looks like {}; secrets must not travel \
                 through a sampling answer (remove it)",
                kind.describe()
            ),
            reason: Reason::SecretInAnswer,
        }),
    }
}

/// How deep a sampling answer's blocks (and a tool call's input) are read.
const SAMPLING_SCAN_DEPTH: usize = 8;

/// The first secret in the text of a sampling answer's content: a block, an
/// array of blocks, a `tool_result`'s blocks, a `tool_use`'s input strings.
fn sampled_secret(
    content: &Value,
    scanner: &SecretValueScanner,
    depth: usize,
) -> Option<SecretValueKind> {
    if depth > SAMPLING_SCAN_DEPTH {
        return None;
    }
    match content {
        Value::Array(blocks) => blocks
            .iter()
            .find_map(|b| sampled_secret(b, scanner, depth + 1)),
        Value::Object(block) => match block.get("type").and_then(Value::as_str) {
            Some("text") => block
                .get("text")
                .and_then(Value::as_str)
                .and_then(|t| scanner.scan(t)),
            Some("tool_result") => block
                .get("content")
                .and_then(|c| sampled_secret(c, scanner, depth + 1)),
            Some("tool_use") => block
                .get("input")
                .and_then(|i| strings_secret(i, scanner, depth + 1)),
            _ => None,
        },
        _ => None,
    }
}

/// The first secret among the strings of `value`, at any depth up to the limit.
fn strings_secret(
    value: &Value,
    scanner: &SecretValueScanner,
    depth: usize,
) -> Option<SecretValueKind> {
    if depth > SAMPLING_SCAN_DEPTH {
        return None;
    }
    match value {
        Value::String(s) => scanner.scan(s),
        Value::Array(items) => items
            .iter()
            .find_map(|v| strings_secret(v, scanner, depth + 1)),
        Value::Object(members) => members
            .values()
            .find_map(|v| strings_secret(v, scanner, depth + 1)),
        _ => None,
    }
}
