//! The gateway's memory of what each upstream listed (rug pulls).
//!
//! Per upstream (its configured id) and item (kind and name or URI), the
//! digest of the item's definition as first seen is *pinned*: trust on
//! first use. A later listing whose item has another digest is a change:
//! it is *held* (its new digest remembered beside the pin) until an
//! operator accepts it, or pinned at once under `on_change = "allow"`. An
//! item listed again with its pinned digest is no longer held. Digests and
//! names are stored, and a held definition's text (bounded) so the operator
//! can read what they accept: an acceptance names the digest it read
//! (`portcullis listings show`, then `accept --digest`), and a definition
//! that changed again since is not pinned by it. No old definition is kept,
//! so none can be served.
//!
//! The store is in memory (per instance, kept across reloads), or in Redis
//! when the gateway has one (`[rate_limits] backend = "redis"`, else
//! `[state] single_use_backend = "redis"`), shared by every instance.

pub mod delivered;
pub mod digest;
mod memory;
mod redis;

use std::time::Duration;

use crate::config::GatewayConfig;
use crate::mrtr::settings::ReplayBackend;
pub use digest::{canonical_text, digest, digest_of, split_field, ItemKind, KINDS};

/// The most items one upstream may have pinned. Past it new items are
/// delivered unpinned (counted as `unpinned`): no pin is ever evicted, so
/// an upstream cannot flush its own pins by listing many names, and one
/// upstream cannot crowd out another's.
pub(crate) const MAX_ITEMS_PER_UPSTREAM: usize = 10_000;

/// The longest held definition kept for review, and the most bytes of
/// held definitions one upstream may have kept: past either, the digest is
/// held without its text (`listings show` says so).
pub(crate) const MAX_HELD_TEXT_BYTES: usize = 64 << 10;
pub(crate) const MAX_HELD_TEXTS_BYTES: usize = 4 << 20;

/// How long a Redis call may take when the state store's Redis is used
/// (the rate limiter's `redis_timeout` applies when that one is).
const STATE_REDIS_TIMEOUT: Duration = Duration::from_millis(500);

/// Field → digest pairs, as a store reads them.
pub(crate) type Digests = Vec<(String, String)>;

/// One item as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    /// `kind:name` ([`ItemKind::field`]).
    pub(crate) field: String,
    pub(crate) digest: String,
    /// Its canonical text (what `digest` is of), kept while it is held.
    pub(crate) text: String,
}

/// What a listing's item is, compared with the pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// As pinned.
    Same,
    /// Seen for the first time: pinned now.
    Pinned,
    /// Not as pinned: held. `first`: this definition was not held before
    /// (the audit event and the metric are written once per definition).
    Held { first: bool },
    /// Not as pinned, and pinned now in its place (`allow`).
    Repinned,
    /// Seen for the first time with the upstream's pins full.
    Unpinned,
}

/// What [`ListingStore::accept`] accepts: held definitions, each only
/// while it is still the one the operator read (its digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Each held field named, while held with the digest given.
    Digests(std::collections::BTreeMap<String, String>),
    /// The held item of that name (and kind, when given), while held with
    /// `digest`.
    Item {
        name: String,
        kind: Option<ItemKind>,
        digest: String,
    },
}

impl Selector {
    /// Whether the item held as `field` with `held` is to be pinned.
    fn matches(&self, field: &str, held: &str) -> bool {
        match self {
            Selector::Digests(d) => d.get(field).is_some_and(|want| want == held),
            Selector::Item { name, kind, digest } => named(field, name, *kind) && digest == held,
        }
    }
}

/// Whether `field` is the item `name` (of `kind`, when given).
pub fn named(field: &str, name: &str, kind: Option<ItemKind>) -> bool {
    split_field(field).is_some_and(|(k, n)| n == name && kind.is_none_or(|want| want == k))
}

/// A held definition, for review.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HeldItem {
    pub kind: &'static str,
    pub name: String,
    pub pinned: Option<String>,
    pub held: String,
    /// Its canonical JSON; `None` when it was too large to keep.
    pub text: Option<String>,
}

/// One item's entry: its pin and, when held, the definition held.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Entry {
    pub(crate) kind: &'static str,
    pub(crate) name: String,
    pub(crate) pinned: Option<String>,
    pub(crate) held: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the store of pinned listings (Redis) is unreachable")]
    Unavailable,
}

/// Where the pins live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListingBackend {
    Memory,
    Redis {
        url: String,
        timeout: Duration,
        prefix: String,
    },
}

impl ListingBackend {
    /// The gateway's Redis when it has one: the rate limiter's (its timeout
    /// and key prefix), else the single-use store's.
    pub(crate) fn of(config: &GatewayConfig) -> ListingBackend {
        if let Some(r) = &config.throttle.redis {
            return ListingBackend::Redis {
                url: r.url.clone(),
                timeout: r.timeout,
                prefix: r.key_prefix.clone(),
            };
        }
        match &config.state.replay {
            ReplayBackend::Redis(url) => ListingBackend::Redis {
                url: url.clone(),
                timeout: STATE_REDIS_TIMEOUT,
                prefix: "portcullis:".into(),
            },
            ReplayBackend::Local => ListingBackend::Memory,
        }
    }
}

