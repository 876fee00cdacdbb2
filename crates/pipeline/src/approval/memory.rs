//! The memory of approvals a rule lets be remembered (`remember =
//! "session"` or `"caller"`, and every first use): one instance keeps them
//! in a bounded map; replicas share them through the single-use store's
//! Redis (keys with their own expiry). Only approvals are kept: a declined
//! call is asked about again. Keys are digests of the rule, upstream, tool
//! and scope (session id or caller), never the arguments' values.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::model::SharedClock;
use crate::mrtr::replay::ReplayStore;

/// How many approvals one instance keeps at most.
pub(crate) const LOCAL_CAPACITY: usize = 50_000;

/// Who a remembered approval holds for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope<'a> {
    /// One 2025-11-25 session (its sealed id).
    Session(&'a str),
    /// One caller: the identity method and the principal's name.
    Caller(&'a str, &'a str),
}

/// What an approval is remembered for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Remembered<'a> {
    pub rule: &'a str,
    pub upstream: &'a str,
    /// The tool's name at its upstream.
    pub tool: &'a str,
    pub scope: Scope<'a>,
}

impl Remembered<'_> {
    /// The key: a digest, so neither names nor ids are stored as written.
    pub(crate) fn key(&self) -> String {
        let (kind, a, b) = match self.scope {
            Scope::Session(id) => ("session", id, ""),
            Scope::Caller(method, name) => ("caller", method, name),
        };
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for part in [self.rule, self.upstream, self.tool, kind, a, b] {
            // Length-prefixed: no two different tuples give one input.
            ctx.update(&(part.len() as u64).to_be_bytes());
            ctx.update(part.as_bytes());
        }
        let sum = ctx.finish();
        let hex: String = sum.as_ref()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("approval.{hex}")
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the store of remembered approvals is unreachable")]
pub(crate) struct MemoryUnavailable;

/// Remembered approvals: in this instance, or shared.
pub(crate) enum DecisionMemory {
    Local(Mutex<Local>, SharedClock),
    Shared(Arc<ReplayStore>),
}

/// Keys with their expiry (unix seconds), and the same ordered by expiry
/// so the soonest to expire goes first when the map is full.
#[derive(Default)]
pub(crate) struct Local {
    expiry: HashMap<String, u64>,
    by_expiry: BTreeSet<(u64, String)>,
    capacity: usize,
}

impl DecisionMemory {
    pub(crate) fn local(capacity: usize, clock: SharedClock) -> DecisionMemory {
        DecisionMemory::Local(
            Mutex::new(Local {
                capacity: capacity.max(1),
                ..Default::default()
            }),
            clock,
        )
    }

    /// Shared through the single-use store (which is Redis when replicas
    /// share state; in memory it is this instance's own, unbounded by
    /// this module: prefer [`DecisionMemory::local`] then).
    pub(crate) fn shared(store: Arc<ReplayStore>) -> DecisionMemory {
        DecisionMemory::Shared(store)
    }

    /// Whether an approval for `what` is remembered and still holds.
    pub(crate) async fn recall(&self, what: &Remembered<'_>) -> Result<bool, MemoryUnavailable> {
        let key = what.key();
        match self {
            DecisionMemory::Local(map, clock) => {
                let now = clock.now_secs();
                let map = map.lock().map_err(|_| MemoryUnavailable)?;
                Ok(map.expiry.get(&key).is_some_and(|exp| *exp > now))
            }
            DecisionMemory::Shared(store) => {
                store.is_consumed(&key).await.map_err(|_| MemoryUnavailable)
            }
        }
    }

    /// Remember an approval for `what` until `expires` (unix seconds).
    pub(crate) async fn remember(
        &self,
        what: &Remembered<'_>,
        expires: u64,
    ) -> Result<(), MemoryUnavailable> {
        let key = what.key();
        match self {
            DecisionMemory::Local(map, clock) => {
                let now = clock.now_secs();
                let mut map = map.lock().map_err(|_| MemoryUnavailable)?;
                map.insert(key, expires, now);
                Ok(())
            }
            DecisionMemory::Shared(store) => store
                .consume(&key, expires)
                .await
                .map_err(|_| MemoryUnavailable),
        }
    }
}

impl Local {
    fn insert(&mut self, key: String, expires: u64, now: u64) {
        if let Some(old) = self.expiry.remove(&key) {
            self.by_expiry.remove(&(old, key.clone()));
        }
        // Expired entries go first; then, when still full, the soonest to expire.
        while let Some((exp, _)) = self.by_expiry.first() {
            if *exp > now && self.expiry.len() < self.capacity {
                break;
            }
            if let Some((_, k)) = self.by_expiry.pop_first() {
                self.expiry.remove(&k);
            }
        }
        self.by_expiry.insert((expires, key.clone()));
        self.expiry.insert(key, expires);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.expiry.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Clock, ManualClock};
    use crate::mrtr::settings::ReplayBackend;
    use std::time::Duration;

    fn what<'a>(tool: &'a str, scope: Scope<'a>) -> Remembered<'a> {
        Remembered {
            rule: "cancel",
            upstream: "rooms",
            tool,
            scope,
        }
    }

    #[tokio::test]
    async fn an_approval_holds_for_its_scope_until_it_expires() {
        let clock = ManualClock::starting_now();
        let m = DecisionMemory::local(10, clock.clone());
        let alice = Scope::Caller("jwt", "alice");
        let now = clock.now_secs();
        m.remember(&what("cancel_booking", alice), now + 60)
            .await
            .unwrap();
        assert!(m.recall(&what("cancel_booking", alice)).await.unwrap());
        assert!(!m
            .recall(&what("cancel_booking", Scope::Caller("jwt", "bob")))
            .await
            .unwrap());
        assert!(!m
            .recall(&what("cancel_booking", Scope::Caller("api_key", "alice")))
            .await
            .unwrap());
        assert!(!m.recall(&what("delete_room", alice)).await.unwrap());
        assert!(!m
            .recall(&what("cancel_booking", Scope::Session("s1")))
            .await
            .unwrap());
        clock.advance(Duration::from_secs(61));
        assert!(!m.recall(&what("cancel_booking", alice)).await.unwrap());
    }

    #[tokio::test]
    async fn the_local_memory_is_bounded() {
        let clock = ManualClock::starting_now();
        let m = DecisionMemory::local(3, clock.clone());
        let now = clock.now_secs();
        let tools = ["a", "b", "c", "d"];
        for (i, t) in tools.iter().enumerate() {
            m.remember(&what(t, Scope::Session("s")), now + 100 + i as u64)
                .await
                .unwrap();
        }
        let DecisionMemory::Local(map, _) = &m else {
            unreachable!()
        };
        assert_eq!(map.lock().unwrap().len(), 3);
        // The soonest to expire made room.
        assert!(!m.recall(&what("a", Scope::Session("s"))).await.unwrap());
        assert!(m.recall(&what("d", Scope::Session("s"))).await.unwrap());
    }

    #[tokio::test]
    async fn the_shared_memory_uses_the_single_use_store() {
        let store = Arc::new(ReplayStore::new(&ReplayBackend::Local));
        let m = DecisionMemory::shared(store.clone());
        let w = what("x", Scope::Caller("jwt", "alice"));
        assert!(!m.recall(&w).await.unwrap());
        m.remember(&w, crate::model::SystemClock.now_secs() + 60)
            .await
            .unwrap();
        assert!(m.recall(&w).await.unwrap());
        assert!(store.is_consumed(&w.key()).await.unwrap());
    }

    #[test]
    fn keys_are_digests_that_keep_parts_apart() {
        let a = what("ab", Scope::Caller("c", "")).key();
        let b = what("a", Scope::Caller("bc", "")).key();
        assert_ne!(a, b);
        assert!(!a.contains("ab") || a.starts_with("approval."));
        assert_eq!(a.len(), "approval.".len() + 32);
    }
}
