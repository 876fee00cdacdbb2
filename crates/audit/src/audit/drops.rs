//! Audit events lost, per output: counted, reported to the metrics by
//! cause, and warned about at the 1st, 2nd, 4th, 8th, … loss.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::model::{AuditLoss, AuditSinkKind, Health, HealthReport};

/// Lines lost: counted here (`AuditSink::dropped`) and reported by cause.
#[derive(Debug)]
pub(super) struct Drops {
    pub(super) total: AtomicU64,
    /// `None` for `off`, which loses nothing.
    pub(super) sink: Option<AuditSinkKind>,
    /// Where losses are reported (set once, by the first gateway).
    pub(super) health: OnceLock<HealthReport>,
}

impl Drops {
    pub(super) fn new(sink: Option<AuditSinkKind>) -> Drops {
        Drops {
            total: AtomicU64::new(0),
            sink,
            health: OnceLock::new(),
        }
    }

    #[cfg(test)]
    pub(super) fn for_test() -> Drops {
        Drops::new(Some(AuditSinkKind::Otlp))
    }

    /// Count `n` lost lines; warn at 1, 2, 4, 8, … so a flood is visible
    /// without flooding the log itself.
    pub(super) fn note(&self, n: u64, cause: AuditLoss) {
        if n == 0 {
            return;
        }
        if let (Some(sink), Some(h)) = (self.sink, self.health.get()) {
            h.report(Health::AuditDropped(sink, cause, n));
        }
        let before = self.total.fetch_add(n, Ordering::Relaxed);
        let after = before + n;
        if (before + 1..=after).any(u64::is_power_of_two) {
            tracing::warn!(
                dropped_total = after,
                sink = self.sink.map_or("off", AuditSinkKind::as_str),
                cause = cause.as_str(),
                "audit events dropped"
            );
        }
    }
}
