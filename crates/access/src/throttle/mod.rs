//! Throttle (data-flow step 3): rate limits per principal, per
//! principal+upstream, per principal+tool, and on the `input_required` rounds
//! a principal receives.
//!
//! Every limit is a GCRA ("N per s/m/h, bursts of B"). Two backends:
//!
//! - `local`: governor keyed limiters in this process, one per scope
//!   ([`local`] explains the memory bound: at most `max_keys` keys per scope,
//!   idle keys evicted every [`EVICT_INTERVAL`], and past the cap new keys
//!   share one overflow bucket).
//! - `redis`: the same GCRA as an atomic Lua script in Redis, so that all
//!   gateway instances share one budget ([`redis`] explains keys, expiry and
//!   outages). When Redis is unreachable, `redis_failure = "local"` answers
//!   from this instance's local limiters, `"refuse"` returns
//!   [`ThrottleError::Unavailable`].
//!
//! Configuration is validated up front by [`Throttle::build`] (no I/O);
//! [`Throttle::start`] starts the background work inside tokio.

pub(crate) mod config;
mod local;
mod redis;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use toml::Spanned;

pub use config::{validate, RawRateLimits, ThrottleSettings};
pub(crate) use config::{Rate, RateConfigError, RedisFailure};

use crate::model::{Fallback, Health, HealthReport, StoreUser};
use local::LocalScope;
use redis::{RedisAnswer, RedisBackend};

/// How often idle keys are evicted from the local limiters. A sweep also
/// runs (at most once a second) as soon as a scope reaches `max_keys`.
pub(crate) const EVICT_INTERVAL: Duration = Duration::from_secs(10);
const MIN_EVICT_SPACING: Duration = Duration::from_secs(1);

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every request of a principal.
    Principal,
    /// Requests of a principal to one upstream.
    PrincipalUpstream,
    /// Calls of a principal to one tool (of one upstream).
    PrincipalTool,
    /// `input_required` results a principal receives.
    InputRequiredRounds,
}

impl Scope {
    pub(crate) const COUNT: usize = 4;
    pub(crate) const ALL: [Scope; Scope::COUNT] = [
        Scope::Principal,
        Scope::PrincipalUpstream,
        Scope::PrincipalTool,
        Scope::InputRequiredRounds,
    ];

    /// Stable name, used in refusals (`data.scope`), metrics labels and
    /// Redis keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Principal => "principal",
            Scope::PrincipalUpstream => "principal_upstream",
            Scope::PrincipalTool => "principal_tool",
            Scope::InputRequiredRounds => "input_required_rounds",
        }
    }

    /// The key of this scope's limit in `[rate_limits]`.
    pub(crate) fn config_key(self) -> &'static str {
        match self {
            Scope::Principal => "per_principal",
            Scope::PrincipalUpstream => "per_principal_upstream",
            Scope::PrincipalTool => "per_principal_tool",
            Scope::InputRequiredRounds => "input_required_rounds",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Over the limit: which scope refused, and when one more request would
/// conform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimited {
    pub scope: Scope,
    pub retry_after: Duration,
}

