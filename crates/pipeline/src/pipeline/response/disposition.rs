//! What becomes of one upstream message: the response phase's decision
//! and the values it carries (a pushed question waiting for its budget, a
//! decision waiting for a store). A leaf: it names nothing else of the
//! response phase, so the checks depend on it and never on each other.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::model::{McpMethod, Refusal};
use crate::policy::inspect::Report;

/// The decision on one message from the upstream (the policy's own findings are `policy::inspect::Verdict`s).
#[derive(Debug)]
pub enum Disposition {
    /// A notification the client may see, unchanged.
    Notify,
    /// A request the upstream pushed (2025-11-25), policed and delivered
    /// under the gateway's sealed id; the stream goes on.
    Pushed(Bytes),
    /// A pushed request the policy refused: the gateway answered the
    /// upstream itself, the client sees nothing of it; the stream goes on.
    Withheld,
    /// A pushed question that passed the policy, waiting for the question
    /// budget (`input_required_rounds`, shared with MRTR questions): the
    /// stream awaits [`Exchange::question_gate`], then
    /// [`Exchange::admit_push`] delivers or withholds it.
    PushPending(Box<PendingPush>),
    /// Decided once a check in the single-use store answers (stream only).
    Held(Held),
    /// A notification whose text had to be made safe.
    NotifyRewritten(Bytes),
    /// A notification that asks new questions (a task's status in
    /// `input_required`), passed by the policy and sealed: delivered once
    /// the question budget allows; the stream goes on.
    AskNotify(Bytes),
    /// The response to the request, unchanged; nothing more is read after it.
    Final,
    /// The response rewritten (a list filtered to what the caller may use).
    FinalRewritten(Bytes),
    /// A question that passed policy, rewritten with the gateway's state;
    /// delivered once the rounds limit allows.
    Ask(Bytes),
    /// The client gets this error instead, and the exchange ends.
    Refuse(Refusal),
    /// A response replayed on a resumed stream, refused: `message` is the
    /// error answering the replayed id, delivered in its place; the stream
    /// goes on.
    ReplayRefused { message: Bytes, refusal: Refusal },
}

/// A message that waits for a check in a store (the single-use store: was
/// this elicitation delivered in this session, did the session end; the
/// pins of a list in Redis) before anything of it is decided. It resolves to what becomes of the
/// message then (`Notify`, `Pushed`, `Withheld`, `Refuse`, …); the stream
/// holds the events after it until then, so their order is kept.
pub struct Held(Pin<Box<dyn Future<Output = Disposition> + Send>>);

impl Held {
    pub(crate) fn new(check: impl Future<Output = Disposition> + Send + 'static) -> Held {
        Held(Box::pin(check))
    }

    pub(crate) fn poll(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Disposition> {
        self.0.as_mut().poll(cx)
    }
}

impl Future for Held {
    type Output = Disposition;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Disposition> {
        self.0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held")
    }
}

/// A pushed question that passed the policy, waiting for its token of the
/// question budget; what delivering or withholding it needs.
#[derive(Debug)]
pub struct PendingPush {
    pub(super) id: Box<RawValue>,
    pub(super) method: McpMethod,
    pub(super) name: String,
    pub(super) params: Option<Value>,
    pub(super) report: Report,
    pub(super) operation: String,
    pub(super) round: u32,
}
