//! The definitions the gateway delivered, per upstream and caller: the
//! contracts calls are checked against (`policy::arguments`). Recorded
//! where a list leaves the gateway (`pipeline::response::pins`, after the
//! rules and the pins decided what is delivered), keyed by the pins' own
//! item digests: one compiled contract per definition, shared by every
//! caller it was delivered to, compiled on its first call.
//!
//! A caller's catalogue knows, per kind, whether it holds the whole list
//! (a first page without a next one, or the gateway's own fetch of every
//! page) and when it was made. A call naming an item the catalogue lacks
//! gets the gateway's own fetch of the list (a stateless client that never
//! listed, another replica's client, a server that added a tool since), at
//! most once per [`REFETCH_AFTER`] per caller and kind; only an item
//! missing from a whole list made or asked again less than that ago is
//! `not_listed`.
//!
//! Per instance, in memory: at most [`MAX_CATALOGUES`] (upstream, caller)
//! catalogues, the least recently used going first; a reload keeps them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::digest::ItemKind;
use crate::policy::arguments::Contract;

/// The most (upstream, caller) catalogues kept.
pub const MAX_CATALOGUES: usize = 10_000;
/// The least time between two of the gateway's own fetches of one list
/// for one caller.
pub const REFETCH_AFTER: Duration = Duration::from_secs(5);

/// The kinds a catalogue holds, by their index.
const KINDS: [&str; 3] = ["tool", "prompt", "resource_template"];

type Key = (String, String);

/// A [`Key`] looked up by borrowed names, so a call's look-up allocates
/// nothing: `(String, String)` hashes as its two strings one after the
/// other, and so does this.
trait Names {
    fn names(&self) -> (&str, &str);
}

impl Names for Key {
    fn names(&self) -> (&str, &str) {
        (&self.0, &self.1)
    }
}

impl Names for (&str, &str) {
    fn names(&self) -> (&str, &str) {
        *self
    }
}

impl<'a> std::borrow::Borrow<dyn Names + 'a> for Key {
    fn borrow(&self) -> &(dyn Names + 'a) {
        self
    }
}

impl std::hash::Hash for dyn Names + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (a, b) = self.names();
        a.hash(state);
        b.hash(state);
    }
}

impl PartialEq for dyn Names + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.names() == other.names()
    }
}

impl Eq for dyn Names + '_ {}

/// `kind:name` (the item's field, [`ItemKind::field`]) built on the stack
/// for a look-up.
fn with_field<R>(kind: ItemKind, name: &str, f: impl FnOnce(&str) -> R) -> R {
    let mut buf: smallvec::SmallVec<[u8; 64]> = smallvec::SmallVec::new();
    buf.extend_from_slice(kind.kind.as_bytes());
    buf.push(b':');
    buf.extend_from_slice(name.as_bytes());
    match std::str::from_utf8(&buf) {
        Ok(field) => f(field),
        Err(_) => f(&kind.field(name)),
    }
}

#[derive(Default)]
pub struct Delivered {
    catalogues: Mutex<HashMap<Key, Catalogue>>,
    /// Compiled contracts by the digest of the definition.
    contracts: Mutex<HashMap<String, Weak<Contract>>>,
    /// One fetch at a time per (upstream, caller).
    fetching: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
}

#[derive(Default)]
struct Catalogue {
    items: HashMap<String, Arc<Contract>>,
    /// Per kind: when the whole list was recorded.
    whole: [Option<Instant>; 3],
    /// Per kind: when the gateway last fetched it itself.
    fetched: [Option<Instant>; 3],
    used: Option<Instant>,
}

/// One delivered item.
pub struct Item<'a> {
    pub kind: ItemKind,
    pub name: &'a str,
    pub digest: &'a str,
    pub definition: &'a Value,
}

/// What the catalogue says of an item.
pub enum Found {
    Listed(Arc<Contract>),
    /// Not in a whole list recorded (or asked again) less than
    /// [`REFETCH_AFTER`] ago.
    NotListed,
    /// Not known: the list should be fetched (unless it was just now).
    Unknown {
        fetch: bool,
    },
}

fn index(kind: &str) -> Option<usize> {
    KINDS.iter().position(|k| *k == kind)
}

