//! Data that crosses servers: per caller, keyed fingerprints of the
//! secrets and private values each upstream's results delivered to it
//! (what `policy::arguments::result_material` picks), so that such a value
//! in a call to a different upstream is found (`cross_upstream_flow`).
//!
//! A fingerprint is HMAC-SHA256 over the caller and the text, with a key
//! derived from the gateway's state keys (`StateKeys::fingerprint_key`),
//! cut to 128 bits: the value itself is never kept, and without the keys
//! a fingerprint says nothing about it. Bounded in time (`ttl` after it
//! was last delivered) and in memory (at most [`MAX_PER_CALLER`] per
//! caller, [`MAX_CALLERS`] callers; the oldest go first). With the
//! single-use store in Redis, replicas share them: one key per caller and
//! fingerprint, a set of the upstreams it came from, expiring with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ring::hmac;

use super::replay::{ReplayError, ReplayStore};

/// The most fingerprints remembered per caller (in memory).
pub const MAX_PER_CALLER: usize = 4096;
/// The most callers remembered (in memory).
pub const MAX_CALLERS: usize = 10_000;
/// How long a value delivered is remembered when no setting says.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// One caller's fingerprint: 128 bits.
pub type Fingerprint = [u8; 16];

/// What each caller was handed, by fingerprint, and from where.
pub struct FlowStore {
    local: Mutex<HashMap<Fingerprint, Caller>>,
    /// The single-use store: its Redis is where replicas share them.
    shared: Arc<ReplayStore>,
    ttl: Duration,
}

#[derive(Default)]
struct Caller {
    values: HashMap<Fingerprint, Entry>,
    last: Option<Instant>,
}

struct Entry {
    /// The upstreams that returned it (ids).
    origins: Vec<Arc<str>>,
    expires: Instant,
}

/// One text of a call to look up, and where the call holds it.
pub struct Lookup<'a> {
    pub path: &'a str,
    pub text: &'a str,
}

impl FlowStore {
    pub fn new(shared: Arc<ReplayStore>, ttl: Duration) -> FlowStore {
        FlowStore {
            local: Mutex::new(HashMap::new()),
            shared,
            ttl,
        }
    }

    /// Whether this store serves the single-use store `shared` (a reload
    /// keeps it, and what it remembers, while that does not change).
    pub fn serves(&self, shared: &Arc<ReplayStore>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }

    fn shared_redis(&self) -> bool {
        matches!(*self.shared, ReplayStore::Redis(_))
    }

    /// Remember that upstream `origin` delivered `texts` to `caller`.
    pub async fn remember(
        &self,
        key: &hmac::Key,
        caller: &str,
        origin: &str,
        texts: &[String],
    ) -> Result<(), ReplayError> {
        if texts.is_empty() {
            return Ok(());
        }
        let who = caller_id(key, caller);
        let prints: Vec<Fingerprint> = texts.iter().map(|t| fingerprint(key, &who, t)).collect();
        if self.shared_redis() {
            let keys: Vec<String> = prints.iter().map(|p| redis_key(&who, p)).collect();
            return self.shared.flows_add(&keys, origin, self.ttl).await;
        }
        self.remember_here(who, origin, &prints);
        Ok(())
    }

    fn remember_here(&self, who: Fingerprint, origin: &str, prints: &[Fingerprint]) {
        let now = Instant::now();
        let expires = now + self.ttl;
        let Ok(mut callers) = self.local.lock() else {
            return;
        };
        if !callers.contains_key(&who) && callers.len() >= MAX_CALLERS {
            forget_oldest_caller(&mut callers, now);
        }
        let caller = callers.entry(who).or_default();
        caller.last = Some(now);
        for p in prints {
            if !caller.values.contains_key(p) && caller.values.len() >= MAX_PER_CALLER {
                caller.values.retain(|_, e| e.expires > now);
                if caller.values.len() >= MAX_PER_CALLER {
                    forget_soonest(&mut caller.values);
                }
            }
            let entry = caller.values.entry(*p).or_insert_with(|| Entry {
                origins: Vec::new(),
                expires,
            });
            entry.expires = expires;
            if !entry.origins.iter().any(|o| &**o == origin) && entry.origins.len() < 8 {
                entry.origins.push(Arc::from(origin));
            }
        }
    }

    /// Whether `caller` may have anything remembered (`false` only when
    /// this instance knows it has not: memory, nothing kept).
    pub fn may_hold(&self, key: &hmac::Key, caller: &str) -> bool {
        if self.shared_redis() {
            return true;
        }
        let who = caller_id(key, caller);
        self.local
            .lock()
            .map(|c| c.get(&who).is_some_and(|c| !c.values.is_empty()))
            .unwrap_or(true)
    }

    /// The texts of a call to `target` that another upstream delivered to
    /// `caller`: (path, that upstream's id), in the order given.
    pub async fn find(
        &self,
        key: &hmac::Key,
        caller: &str,
        target: &str,
        texts: &[Lookup<'_>],
    ) -> Result<Vec<(String, String)>, ReplayError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let who = caller_id(key, caller);
        let prints: Vec<Fingerprint> = texts
            .iter()
            .map(|t| fingerprint(key, &who, t.text))
            .collect();
        let origins: Vec<Vec<String>> = if self.shared_redis() {
            let keys: Vec<String> = prints.iter().map(|p| redis_key(&who, p)).collect();
            self.shared.flows_members(&keys).await?
        } else {
            self.found_here(&who, &prints)
        };
        let mut hits = Vec::new();
        for (t, from) in texts.iter().zip(origins) {
            // Delivered by the target itself too: not crossing.
            if from.iter().any(|o| o == target) {
                continue;
            }
            if let Some(origin) = from.into_iter().next() {
                if !hits.iter().any(|(p, _): &(String, String)| p == t.path) {
                    hits.push((t.path.to_owned(), origin));
                }
            }
        }
        Ok(hits)
    }

