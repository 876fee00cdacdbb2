//! Rule: what a server lists for the model to choose from — the titles and
//! descriptions of its tools, prompts, resources and resource templates, the
//! descriptions inside a tool's input and output schemas, a prompt's
//! argument descriptions — is put into the model's context by every client
//! that offers them. Instructions hidden there ("tool poisoning") reach the
//! model before any call, so this text gets the text rules of a form: made
//! safe and scanned for prompt injection. It is never cut: the body limit
//! bounds it, and a shortened description would change what a tool means.
//! An item's `name` is never changed (it is what the client calls): one
//! that hides characters removes the item, and so does a tool's name that
//! is not a tool name of the specification (1 to 128 of `A-Z a-z 0-9 _ -
//! .`, and `/` as SEP-986 allows). Each item's icons get the icon rule
//! (`icons.rs`).

use serde_json::{Map, Value};

use super::{Checked, Run};
use crate::model::{printable_name, Reason, Refusal};
use crate::policy::injection::TextContext;
use crate::policy::sanitize::has_hidden_characters;

/// The parts of a listed item a person or a model reads.
const ITEM_TEXT: [&str; 2] = ["title", "description"];

impl Run<'_> {
    /// Clean the readable text of every item under `items` in place.
    pub(super) fn check_listing(&mut self, items: &str, result: &mut Value) -> Checked<()> {
        let list = match result.get_mut(items) {
            None => return Ok(()),
            Some(Value::Array(list)) => list,
            Some(_) => return Err(self.not_a_list(items)),
        };
        if !list.iter().all(Value::is_object) {
            return Err(self.not_a_list(items));
        }
        self.listed_as = match items {
            "prompts" => TextContext::PromptListing,
            _ => TextContext::Listing,
        };
        let mut keep = Vec::with_capacity(list.len());
        for item in list.iter_mut().filter_map(Value::as_object_mut) {
            let key = item_key(item);
            if !self.spend(&key, None, 0)? {
                break;
            }
            keep.push(self.check_item(items, &key, item)?);
        }
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
            "protocol",
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
    ) -> Checked<bool> {
        let keep = self.check_item_name(items, key, item)?;
        for part in ITEM_TEXT {
            self.clean_listed(key, None, part, item.get_mut(part))?;
        }
        if let Some(Value::Object(notes)) = item.get_mut("annotations") {
            self.clean_listed(key, None, "annotations.title", notes.get_mut("title"))?;
        }
        self.check_icons(key, item)?;
        for schema in ["inputSchema", "outputSchema"] {
            if let Some(s) = item.get_mut(schema) {
                self.check_schema_text(key, None, s)?;
            }
        }
        if let Some(Value::Array(arguments)) = item.get_mut("arguments") {
            for argument in arguments.iter_mut().filter_map(Value::as_object_mut) {
                if !self.spend(key, None, 0)? {
                    break;
                }
                let raw_name = argument.get("name").and_then(Value::as_str);
                if let Some(n) = raw_name {
                    self.scan_listed(key, None, "argument name", n)?;
                }
                let name = raw_name.map(printable_name);
                for part in ITEM_TEXT {
                    self.clean_listed(key, name.as_deref(), part, argument.get_mut(part))?;
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
    ) -> Checked<bool> {
        let Some(Value::String(name)) = item.get("name") else {
            return Ok(true);
        };
        self.scan_listed(key, None, "name", name)?;
        if has_hidden_characters(name) {
            let detail = "name: hidden characters".to_owned();
            return Ok(!self.removal("text_safety", key, detail));
        }
        self.pass("text_safety", Some(key), None, "name");
        if items == "tools" && !is_tool_name(name) {
            let detail = "name: not a tool name".to_owned();
            return Ok(!self.removal("name", key, detail));
        }
        Ok(true)
    }

    /// Every `title` and `description` string of a JSON schema, at any depth
    /// (properties, items, definitions, combinators), is cleaned and
    /// scanned; every other string (`enum`, `const`, `default`, `examples`,
    /// `$comment`, `x-` keys) and every property name, values the model
    /// reads but that cannot change without changing the schema, is
    /// scanned. None is left unread, and the strict parse already bounds the
    /// depth (`json::MAX_DEPTH`). `field` is the nearest property name.
    fn check_schema_text(
        &mut self,
        key: &str,
        field: Option<&str>,
        schema: &mut Value,
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
                        ("title", Value::String(_)) => {
                            self.clean_listed(key, field, "title", Some(child))?
                        }
                        ("description", Value::String(_)) => {
                            self.clean_listed(key, field, "description", Some(child))?
                        }
                        // A fixed vocabulary, not text.
                        ("type" | "format", Value::String(_)) => {}
                        ("properties", Value::Object(props)) => {
                            for (prop, sub) in props.iter_mut() {
                                let shown = printable_name(prop);
                                self.scan_listed(key, Some(&shown), "property name", prop)?;
                                self.check_schema_text(key, Some(&shown), sub)?;
                            }
                        }
                        _ => self.check_schema_text(key, field, child)?,
                    }
                }
                Ok(())
            }
            Value::Array(items) => items
                .iter_mut()
                .try_for_each(|v| self.check_schema_text(key, field, v)),
            Value::String(text) => self.scan_listed(key, field, "schema value", text),
            _ => Ok(()),
        }
    }

    fn scan_listed(
        &mut self,
        key: &str,
        field: Option<&str>,
        part: &'static str,
        text: &str,
    ) -> Checked<()> {
        if !self.spend(key, field, text.len())? {
            return Ok(());
        }
        self.scan_injection(key, field, part, text, self.listed_as)
    }

    fn clean_listed(
        &mut self,
        key: &str,
        field: Option<&str>,
        part: &'static str,
        slot: Option<&mut Value>,
    ) -> Checked<()> {
        self.clean_in(key, field, part, slot, usize::MAX, self.listed_as)
    }
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
