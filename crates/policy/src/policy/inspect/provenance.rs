//! The gateway's provenance annotation: who asked (the configured upstream
//! name, never the server's own claim), under which policy, and what the
//! gateway decided, under `_meta["dev.portcullis/provenance"]`.
//!
//! Anything an upstream writes under the gateway's own prefix is removed
//! from every message, in every mode (verdict `provenance`/`remove`): from
//! each `_meta` object at any depth (a result's, each content block's, each
//! listed item's, an embedded resource's, a notification's, an error's
//! data), however the key is spelled. The JSON parse decodes `\u`
//! escapes; the key is then read as the detectors read words
//! ([`fold_value`]: NFKC, so fullwidth forms are plain; invisible format
//! characters dropped), with case folded and every other look-alike letter
//! read as the ASCII letter it imitates (UTS #39 skeleton), so
//! `Dev.Portcullis/…`, `ｄｅｖ．ｐｏｒｔｃｕｌｌｉｓ/…`, `dev.p\u043ertcullis/…`
//! (Cyrillic o) and `dev.port\u200bcullis/…` are all the gateway's.

use std::sync::LazyLock;

use regex::bytes::Regex;
use serde_json::{json, Map, Value};

use super::{Action, Rule};
use super::{Run, Verdict};
use crate::model::Asked;
use crate::policy::detect::fold_value;
use crate::policy::sanitize::has_hidden_characters;

/// The `_meta` key under which the gateway annotates what it let through.
pub const PROVENANCE_KEY: &str = "dev.portcullis/provenance";

/// The gateway's `_meta` namespace, folded.
const NAMESPACE: &str = "dev.portcullis";

/// Whether a `_meta` key (as parsed) is in the gateway's namespace, however
/// it is spelled: folded (see the module documentation), after anything
/// that is no ASCII letter or digit at its start, it begins `dev.portcullis`.
pub fn is_gateway_key(key: &str) -> bool {
    let folded = if key.is_ascii() {
        key.to_ascii_lowercase()
    } else {
        fold_key(key)
    };
    folded
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .starts_with(NAMESPACE)
}

/// A non-ASCII key read as the detectors read a word, with each remaining
/// look-alike letter as the ASCII letter it imitates.
fn fold_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut buf = [0u8; 4];
    for c in fold_value(key).chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
            continue;
        }
        if has_hidden_characters(c.encode_utf8(&mut buf))
            || unicode_normalization::char::is_combining_mark(c)
        {
            continue;
        }
        for lower in c.to_lowercase() {
            for s in unicode_security::skeleton(lower.encode_utf8(&mut buf)) {
                if s.is_ascii() {
                    out.push(s.to_ascii_lowercase());
                } else if !unicode_normalization::char::is_combining_mark(s) {
                    out.push(s);
                }
            }
        }
    }
    out
}

static PORTCULLIS: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new("(?i-u)portcullis").ok());

/// Whether raw JSON may hold a key [`is_gateway_key`] would find: `false`
/// only when it is plain ASCII without a `\u` escape and without
/// `portcullis` in any case, since such a key holds that word as written.
pub(crate) fn may_carry_gateway_key(raw: &[u8]) -> bool {
    !raw.is_ascii()
        || memchr::memmem::find(raw, b"\\u").is_some()
        || PORTCULLIS.as_ref().is_none_or(|re| re.is_match(raw))
}

impl Run<'_> {
    /// Removes every key in the gateway's namespace from every `_meta`
    /// object in `value`, at any depth (the strict parse bounds it).
    pub(super) fn strip_namespace(&mut self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(meta)) = map.get_mut("_meta") {
                    let before = meta.len();
                    meta.retain(|k, _| !is_gateway_key(k));
                    let removed = before - meta.len();
                    if removed > 0 {
                        let detail = format!("_meta: {removed} key(s) in the gateway's namespace");
                        self.note(Rule::Provenance, Action::Remove, None, None, Some(detail));
                    }
                }
                map.values_mut().for_each(|v| self.strip_namespace(v));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.strip_namespace(v)),
            _ => {}
        }
    }

    /// [`Self::strip_namespace`] on the value parsed from `raw`, when the
    /// bytes may hold such a key: whether any was removed.
    pub(super) fn strip_namespace_in(&mut self, raw: &[u8], value: &mut Value) -> bool {
        if !may_carry_gateway_key(raw) {
            return false;
        }
        let before = self.report.verdicts.len();
        self.strip_namespace(value);
        self.report.verdicts.len() > before
    }

    /// A list is annotated only when an enforcing gateway decided something
    /// about it (an item removed or flagged, invisible characters
    /// removed): the annotation names each item and why. A clean result,
    /// or any result under a monitoring policy, stays byte for byte the
    /// upstream's. Whether the result changed.
    pub(super) fn annotate_listing(&mut self, result: &mut Value) -> bool {
        let decided = self.enforcing()
            && self
                .report
                .verdicts
                .iter()
                .any(|v| v.action != Action::Pass);
        let changed = self.report.verdicts.iter().any(Verdict::rewrites);
        match result {
            Value::Object(obj) if decided => {
                self.annotate(obj);
                true
            }
            _ => changed,
        }
    }

    /// The gateway's annotation replaces anything the upstream wrote under
    /// the gateway's own `_meta` prefix.
    pub(super) fn annotate(&mut self, obj: &mut Map<String, Value>) {
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        let Value::Object(meta) = meta else { return };
        meta.retain(|k, _| !is_gateway_key(k));
        let verdicts: Vec<Value> = self
            .report
            .verdicts
            .iter()
            .map(|v| {
                let mut o = Map::new();
                o.insert("rule".into(), v.rule.as_str().into());
                o.insert("action".into(), v.action.as_str().into());
                if let Some(k) = &v.key {
                    o.insert("key".into(), k.clone().into());
                }
                if let Some(f) = &v.field {
                    o.insert("field".into(), f.clone().into());
                }
                if let Some(d) = &v.detail {
                    o.insert("detail".into(), d.clone().into());
                }
                Value::Object(o)
            })
            .collect();
        let urls: Map<String, Value> = self
            .report
            .asked
            .iter()
            .filter_map(|(k, a)| match a {
                Asked::Url { host } if !host.is_empty() => {
                    Some((k.clone(), json!({ "host": host })))
                }
                _ => None,
            })
            .collect();
        let mut provenance = json!({
            "upstream": { "name": self.subject.upstream_name, "endpointHost": self.subject.upstream_host },
            "policy": self.policy.name,
            "mode": if self.enforcing() { "enforce" } else { "monitor" },
            "verdicts": verdicts,
        });
        if !urls.is_empty() {
            provenance["urls"] = Value::Object(urls);
        }
        meta.insert(PROVENANCE_KEY.into(), provenance);
    }
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&PORTCULLIS);
}
