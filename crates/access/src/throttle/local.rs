//! In-process limiters: governor's GCRA over a bounded keyed state store.
//!
//! Keys are not stored as strings: the caller's key is hashed once with a
//! per-process random SipHash key ([`std::collections::hash_map::RandomState`])
//! and the 64-bit digest is the map key. A check therefore never allocates,
//! and each tracked key costs a fixed ~30 bytes whatever the principal name's
//! length. Two distinct keys share a bucket only on a 64-bit collision of a
//! secretly keyed hash (about 3·10⁻¹⁰ for 100,000 live keys), which an
//! outsider cannot aim for.
//!
//! Memory bound: at most `max_keys` keys per scope. Idle keys (whose state is
//! indistinguishable from a fresh one) are evicted periodically by
//! [`LocalScope::evict_idle`]. When the map is full, a key not already
//! tracked is **not** inserted: it is charged to one shared *overflow bucket*
//! with the scope's own quota. Keys already tracked keep their exact state
//! (a flood of new names can neither evict nor reset them), and the flood as a
//! whole gets one key's worth of traffic until eviction frees room.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::{DashMapStateStore, ShrinkableKeyedStateStore};
use governor::state::{InMemoryState, NotKeyed, StateStore};
use governor::{Quota, RateLimiter};
use tokio::sync::Notify;

use super::config::Rate;

/// The map is keyed by an already-uniform 64-bit digest: hash it no further.
#[derive(Clone, Copy, Default)]
pub(crate) struct PreHashed;

#[derive(Default)]
pub(crate) struct PreHashedHasher(u64);

impl Hasher for PreHashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used for u64 keys; this is a correct fallback.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl BuildHasher for PreHashed {
    type Hasher = PreHashedHasher;
    fn build_hasher(&self) -> PreHashedHasher {
        PreHashedHasher(0)
    }
}

/// Reads a GCRA state without changing it (the closure refuses, so no write).
fn read_tat(state: &InMemoryState) -> Option<Nanos> {
    state
        .measure_and_replace(&NotKeyed::NonKey, Err::<((), Nanos), _>)
        .unwrap_err()
}

/// A keyed state store holding at most `max` keys, plus one overflow bucket.
pub(crate) struct BoundedStore {
    map: DashMapStateStore<u64, PreHashed>,
    /// Number of keys in `map`; slots are reserved before insertion so that
    /// concurrent inserts cannot overshoot `max`.
    len: AtomicUsize,
    max: usize,
    overflow: InMemoryState,
    /// Set when a new key was sent to the overflow bucket since the last
    /// eviction (asks the background task for an early sweep).
    full: AtomicBool,
    overflow_hits: AtomicU64,
    pressure: Arc<Notify>,
}

impl BoundedStore {
    fn new(max: usize, pressure: Arc<Notify>) -> Self {
        BoundedStore {
            map: DashMapStateStore::with_hasher(PreHashed),
            len: AtomicUsize::new(0),
            max,
            overflow: InMemoryState::default(),
            full: AtomicBool::new(false),
            overflow_hits: AtomicU64::new(0),
            pressure,
        }
    }

    fn reserve(&self) -> bool {
        self.len
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    fn measure<T, F, E>(&self, key: &u64, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        if let Some(state) = self.map.get(key) {
            return state.measure_and_replace(&NotKeyed::NonKey, f);
        }
        if self.reserve() {
            let mut inserted = false;
            let state = self.map.entry(*key).or_insert_with(|| {
                inserted = true;
                InMemoryState::default()
            });
            if !inserted {
                // Another thread inserted the same key first.
                self.len.fetch_sub(1, Ordering::AcqRel);
            }
            return state.measure_and_replace(&NotKeyed::NonKey, f);
        }
        self.overflow_hits.fetch_add(1, Ordering::Relaxed);
        if !self.full.load(Ordering::Relaxed) && !self.full.swap(true, Ordering::Relaxed) {
            self.pressure.notify_one();
        }
        self.overflow.measure_and_replace(&NotKeyed::NonKey, f)
    }

    fn retain(&self, drop_below: Nanos) {
        let mut removed = 0usize;
        self.map.retain(|_, state| {
            let keep = read_tat(state).is_some_and(|tat| tat > drop_below);
            removed += usize::from(!keep);
            keep
        });
        self.len.fetch_sub(removed, Ordering::AcqRel);
    }
}

/// The store as handed to governor; [`LocalScope`] keeps a second handle to
/// read its counters (governor's `RateLimiter` does not expose its store).
pub(crate) struct SharedStore(Arc<BoundedStore>);

impl StateStore for SharedStore {
    type Key = u64;

