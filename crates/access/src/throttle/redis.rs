//! Cluster-wide limits: GCRA in Redis, one atomic Lua script per check.
//!
//! The script keeps, per key, the theoretical arrival time (TAT, in
//! microseconds of Redis server time, so gateway clocks need not agree) and
//! sets it with a millisecond expiry equal to how far the TAT lies in the
//! future: once a key's state is indistinguishable from a fresh one it is gone
//! from Redis. It is invoked with EVALSHA (the script is loaded at start and
//! re-loaded transparently after a Redis restart).
//!
//! Keys are `<key_prefix><scope>:<hex of SHA-256 over the caller's key
//! parts>`, truncated to 128 bits: fixed length, any input characters, and no
//! principal names stored in Redis.
//!
//! Outages: a Redis error or a call exceeding `redis_timeout` marks Redis
//! down (logged once); while down, only one call per [`PROBE_INTERVAL`] tries
//! Redis again, the others go straight to the configured fallback so that an
//! outage does not add `redis_timeout` to every request. The first success
//! marks Redis up again (logged once). Every failed call and each change
//! between up and down is reported ([`HealthReport`]) as `throttle`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{OnceLock, Weak};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::config::{Rate, RedisFailure, RedisSettings};
use super::{RateLimited, Scope};
use crate::model::{Health, HealthReport, StoreFailure, StoreUser};

/// While Redis is down, how often one request probes it.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// How often the background task retries the very first connection.
const CONNECT_RETRY: Duration = Duration::from_secs(1);

/// KEYS[1]: the key. ARGV[1]: emission interval (µs). ARGV[2]: tolerance
/// τ = interval × (burst − 1) (µs).
/// Returns 0 when allowed, else the wait in µs until one unit conforms.
const GCRA_LUA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local earliest = tat - tau
if now < earliest then
  return earliest - now
end
local new_tat = tat + interval
local ttl_ms = math.ceil((new_tat - now) / 1000)
if ttl_ms < 1 then ttl_ms = 1 end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', ttl_ms)
return 0
"#;

pub(crate) struct RedisBackend {
    client: redis::Client,
    conn: OnceLock<ConnectionManager>,
    script: redis::Script,
    pub(crate) failure: RedisFailure,
    timeout: Duration,
    prefix: String,
    down: AtomicBool,
    /// Number of up → down transitions (each logged once).
    outages: AtomicU64,
    /// Nanoseconds since `epoch` before which no call probes a down Redis.
    next_probe: AtomicU64,
    epoch: Instant,
    /// Where failures are reported (set once, by the first gateway).
    health: OnceLock<HealthReport>,
}

/// The outcome of asking Redis.
pub(crate) enum RedisAnswer {
    Decided(Result<(), RateLimited>),
    /// Redis down, timed out, not yet connected, or skipped while down.
    Unavailable,
}

impl RedisBackend {
    pub(crate) fn new(settings: &RedisSettings) -> Self {
        RedisBackend {
            // The URL was checked by `config::validate`.
            client: redis::Client::open(settings.url.as_str()).expect("validated Redis URL"),
            conn: OnceLock::new(),
            script: redis::Script::new(GCRA_LUA),
            failure: settings.failure,
            timeout: settings.timeout,
            prefix: settings.key_prefix.clone(),
            // Not connected until `start`.
            down: AtomicBool::new(false),
            outages: AtomicU64::new(0),
            next_probe: AtomicU64::new(0),
            epoch: Instant::now(),
            health: OnceLock::new(),
        }
    }

    /// Report failures to `health` from now on (the first call wins), and
    /// say whether Redis is down now.
    pub(crate) fn report_to(&self, health: &HealthReport) {
        let _ = self.health.set(health.clone());
        self.report(Health::StoreDown(
            StoreUser::Throttle,
            self.down.load(Ordering::Relaxed),
        ));
    }

    pub(crate) fn report(&self, health: Health) {
        if let Some(h) = self.health.get() {
            h.report(health);
        }
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.conn.get().is_some() && !self.down.load(Ordering::Relaxed)
    }

    pub(crate) fn outages(&self) -> u64 {
        self.outages.load(Ordering::Relaxed)
    }