impl Delivered {
    /// Record items delivered to `caller` from `upstream`; `whole`: the
    /// kinds whose whole list they are.
    pub fn record(&self, upstream: &str, caller: &str, items: &[Item<'_>], whole: &[ItemKind]) {
        let now = Instant::now();
        let contracts: Vec<(String, Arc<Contract>)> = items
            .iter()
            .filter(|i| index(i.kind.kind).is_some())
            .map(|i| (i.kind.field(i.name), self.contract(i)))
            .collect();
        let Ok(mut all) = self.catalogues.lock() else {
            return;
        };
        let key = (upstream.to_owned(), caller.to_owned());
        if !all.contains_key(&key) && all.len() >= MAX_CATALOGUES {
            evict(&mut all);
        }
        let catalogue = all.entry(key).or_default();
        for kind in whole {
            if let Some(k) = index(kind.kind) {
                let prefix = format!("{}:", kind.kind);
                catalogue.items.retain(|f, _| !f.starts_with(&prefix));
                catalogue.whole[k] = Some(now);
            }
        }
        catalogue.items.extend(contracts);
        catalogue.used = Some(now);
    }

    /// The contract of a definition: the one already compiled for its
    /// digest, or a new one.
    fn contract(&self, item: &Item<'_>) -> Arc<Contract> {
        let make = || {
            Arc::new(match item.kind.kind {
                "tool" => Contract::tool(item.definition),
                "prompt" => Contract::prompt(item.definition),
                _ => Contract::template(),
            })
        };
        let Ok(mut contracts) = self.contracts.lock() else {
            return make();
        };
        let key = format!("{}:{}", item.kind.kind, item.digest);
        if let Some(c) = contracts.get(&key).and_then(Weak::upgrade) {
            return c;
        }
        if contracts.len() >= MAX_CATALOGUES {
            contracts.retain(|_, w| w.strong_count() > 0);
        }
        let c = make();
        contracts.insert(key, Arc::downgrade(&c));
        c
    }

    /// What `caller`'s catalogue of `upstream` says of `kind:name`.
    pub fn find(&self, upstream: &str, caller: &str, kind: ItemKind, name: &str) -> Found {
        let Some(k) = index(kind.kind) else {
            return Found::Unknown { fetch: false };
        };
        let now = Instant::now();
        let Ok(mut all) = self.catalogues.lock() else {
            return Found::Unknown { fetch: false };
        };
        let Some(c) = all.get_mut(&(upstream, caller) as &dyn Names) else {
            return Found::Unknown { fetch: true };
        };
        c.used = Some(now);
        if let Some(contract) = with_field(kind, name, |field| c.items.get(field).cloned()) {
            return Found::Listed(contract);
        }
        // A miss in a whole list is asked of the upstream again (it may have
        // added the item since), at most once per REFETCH_AFTER per caller
        // and kind: only a list that recent says the item is not listed.
        let recent =
            |t: Option<Instant>| t.is_some_and(|at| now.duration_since(at) < REFETCH_AFTER);
        if c.whole[k].is_some() && (recent(c.whole[k]) || recent(c.fetched[k])) {
            return Found::NotListed;
        }
        Found::Unknown {
            fetch: !recent(c.fetched[k]),
        }
    }

    /// The lock one fetch of `upstream`'s lists for `caller` holds.
    pub fn fetch_lock(&self, upstream: &str, caller: &str) -> Arc<tokio::sync::Mutex<()>> {
        let Ok(mut f) = self.fetching.lock() else {
            return Arc::new(tokio::sync::Mutex::new(()));
        };
        if f.len() >= MAX_CATALOGUES {
            f.retain(|_, l| Arc::strong_count(l) > 1);
        }
        f.entry((upstream.to_owned(), caller.to_owned()))
            .or_default()
            .clone()
    }

    /// The gateway fetched `kind` for `caller` itself (whatever came of it).
    pub fn fetched(&self, upstream: &str, caller: &str, kind: ItemKind) {
        let Some(k) = index(kind.kind) else { return };
        if let Ok(mut all) = self.catalogues.lock() {
            let key = (upstream.to_owned(), caller.to_owned());
            if !all.contains_key(&key) && all.len() >= MAX_CATALOGUES {
                evict(&mut all);
            }
            all.entry(key).or_default().fetched[k] = Some(Instant::now());
        }
    }
}

fn evict(all: &mut HashMap<Key, Catalogue>) {
    if let Some(k) = all
        .iter()
        .min_by_key(|(_, c)| c.used)
        .map(|(k, _)| k.clone())
    {
        all.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool() -> ItemKind {
        ItemKind::of_kind("tool").unwrap()
    }

    #[test]
    fn a_whole_list_lists_and_a_page_adds() {
        let d = Delivered::default();
        assert!(matches!(
            d.find("u", "alice", tool(), "a"),
            Found::Unknown { fetch: true }
        ));
        let def = json!({"name": "a", "inputSchema": {"type": "object"}});
        let items = [Item {
            kind: tool(),
            name: "a",
            digest: "d1",
            definition: &def,
        }];
        d.record("u", "alice", &items, &[tool()]);
        assert!(matches!(
            d.find("u", "alice", tool(), "a"),
            Found::Listed(_)
        ));
        assert!(matches!(
            d.find("u", "alice", tool(), "b"),
            Found::NotListed
        ));
        // Another caller, another upstream: their own.
        assert!(matches!(
            d.find("u", "bob", tool(), "a"),
            Found::Unknown { fetch: true }
        ));
        assert!(matches!(
            d.find("v", "alice", tool(), "a"),
            Found::Unknown { fetch: true }
        ));
        // A page (not whole) adds without dropping.
        let def_b = json!({"name": "b"});
        let page = [Item {
            kind: tool(),
            name: "b",
            digest: "d2",
            definition: &def_b,
        }];
        d.record("u", "alice", &page, &[]);
        assert!(matches!(
            d.find("u", "alice", tool(), "a"),
            Found::Listed(_)
        ));
        assert!(matches!(
            d.find("u", "alice", tool(), "b"),
            Found::Listed(_)
        ));
        // A new whole list replaces the kind.
        d.record("u", "alice", &page, &[tool()]);
        assert!(matches!(
            d.find("u", "alice", tool(), "a"),
            Found::NotListed
        ));
    }

    #[test]
    fn a_miss_in_an_older_whole_list_is_asked_again_once() {
        let d = Delivered::default();
        let def = json!({"name": "a", "inputSchema": {"type": "object"}});
        let items = [Item {
            kind: tool(),
            name: "a",
            digest: "d1",
            definition: &def,
        }];
        d.record("u", "alice", &items, &[tool()]);
        assert!(matches!(
            d.find("u", "alice", tool(), "new"),
            Found::NotListed
        ));
        // The list is older than REFETCH_AFTER: the server may have added
        // `new` since, so the gateway asks again ...
        let past = Instant::now()
            .checked_sub(REFETCH_AFTER + Duration::from_secs(1))
            .unwrap();
        let key = ("u".to_owned(), "alice".to_owned());
        d.catalogues.lock().unwrap().get_mut(&key).unwrap().whole[0] = Some(past);
        assert!(matches!(
            d.find("u", "alice", tool(), "new"),
            Found::Unknown { fetch: true }
        ));
        assert!(matches!(
            d.find("u", "alice", tool(), "a"),
            Found::Listed(_)
        ));
        // ... once: after its own fetch, a list without it says not listed.
        d.fetched("u", "alice", tool());
        assert!(matches!(
            d.find("u", "alice", tool(), "new"),
            Found::NotListed
        ));
    }

    #[test]
    fn one_contract_per_definition_and_fetches_are_spaced() {
        let d = Delivered::default();
        let def = json!({"name": "a"});
        let items = [Item {
            kind: tool(),
            name: "a",
            digest: "same",
            definition: &def,
        }];
        d.record("u", "alice", &items, &[]);
        d.record("u", "bob", &items, &[]);
        let (Found::Listed(a), Found::Listed(b)) = (
            d.find("u", "alice", tool(), "a"),
            d.find("u", "bob", tool(), "a"),
        ) else {
            panic!("listed")
        };
        assert!(Arc::ptr_eq(&a, &b));
        d.fetched("u", "alice", tool());
        assert!(matches!(
            d.find("u", "alice", tool(), "zz"),
            Found::Unknown { fetch: false }
        ));
    }
}
