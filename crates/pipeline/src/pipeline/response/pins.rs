//! A list's items against the pins (rug pulls), after the policy
//! inspection passed and the permissions filtered: each item of every
//! catalogue member present (`tools`, `prompts`, `resources`,
//! `resourceTemplates`), as the client will receive it, is digested
//! (`listings::digest`) and compared with what the gateway pinned for this
//! upstream (`listings`). A changed definition is removed from the list
//! (`on_change = "remove"`, in a policy that enforces), delivered and
//! recorded (`flag`, or `remove` in `monitor` mode), or pinned in place
//! of the old one (`allow`). A removed item is named under the list's
//! `_meta["dev.portcullis/removed"]`; the old definition is never served in
//! its place: the gateway keeps digests (and, for the operator's review,
//! the held new definition), and the upstream runs the new one whatever
//! the list says.
//!
//! The in-memory store answers at once; Redis is asked after the
//! inspection (a [`Held`] message: the stream keeps the events after it
//! waiting), bounded by its timeout. When it cannot be asked, `remove`
//! refuses the list (`listing_store_unavailable`): delivering it unchecked
//! would deliver what the policy holds; `flag` and `allow` deliver it.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::disposition::{Disposition, Held};
use super::exchange::{reencode_failed, response_bytes, Exchange};
use crate::audit::{AuditContext, AuditEvent};
use crate::listings::{canonical_text, digest_of, Change, ItemKind, Seen, StoreError};
use crate::model::{Fallback, Reason, Refusal, StoreUser};
use crate::pipeline::Gateway;
use crate::policy::config::{Mode, OnChange};
use crate::policy::inspect::list_members;

/// The `_meta` key of a list under which the gateway names what it removed.
pub(crate) const REMOVED_KEY: &str = "dev.portcullis/removed";

/// One listed item: what it is and where it is in the result (several
/// places when the list names it more than once: they are one definition,
/// digested together in order, and removed together).
struct Listed {
    kind: ItemKind,
    indices: Vec<usize>,
    name: String,
}

/// A list's comparison with the pins, from the inspection to the decision.
struct Pinning {
    gateway: Arc<Gateway>,
    audit_at: Option<AuditContext>,
    upstream: String,
    /// What a change becomes: `removed`, `flagged`, `monitor` or `allowed`.
    action: &'static str,
    listed: Vec<Listed>,
    seen: Vec<Seen>,
    value: Value,
    id: Option<Box<RawValue>>,
    /// The inspection or the permissions changed the result already.
    rewritten: bool,
    unchanged: Disposition,
    /// Who the list is delivered to, and which kinds it lists whole.
    delivered_to: super::contracts::DeliveredTo,
}

impl Exchange {
    /// The list's items against the pins; what to deliver. `rewritten`:
    /// whether `value` differs from what the upstream sent.
    pub(super) fn pinned(
        &self,
        id: Option<&RawValue>,
        value: &mut Value,
        rewritten: bool,
        unchanged: Disposition,
    ) -> Disposition {
        let (listed, seen) = items(value);
        let ctx = &self.ctx;
        let delivered_to = super::contracts::DeliveredTo::of(ctx, value);
        if listed.is_empty() {
            delivered_to.record(value, &[]);
            return deliver(id, value, rewritten, unchanged);
        }
        let policy = &ctx.route.upstream.settings.policy;
        let action = match (policy.on_change, policy.mode) {
            (OnChange::Remove, Mode::Enforce) => "removed",
            (OnChange::Remove, Mode::Monitor) => "monitor",
            (OnChange::Flag, _) => "flagged",
            (OnChange::Allow, _) => "allowed",
        };
        let gateway = ctx.gateway.clone();
        let audit_at = gateway.audit.enabled().then(|| ctx.audit_context());
        let pinning = Pinning {
            gateway,
            audit_at,
            upstream: ctx.route.upstream.settings.id.clone(),
            action,
            listed,
            seen,
            value: std::mem::take(value),
            id: id.map(|i| i.to_owned()),
            rewritten,
            unchanged,
            delivered_to,
        };
        let store = pinning.gateway.listings.clone();
        let hold = policy.on_change != OnChange::Allow;
        if let Some(memory) = store.memory() {
            let changes = memory.observe(&pinning.upstream, &pinning.seen, hold);
            return pinning.decide(Ok(changes));
        }
        Disposition::Held(Held::new(async move {
            let changes = store.observe(&pinning.upstream, &pinning.seen, hold).await;
            pinning.decide(changes)
        }))
    }
}