    fn manager_config(&self) -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_number_of_retries(2)
            .set_exponent_base(2)
            .set_factor(100)
            .set_max_delay(1000)
            .set_connection_timeout(self.connect_timeout())
            .set_response_timeout(self.timeout)
    }

    fn connect_timeout(&self) -> Duration {
        self.timeout.max(Duration::from_secs(1))
    }

    /// One attempt to create the connection manager and load the script.
    pub(crate) async fn connect_once(&self) -> bool {
        if self.conn.get().is_some() {
            return true;
        }
        let attempt =
            ConnectionManager::new_with_config(self.client.clone(), self.manager_config());
        match tokio::time::timeout(self.connect_timeout() * 2, attempt).await {
            Ok(Ok(mut manager)) => {
                let loaded = tokio::time::timeout(
                    self.connect_timeout(),
                    self.script.load_async(&mut manager),
                )
                .await;
                if let Ok(Err(e)) = &loaded {
                    // Not fatal: EVALSHA falls back to loading on NOSCRIPT.
                    tracing::debug!(error = %e, "could not pre-load the rate-limit script");
                }
                let _ = self.conn.set(manager);
                self.mark_up();
                true
            }
            Ok(Err(e)) => {
                self.mark_down(StoreFailure::Connect, &e.to_string());
                false
            }
            Err(_) => {
                self.mark_down(StoreFailure::Connect, "connection timed out");
                false
            }
        }
    }

    /// Retries the first connection in the background until it succeeds or
    /// the throttle is dropped.
    pub(crate) fn spawn_connect_loop(backend: Weak<RedisBackend>) {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(CONNECT_RETRY).await;
                let Some(backend) = backend.upgrade() else {
                    return;
                };
                if backend.connect_once().await {
                    return;
                }
            }
        });
    }

    fn now_nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn mark_down(&self, failure: StoreFailure, why: &str) {
        self.report(Health::StoreFailed(StoreUser::Throttle, failure));
        self.next_probe.store(
            self.now_nanos() + PROBE_INTERVAL.as_nanos() as u64,
            Ordering::Relaxed,
        );
        if !self.down.swap(true, Ordering::AcqRel) {
            self.outages.fetch_add(1, Ordering::Relaxed);
            self.report(Health::StoreDown(StoreUser::Throttle, true));
            match self.failure {
                RedisFailure::Local => tracing::warn!(
                    error = why,
                    "Redis rate-limit backend unavailable; using this instance's local limits until it is back"
                ),
                RedisFailure::Refuse => tracing::error!(
                    error = why,
                    "Redis rate-limit backend unavailable; refusing rate-limited requests until it is back"
                ),
            }
        }
    }

    fn mark_up(&self) {
        if self.down.load(Ordering::Relaxed) && self.down.swap(false, Ordering::AcqRel) {
            self.report(Health::StoreDown(StoreUser::Throttle, false));
            tracing::info!("Redis rate-limit backend reachable again; limits are cluster-wide");
        }
    }

    /// While down, lets one caller per `PROBE_INTERVAL` through.
    fn may_try(&self) -> bool {
        if !self.down.load(Ordering::Relaxed) {
            return true;
        }
        let now = self.now_nanos();
        let next = self.next_probe.load(Ordering::Relaxed);
        now >= next
            && self
                .next_probe
                .compare_exchange(
                    next,
                    now + PROBE_INTERVAL.as_nanos() as u64,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// The Redis key for `scope` and the caller's key parts.
    pub(crate) fn key(&self, scope: Scope, parts: &[&str]) -> String {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for p in parts {
            ctx.update(&(p.len() as u64).to_le_bytes());
            ctx.update(p.as_bytes());
        }
        let digest = ctx.finish();
        let scope = scope.as_str();
        let mut key = String::with_capacity(self.prefix.len() + scope.len() + 1 + 32);
        key.push_str(&self.prefix);
        key.push_str(scope);
        key.push(':');
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for b in &digest.as_ref()[..16] {
            key.push(HEX[usize::from(b >> 4)] as char);
            key.push(HEX[usize::from(b & 15)] as char);
        }
        key
    }

    pub(crate) async fn check(&self, scope: Scope, rate: &Rate, parts: &[&str]) -> RedisAnswer {
        let Some(conn) = self.conn.get() else {
            return RedisAnswer::Unavailable;
        };
        if !self.may_try() {
            return RedisAnswer::Unavailable;
        }
        let mut conn = conn.clone();
        let interval = micros(rate.interval());
        let tau = interval.saturating_mul(u64::from(rate.burst.max(1) - 1));
        let key = self.key(scope, parts);
        let mut invocation = self.script.key(key);
        invocation.arg(interval).arg(tau);
        let call = invocation.invoke_async::<i64>(&mut conn);
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(wait)) => {
                self.mark_up();
                RedisAnswer::Decided(if wait <= 0 {
                    Ok(())
                } else {
                    Err(RateLimited {
                        scope,
                        retry_after: Duration::from_micros(wait as u64),
                    })
                })
            }
            Ok(Err(e)) => {
                self.mark_down(StoreFailure::Failed, &e.to_string());
                RedisAnswer::Unavailable
            }
            Err(_) => {
                self.mark_down(StoreFailure::Timeout, "timed out");
                RedisAnswer::Unavailable
            }
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}
