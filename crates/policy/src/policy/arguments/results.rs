//! Credentials in what a server returns (`[content] secrets`): a tool's
//! result, a resource's contents, a prompt's messages, an error's data.
//! Every string (but `_meta` and base64 payloads) is read by the one value
//! scanner; each credential found is a `result_secret` verdict, and under
//! `redact` (when the policy enforces) it is replaced by `[redacted]`
//! before the model reads it, the result's provenance saying so. Whatever
//! the setting, the gateway remembers a keyed fingerprint of it for the
//! caller (`flows.rs`), so it cannot be sent on to another upstream.
//! A tool listed as a secret store (`secret_store.rs`) returns secrets as
//! its job: under `[content] secret_stores = "deliver"` what it returns is
//! delivered as returned, without a verdict, and remembered all the same.

use serde_json::{json, Map, Value};
use std::fmt::Write as _;

use super::contract::push_segment;
use crate::policy::config::{Mode, Policy, ResultSecrets as Setting, SecretStores};
use crate::policy::inspect::{Action, Cue, RawScan, Rule, Subject, Verdict, PROVENANCE_KEY};
use crate::policy::secret_values::SecretValueScanner;

/// What the result check found and did.
#[derive(Debug, Default)]
pub struct ResultSecrets {
    pub verdicts: Vec<Verdict>,
    /// Something was redacted: the result is written again.
    pub changed: bool,
}

/// Whether a raw result may hold what the check or the caller's memory
/// reads: a pattern of the scanner, a credential word (`pass`, `token`,
/// `key`, … in any case), an escape that can spell either, or text the
/// scanner reads folded (not ASCII). The words and the escape are read
/// from the one scan of the raw JSON (`inspect/prescan.rs`).
pub fn may_hold_result_secrets(
    policy: &Policy,
    scanner: &SecretValueScanner,
    raw: &RawScan<'_>,
) -> bool {
    if !policy.reads_result_secrets() {
        return false;
    }
    raw.non_ascii()
        || raw.unicode_escape()
        || raw.credential_word()
        || raw
            .cue(Cue::Secret)
            .unwrap_or_else(|| scanner.may_match(raw.raw()))
}

/// Find, record and (per `[content] secrets`) redact the credentials in a
/// parsed result, in place; its `_meta` provenance names what was done.
pub fn inspect_result_secrets(
    policy: &Policy,
    subject: &Subject<'_>,
    scanner: &SecretValueScanner,
    result: &mut Value,
) -> ResultSecrets {
    let setting = policy.result_secrets();
    let mut out = ResultSecrets::default();
    if setting == Setting::Off {
        return out;
    }
    // A secret store's answer is what it was asked for: no finding (its
    // fingerprint is kept all the same, `result_material`).
    let asked_a_store = policy.content.secret_stores == SecretStores::Deliver
        && subject
            .catalogue
            .is_some_and(|c| c.answers_from_secret_store());
    if asked_a_store {
        return out;
    }
    let action = match (setting, policy.mode) {
        (Setting::Redact, Mode::Enforce) => Action::Redact,
        (Setting::Redact, Mode::Monitor) => Action::Monitor,
        _ => Action::Flag,
    };
    let mut at = String::new();
    walk(scanner, action, result, &mut at, &mut out);
    if out.changed {
        annotate(policy, subject, result, &out.verdicts);
    }
    out
}

fn walk(
    scanner: &SecretValueScanner,
    action: Action,
    value: &mut Value,
    at: &mut String,
    out: &mut ResultSecrets,
) {
    match value {
        Value::String(text) => {
            let scanned = scanner.find_all(text);
            if scanned.found.is_empty() {
                return;
            }
            for f in &scanned.found {
                out.verdicts.push(Verdict {
                    rule: Rule::ResultSecret,
                    action,
                    key: Some(at.clone()),
                    field: None,
                    detail: Some(f.kind.as_str().to_owned()),
                });
            }
            if action == Action::Redact {
                let redacted = super::edit::redact(text, &scanned, false);
                drop(scanned);
                *text = redacted;
                out.changed = true;
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = at.len();
                let _ = write!(at, "/{i}");
                walk(scanner, action, item, at, out);
                at.truncate(len);
            }
        }
        Value::Object(map) => {
            let binary = map
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t == "image" || t == "audio");
            for (k, v) in map.iter_mut() {
                if k == "_meta" || k == "blob" || (k == "data" && binary) {
                    continue;
                }
                let len = at.len();
                push_segment(at, k);
                walk(scanner, action, v, at, out);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

/// The gateway's provenance under the result's `_meta`, naming what it
/// redacted (the same shape as every other annotation).
fn annotate(policy: &Policy, subject: &Subject<'_>, result: &mut Value, verdicts: &[Verdict]) {
    let Value::Object(obj) = result else { return };
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Value::Object(meta) = meta else { return };
    let verdicts = verdicts.iter().map(|v| {
        json!({"rule": v.rule.as_str(), "action": v.action.as_str(), "key": v.key, "detail": v.detail})
    });
    // The content rules may have annotated the result already: one
    // annotation, their verdicts and these.
    if let Some(Value::Array(before)) = meta
        .get_mut(PROVENANCE_KEY)
        .and_then(|p| p.get_mut("verdicts"))
    {
        before.extend(verdicts);
        return;
    }
    meta.insert(
        PROVENANCE_KEY.into(),
        json!({
            "upstream": {"name": subject.upstream_name, "endpointHost": subject.upstream_host},
            "policy": policy.name,
            "mode": "enforce",
            "verdicts": verdicts.collect::<Vec<_>>(),
        }),
    );
}