/// Every item with a name (a URI, a URI template) of every catalogue
/// member present, its canonical text and its digest (of every definition
/// in order, as a JSON array, when one name is listed more than once).
fn items(value: &Value) -> (Vec<Listed>, Vec<Seen>) {
    let mut listed: Vec<Listed> = Vec::new();
    let mut texts: Vec<Vec<String>> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut fields: Vec<String> = Vec::new();
    for member in list_members() {
        let (Some(kind), Some(Value::Array(items))) =
            (ItemKind::of_member(member), value.get(member))
        else {
            continue;
        };
        for (index, item) in items.iter().enumerate() {
            let Some(name) = item.get(kind.identity).and_then(Value::as_str) else {
                continue;
            };
            let field = kind.field(name);
            if let Some(&i) = at.get(&field) {
                listed[i].indices.push(index);
                texts[i].push(canonical_text(item));
                continue;
            }
            at.insert(field.clone(), listed.len());
            texts.push(vec![canonical_text(item)]);
            fields.push(field);
            listed.push(Listed {
                kind,
                indices: vec![index],
                name: name.to_owned(),
            });
        }
    }
    let seen = fields
        .into_iter()
        .zip(texts)
        .map(|(field, mut t)| {
            let text = if t.len() == 1 {
                t.pop().unwrap_or_default()
            } else {
                format!("[{}]", t.join(","))
            };
            Seen {
                field,
                digest: digest_of(&text),
                text,
            }
        })
        .collect();
    (listed, seen)
}

/// What the client gets: the upstream's bytes when nothing changed.
fn deliver(
    id: Option<&RawValue>,
    value: &Value,
    rewritten: bool,
    unchanged: Disposition,
) -> Disposition {
    if !rewritten {
        return unchanged;
    }
    let Some(bytes) = response_bytes(id, value) else {
        return Disposition::Refuse(reencode_failed());
    };
    match unchanged {
        Disposition::Notify => Disposition::NotifyRewritten(bytes),
        _ => Disposition::FinalRewritten(bytes),
    }
}

impl Pinning {
    fn decide(self, changes: Result<Vec<Change>, StoreError>) -> Disposition {
        let metrics = &self.gateway.metrics;
        let changes = match changes {
            Ok(c) => c,
            Err(StoreError::Unavailable) => {
                for l in &self.listed {
                    metrics.listing_changed(&self.upstream, l.kind.kind, "unavailable");
                }
                if self.action == "removed" {
                    return Disposition::Refuse(Refusal::new(
                        Reason::ListingStoreUnavailable,
                        "the gateway cannot compare this list with the definitions it pinned (its store is unreachable); try again",
                    ));
                }
                metrics.store_fell_back(StoreUser::Listings, Fallback::Unchecked);
                return self.finish(&[]);
            }
        };
        let mut removed = Vec::new();
        for ((listed, seen), change) in self.listed.iter().zip(&self.seen).zip(changes) {
            let kind = listed.kind.kind;
            let action = match change {
                Change::Same | Change::Pinned => continue,
                Change::Unpinned => {
                    metrics.listing_changed(&self.upstream, kind, "unpinned");
                    continue;
                }
                Change::Repinned => "allowed",
                Change::Held { .. } => self.action,
            };
            if action == "removed" {
                removed.push(listed);
            }
            // Once per new definition; an item removed stays removed.
            if matches!(change, Change::Held { first: false }) {
                continue;
            }
            metrics.listing_changed(&self.upstream, kind, action);
            if let Some(at) = &self.audit_at {
                let event =
                    AuditEvent::listing_changed(kind, &listed.name, action, Some(&seen.digest));
                self.gateway.audit.emit(at, event);
            }
        }
        let mut removed: Vec<(ItemKind, usize, String)> = removed
            .into_iter()
            .flat_map(|l| l.indices.iter().map(|i| (l.kind, *i, l.name.clone())))
            .collect();
        removed.sort_by_key(|(kind, index, _)| (kind.member, *index));
        self.finish(&removed)
    }

    /// Take the removed items out (named under the list's `_meta`) and
    /// build what the client gets.
    fn finish(mut self, removed: &[(ItemKind, usize, String)]) -> Disposition {
        let kept: Vec<super::contracts::Kept<'_>> = self
            .listed
            .iter()
            .zip(&self.seen)
            .filter(|(l, _)| {
                !removed
                    .iter()
                    .any(|(k, i, _)| *k == l.kind && l.indices.contains(i))
            })
            .map(|(l, s)| (l.kind, l.indices[0], l.name.as_str(), s.digest.as_str()))
            .collect();
        self.delivered_to.record(&self.value, &kept);
        drop(kept);
        if removed.is_empty() {
            return deliver(
                self.id.as_deref(),
                &self.value,
                self.rewritten,
                self.unchanged,
            );
        }
        for (kind, index, _) in removed.iter().rev() {
            if let Some(Value::Array(items)) = self.value.get_mut(kind.member) {
                if *index < items.len() {
                    items.remove(*index);
                }
            }
        }
        let mut named: Vec<Value> = removed
            .iter()
            .map(|(kind, _, name)| {
                json!({"kind": kind.kind, "name": name, "reason": Reason::ListingChanged.as_str()})
            })
            .collect();
        let mut once = std::collections::HashSet::new();
        named.retain(|n| once.insert(n.to_string()));
        if let Value::Object(result) = &mut self.value {
            let meta = result
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                match meta.get_mut(REMOVED_KEY) {
                    Some(Value::Array(before)) => before.extend(named),
                    _ => {
                        meta.insert(REMOVED_KEY.to_owned(), Value::Array(named));
                    }
                }
            }
        }
        deliver(self.id.as_deref(), &self.value, true, self.unchanged)
    }
}
