//! The heavy-inspection lanes' metric families (`heavy`): messages
//! inspected off the runtime workers or refused, and those waiting.

use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use portcullis_dataplane::described::Described;

/// The metric families of every lane, registered once with the registry.
pub(crate) struct HeavyMetrics {
    pub(crate) inspections: IntCounterVec,
    pub(crate) waiting: IntGaugeVec,
}

impl HeavyMetrics {
    pub(crate) fn new(registry: &Described) -> Result<Self, prometheus::Error> {
        let inspections = IntCounterVec::new(
            Opts::new(
                "portcullis_heavy_inspections_total",
                "Upstream messages larger than inline_inspection_bytes, by upstream and outcome: inspected off the runtime workers (offloaded) or refused because the upstream's lane and queue were full (refused)",
            ),
            &["upstream", "outcome"],
        )?;
        let waiting = IntGaugeVec::new(
            Opts::new(
                "portcullis_heavy_inspections_waiting",
                "Large upstream messages waiting for their upstream's turn to be inspected",
            ),
            &["upstream"],
        )?;
        registry.register(Box::new(inspections.clone()))?;
        registry.register(Box::new(waiting.clone()))?;
        Ok(HeavyMetrics {
            inspections,
            waiting,
        })
    }
}
