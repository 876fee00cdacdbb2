//! The gateway's own question: an `elicitation/create` form written by the
//! gateway alone. Nothing in it is the upstream's text: the server is named
//! by its configured name, what the call will do is said in the gateway's
//! words from the hints the upstream listed, and the arguments are shown as
//! the client sent them — names and values shortened, every invisible or
//! control character dropped, secrets masked by their kind. The gateway's
//! provenance rides in `_meta` like on every question it delivers.

use serde_json::{json, Map, Value};

use super::{Annotations, ApprovalRule};
use crate::model::Invisible;
use crate::policy::inspect::PROVENANCE_KEY;

/// The form's field the person ticks to approve: an accept without it
/// ticked is a decline (a client that accepts a form blindly approves
/// nothing).
pub(crate) const APPROVE_FIELD: &str = "approve";
/// The form's field that keeps the decision for the rule's `remember`.
pub(crate) const REMEMBER_FIELD: &str = "remember";

/// At most this many arguments are shown, one line each.
const MAX_ARGUMENTS: usize = 12;
/// A shown argument name's and value's longest form, in characters.
const MAX_NAME_CHARS: usize = 40;
const MAX_VALUE_CHARS: usize = 80;
const MAX_TOOL_CHARS: usize = 64;
/// At most this many findings of the argument checks are named.
const MAX_FOUND: usize = 4;

/// What the question is about.
pub(crate) struct Subject<'a> {
    /// The upstream's configured display name.
    pub server: &'a str,
    /// The tool, as the client called it.
    pub tool: &'a str,
    pub annotations: Option<Annotations>,
    pub arguments: &'a Value,
    pub rule: &'a ApprovalRule,
    /// The name of the policy the rule came from (or the route's).
    pub policy: &'a str,
    /// What `[arguments]` rules set to `ask` found, and where (a JSON
    /// pointer into the arguments: names, never values).
    pub found: &'a [(super::ArgumentCheck, String)],
    /// What a value looks like when it is a secret: its kind, never the value.
    pub secret: &'a dyn Fn(&str, &str) -> Option<&'static str>,
}

/// The `params` of the gateway's `elicitation/create` (form mode).
pub(crate) fn form(s: &Subject<'_>) -> Value {
    let mut properties = Map::new();
    properties.insert(
        APPROVE_FIELD.into(),
        json!({
            "type": "boolean",
            "title": "Approve this call",
            "description": "Tick to let the call go to the server; leave it unticked, or decline, to stop it.",
            "default": false,
        }),
    );
    if let Some(title) = remember_title(s.rule) {
        properties.insert(
            REMEMBER_FIELD.into(),
            json!({"type": "boolean", "title": title, "default": false}),
        );
    }
    json!({
        "mode": "form",
        "message": message(s),
        "requestedSchema": {
            "type": "object",
            "properties": properties,
            "required": [APPROVE_FIELD],
        },
        "_meta": { PROVENANCE_KEY: provenance(s) },
    })
}

/// The gateway's provenance on its own question: who asks is the gateway.
pub(crate) fn provenance(s: &Subject<'_>) -> Value {
    json!({
        "asker": "gateway",
        "upstream": { "name": s.server },
        "policy": s.policy,
        "approval": { "rule": s.rule.name, "tool": shown_name(s.tool, MAX_TOOL_CHARS) },
    })
}

fn remember_title(rule: &ApprovalRule) -> Option<String> {
    use super::Remember;
    if rule.first_use {
        return None;
    }
    match rule.remembered()? {
        Remember::Call => None,
        Remember::Session => Some("Don't ask again for this tool in this session".into()),
        Remember::Caller => Some(format!(
            "Don't ask again for this tool for {}",
            humantime::format_duration(rule.remember_for)
        )),
    }
}

/// The message of the link to the approval page (URL mode): the caller
/// is told who decides, never the arguments (the page shows them to the
/// approver).
pub(crate) fn link_message(server: &str, tool: &str, rule: &str) -> String {
    format!(
        "An approver must approve this call to the tool \"{}\" of {} (approval rule \"{}\") before it goes through. The link opens the gateway's approval page, where the approver decides; nothing is forwarded until then.",
        shown_name(tool, MAX_TOOL_CHARS),
        shown_text(server, MAX_TOOL_CHARS),
        shown_name(rule, MAX_TOOL_CHARS),
    )
}

