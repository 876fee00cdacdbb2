//! Rule: what a server lists for the model to choose from — the titles and
//! descriptions of its tools, prompts, resources and resource templates,
//! every string of a tool's input and output schemas, a prompt's arguments
//! — is put into the model's context by every client that offers them.
//! Instructions hidden there ("tool poisoning") reach the model before any
//! call. The text is delivered as the server wrote it (only characters no
//! one sees are removed: `text.rs`), and its meaning is judged item by item
//! by the intent detector (`intent.rs`): a verdict on one item acts on that
//! item (removed, or flagged, or the list refused: `[listing]
//! on_violation`), and the rest is delivered. Each item has its own text
//! budget (`max_text_bytes`): one it cannot read whole is removed, so no
//! real server is refused for the size of its list and no unread text is
//! delivered. An item's `name` is never changed (it is what the client
//! calls): one that hides characters removes the item, and so does a
//! tool's name that is not a tool name of the specification (1 to 128 of
//! `A-Z a-z 0-9 _ - .`, and `/` as SEP-986 allows). Each item's icons get
//! the icon rule (`icons.rs`).

use serde_json::{Map, Value};

use super::Rule;
use super::{Checked, Run};
use crate::model::{printable_name, Reason, Refusal};
use crate::policy::injection::TextContext;
use crate::policy::intent::Place;
use crate::policy::sanitize::has_hidden_characters;

/// The parts of a listed item a person or a model reads.
const ITEM_TEXT: [(&str, Place); 2] =
    [("title", Place::Title), ("description", Place::Description)];

