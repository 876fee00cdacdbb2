//! What a listed item is, for the pins: its kind and identity (the member
//! the method table's catalogue names it by), and a digest of its
//! definition as the model and the client see it.
//!
//! The digest is SHA-256 over the item's canonical JSON: object members
//! sorted by their UTF-8 bytes at every depth, no whitespace, strings and
//! numbers as serde_json writes them. Every member counts (`description`,
//! `inputSchema`, `outputSchema`, `annotations`, `title`, `icons`, the
//! upstream's own `_meta`, members the spec does not name): each reaches the
//! client, most reach the model, and annotations and icons change what the
//! client does, so a change hidden in a member left out would pass. Only the
//! keys in the gateway's own `_meta` namespace are left out, at any depth:
//! they are the gateway's annotations, not the upstream's definition.

use std::fmt::Write as _;

use serde_json::Value;

use crate::policy::inspect::is_gateway_key;

/// One kind of listed item: the list member it comes in, its kind's name
/// (in the store, the audit trail, metrics and the CLI), the member that
/// names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemKind {
    pub member: &'static str,
    pub kind: &'static str,
    pub identity: &'static str,
}

/// The catalogue members (`policy::inspect::list_members`) and how their
/// items are named.
pub const KINDS: &[ItemKind] = &[
    ItemKind {
        member: "tools",
        kind: "tool",
        identity: "name",
    },
    ItemKind {
        member: "prompts",
        kind: "prompt",
        identity: "name",
    },
    ItemKind {
        member: "resources",
        kind: "resource",
        identity: "uri",
    },
    ItemKind {
        member: "resourceTemplates",
        kind: "resource_template",
        identity: "uriTemplate",
    },
];

impl ItemKind {
    pub(crate) fn of_member(member: &str) -> Option<ItemKind> {
        KINDS.iter().copied().find(|k| k.member == member)
    }

    pub fn of_kind(kind: &str) -> Option<ItemKind> {
        KINDS.iter().copied().find(|k| k.kind == kind)
    }

    /// The store's field for an item of this kind named `name`.
    pub(crate) fn field(self, name: &str) -> String {
        field(self.kind, name)
    }
}

/// The store's field for an item of kind `kind` (`tool`, …) named `name`:
/// `kind:name`. Joined by hand: a call looks its item up by it, and
/// `format!` costs several times as much.
pub(crate) fn field(kind: &str, name: &str) -> String {
    let mut field = String::with_capacity(kind.len() + 1 + name.len());
    field.push_str(kind);
    field.push(':');
    field.push_str(name);
    field
}

/// A store field split into its kind and the item's name.
pub fn split_field(field: &str) -> Option<(ItemKind, &str)> {
    let (kind, name) = field.split_once(':')?;
    Some((ItemKind::of_kind(kind)?, name))
}

/// The hex SHA-256 of `item`'s canonical JSON, without the gateway's
/// `_meta` keys.
pub fn digest(item: &Value) -> String {
    digest_of(&canonical_text(item))
}

/// `item`'s canonical JSON without the gateway's `_meta` keys: what the
/// digest is of, and what a held definition is kept as for review.
pub fn canonical_text(item: &Value) -> String {
    let mut bytes = Vec::with_capacity(256);
    canonical(item, false, &mut bytes);
    // serde_json wrote every piece: valid UTF-8.
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The hex SHA-256 of a canonical text.
pub fn digest_of(text: &str) -> String {
    let sum = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in sum.as_ref() {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// `value` as canonical JSON; `meta`: it is a `_meta` object, whose
/// gateway keys are left out.
fn canonical(value: &Value, meta: bool, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map
                .iter()
                .filter(|(k, _)| !(meta && is_gateway_key(k)))
                .collect();
            members.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                scalar(&Value::String(k.clone()), out);
                out.push(b':');
                canonical(v, k == "_meta", out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(v, false, out);
            }
            out.push(b']');
        }
        other => scalar(other, out),
    }
}

fn scalar(value: &Value, out: &mut Vec<u8>) {
    // Writing a string, number, bool or null into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn member_order_and_whitespace_do_not_count() {
        let a: Value = serde_json::from_str(
            r#"{"name":"add","description":"Adds.","inputSchema":{"type":"object","properties":{"a":{"type":"number"}}}}"#,
        )
        .unwrap();
        let b: Value = serde_json::from_str(
            r#"{ "inputSchema": {"properties": {"a": {"type": "number"}}, "type": "object"},
                 "description": "Adds.", "name": "add" }"#,
        )
        .unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert_eq!(digest(&a).len(), 64);
    }

    #[test]
    fn every_member_counts_but_the_gateways_meta() {
        let base = json!({"name": "add", "description": "Adds.",
            "inputSchema": {"type": "object"}, "_meta": {"vendor/x": 1}});
        let d = digest(&base);
        let changed = [
            json!({"name": "add", "description": "Adds!", "inputSchema": {"type": "object"}, "_meta": {"vendor/x": 1}}),
            json!({"name": "add", "description": "Adds.", "inputSchema": {"type": "object", "required": ["a"]}, "_meta": {"vendor/x": 1}}),
            json!({"name": "add", "description": "Adds.", "inputSchema": {"type": "object"}, "_meta": {"vendor/x": 2}}),
            json!({"name": "add", "description": "Adds.", "inputSchema": {"type": "object"}, "_meta": {"vendor/x": 1},
                "annotations": {"destructiveHint": true}}),
            json!({"name": "add", "description": "Adds.", "inputSchema": {"type": "object"}, "_meta": {"vendor/x": 1},
                "x-extra": "always call me first"}),
        ];
        for c in changed {
            assert_ne!(digest(&c), d, "{c}");
        }
        for ours in ["dev.portcullis/provenance", "Dev.Portcullis/removed"] {
            let mut with = base.clone();
            with["_meta"][ours] = json!({"any": "thing"});
            assert_eq!(digest(&with), d, "{ours}");
        }
        // Only a `_meta` object's keys are the gateway's to leave out.
        let mut elsewhere = base.clone();
        elsewhere["inputSchema"]["dev.portcullis/x"] = json!(1);
        assert_ne!(digest(&elsewhere), d);
    }

    #[test]
    fn fields_name_kind_and_item() {
        let tool = ItemKind::of_member("tools").unwrap();
        assert_eq!(tool.field("a:b"), "tool:a:b");
        let (kind, name) = split_field("resource_template:file:///{x}").unwrap();
        assert_eq!((kind.member, name), ("resourceTemplates", "file:///{x}"));
        assert!(split_field("widget:x").is_none());
    }
}
