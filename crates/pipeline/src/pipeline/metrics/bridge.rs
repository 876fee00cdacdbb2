//! What bridged sessions do, counted: sessions the gateway opened for a
//! 2025-11-25 client of a 2026-07-28-only upstream, and how each question
//! it pushed for one ended.

use prometheus::{IntCounterVec, Opts};

use portcullis_dataplane::described::Described;

/// How a question pushed for a bridged call ended (the `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QuestionOutcome {
    /// Delivered to the client.
    Pushed,
    /// The client answered it (any action, or an error).
    Answered,
    /// Nobody answered within `push_timeout`.
    TimedOut,
    /// The client cancelled the call.
    Cancelled,
    /// The client closed the call's stream first.
    Abandoned,
}

impl QuestionOutcome {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            QuestionOutcome::Pushed => "pushed",
            QuestionOutcome::Answered => "answered",
            QuestionOutcome::TimedOut => "timed_out",
            QuestionOutcome::Cancelled => "cancelled",
            QuestionOutcome::Abandoned => "abandoned",
        }
    }
}

/// The bridge's metric families, registered once.
pub(crate) struct BridgeMetrics {
    sessions: IntCounterVec,
    questions: IntCounterVec,
    handoffs: IntCounterVec,
}

impl BridgeMetrics {
    pub(crate) fn new(registry: &Described) -> Result<Self, prometheus::Error> {
        let sessions = IntCounterVec::new(
            Opts::new(
                "portcullis_bridge_sessions_total",
                "Bridged sessions opened: a 2025-11-25 client's initialize answered by the gateway for a 2026-07-28-only upstream, or an upstream session the gateway opened for 2026-07-28 clients of a 2025-11-25-only upstream, by upstream",
            ),
            &["upstream"],
        )?;
        let questions = IntCounterVec::new(
            Opts::new(
                "portcullis_bridge_questions_total",
                "Questions carried across protocol generations (a 2026-07-28 upstream's pushed to a 2025-11-25 client, a 2025-11-25 upstream's push asked as input_required), by upstream and outcome (pushed, then answered, timed_out, cancelled or abandoned)",
            ),
            &["upstream", "outcome"],
        )?;
        let handoffs = IntCounterVec::new(
            Opts::new(
                "portcullis_relay_handoffs_total",
                "Answers (kind answer: to a question pushed on a 2025-11-25 call's stream), retries (kind retry: of a call carried in a 2025-11-25 upstream session) and approval page decisions (kind decision: a decision, or a 2026-07-28 retry waiting for one) this replica received for a call another replica holds and handed to it through Redis, by kind and outcome (delivered, answered, not_waiting, refused, holder_gone, timed_out, store_unavailable)",
            ),
            &["kind", "outcome"],
        )?;
        registry.register(Box::new(sessions.clone()))?;
        registry.register(Box::new(questions.clone()))?;
        registry.register(Box::new(handoffs.clone()))?;
        Ok(BridgeMetrics {
            sessions,
            questions,
            handoffs,
        })
    }

    pub(crate) fn session_opened(&self, upstream: &str) {
        self.sessions.with_label_values(&[upstream]).inc();
    }

    /// A hand-off through the relay, by `kind` and `outcome`.
    pub(crate) fn handoff(&self, kind: &str, outcome: &str) {
        self.handoffs.with_label_values(&[kind, outcome]).inc();
    }

    pub(crate) fn questions(&self, upstream: &str, outcome: QuestionOutcome, n: usize) {
        self.questions
            .with_label_values(&[upstream, outcome.as_str()])
            .inc_by(n as u64);
    }
}
