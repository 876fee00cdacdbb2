//! What federated routes leave out, counted.

use prometheus::{IntCounterVec, Opts};

use crate::model::McpMethod;
use portcullis_dataplane::described::Described;

/// The federation's metric family, registered once.
pub(crate) struct FederationMetrics {
    left_out: IntCounterVec,
}

impl FederationMetrics {
    pub(crate) fn new(registry: &Described) -> Result<Self, prometheus::Error> {
        let left_out = IntCounterVec::new(
            Opts::new(
                "portcullis_federation_left_out_total",
                "Upstreams of a federated route left out of a merged answer (down, slow, refused, or an error), by upstream, method and reason",
            ),
            &["upstream", "method", "reason"],
        )?;
        registry.register(Box::new(left_out.clone()))?;
        Ok(FederationMetrics { left_out })
    }

    /// An upstream of a federated route left out of a merged answer.
    /// `reason`: a refusal reason's name, or `upstream_error`.
    pub(crate) fn left_out(&self, upstream: &str, method: McpMethod, reason: &str) {
        self.left_out
            .with_label_values(&[upstream, method.as_str(), reason])
            .inc();
    }
}
