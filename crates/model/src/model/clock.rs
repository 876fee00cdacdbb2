//! The time as the gateway's rules see it: state expiry, operation time and
//! round timeouts read one [`Clock`], so tests can move it instead of
//! sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Unix time in milliseconds.
    fn now_millis(&self) -> u64;

    fn now_secs(&self) -> u64 {
        self.now_millis() / 1000
    }
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn starting_now() -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicU64::new(SystemClock.now_millis())))
    }

    pub fn advance(&self, by: std::time::Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The clock every component shares.
pub type SharedClock = Arc<dyn Clock>;

pub fn system_clock() -> SharedClock {
    Arc::new(SystemClock)
}

/// When the deadline layer cuts a request that has no response head yet,
/// on the request's extensions so the pipeline's record counts such a cut
/// as `gateway_timeout`, not as a client that went away.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub std::time::Instant);
