//! Approval questions, counted: by upstream, rule and what became of each
//! (`Step`: asked, approved, declined, cancelled, expired, unavailable,
//! remembered, fallback_allowed). Rule names are the operator's; tool names
//! are not labels (their number is the upstream's to choose).

use prometheus::{IntCounterVec, Opts};

use super::super::record::Described;
use crate::approval::Step;

pub struct ApprovalMetrics {
    steps: IntCounterVec,
}

impl ApprovalMetrics {
    pub fn new(registry: &Described) -> Result<Self, prometheus::Error> {
        let steps = IntCounterVec::new(
            Opts::new(
                "portcullis_approvals_total",
                "The gateway's own approval questions ([[approval]] rules), by upstream, rule and step (asked, approved, declined, cancelled, expired, unavailable, remembered, fallback_allowed)",
            ),
            &["upstream", "rule", "step"],
        )?;
        registry.register(Box::new(steps.clone()))?;
        Ok(ApprovalMetrics { steps })
    }

    pub fn step(&self, upstream: &str, rule: &str, step: Step) {
        self.steps
            .with_label_values(&[upstream, rule, step.as_str()])
            .inc();
    }
}