impl Run<'_> {
    /// Read every item under `items`: invisible characters removed in
    /// place, each item judged, and the items that are not to be delivered
    /// removed (when enforcing).
    pub(super) fn check_listing(&mut self, items: &str, result: &mut Value) -> Checked<()> {
        let list = match result.get_mut(items) {
            None => return Ok(()),
            Some(Value::Array(list)) => list,
            Some(_) => return Err(self.not_a_list(items)),
        };
        if !list.iter().all(Value::is_object) {
            return Err(self.not_a_list(items));
        }
        let message_budget = (self.text_left, self.over_budget);
        let mut keep = Vec::with_capacity(list.len());
        let mut read = Vec::with_capacity(list.len());
        let mut keys = Vec::with_capacity(list.len());
        for item in list.iter_mut().filter_map(Value::as_object_mut) {
            let key = item_key(item);
            self.text_left = self.policy.limits.max_text_bytes;
            self.over_budget = false;
            self.per_item = true;
            let mut texts = ItemText::default();
            let checked = self.check_item(items, &key, item, &mut texts);
            self.per_item = false;
            let mut kept = checked?;
            if self.over_budget {
                let detail = "more text than the gateway reads in one item".to_owned();
                kept &= !self.removal(Rule::Limit, &key, format!("max_text_bytes: {detail}"));
            }
            keep.push(kept);
            read.push(texts);
            keys.push(key);
        }
        (self.text_left, self.over_budget) = message_budget;
        self.judge_listed(items, &keys, &read, &mut keep)?;
        if self.enforcing() && keep.contains(&false) {
            let mut keep = keep.into_iter();
            list.retain(|_| keep.next().unwrap_or(true));
        }
        Ok(())
    }

    /// What no client can read as the list leaves nothing to inspect: it
    /// is refused rather than passed unread.
    fn not_a_list(&mut self, items: &str) -> Refusal {
        let message = format!("the upstream's {items} is not a list of objects");
        self.invalid(
            Reason::UpstreamProtocolViolation,
            Rule::Protocol,
            None,
            None,
            message,
        )
    }

    /// Whether the item stays in the list.
    fn check_item(
        &mut self,
        items: &str,
        key: &str,
        item: &mut Map<String, Value>,
        read: &mut ItemText,
    ) -> Checked<bool> {
        let keep = self.check_item_name(items, key, item, read)?;
        for (part, place) in ITEM_TEXT {
            self.clean_listed(key, None, part, item.get_mut(part), place, read)?;
        }
        if let Some(Value::Object(notes)) = item.get_mut("annotations") {
            let slot = notes.get_mut("title");
            self.clean_listed(key, None, "annotations.title", slot, Place::Title, read)?;
        }
        self.check_icons(key, item)?;
        for schema in ["inputSchema", "outputSchema"] {
            if let Some(s) = item.get_mut(schema) {
                self.check_schema_text(key, None, s, read)?;
            }
        }
        if let Some(Value::Array(arguments)) = item.get_mut("arguments") {
            for argument in arguments.iter_mut().filter_map(Value::as_object_mut) {
                if !self.spend(key, None, 0)? {
                    break;
                }
                let raw_name = argument.get("name").and_then(Value::as_str);
                if let Some(n) = raw_name {
                    self.scan_listed(key, None, "argument name", n, Place::ArgumentName, read)?;
                }
                let name = raw_name.map(printable_name);
                for (part, _) in ITEM_TEXT {
                    let slot = argument.get_mut(part);
                    let field = name.as_deref();
                    self.clean_listed(key, field, part, slot, Place::ArgumentText, read)?;
                }
            }
        }
        Ok(keep)
    }

    /// A name is what the client calls, and what it shows when there is no
    /// title: it cannot be cleaned without changing what it names, so an
    /// item whose name hides characters is removed. Its words are scanned
    /// like any listed text (`export_chat_history` names what a tool does:
    /// the listing rules let that pass).
    fn check_item_name(
        &mut self,
        items: &str,
        key: &str,
        item: &Map<String, Value>,
        read: &mut ItemText,
    ) -> Checked<bool> {
        let Some(Value::String(name)) = item.get("name") else {
            return Ok(true);
        };
        self.scan_listed(key, None, "name", name, Place::Name, read)?;
        if has_hidden_characters(name) {
            let detail = "name: hidden characters".to_owned();
            return Ok(!self.removal(Rule::TextSafety, key, detail));
        }
        self.pass(Rule::TextSafety, Some(key), None, "name");
        if items == "tools" && !is_tool_name(name) {
            let detail = "name: not a tool name".to_owned();
            return Ok(!self.removal(Rule::Name, key, detail));
        }
        Ok(true)
    }

    /// Every `title` and `description` string of a JSON schema, at any depth
    /// (properties, items, definitions, combinators), is cleaned and
    /// read; every other string (`enum`, `const`, `default`, `examples`,
    /// `required`, `$comment`, `x-` keys, a `type` or `format` outside
    /// their vocabulary) and every property name, values the model reads
    /// but that cannot change without changing the schema, is read as it
    /// is. None is left unread, and the strict parse already bounds the
    /// depth (`json::MAX_DEPTH`). `field` is the nearest property name.
    fn check_schema_text(
        &mut self,
        key: &str,
        field: Option<&str>,
        schema: &mut Value,
        read: &mut ItemText,
    ) -> Checked<()> {
        // A string spends its own bytes where it is read; every other
        // member or element costs its share, read or not.
        if !schema.is_string() && !self.spend(key, field, 0)? {
            return Ok(());
        }
        match schema {
            Value::Object(map) => {
                for (name, child) in map.iter_mut() {
                    match (name.as_str(), &mut *child) {
                        ("title" | "description", Value::String(_)) => {
                            let part = if name == "title" {
                                "title"
                            } else {
                                "description"
                            };
                            let slot = Some(child);
                            self.clean_listed(key, field, part, slot, Place::SchemaText, read)?
                        }
                        // A fixed vocabulary, not text.
                        ("type" | "format", Value::String(word)) if is_schema_word(word) => {}
                        ("properties", Value::Object(props)) => {
                            for (prop, sub) in props.iter_mut() {
                                let shown = printable_name(prop);
                                let place = Place::PropertyName;
                                self.scan_listed(
                                    key,
                                    Some(&shown),
                                    "property name",
                                    prop,
                                    place,
                                    read,
                                )?;
                                self.check_schema_text(key, Some(&shown), sub, read)?;
                            }
                        }
                        _ => self.check_schema_text(key, field, child, read)?,
                    }
                }
                Ok(())
            }
            Value::Array(items) => items
                .iter_mut()
                .try_for_each(|v| self.check_schema_text(key, field, v, read)),
            Value::String(text) => {
                let place = Place::SchemaValue;
                self.scan_listed(key, field, "schema value", text, place, read)
            }
            _ => Ok(()),
        }
    }

    /// A value read as it is (a name, a schema value): kept for the
    /// judgement and scanned by the operator's rules.
    fn scan_listed(
        &mut self,
        key: &str,
        field: Option<&str>,
        part: &'static str,
        text: &str,
        place: Place,
        read: &mut ItemText,
    ) -> Checked<()> {
        if !self.spend(key, field, text.len())? {
            return Ok(());
        }
        read.push((place, text.to_owned()));
        self.scan_injection(key, field, part, text, TextContext::Listing)
    }

    /// Text: invisible characters removed in place (`text.rs`), then kept
    /// for the judgement.
    fn clean_listed(
        &mut self,
        key: &str,
        field: Option<&str>,
        part: &'static str,
        mut slot: Option<&mut Value>,
        place: Place,
        read: &mut ItemText,
    ) -> Checked<()> {
        let context = TextContext::Listing;
        self.clean_in(key, field, part, slot.as_deref_mut(), usize::MAX, context)?;
        if let Some(Value::String(text)) = slot {
            read.push((place, text.clone()));
        }
        Ok(())
    }
}

/// Every string of one listed item the model reads, with where it sits.
pub(super) type ItemText = Vec<(Place, String)>;

/// The words of JSON Schema's `type` and `format` vocabularies (and of the
/// formats MCP servers use): anything else in those members is read.
fn is_schema_word(word: &str) -> bool {
    word.len() <= 32
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A tool name as the specification has it (1 to 128 characters of `A-Z
/// a-z 0-9 _ - .`), with the `/` SEP-986 adds.
pub(super) fn is_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

/// A listed item's name for verdicts and refusals: its `name`, else its
/// `uri` or `uriTemplate`, made printable and short.
fn item_key(item: &Map<String, Value>) -> String {
    ["name", "uri", "uriTemplate"]
        .iter()
        .find_map(|k| item.get(*k).and_then(Value::as_str))
        .map_or_else(|| "item".to_owned(), printable_name)
}