/// The message: the call, what it will do, why the gateway asks, the
/// arguments.
pub(crate) fn message(s: &Subject<'_>) -> String {
    let mut m = format!(
        "The gateway asks before a call to the tool \"{}\" of {} goes through.",
        shown_name(s.tool, MAX_TOOL_CHARS),
        shown_text(s.server, MAX_TOOL_CHARS),
    );
    m.push_str(&effect(s.annotations));
    if let Some(reason) = &s.rule.reason {
        m.push_str("\nWhy: ");
        m.push_str(reason);
    }
    if s.rule.first_use {
        m.push_str("\nThis is your first call to this tool.");
    }
    m.push_str(&found(s.found));
    m.push_str(&arguments(s));
    m.push_str("\nApprove only if you expect this call.");
    m
}

/// What the argument checks found, one line each (at most a few).
fn found(found: &[(super::ArgumentCheck, String)]) -> String {
    let mut out = String::new();
    for (check, at) in found.iter().take(MAX_FOUND) {
        out.push_str("\nFound: ");
        out.push_str(check.what());
        if !at.is_empty() {
            out.push_str(" (");
            out.push_str(&shown_name(at, MAX_NAME_CHARS));
            out.push(')');
        }
        out.push('.');
    }
    if found.len() > MAX_FOUND {
        out.push_str(&format!(
            "\n… and {} more findings.",
            found.len() - MAX_FOUND
        ));
    }
    out
}

/// What the call will do, in the gateway's words, from the listed hints.
fn effect(listed: Option<Annotations>) -> String {
    let Some(a) = listed else {
        return "\nThe gateway has no listing of this tool: what it does is unknown.".into();
    };
    let mut out = String::new();
    if a.read_only == Some(true) {
        out.push_str("\nThe server lists it as read-only.");
    } else if a.destructive == Some(false) {
        out.push_str("\nThe server lists it as changing data without deleting any.");
    } else {
        out.push_str("\nThe server lists it as able to delete or overwrite data.");
    }
    if a.open_world != Some(false) {
        out.push_str(" It may reach systems beyond the server.");
    }
    out
}

fn arguments(s: &Subject<'_>) -> String {
    let Some(obj) = s.arguments.as_object().filter(|o| !o.is_empty()) else {
        return "\nNo arguments.".into();
    };
    let mut out = String::from("\nArguments:");
    for (name, value) in obj.iter().take(MAX_ARGUMENTS) {
        out.push_str("\n- ");
        out.push_str(&shown_name(name, MAX_NAME_CHARS));
        out.push_str(": ");
        out.push_str(&shown_value(name, value, s.secret));
    }
    if obj.len() > MAX_ARGUMENTS {
        out.push_str(&format!("\n- and {} more", obj.len() - MAX_ARGUMENTS));
    }
    out
}

fn shown_value(
    name: &str,
    v: &Value,
    secret: &dyn Fn(&str, &str) -> Option<&'static str>,
) -> String {
    match v {
        Value::String(text) => match secret(name, text) {
            Some(kind) => format!("(hidden: {kind})"),
            None => format!("\"{}\"", shown_text(text, MAX_VALUE_CHARS)),
        },
        Value::Array(items) => {
            let hidden = items
                .iter()
                .filter_map(Value::as_str)
                .any(|t| secret(name, t).is_some());
            match hidden {
                true => format!("a list of {} (hidden: it holds a secret)", items.len()),
                false => format!("a list of {}", items.len()),
            }
        }
        Value::Object(fields) => format!("an object of {} fields", fields.len()),
        other => shown_text(&other.to_string(), MAX_VALUE_CHARS),
    }
}

/// A name as shown: letters, digits and `_.-/:` as written, anything else
/// as `?`, shortened.
fn shown_name(name: &str, max: usize) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| match c.is_alphanumeric() || "_.-/:".contains(c) {
            true => c,
            false => '?',
        })
        .collect();
    shorten(&cleaned, max)
}

/// Text as shown: invisible and control characters dropped, line breaks
/// and quotes made visible as what they are, shortened.
fn shown_text(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4));
    for c in text.chars() {
        match c {
            '\n' | '\r' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            c if c.is_control() || Invisible::of(c).is_some() => {}
            c => out.push(c),
        }
    }
    shorten(&out, max)
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests;
