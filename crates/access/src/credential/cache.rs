//! Cached upstream tokens, one slot per key: a slot's lock is held while
//! its token is fetched, so concurrent callers of one key make one request.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::HeaderValue;

use super::CredentialError;

/// Lifetime assumed when the token endpoint gives none.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// Refreshed this long before expiry, at most (a quarter of a short life).
const EARLY: Duration = Duration::from_secs(60);
const MAX_KEYS: usize = 10_000;

struct Cached {
    value: HeaderValue,
    fresh_until: Instant,
}

type Slot = Arc<tokio::sync::Mutex<Option<Cached>>>;

#[derive(Default)]
pub(super) struct TokenCache {
    slots: Mutex<HashMap<String, Slot>>,
}

impl TokenCache {
    fn slot(&self, key: String) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.len() >= MAX_KEYS && !slots.contains_key(&key) {
            // Drop the slots nobody is using that hold nothing fresh.
            let now = Instant::now();
            slots.retain(|_, s| {
                Arc::strong_count(s) > 1
                    || s.try_lock()
                        .is_ok_and(|c| c.as_ref().is_some_and(|c| c.fresh_until > now))
            });
            if slots.len() >= MAX_KEYS {
                slots.clear();
            }
        }
        slots.entry(key).or_default().clone()
    }

    /// The cached value of `key`, or the one `fetch` obtains (kept until
    /// shortly before its lifetime ends).
    pub(super) async fn get_or_fetch<F, Fut>(
        &self,
        key: String,
        fetch: F,
    ) -> Result<HeaderValue, CredentialError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(HeaderValue, Option<u64>), CredentialError>>,
    {
        let slot = self.slot(key);
        let mut held = slot.lock().await;
        if let Some(c) = held.as_ref().filter(|c| c.fresh_until > Instant::now()) {
            return Ok(c.value.clone());
        }
        let (value, lifetime) = fetch().await?;
        let life = lifetime.map_or(DEFAULT_LIFETIME, Duration::from_secs);
        let early = EARLY.min(life / 4);
        *held = Some(Cached {
            value: value.clone(),
            fresh_until: Instant::now() + life.saturating_sub(early),
        });
        Ok(value)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots.lock().unwrap().len()
    }
}
