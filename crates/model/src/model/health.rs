//! What the gateway's own backends report about failures no response
//! shows: the shared store (Redis) behind the rate limiter, the pinned
//! listings and the single-use states, and the audit trail's lost lines.
//! Each label is one of the enums here (never a value from the network);
//! `pipeline::record` counts the reports, the backends hold a
//! [`HealthReport`] and know nothing of metrics.

use std::sync::Arc;

crate::name_table! {
    /// Which part of the gateway uses the shared store (label `backend`).
    StoreUser {
        Throttle => "throttle", "The rate limiter (`[rate_limits] backend = \"redis\"`).";
        Listings => "listings", "The pinned listings (rug pulls).";
        Replay => "replay", "The single-use states and sessions (`[state] single_use_backend`).";
    }
}

crate::name_table! {
    /// How a call to the store failed (label `error`).
    StoreFailure {
        Connect => "connect", "No connection could be made.";
        Timeout => "timeout", "The call took longer than its timeout.";
        Failed => "failed", "The store answered with an error, or the connection broke.";
    }
}

crate::name_table! {
    /// What the gateway did without the store (label `outcome`).
    Fallback {
        Local => "local", "Decided by this instance's own limits (`redis_failure = \"local\"`).";
        Refused => "refused", "The request was refused (`*_store_unavailable`, `rate_limiter_unavailable`).";
        Unchecked => "unchecked", "Delivered without the store's check: a list not compared with the pins, a single-use state not marked as used.";
    }
}

crate::name_table! {
    /// Where audit lines go (label `sink`; `off` loses nothing).
    AuditSinkKind {
        Stdout => "stdout", "The gateway's standard output (`[audit] sink = \"stdout\"`).";
        File => "file", "An append-only file (`[audit] sink = \"file\"`).";
        Otlp => "otlp", "OpenTelemetry log records sent to a collector (`[audit.otlp]`).";
    }
}

crate::name_table! {
    /// Why audit lines were lost (label `cause`).
    AuditLoss {
        QueueFull => "queue_full", "The queue to the writer was full (the output is slower than the events).";
        WriteFailed => "write_failed", "The file could not be opened or written, stdout failed, or the collector did not take an export.";
        Unencodable => "unencodable", "The event could not be serialised.";
    }
}

/// One report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// A call to the store failed.
    StoreFailed(StoreUser, StoreFailure),
    /// A decision was taken without the store.
    StoreFellBack(StoreUser, Fallback),
    /// The store is unreachable (`true`) or reachable again; also sent when
    /// a store starts reporting, so its series exist before a failure.
    StoreDown(StoreUser, bool),
    /// Audit lines lost (`0`: the sink starts reporting).
    AuditDropped(AuditSinkKind, AuditLoss, u64),
}

/// Where a backend sends its reports. Cheap to clone; the default sends
/// them nowhere (tests, offline runs).
#[derive(Clone, Default)]
pub struct HealthReport(Option<Arc<dyn Fn(Health) + Send + Sync>>);

impl HealthReport {
    pub fn new(to: impl Fn(Health) + Send + Sync + 'static) -> HealthReport {
        HealthReport(Some(Arc::new(to)))
    }

    pub fn report(&self, health: Health) {
        if let Some(to) = &self.0 {
            to(health);
        }
    }
}

impl std::fmt::Debug for HealthReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "HealthReport"
        } else {
            "HealthReport(nowhere)"
        })
    }
}
