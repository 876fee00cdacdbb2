//! The gateway's provenance annotation: who asked (the configured upstream
//! name, never the server's own claim), under which policy, and what the
//! gateway decided, under `_meta["dev.portcullis/provenance"]`. Anything an
//! upstream wrote under the gateway's own prefix is removed.

use serde_json::{json, Map, Value};

use super::Run;
use crate::model::Asked;

/// The `_meta` key under which the gateway annotates what it let through.
pub const PROVENANCE_KEY: &str = "dev.portcullis/provenance";

/// A `_meta` key in the gateway's own namespace, in any letter case.
pub(super) fn is_gateway_key(key: &str) -> bool {
    const PREFIX: &str = "dev.portcullis/";
    key.get(..PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(PREFIX))
}

impl Run<'_> {
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
                o.insert("rule".into(), v.rule.into());
                o.insert("action".into(), v.action.into());
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
