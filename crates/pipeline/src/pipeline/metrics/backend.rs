//! The failures of the gateway's own backends, as metrics: what the Redis
//! users and the audit sink report through their `HealthReport`
//! (`model::health`), each label one of its enums, and the refusals that
//! report a store unreachable.

use prometheus::{IntCounter, IntCounterVec, IntGaugeVec, Opts};

use crate::model::{AuditLoss, AuditSinkKind, Fallback, Health, Reason, StoreFailure, StoreUser};
use portcullis_dataplane::described::Described;

/// The store whose being unreachable a refusal reports.
pub(crate) fn unavailable_store(reason: Reason) -> Option<StoreUser> {
    match reason {
        Reason::RateLimiterUnavailable => Some(StoreUser::Throttle),
        Reason::ListingStoreUnavailable => Some(StoreUser::Listings),
        Reason::StateStoreUnavailable => Some(StoreUser::Replay),
        _ => None,
    }
}

/// The failures of the gateway's own backends (`model::Health`), each label
/// one of its enums.
pub(crate) struct BackendMetrics {
    store_errors: IntCounterVec,
    store_fallbacks: IntCounterVec,
    store_down: IntGaugeVec,
    audit_dropped: IntCounterVec,
}

impl BackendMetrics {
    pub(crate) fn new(registry: &Described) -> Result<BackendMetrics, prometheus::Error> {
        let m = BackendMetrics {
            store_errors: IntCounterVec::new(
                Opts::new(
                    "portcullis_redis_errors_total",
                    "Failed calls to Redis, by backend (throttle, listings, replay) and error (connect, timeout, failed)",
                ),
                &["backend", "error"],
            )?,
            store_fallbacks: IntCounterVec::new(
                Opts::new(
                    "portcullis_redis_fallbacks_total",
                    "Decisions taken without Redis, by backend and outcome (local: this instance's limits; refused: the request was refused; unchecked: delivered without the store's check)",
                ),
                &["backend", "outcome"],
            )?,
            store_down: IntGaugeVec::new(
                Opts::new(
                    "portcullis_redis_unavailable",
                    "1 while a backend finds Redis unreachable (its fallback is in use), by backend; only backends configured with Redis",
                ),
                &["backend"],
            )?,
            audit_dropped: IntCounterVec::new(
                Opts::new(
                    "portcullis_audit_dropped_total",
                    "Audit lines lost, by sink (stdout, file) and cause (queue_full, write_failed, unencodable)",
                ),
                &["sink", "cause"],
            )?,
        };
        registry.register(Box::new(m.store_errors.clone()))?;
        registry.register(Box::new(m.store_fallbacks.clone()))?;
        registry.register(Box::new(m.store_down.clone()))?;
        registry.register(Box::new(m.audit_dropped.clone()))?;
        Ok(m)
    }

    pub(crate) fn count(&self, health: Health) {
        match health {
            Health::StoreFailed(user, failure) => self
                .store_errors
                .with_label_values(&[user.as_str(), failure.as_str()])
                .inc(),
            Health::StoreFellBack(user, fallback) => self
                .store_fallbacks
                .with_label_values(&[user.as_str(), fallback.as_str()])
                .inc(),
            Health::StoreDown(user, down) => {
                // A store that reports exists: its series show zeros, not gaps.
                for f in StoreFailure::ALL {
                    let _ = self
                        .store_errors
                        .with_label_values(&[user.as_str(), f.as_str()]);
                }
                for f in Fallback::ALL {
                    let _ = self
                        .store_fallbacks
                        .with_label_values(&[user.as_str(), f.as_str()]);
                }
                self.store_down
                    .with_label_values(&[user.as_str()])
                    .set(i64::from(down));
            }
            Health::AuditDropped(sink, cause, n) => self.audit_dropped(sink, cause).inc_by(n),
        }
    }

    fn audit_dropped(&self, sink: AuditSinkKind, cause: AuditLoss) -> IntCounter {
        self.audit_dropped
            .with_label_values(&[sink.as_str(), cause.as_str()])
    }
}
