//! What the stdio programs do, counted: processes running, starts and
//! ends, lines refused on stdout, stderr lines dropped.

use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use super::frame::LineFault;
use crate::described::Described;

/// The stdio upstreams' metric families, registered once.
pub struct StdioMetrics {
    running: IntGaugeVec,
    started: IntCounterVec,
    ended: IntCounterVec,
    rejected: IntCounterVec,
    stderr_dropped: IntCounterVec,
}

impl StdioMetrics {
    pub fn new(registry: &Described) -> Result<Self, prometheus::Error> {
        let running = IntGaugeVec::new(
            Opts::new(
                "portcullis_stdio_processes",
                "stdio programs running, by upstream",
            ),
            &["upstream"],
        )?;
        let started = IntCounterVec::new(
            Opts::new(
                "portcullis_stdio_starts_total",
                "stdio programs started, by upstream",
            ),
            &["upstream"],
        )?;
        let ended = IntCounterVec::new(
            Opts::new(
                "portcullis_stdio_exits_total",
                "stdio programs ended, by upstream and how (exited, signalled, failed)",
            ),
            &["upstream", "how"],
        )?;
        let rejected = IntCounterVec::new(
            Opts::new(
                "portcullis_stdio_stdout_rejected_total",
                "Lines a stdio program wrote on stdout that are not a message the gateway could use, by upstream and kind (text, oversized, not_utf8, not_jsonrpc, unknown_id)",
            ),
            &["upstream", "kind"],
        )?;
        let stderr_dropped = IntCounterVec::new(
            Opts::new(
                "portcullis_stdio_stderr_dropped_total",
                "stderr lines of stdio programs not logged (over the rate limit), by upstream",
            ),
            &["upstream"],
        )?;
        for c in [&started, &ended, &rejected, &stderr_dropped] {
            registry.register(Box::new(c.clone()))?;
        }
        registry.register(Box::new(running.clone()))?;
        Ok(StdioMetrics {
            running,
            started,
            ended,
            rejected,
            stderr_dropped,
        })
    }

    pub(crate) fn started(&self, upstream: &str) {
        self.started.with_label_values(&[upstream]).inc();
        self.running.with_label_values(&[upstream]).inc();
    }

    pub(crate) fn ended(&self, upstream: &str, how: &str) {
        self.ended.with_label_values(&[upstream, how]).inc();
        self.running.with_label_values(&[upstream]).dec();
    }

    pub(crate) fn rejected(&self, upstream: &str, fault: LineFault) {
        self.rejected
            .with_label_values(&[upstream, fault.as_str()])
            .inc();
    }

    pub(crate) fn stderr_dropped(&self, upstream: &str) {
        self.stderr_dropped.with_label_values(&[upstream]).inc();
    }
}
