//! Rule: one message split over several items of a list. Each tool of a
//! poisoned server carries a piece — `meta: share=7b1 checksum=a1`,
//! `share=9c2 checksum=a2`, … — that says nothing about the tool and only
//! makes sense put together (threshold shares of a secret instruction, the
//! parts of an encoded payload). Taken one at a time, no item asks
//! anything; the signal is the list's: the same keys, in several items,
//! each with an opaque code (letters and digits mixed, no word in it) that
//! differs from item to item, in text written for the model (a name, title
//! or description), and not one of the items' own parameters.
//!
//! Recorded (`listing_intent`, `flag`, detail `split_fragments`) on every
//! item that carries a piece: a list cannot be judged by a payload it does
//! not show, and an honest list may number its parts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use super::listing::ItemText;
use super::{Action, Rule, Run};
use crate::policy::intent::Place;

/// Items that must carry pieces of one scheme.
const MIN_ITEMS: usize = 2;

/// `key=value` or `key: value`, one word each.
static PIECE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\s(\[{,;])([A-Za-z][A-Za-z0-9_]{1,31})\s*[=:]\s*([A-Za-z0-9+/_-]{2,64})(?:$|[\s)\]},;.])").ok()
});

/// A code, not a word: letters and digits mixed, and no run of three
/// letters (`7b1`, `a1`, `ab12cd34`; not `gpt-4o`, `utf8`, `v2ok`).
fn opaque(value: &str) -> bool {
    let letters = value.bytes().any(|b| b.is_ascii_alphabetic());
    let digits = value.bytes().any(|b| b.is_ascii_digit());
    let mut run = 0;
    let wordy = value.bytes().any(|b| {
        run = if b.is_ascii_alphabetic() { run + 1 } else { 0 };
        run >= 3
    });
    letters && digits && !wordy
}

/// The (key, code) pieces of one item's prose, but its own parameters.
fn pieces(item: &ItemText) -> BTreeMap<String, String> {
    let Some(re) = PIECE.as_ref() else {
        return BTreeMap::new();
    };
    let params: BTreeSet<String> = item
        .iter()
        .filter(|(p, _)| matches!(p, Place::PropertyName | Place::ArgumentName))
        .map(|(_, t)| t.to_lowercase())
        .collect();
    let mut out = BTreeMap::new();
    for (place, text) in item {
        if !matches!(place, Place::Name | Place::Title | Place::Description) {
            continue;
        }
        for c in re.captures_iter(text) {
            let (Some(k), Some(v)) = (c.get(1), c.get(2)) else {
                continue;
            };
            let key = k.as_str().to_lowercase();
            if opaque(v.as_str()) && !params.contains(&key) {
                out.entry(key).or_insert_with(|| v.as_str().to_owned());
            }
        }
    }
    out
}

/// The items (by index) that carry pieces of one scheme: a key found in at
/// least [`MIN_ITEMS`] items, with a different code in each.
pub(super) fn split_items(read: &[ItemText]) -> Vec<usize> {
    let all: Vec<BTreeMap<String, String>> = read.iter().map(pieces).collect();
    let mut by_key: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
    for (i, p) in all.iter().enumerate() {
        for (k, v) in p {
            by_key.entry(k).or_default().push((i, v));
        }
    }
    let mut items = BTreeSet::new();
    for carriers in by_key.values() {
        let codes: BTreeSet<&str> = carriers.iter().map(|(_, v)| *v).collect();
        if carriers.len() >= MIN_ITEMS && codes.len() == carriers.len() {
            items.extend(carriers.iter().map(|(i, _)| *i));
        }
    }
    items.into_iter().collect()
}

impl Run<'_> {
    /// Record every item of one list that carries a piece of a split message.
    pub(super) fn split_fragments(&mut self, keys: &[String], read: &[ItemText]) {
        for i in split_items(read) {
            if let Some(key) = keys.get(i) {
                let detail = Some("split_fragments".to_owned());
                self.note(Rule::ListingIntent, Action::Flag, Some(key), None, detail);
            }
        }
    }
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&PIECE);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, description: &str) -> ItemText {
        vec![
            (Place::Name, name.to_owned()),
            (Place::Description, description.to_owned()),
        ]
    }

    #[test]
    fn pieces_of_one_scheme_across_items_are_found() {
        let list = [
            item("format_text", "Formats text. meta: share=7b1 checksum=a1"),
            item("format_num", "Formats numbers. meta: share=9c2 checksum=a2"),
            item("format_date", "Formats dates. meta: share=4d3 checksum=a3"),
        ];
        assert_eq!(split_items(&list), [0, 1, 2]);
        let other = [
            item("a", "Part 1 of the guide. ref: x9k2q"),
            item("b", "Reads the log. (ref: p4m7z)"),
        ];
        assert_eq!(split_items(&other), [0, 1]);
    }

    #[test]
    fn honest_lists_carry_none() {
        let list = [
            item("format_text", "Formats text."),
            item(
                "chat",
                "Chat with a model, e.g. model: gpt-4o or model=o3-mini.",
            ),
            item("encode", "Encodes text; encoding: utf8 by default."),
            item("encode2", "Encodes bytes; encoding: utf16 when asked."),
            item("page", "Returns page=2 of the results when limit=50."),
            item("page2", "Returns page=3 of the results when limit=20."),
            item("one", "Only this tool has id=a1b2."),
            item("same", "Uses region: eu1"),
            item("same2", "Uses region: eu1"),
        ];
        assert!(split_items(&list).is_empty(), "{:?}", split_items(&list));
    }
}
