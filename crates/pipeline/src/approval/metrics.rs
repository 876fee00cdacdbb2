//! Approval questions, counted: by upstream, rule and what became of each
//! (`Step`: asked, approved, declined, cancelled, expired, unavailable,
//! remembered, fallback_allowed). Rule names are the operator's; tool names
//! are not labels (their number is the upstream's to choose).

use prometheus::{IntCounterVec, Opts};

use super::Step;

pub(crate) struct ApprovalMetrics {
    steps: IntCounterVec,
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
        Ok(ApprovalMetrics { steps })
    }

    pub(crate) fn collector(&self) -> Box<dyn prometheus::core::Collector> {
        Box::new(self.steps.clone())
    }

    pub(crate) fn step(&self, upstream: &str, rule: &str, step: Step) {
        self.steps
            .with_label_values(&[upstream, rule, step.as_str()])
            .inc();
    }
}
