//! Where an upstream message is inspected. Reading a message costs the
//! gateway per byte and per string, and the upstream chooses how many: a
//! message up to `limits.inline_inspection_bytes` is inspected on the
//! runtime worker that read it (no hand-off, the common case); a larger one
//! on tokio's blocking threads, so the workers go on serving every other
//! request while it is read. Each upstream has its own lane: at most
//! `heavy_inspections_per_upstream` of its messages are inspected at once and
//! `heavy_inspection_queue` more wait their turn (first come, first served);
//! one more is refused (`inspection_busy`, 503 with `Retry-After`), so one
//! upstream's heavy answers cannot take the inspection capacity of the
//! others, nor hold unbounded memory while they wait.

use std::panic::resume_unwind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use prometheus::{IntCounter, IntGauge};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::metrics::heavy::HeavyMetrics;
use crate::config::InspectionLimits;
use crate::model::{Reason, Refusal};

/// One upstream's lane for large messages (one per config generation).
pub(crate) struct HeavyLane {
    limits: InspectionLimits,
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    offloaded: IntCounter,
    refused: IntCounter,
    waiting_gauge: IntGauge,
}

impl HeavyLane {
    pub(crate) fn new(limits: InspectionLimits, metrics: &HeavyMetrics, upstream: &str) -> Self {
        let outcome = |o: &str| metrics.inspections.with_label_values(&[upstream, o]);
        HeavyLane {
            limits,
            running: Arc::new(Semaphore::new(limits.per_upstream)),
            waiting: AtomicUsize::new(0),
            offloaded: outcome("offloaded"),
            refused: outcome("refused"),
            waiting_gauge: metrics.waiting.with_label_values(&[upstream]),
        }
    }

    /// Whether a message of `len` bytes is inspected off the workers.
    pub(crate) fn is_heavy(&self, len: usize) -> bool {
        len > self.limits.inline_bytes
    }

    /// This upstream's turn to inspect one large message: at once when one
    /// of its places is free, after the messages waiting before it when the
    /// queue has room, refused otherwise.
    pub(crate) async fn admit(self: &Arc<Self>) -> Result<Turn, Refusal> {
        if let Ok(permit) = self.running.clone().try_acquire_owned() {
            return Ok(self.turn(permit));
        }
        let _queued = self.enqueue().ok_or_else(|| {
            self.refused.inc();
            busy()
        })?;
        // The semaphore is never closed: a failure here is a bug.
        let permit =
            self.running.clone().acquire_owned().await.map_err(|_| {
                Refusal::new(Reason::InternalError, "the inspection lane was closed")
            })?;
        Ok(self.turn(permit))
    }

    fn turn(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Turn {
        Turn {
            permit,
            lane: self.clone(),
        }
    }

    /// A place in the queue, given back when dropped (the message got its
    /// turn, or the client went away while it waited).
    fn enqueue(&self) -> Option<Queued<'_>> {
        self.waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limits.queue).then_some(n + 1)
            })
            .ok()?;
        self.waiting_gauge.inc();
        Some(Queued(self))
    }
}

struct Queued<'a>(&'a HeavyLane);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
        self.0.waiting_gauge.dec();
    }
}

fn busy() -> Refusal {
    Refusal::new(
        Reason::InspectionBusy,
        "the gateway is already inspecting as many large answers from this upstream as it is configured to; retry shortly",
    )
    .with_data("retryAfterSeconds", 1.into())
}

/// A place in one upstream's lane, held until the work given to it ends
/// (even when the request that waits for it is gone).
pub(crate) struct Turn {
    permit: OwnedSemaphorePermit,
    lane: Arc<HeavyLane>,
}

impl Turn {
    /// Run `work` on a blocking thread and wait for it. A panic in it goes
    /// on where the caller waits, as it would have inline; the only error
    /// is a runtime that shuts down before the work starts.
    pub(crate) async fn run<T: Send + 'static>(
        self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Refusal> {
        self.lane.offloaded.inc();
        let permit = self.permit;
        let done = tokio::task::spawn_blocking(move || {
            let out = work();
            drop(permit);
            out
        })
        .await;
        match done {
            Ok(out) => Ok(out),
            Err(e) if e.is_panic() => resume_unwind(e.into_panic()),
            Err(_) => Err(Refusal::new(
                Reason::ShuttingDown,
                "the gateway is shutting down and did not inspect the upstream's answer; retry the request",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portcullis_dataplane::described::Described;

    fn lane(per_upstream: usize, queue: usize) -> Arc<HeavyLane> {
        let metrics = HeavyMetrics::new(&Described::new()).expect("metrics");
        let limits = InspectionLimits {
            inline_bytes: 4,
            per_upstream,
            queue,
        };
        Arc::new(HeavyLane::new(limits, &metrics, "up"))
    }

    #[test]
    fn only_messages_over_the_inline_size_are_heavy() {
        let lane = lane(1, 0);
        assert!(!lane.is_heavy(0));
        assert!(!lane.is_heavy(4));
        assert!(lane.is_heavy(5));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_lane_queues_then_refuses_and_frees_its_places() {
        let lane = lane(1, 1);
        let first = lane.admit().await.expect("a free place");
        let waiting = tokio::spawn({
            let lane = lane.clone();
            async move { lane.admit().await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        assert_eq!(lane.waiting.load(Ordering::Acquire), 1);
        let refused = lane.admit().await.err().expect("the queue is full");
        assert_eq!(refused.reason, Reason::InspectionBusy);
        assert_eq!(refused.data("retryAfterSeconds"), Some(&1.into()));
        assert_eq!(lane.refused.get(), 1);
        // The first message's work ends: the one waiting gets its turn.
        first.run(|| ()).await.expect("ran");
        waiting.await.expect("joined").expect("its turn came");
        assert_eq!(lane.waiting.load(Ordering::Acquire), 0);
        assert_eq!(lane.waiting_gauge.get(), 0);
        assert_eq!(lane.offloaded.get(), 1);
        assert_eq!(lane.running.available_permits(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_client_gone_while_waiting_gives_its_place_back() {
        let lane = lane(1, 1);
        let _first = lane.admit().await.expect("a free place");
        let gone = tokio::spawn({
            let lane = lane.clone();
            async move { lane.admit().await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        assert_eq!(lane.waiting.load(Ordering::Acquire), 1);
        gone.abort();
        let _ = gone.await;
        assert_eq!(lane.waiting.load(Ordering::Acquire), 0);
        assert_eq!(lane.waiting_gauge.get(), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn work_runs_off_the_runtime_thread() {
        let lane = lane(1, 0);
        let here = std::thread::current().id();
        let turn = lane.admit().await.expect("a free place");
        let there = turn.run(|| std::thread::current().id()).await.expect("ran");
        assert_ne!(here, there);
    }
}
