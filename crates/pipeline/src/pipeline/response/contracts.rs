//! A list as it leaves the gateway, recorded as the contracts the caller's
//! calls are checked against (`listings::delivered`): the items delivered
//! (after the rules and the pins took theirs out), each under the pins'
//! digest of its definition, and which kinds the list holds whole (a first
//! page without a next one).

use serde_json::Value;

use crate::listings::delivered::Item;
use crate::listings::ItemKind;
use crate::pipeline::ctx::RequestCtx;
use crate::pipeline::Gateway;

/// One item delivered: its kind, where it is in its list member, its name
/// and digest.
pub(super) type Kept<'a> = (ItemKind, usize, &'a str, &'a str);

/// Whom a list is delivered to, from which upstream, and its whole kinds.
pub(super) struct DeliveredTo {
    gateway: std::sync::Arc<Gateway>,
    upstream: String,
    caller: String,
    whole: Vec<ItemKind>,
}

impl DeliveredTo {
    pub(super) fn of(ctx: &RequestCtx, value: &Value) -> DeliveredTo {
        let last_page = !ctx.request.paged && value.get("nextCursor").is_none_or(Value::is_null);
        let whole = match last_page {
            true => crate::listings::KINDS
                .iter()
                .copied()
                .filter(|k| value.get(k.member).is_some_and(Value::is_array))
                .collect(),
            false => Vec::new(),
        };
        DeliveredTo {
            gateway: ctx.gateway.clone(),
            upstream: ctx.route.upstream.settings.id.clone(),
            caller: ctx.binding().principal_key(),
            whole,
        }
    }

    /// Record the `kept` items of `value` (before anything is removed from it).
    pub(super) fn record(&self, value: &Value, kept: &[Kept<'_>]) {
        let items: Vec<Item<'_>> = kept
            .iter()
            .filter_map(|&(kind, index, name, digest)| {
                let definition = value.get(kind.member)?.get(index)?;
                Some(Item {
                    kind,
                    name,
                    digest,
                    definition,
                })
            })
            .collect();
        if items.is_empty() && self.whole.is_empty() {
            return;
        }
        let delivered = &self.gateway.listings.delivered;
        delivered.record(&self.upstream, &self.caller, &items, &self.whole);
    }
}