/// What the gateway remembers of each upstream's listings: the pins (one
/// digest per item, shared by the instances of a cluster), and the
/// definitions it delivered to each caller, as the contracts calls are
/// checked against (`delivered.rs`, per instance).
pub struct ListingStore {
    pins: Pins,
    pub delivered: delivered::Delivered,
}

enum Pins {
    Memory(memory::Memory),
    Redis(redis::RedisPins),
}

impl ListingStore {
    pub(crate) fn new(backend: &ListingBackend) -> ListingStore {
        let pins = match backend {
            ListingBackend::Memory => Pins::Memory(memory::Memory::default()),
            ListingBackend::Redis {
                url,
                timeout,
                prefix,
            } => Pins::Redis(redis::RedisPins::new(url, *timeout, prefix)),
        };
        ListingStore {
            pins,
            delivered: delivered::Delivered::default(),
        }
    }

    /// Whether this store serves `backend` (a reload keeps it, and its memory).
    pub(crate) fn serves(&self, backend: &ListingBackend) -> bool {
        match (&self.pins, backend) {
            (Pins::Memory(_), ListingBackend::Memory) => true,
            (Pins::Redis(r), ListingBackend::Redis { url, prefix, .. }) => r.serves(url, prefix),
            _ => false,
        }
    }

    /// Report the Redis store's failures to `health` (the first call wins;
    /// the memory store cannot fail).
    pub(crate) fn report_to(&self, health: &crate::model::HealthReport) {
        if let Pins::Redis(r) = &self.pins {
            r.report_to(health);
        }
    }

    /// The in-memory store, which answers without waiting.
    pub(crate) fn memory(&self) -> Option<&memory::Memory> {
        match &self.pins {
            Pins::Memory(m) => Some(m),
            Pins::Redis(_) => None,
        }
    }

    /// Compare a listing's items with `upstream`'s pins, pinning new ones;
    /// a change is held (`hold`) or pinned in place of the old one.
    pub(crate) async fn observe(
        &self,
        upstream: &str,
        items: &[Seen],
        hold: bool,
    ) -> Result<Vec<Change>, StoreError> {
        match &self.pins {
            Pins::Memory(m) => Ok(m.observe(upstream, items, hold)),
            Pins::Redis(r) => r.observe(upstream, items, hold).await,
        }
    }

    /// Whether `upstream`'s item `field` is held.
    pub(crate) async fn is_held(&self, upstream: &str, field: &str) -> Result<bool, StoreError> {
        match &self.pins {
            Pins::Memory(m) => Ok(m.is_held(upstream, field)),
            Pins::Redis(r) => r.is_held(upstream, field).await,
        }
    }

    /// What is pinned and held for `upstream`, by kind and name.
    pub async fn entries(&self, upstream: &str) -> Result<Vec<Entry>, StoreError> {
        let (pinned, held) = match &self.pins {
            Pins::Memory(m) => m.entries(upstream),
            Pins::Redis(r) => r.entries(upstream).await?,
        };
        Ok(merge(pinned, held))
    }

    /// The held definitions of `upstream`'s item `name` (of `kind`), with
    /// their texts.
    pub async fn held(
        &self,
        upstream: &str,
        name: &str,
        kind: Option<ItemKind>,
    ) -> Result<Vec<HeldItem>, StoreError> {
        let (pinned, held, texts) = match &self.pins {
            Pins::Memory(m) => m.held(upstream),
            Pins::Redis(r) => r.held(upstream).await?,
        };
        let mut out = Vec::new();
        for (field, digest) in held {
            if !named(&field, name, kind) {
                continue;
            }
            let Some((k, n)) = split_field(&field) else {
                continue;
            };
            out.push(HeldItem {
                kind: k.kind,
                name: n.to_owned(),
                pinned: pinned
                    .iter()
                    .find(|(f, _)| *f == field)
                    .map(|(_, d)| d.clone()),
                text: texts
                    .iter()
                    .find(|(f, _)| *f == field)
                    .map(|(_, t)| t.clone())
                    .filter(|t| digest_of(t) == digest),
                held: digest,
            });
        }
        Ok(out)
    }

    /// Pin the held definitions `which` selects; the fields accepted.
    pub async fn accept(
        &self,
        upstream: &str,
        which: &Selector,
    ) -> Result<Vec<String>, StoreError> {
        match &self.pins {
            Pins::Memory(m) => Ok(m.accept(upstream, which)),
            Pins::Redis(r) => r.accept(upstream, which).await,
        }
    }
}

/// Pins and holds (field → digest) as entries sorted by kind and name.
fn merge(pinned: Digests, held: Digests) -> Vec<Entry> {
    let mut by_field: std::collections::BTreeMap<String, Entry> = Default::default();
    let fresh = |field: &str| {
        let (kind, name) = split_field(field)
            .map(|(k, n)| (k.kind, n.to_owned()))
            .unwrap_or(("unknown", field.to_owned()));
        Entry {
            kind,
            name,
            pinned: None,
            held: None,
        }
    };
    for (field, d) in pinned {
        let e = fresh(&field);
        by_field.entry(field).or_insert(e).pinned = Some(d);
    }
    for (field, d) in held {
        let e = fresh(&field);
        by_field.entry(field).or_insert(e).held = Some(d);
    }
    by_field.into_values().collect()
}