    fn found_here(&self, who: &Fingerprint, prints: &[Fingerprint]) -> Vec<Vec<String>> {
        let now = Instant::now();
        let Ok(callers) = self.local.lock() else {
            return vec![Vec::new(); prints.len()];
        };
        let Some(caller) = callers.get(who) else {
            return vec![Vec::new(); prints.len()];
        };
        prints
            .iter()
            .map(|p| match caller.values.get(p) {
                Some(e) if e.expires > now => e.origins.iter().map(|o| o.to_string()).collect(),
                _ => Vec::new(),
            })
            .collect()
    }
}

/// A caller as the store names it: its own fingerprint.
fn caller_id(key: &hmac::Key, caller: &str) -> Fingerprint {
    cut(hmac::sign(key, format!("caller\0{caller}").as_bytes()).as_ref())
}

fn fingerprint(key: &hmac::Key, who: &Fingerprint, text: &str) -> Fingerprint {
    let mut ctx = hmac::Context::with_key(key);
    ctx.update(b"value\0");
    ctx.update(who);
    ctx.update(text.as_bytes());
    cut(ctx.sign().as_ref())
}

fn cut(tag: &[u8]) -> Fingerprint {
    let mut out = [0u8; 16];
    out.copy_from_slice(&tag[..16]);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn redis_key(who: &Fingerprint, print: &Fingerprint) -> String {
    format!("portcullis:flow:{}:{}", hex(who), hex(print))
}

fn forget_soonest(values: &mut HashMap<Fingerprint, Entry>) {
    if let Some(k) = values
        .iter()
        .min_by_key(|(_, e)| e.expires)
        .map(|(k, _)| *k)
    {
        values.remove(&k);
    }
}

fn forget_oldest_caller(callers: &mut HashMap<Fingerprint, Caller>, now: Instant) {
    callers.retain(|_, c| c.values.values().any(|e| e.expires > now));
    if callers.len() < MAX_CALLERS {
        return;
    }
    if let Some(k) = callers.iter().min_by_key(|(_, c)| c.last).map(|(k, _)| *k) {
        callers.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrtr::settings::ReplayBackend;

    fn key() -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA256, b"0123456789abcdef0123456789abcdef")
    }

    fn store() -> FlowStore {
        FlowStore::new(
            Arc::new(ReplayStore::new(&ReplayBackend::Local)),
            DEFAULT_TTL,
        )
    }

    fn look<'a>(path: &'a str, text: &'a str) -> Lookup<'a> {
        Lookup { path, text }
    }

    #[tokio::test]
    async fn a_value_from_one_upstream_is_found_going_to_another() {
        let s = store();
        let k = key();
        assert!(!s.may_hold(&k, "api_key:alice"));
        s.remember(&k, "api_key:alice", "vault", &["s3cr3t-value".into()])
            .await
            .unwrap();
        assert!(s.may_hold(&k, "api_key:alice"));
        let texts = [look("/body", "s3cr3t-value"), look("/to", "bob")];
        let hits = s
            .find(&k, "api_key:alice", "webhook", &texts)
            .await
            .unwrap();
        assert_eq!(hits, [("/body".to_owned(), "vault".to_owned())]);
        // Back to where it came from: no crossing.
        assert!(s
            .find(&k, "api_key:alice", "vault", &texts)
            .await
            .unwrap()
            .is_empty());
        // Another caller was never handed it.
        assert!(s
            .find(&k, "api_key:bob", "webhook", &texts)
            .await
            .unwrap()
            .is_empty());
        // Another key (another cluster) finds nothing.
        let other = hmac::Key::new(hmac::HMAC_SHA256, b"another key entirely, 32 bytes!!");
        assert!(s
            .find(&other, "api_key:alice", "webhook", &texts)
            .await
            .unwrap()
            .is_empty());
    }

    #[tokio::test]
    async fn memory_is_bounded_and_forgets_in_time() {
        let s = FlowStore::new(
            Arc::new(ReplayStore::new(&ReplayBackend::Local)),
            Duration::from_millis(30),
        );
        let k = key();
        let many: Vec<String> = (0..MAX_PER_CALLER + 10)
            .map(|i| format!("value-{i:08}"))
            .collect();
        s.remember(&k, "c", "a", &many).await.unwrap();
        let kept = s
            .local
            .lock()
            .unwrap()
            .values()
            .map(|c| c.values.len())
            .sum::<usize>();
        assert!(kept <= MAX_PER_CALLER, "{kept}");
        tokio::time::sleep(Duration::from_millis(60)).await;
        let texts = [look("/x", "value-00000001")];
        assert!(s.find(&k, "c", "b", &texts).await.unwrap().is_empty());
    }

    #[test]
    fn fingerprints_never_hold_the_value() {
        let k = key();
        let who = caller_id(&k, "alice");
        let p = fingerprint(&k, &who, "hunter2-hunter2");
        assert_eq!(p.len(), 16);
        assert!(!hex(&p).contains("hunter2"));
        assert_ne!(p, fingerprint(&k, &caller_id(&k, "bob"), "hunter2-hunter2"));
    }
}
