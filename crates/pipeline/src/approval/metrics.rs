//! Approval questions, counted: by upstream, rule and what became of each
//! (`Step`: asked, approved, declined, cancelled, expired, unavailable,
//! remembered, fallback_allowed). Rule names are the operator's; tool names
//! are not labels (their number is the upstream's to choose). Decisions sent
//! to the approval page and not taken are counted by why.

use prometheus::{IntCounterVec, Opts};

use super::{RefusedDecision, Step};

pub(crate) struct ApprovalMetrics {
    steps: IntCounterVec,
    refused: IntCounterVec,
}

impl ApprovalMetrics {
    /// The family, to be registered by the gateway's metrics
    /// ([`ApprovalMetrics::collector`]).
    pub(crate) fn new() -> Result<Self, prometheus::Error> {
        let steps = IntCounterVec::new(
            Opts::new(
                "portcullis_approvals_total",
                "The gateway's own approval questions ([[approval]] rules), by upstream, rule and step (asked, approved, declined, cancelled, expired, unavailable, remembered, fallback_allowed)",
            ),
            &["upstream", "rule", "step"],
        )?;
        let refused = IntCounterVec::new(
            Opts::new(
                "portcullis_approval_decisions_refused_total",
                "Decisions sent to the approval page and not taken, by upstream, rule and why (unauthenticated, not_approver, token_mismatch, expired, already_decided)",
            ),
            &["upstream", "rule", "why"],
        )?;
        Ok(ApprovalMetrics { steps, refused })
    }

    pub(crate) fn collectors(&self) -> [Box<dyn prometheus::core::Collector>; 2] {
        [Box::new(self.steps.clone()), Box::new(self.refused.clone())]
    }

    pub(crate) fn step(&self, upstream: &str, rule: &str, step: Step) {
        self.steps
            .with_label_values(&[upstream, rule, step.as_str()])
            .inc();
    }

    pub(crate) fn refused(&self, upstream: &str, rule: &str, why: RefusedDecision) {
        self.refused
            .with_label_values(&[upstream, rule, why.as_str()])
            .inc();
    }
}
