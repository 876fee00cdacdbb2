//! Approval questions, counted: by upstream, rule and what became of each
//! (`Step`: asked, approved, declined, cancelled, expired, unavailable,
//! remembered, fallback_allowed). Rule names are the operator's; tool names
//! are not labels (their number is the upstream's to choose). Decisions sent
//! to the approval page and not taken are counted by why.

use prometheus::{IntCounterVec, Opts};

use super::{RefusedDecision, RefusedSignIn, Step};

pub(crate) struct ApprovalMetrics {
    steps: IntCounterVec,
    refused: IntCounterVec,
    sign_ins_refused: IntCounterVec,
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
        let sign_ins_refused = IntCounterVec::new(
            Opts::new(
                "portcullis_approval_sign_ins_refused_total",
                "Sign-ins to the approval page refused, and session cookies that did not hold, by upstream, rule and why (credential_missing, credential_refused, not_approver, token_mismatch, session_tampered, session_expired)",
            ),
            &["upstream", "rule", "why"],
        )?;
        Ok(ApprovalMetrics {
            steps,
            refused,
            sign_ins_refused,
        })
    }

    pub(crate) fn collectors(&self) -> [Box<dyn prometheus::core::Collector>; 3] {
        [
            Box::new(self.steps.clone()),
            Box::new(self.refused.clone()),
            Box::new(self.sign_ins_refused.clone()),
        ]
    }

    pub(crate) fn sign_in_refused(&self, upstream: &str, rule: &str, why: RefusedSignIn) {
        self.sign_ins_refused
            .with_label_values(&[upstream, rule, why.as_str()])
            .inc();
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