impl RateLimited {
    /// `retry_after` rounded up to whole seconds, at least 1 (for the HTTP
    /// `Retry-After` header).
    pub fn retry_after_secs(&self) -> u64 {
        let d = self.retry_after;
        (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ThrottleError {
    /// Redis is down and `redis_failure = "refuse"`.
    #[error("rate limiter unavailable")]
    Unavailable,
}

struct ScopeLimiter {
    rate: Rate,
    local: LocalScope,
}

struct Inner {
    scopes: [Option<ScopeLimiter>; Scope::COUNT],
    max_keys: usize,
    /// Per-process random SipHash key for the local maps.
    hasher: RandomState,
    redis: Option<Arc<RedisBackend>>,
    started: AtomicBool,
    /// Woken when a scope's map is full, for an early eviction sweep.
    pressure: Arc<Notify>,
}

/// The rate limiter. Cheap to clone (clones share state).
#[derive(Clone)]
pub struct Throttle {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Throttle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Throttle");
        d.field("backend", &self.backend());
        for scope in Scope::ALL {
            if let Some(l) = &self.inner.scopes[scope.index()] {
                d.field(scope.as_str(), &format_args!("{}", l.rate));
            }
        }
        d.field("max_keys", &self.inner.max_keys).finish()
    }
}

impl Throttle {
    /// Validates `[rate_limits]` (absent = no limits) and builds the limiters.
    /// Does no I/O: Redis is contacted by [`Throttle::start`].
    pub fn build(raw: Option<&Spanned<RawRateLimits>>) -> Result<Throttle, RateConfigError> {
        Ok(Self::new(&config::validate(raw)?))
    }

    /// The limiters for validated settings.
    pub fn new(settings: &ThrottleSettings) -> Throttle {
        let redis = settings
            .redis
            .as_ref()
            .map(|r| Arc::new(RedisBackend::new(r)));
        Self::with_redis(settings, redis)
    }

    /// The limiters for `settings` after a reload: `old` (built from `was`)
    /// hands over its Redis connection when the Redis settings are the same,
    /// so new limits do not re-dial Redis.
    pub fn keeping(
        settings: &ThrottleSettings,
        old: &Throttle,
        was: &ThrottleSettings,
    ) -> Throttle {
        match (&settings.redis, &old.inner.redis) {
            (Some(r), Some(kept)) if was.redis.as_ref() == Some(r) => {
                Self::with_redis(settings, Some(kept.clone()))
            }
            _ => Self::new(settings),
        }
    }

    fn with_redis(settings: &ThrottleSettings, redis: Option<Arc<RedisBackend>>) -> Throttle {
        let pressure = Arc::new(Notify::new());
        let scopes = Scope::ALL.map(|scope| {
            settings.rates[scope.index()].map(|rate| ScopeLimiter {
                rate,
                local: LocalScope::new(&rate, settings.max_keys, pressure.clone()),
            })
        });
        Throttle {
            inner: Arc::new(Inner {
                scopes,
                max_keys: settings.max_keys,
                hasher: RandomState::new(),
                redis,
                started: AtomicBool::new(false),
                pressure,
            }),
        }
    }

    /// Starts the background work: idle-key eviction and, with the Redis
    /// backend, the connection (one attempt is awaited here, bounded by
    /// max(redis_timeout, 1s); if it fails, it is retried in the background
    /// every second and checks use the `redis_failure` behaviour meanwhile).
    /// Call once inside a tokio runtime; later calls do nothing.
    pub async fn start(&self) {
        if self.inner.started.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.inner.scopes.iter().any(Option::is_some) {
            tokio::spawn(evict_loop(
                Arc::downgrade(&self.inner),
                self.inner.pressure.clone(),
            ));
        }
        if let Some(redis) = &self.inner.redis {
            if !redis.connect_once().await {
                RedisBackend::spawn_connect_loop(Arc::downgrade(redis));
            }
        }
    }

    /// Checks (and consumes one unit of) the limit for `scope` and `key`.
    /// `Ok(Ok(()))`: allowed (also when the scope has no limit);
    /// `Ok(Err(_))`: over the limit; `Err(_)`: Redis unavailable and
    /// `redis_failure = "refuse"`.
    pub async fn check(
        &self,
        scope: Scope,
        key: &str,
    ) -> Result<Result<(), RateLimited>, ThrottleError> {
        self.check_parts(scope, &[key]).await
    }

    /// Like [`Throttle::check`] for a key made of several parts (e.g.
    /// principal and tool), without building a joined string. Parts are
    /// length-delimited: `["a", "bc"]` and `["ab", "c"]` are different keys.
    /// `check(s, k)` and `check_parts(s, &[k])` use the same key.
    pub async fn check_parts(
        &self,
        scope: Scope,
        parts: &[&str],
    ) -> Result<Result<(), RateLimited>, ThrottleError> {
        let Some(limiter) = &self.inner.scopes[scope.index()] else {
            return Ok(Ok(()));
        };
        if let Some(redis) = &self.inner.redis {
            // Boxed: the shared limiter's round trip is a large future, and
            // inline every request's phases would carry its size, Redis or not.
            match Box::pin(redis.check(scope, &limiter.rate, parts)).await {
                RedisAnswer::Decided(d) => return Ok(d),
                RedisAnswer::Unavailable => {
                    // A refusal is counted where every request is (its reason).
                    if redis.failure == RedisFailure::Refuse {
                        return Err(ThrottleError::Unavailable);
                    }
                    redis.report(Health::StoreFellBack(StoreUser::Throttle, Fallback::Local));
                }
            }
        }
        Ok(self.check_local(scope, limiter, parts))
    }

    #[inline]
    fn check_local(
        &self,
        scope: Scope,
        limiter: &ScopeLimiter,
        parts: &[&str],
    ) -> Result<(), RateLimited> {
        let mut h = self.inner.hasher.build_hasher();
        for p in parts {
            p.hash(&mut h);
        }
        limiter
            .local
            .check(h.finish())
            .map_err(|retry_after| RateLimited { scope, retry_after })
    }

    /// Report Redis failures and fallbacks to `health` (with the Redis
    /// backend; the first call wins, so a limiter carried across reloads
    /// keeps reporting to the same place).
    pub fn report_to(&self, health: &HealthReport) {
        if let Some(redis) = &self.inner.redis {
            redis.report_to(health);
        }
    }

    /// Whether `scope` has a configured limit.
    pub fn is_limited(&self, scope: Scope) -> bool {
        self.inner.scopes[scope.index()].is_some()
    }

    /// `"local"` or `"redis"`.
    pub fn backend(&self) -> &'static str {
        if self.inner.redis.is_some() {
            "redis"
        } else {
            "local"
        }
    }

    /// With the Redis backend: whether Redis is currently answering
    /// (`None` with the local backend). For health endpoints and metrics.
    pub fn redis_available(&self) -> Option<bool> {
        self.inner.redis.as_ref().map(|r| r.is_connected())
    }

    /// With the Redis backend: how many times Redis became unavailable since
    /// start (each outage is logged once, when it begins, and once when it
    /// ends). `None` with the local backend.
    pub fn redis_outages(&self) -> Option<u64> {
        self.inner.redis.as_ref().map(|r| r.outages())
    }

    /// Keys currently tracked by the local limiter of `scope` (bounded by
    /// `max_keys`). With the Redis backend these are the keys touched while
    /// falling back to local limits.
    pub fn key_count(&self, scope: Scope) -> usize {
        self.inner.scopes[scope.index()]
            .as_ref()
            .map_or(0, |l| l.local.key_count())
    }

    /// How many checks of `scope` were charged to the shared overflow bucket
    /// because the scope already tracked `max_keys` keys.
    #[cfg(test)]
    pub(crate) fn overflow_hits(&self, scope: Scope) -> u64 {
        self.inner.scopes[scope.index()]
            .as_ref()
            .map_or(0, |l| l.local.overflow_hits())
    }

    /// Evicts idle keys from every local limiter now. The background task
    /// started by [`Throttle::start`] does this every [`EVICT_INTERVAL`].
    #[cfg(test)]
    pub(crate) fn evict_idle(&self) {
        self.inner.evict_idle();
    }
}

impl Inner {
    fn evict_idle(&self) {
        for l in self.scopes.iter().flatten() {
            l.local.evict_idle();
        }
    }
}

async fn evict_loop(inner: Weak<Inner>, pressure: Arc<Notify>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVICT_INTERVAL) => {}
            _ = pressure.notified() => {}
        }
        let Some(inner) = inner.upgrade() else { return };
        inner.evict_idle();
        drop(inner);
        tokio::time::sleep(MIN_EVICT_SPACING).await;
    }
}

#[cfg(test)]
mod tests;
