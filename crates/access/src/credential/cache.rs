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
/// A failed fetch is the answer for this long: the callers waiting on the
/// slot (and those right behind them) fail at once instead of each trying
/// a token endpoint that just did not answer.
const FAILURE_HOLD: Duration = Duration::from_secs(1);

enum Cached {
    Token {
        value: HeaderValue,
        fresh_until: Instant,
    },
    Failed {
        error: CredentialError,
        until: Instant,
    },
}

impl Cached {
    /// What the slot answers now, if it still holds.
    fn now(&self) -> Option<Result<HeaderValue, CredentialError>> {
        let now = Instant::now();
        match self {
            Cached::Token { value, fresh_until } if *fresh_until > now => Some(Ok(value.clone())),
            Cached::Failed { error, until } if *until > now => Some(Err(error.clone())),
            _ => None,
        }
    }
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
                    || s.try_lock().is_ok_and(|c| {
                        matches!(c.as_ref(), Some(Cached::Token { fresh_until, .. }) if *fresh_until > now)
                    })
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
        if let Some(answer) = held.as_ref().and_then(Cached::now) {
            return answer;
        }
        match fetch().await {
            Ok((value, lifetime)) => {
                let life = lifetime.map_or(DEFAULT_LIFETIME, Duration::from_secs);
                let early = EARLY.min(life / 4);
                *held = Some(Cached::Token {
                    value: value.clone(),
                    fresh_until: Instant::now() + life.saturating_sub(early),
                });
                Ok(value)
            }
            Err(error) => {
                *held = Some(Cached::Failed {
                    error: error.clone(),
                    until: Instant::now() + FAILURE_HOLD,
                });
                Err(error)
            }
        }
    }

    /// Drops what `key` holds (a token the upstream refused). A fetch in
    /// flight for it finishes and is kept: it is newer than the refused one.
    pub(super) fn forget(&self, key: &str) {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned();
        if let Some(slot) = slot {
            if let Ok(mut held) = slot.try_lock() {
                *held = None;
            }
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots.lock().unwrap().len()
    }
}