    #[inline]
    fn measure_and_replace<T, F, E>(&self, key: &u64, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        self.0.measure(key, f)
    }
}

impl ShrinkableKeyedStateStore<u64> for SharedStore {
    fn retain_recent(&self, drop_below: Nanos) {
        self.0.retain(drop_below);
    }

    fn shrink_to_fit(&self) {
        self.0.map.shrink_to_fit();
    }

    fn len(&self) -> usize {
        self.0.len.load(Ordering::Acquire)
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One scope's local limiter.
pub(crate) struct LocalScope<C: Clock = DefaultClock> {
    limiter: RateLimiter<u64, SharedStore, C, NoOpMiddleware<C::Instant>>,
    store: Arc<BoundedStore>,
    /// Most keys held since the map was last shrunk.
    high_water: AtomicUsize,
}

pub(crate) fn quota(rate: &Rate) -> Quota {
    // `parse_rate` guarantees an interval of at least 1 µs and burst ≥ 1.
    let interval = rate.interval().max(Duration::from_nanos(1));
    let burst = std::num::NonZeroU32::new(rate.burst.max(1)).expect("burst >= 1");
    Quota::with_period(interval)
        .expect("non-zero interval")
        .allow_burst(burst)
}

impl LocalScope<DefaultClock> {
    pub(crate) fn new(rate: &Rate, max_keys: usize, pressure: Arc<Notify>) -> Self {
        Self::with_clock(rate, max_keys, DefaultClock::default(), pressure)
    }
}

impl<C: Clock> LocalScope<C> {
    pub(crate) fn with_clock(
        rate: &Rate,
        max_keys: usize,
        clock: C,
        pressure: Arc<Notify>,
    ) -> Self {
        let store = Arc::new(BoundedStore::new(max_keys, pressure));
        LocalScope {
            limiter: RateLimiter::new(quota(rate), SharedStore(store.clone()), clock),
            store,
            high_water: AtomicUsize::new(0),
        }
    }

    /// Consumes one unit for `key`; on refusal, how long until one conforms.
    #[inline]
    pub(crate) fn check(&self, key: u64) -> Result<(), Duration> {
        self.limiter
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(self.limiter.clock().now()))
    }

    /// Drops keys whose state is indistinguishable from a fresh one, and
    /// returns the memory to the allocator once the map has at least halved
    /// since it was last shrunk (rehashing on every sweep would be waste).
    pub(crate) fn evict_idle(&self) {
        let before = self.limiter.len();
        let high = self
            .high_water
            .fetch_max(before, Ordering::Relaxed)
            .max(before);
        self.limiter.retain_recent();
        let after = self.limiter.len();
        if after <= high / 2 {
            self.limiter.shrink_to_fit();
            self.high_water.store(after, Ordering::Relaxed);
        }
        self.store.full.store(false, Ordering::Relaxed);
    }

    pub(crate) fn key_count(&self) -> usize {
        self.limiter.len()
    }

    /// Whether a new key was refused a slot since the last eviction.
    #[cfg(test)]
    pub(crate) fn is_full(&self) -> bool {
        self.store.full.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn overflow_hits(&self) -> u64 {
        self.store.overflow_hits.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    fn rate(count: u32, per_secs: u64, burst: u32) -> Rate {
        Rate {
            count,
            per: Duration::from_secs(per_secs),
            burst,
        }
    }

    fn scope(r: Rate, max: usize) -> (LocalScope<FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        (
            LocalScope::with_clock(&r, max, clock.clone(), Arc::new(Notify::new())),
            clock,
        )
    }

    #[test]
    fn burst_then_exact_retry_after() {
        // 10/s, burst 3: three at once, then one every 100 ms.
        let (l, clock) = scope(rate(10, 1, 3), 100);
        for _ in 0..3 {
            assert_eq!(l.check(1), Ok(()));
        }
        assert_eq!(l.check(1), Err(Duration::from_millis(100)));
        clock.advance(Duration::from_millis(40));
        assert_eq!(l.check(1), Err(Duration::from_millis(60)));
        clock.advance(Duration::from_millis(60));
        assert_eq!(l.check(1), Ok(()));
        assert_eq!(l.check(1), Err(Duration::from_millis(100)));
        // Other keys are untouched.
        assert_eq!(l.check(2), Ok(()));
    }

    #[test]
    fn per_minute_rounds() {
        // 30/m: one every 2 s, burst 30.
        let (l, _clock) = scope(rate(30, 60, 30), 100);
        for _ in 0..30 {
            assert_eq!(l.check(7), Ok(()));
        }
        assert_eq!(l.check(7), Err(Duration::from_secs(2)));
    }

    #[test]
    fn idle_keys_are_evicted_busy_ones_kept() {
        let (l, clock) = scope(rate(10, 1, 2), 100);
        for k in 0..50 {
            l.check(k).unwrap();
        }
        l.check(1000).unwrap();
        l.check(1000).unwrap();
        assert_eq!(l.key_count(), 51);
        // governor keeps a key until its state has been fresh for one
        // emission interval (100 ms): at 250 ms the single-use keys
        // (tat = 100 ms) go, key 1000 (tat = 200 ms) stays.
        clock.advance(Duration::from_millis(250));
        l.evict_idle();
        assert_eq!(l.key_count(), 1);
        clock.advance(Duration::from_secs(1));
        l.evict_idle();
        assert_eq!(l.key_count(), 0);
    }

    #[test]
    fn cap_sends_new_keys_to_a_shared_overflow_bucket() {
        let (l, clock) = scope(rate(1, 3600, 1), 10);
        for k in 0..10 {
            assert_eq!(l.check(k), Ok(()));
        }
        assert!(!l.is_full());
        // Map full: key 10 and every later new key share one bucket.
        assert_eq!(l.check(10), Ok(()));
        assert!(l.check(11).is_err());
        assert!(l.check(12).is_err());
        assert!(l.is_full());
        assert_eq!(l.key_count(), 10);
        assert_eq!(l.overflow_hits(), 3);
        // Tracked keys keep their own exact state.
        assert!(l.check(3).is_err());
        // Nothing is idle yet, so eviction frees nothing...
        l.evict_idle();
        assert_eq!(l.key_count(), 10);
        // ...until the keys' state has expired.
        clock.advance(Duration::from_secs(7201));
        l.evict_idle();
        assert_eq!(l.key_count(), 0);
        assert!(!l.is_full());
        assert_eq!(l.check(11), Ok(()));
        assert_eq!(l.key_count(), 1);
    }

    #[test]
    fn concurrent_inserts_never_exceed_the_cap() {
        let l = LocalScope::new(&rate(1, 3600, 1), 1000, Arc::new(Notify::new()));
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let l = &l;
                s.spawn(move || {
                    for k in 0..5000u64 {
                        let _ = l.check(t << 32 | k);
                        assert!(l.key_count() <= 1000);
                    }
                });
            }
        });
        assert_eq!(l.key_count(), 1000);
        assert_eq!(l.store.map.len(), 1000);
    }
}
