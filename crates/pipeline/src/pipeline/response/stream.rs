//! An upstream event stream, inspected event by event and forwarded as each
//! event completes. Ends after the final response, or with a JSON-RPC error
//! event when anything goes wrong; letting go of the upstream closes its
//! connection, which is how MCP cancels the upstream request. An event
//! larger than `inline_inspection_bytes` is inspected in its upstream's
//! lane off the runtime workers (`pipeline::heavy`): the stream's state goes
//! to a blocking thread with it and comes back.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::pipeline::forward::UpstreamBody;
use bytes::Bytes;
use http_body::Body;
use tokio::time::Sleep;

use super::disposition::{Disposition, Held, PendingPush};
use super::exchange::{Carrier, Exchange};
use super::gate::Gate;
use crate::model::{Reason, Refusal};
use crate::pipeline::body::EventSource;
use crate::pipeline::refuse::error_bytes;
use crate::pipeline::sse::{
    event_for, event_id_only, event_with_id, SseError, SseEvent, SseFramer,
};

/// What waits for a gate; nothing after it is read until it resolves.
enum Waiting {
    /// The final message: out if the gate passes, else the stream fails.
    Final(Bytes),
    /// A pushed question and its event's id, waiting for the question
    /// budget: delivered, or withheld (the stream goes on either way).
    Push(Box<PendingPush>, Option<String>),
    /// A notification that asks (a task's status), as its event, waiting
    /// for the question budget: out if it passes, else the stream fails.
    Notice(Bytes),
}

pub(super) struct SseBody {
    /// The stream's state; away while an event is inspected off the workers.
    events: Option<Box<Events>>,
    offloaded: Option<Offloaded>,
    /// Why the stream ended when its state did not come back.
    lost: Option<Reason>,
}

/// The stream's state, coming back from a blocking thread (`None`: the
/// runtime shut down before the inspection ran).
type Offloaded = Pin<Box<dyn Future<Output = Option<Box<Events>>> + Send>>;

/// What the stream does next.
enum Next {
    Event(Bytes),
    End,
    /// An event too large to inspect on the workers is waiting.
    Heavy,
}

struct Events {
    exchange: Exchange,
    /// The event the workers left for the upstream's inspection lane.
    heavy: Option<SseEvent>,
    /// A message waiting for its gate.
    gate: Option<(Gate, Waiting)>,
    /// A message waiting for its check in the single-use store (its raw
    /// event and id); the events after it wait in the framer.
    held: Option<(Held, Bytes, Option<String>)>,
    upstream: Option<UpstreamBody>,
    framer: SseFramer,
    out: VecDeque<Bytes>,
    idle: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    refused: Option<Reason>,
    /// Resolves when the drain deadline passes.
    cut_off: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl SseBody {
    pub(super) fn new(exchange: Exchange, upstream: UpstreamBody) -> Self {
        let framer = SseFramer::new(exchange.max_message_bytes);
        let idle_timeout = exchange.ctx.route.upstream.settings.stream_idle_timeout;
        let cut_off = exchange.ctx.gateway.metrics.drain.cut_off();
        let events = Events {
            exchange,
            heavy: None,
            gate: None,
            held: None,
            upstream: Some(upstream),
            framer,
            out: VecDeque::new(),
            idle: Box::pin(tokio::time::sleep(idle_timeout)),
            idle_timeout,
            refused: None,
            cut_off,
        };
        SseBody {
            events: Some(Box::new(events)),
            offloaded: None,
            lost: None,
        }
    }
}

impl Events {
    /// A refusal the request's record reports (the last one, when a
    /// resumed stream refused a replay and went on).
    fn note_refusal(&mut self, reason: Reason) {
        self.refused = Some(reason);
        let ctx = &self.exchange.ctx;
        if reason.is_upstream_failure() {
            ctx.gateway
                .metrics
                .upstream_error(&ctx.route.upstream.label, reason);
        }
    }

    /// End the stream with an error event and let go of the upstream.
    fn fail(&mut self, refusal: Refusal) {
        self.note_refusal(refusal.reason);
        self.heavy = None;
        let ctx = &self.exchange.ctx;
        let body = error_bytes(ctx.id(), &refusal, Some(ctx.upstream_name()));
        self.out.push_back(event_for(&body));
        self.upstream = None;
    }

    /// The final message: through its gate, then out; the upstream is done.
    fn finish_with(&mut self, message: Bytes, asking: bool) {
        // Complete: the connection may finish the stream and be used again.
        if let Some(upstream) = self.upstream.take() {
            upstream.release();
        }
        match self.exchange.gate(asking) {
            None => self.out.push_back(message),
            Some(gate) => self.gate = Some((gate, Waiting::Final(message))),
        }
    }

    /// A pushed question's disposition, as its event: delivered, or only
    /// its id (a comment line) so the client can resume from it.
    fn push_out(&mut self, disposition: Disposition, id: Option<&str>) {
        match disposition {
            Disposition::Pushed(message) => self.out.push_back(event_with_id(id, &message)),
            Disposition::Refuse(r) => self.fail(r),
            _ => {
                if let Some(id) = id {
                    self.out.push_back(event_id_only(id));
                }
            }
        }
    }

    /// A pushed question waits for the question budget; until its gate
    /// resolves nothing after it is read. `false` when it is waiting.
    fn budget_push(&mut self, push: Box<PendingPush>, id: Option<&str>) -> bool {
        match self.exchange.question_gate() {
            Some(gate) => {
                let waiting = Waiting::Push(push, id.map(str::to_owned));
                self.gate = Some((gate, waiting));
                false
            }
            // Delivering may still wait for the session's store (`Held`).
            None => {
                let admitted = self.exchange.admit_push(push, Ok(()));
                self.apply(admitted, Bytes::new(), id.map(str::to_owned))
            }
        }
    }

    /// Inspect the events buffered so far. On the workers (`!offloaded`),
    /// one over `inline_inspection_bytes` stops the loop, left in `heavy`.
    fn take_events(&mut self, offloaded: bool) {
        while self.gate.is_none() && self.held.is_none() && self.upstream.is_some() {
            let next = match self.heavy.take() {
                Some(ev) => Ok(Some(ev)),
                None => self.framer.next_event(),
            };
            let ev = match next {
                Ok(None) => return,
                Ok(Some(ev)) => ev,
                Err(e) => {
                    let reason = match e {
                        SseError::TooLarge(_) => Reason::UpstreamResponseTooLarge,
                        SseError::NotUtf8 | SseError::UnknownField => Reason::UpstreamBadResponse,
                    };
                    let message = format!("the upstream's event stream was refused: {e}");
                    return self.fail(Refusal::new(reason, message));
                }
            };
            let size = ev.data.as_ref().map_or(0, String::len);
            if !offloaded && self.exchange.ctx.route.upstream.heavy.is_heavy(size) {
                self.heavy = Some(ev);
                return;
            }
            // Comments, retry hints and the empty priming event a 2025-11-25
            // server sends first (an id to resume from) carry no message.
            let Some(data) = ev.data.as_deref().filter(|d| !d.trim().is_empty()) else {
                self.out.push_back(ev.raw);
                continue;
            };
            let disposition = self.exchange.inspect(data.as_bytes(), Carrier::Stream);
            if !self.apply(disposition, ev.raw, ev.id) {
                return;
            }
        }
    }

    /// What becomes of one event; `false` when nothing more is read now
    /// (the stream ended, or the event waits for its gate or its check).
    fn apply(&mut self, disposition: Disposition, raw: Bytes, id: Option<String>) -> bool {
        let event_id = id.as_deref();
        match disposition {
            Disposition::Notify => self.out.push_back(raw),
            Disposition::NotifyRewritten(message) => {
                self.out.push_back(event_with_id(event_id, &message))
            }
            // The event's id still reaches the client, so it can resume
            // from it: a comment line carries it.
            pushed @ (Disposition::Pushed(_) | Disposition::Withheld) => {
                self.push_out(pushed, event_id)
            }
            Disposition::PushPending(push) => return self.budget_push(push, event_id),
            Disposition::AskNotify(message) => {
                let event = event_with_id(event_id, &message);
                match self.exchange.question_gate() {
                    Some(gate) => {
                        self.gate = Some((gate, Waiting::Notice(event)));
                        return false;
                    }
                    None => self.out.push_back(event),
                }
            }
            Disposition::Held(check) => {
                self.held = Some((check, raw, id));
                return false;
            }
            Disposition::ReplayRefused { message, refusal } => {
                self.note_refusal(refusal.reason);
                self.out.push_back(event_with_id(event_id, &message));
            }
            Disposition::Final => {
                self.finish_with(raw, false);
                return false;
            }
            Disposition::FinalRewritten(message) => {
                self.finish_with(event_with_id(event_id, &message), false);
                return false;
            }
            Disposition::Ask(message) => {
                self.finish_with(event_with_id(event_id, &message), true);
                return false;
            }
            Disposition::Refuse(r) => {
                self.fail(r);
                return false;
            }
        }
        true
    }

    fn poll_upstream(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        let Some(upstream) = self.upstream.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(upstream).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let deadline = tokio::time::Instant::now() + self.idle_timeout;
                self.idle.as_mut().reset(deadline);
                if let Ok(data) = frame.into_data() {
                    self.framer.push(&data);
                    self.take_events(false);
                }
            }
            // A 2025-11-25 client resumes a cut stream with Last-Event-ID;
            // the cut is still the upstream's failure.
            Poll::Ready(Some(Err(_))) if self.exchange.resumable() => {
                let ctx = &self.exchange.ctx;
                ctx.gateway
                    .metrics
                    .upstream_error(&ctx.route.upstream.label, Reason::UpstreamConnectionClosed);
                self.upstream = None;
                return Poll::Ready(None);
            }
            Poll::Ready(Some(Err(_))) => self.fail(Refusal::new(
                Reason::UpstreamConnectionClosed,
                "the upstream closed the connection in the middle of its event stream",
            )),
            // A 2025-11-25 server may close a stream before its response
            // (the client resumes with Last-Event-ID), and a session's
            // stream of server messages has no response at all.
            Poll::Ready(None) if self.exchange.resumable() => {
                self.upstream = None;
                return Poll::Ready(None);
            }
            Poll::Ready(None) => self.fail(Refusal::new(
                Reason::UpstreamBadResponse,
                "the upstream ended its event stream without a response",
            )),
            Poll::Pending => {
                // A session's stream of server messages may be quiet for as
                // long as the session lives; TCP keep-alive finds a dead peer.
                if self.exchange.listening() || self.idle.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let t = humantime::format_duration(self.idle_timeout);
                self.fail(Refusal::new(
                    Reason::UpstreamTimeout,
                    format!("the upstream's event stream was silent for {t}"),
                ));
            }
        }
        Poll::Ready(Some(()))
    }

    /// The waiting large event (and whatever was buffered after it),
    /// inspected in the upstream's lane on a blocking thread.
    async fn inspect_heavy(mut self: Box<Self>) -> Option<Box<Self>> {
        let lane = self.exchange.ctx.route.upstream.heavy.clone();
        match lane.admit().await {
            Err(refusal) => {
                self.fail(refusal);
                Some(self)
            }
            Ok(turn) => turn
                .run(move || {
                    self.take_events(true);
                    self
                })
                .await
                .ok(),
        }
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Next> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Poll::Ready(Next::Event(b));
            }
            // Cut only a stream still waiting for its final message.
            let open = self.upstream.is_some() || self.gate.is_some() || self.held.is_some();
            if open && self.cut_off.as_mut().poll(cx).is_ready() {
                self.gate = None;
                self.held = None;
                self.fail(Refusal::new(
                    Reason::ShuttingDown,
                    "the gateway is shutting down and ended this stream; retry the request",
                ));
                continue;
            }
            if let Some((gate, _)) = self.gate.as_mut() {
                let passed = std::task::ready!(gate.as_mut().poll(cx));
                match (self.gate.take(), passed) {
                    (Some((_, Waiting::Final(message))), Ok(())) => self.out.push_back(message),
                    (Some((_, Waiting::Final(_))), Err(r)) => self.fail(r),
                    (Some((_, Waiting::Notice(event))), Ok(())) => {
                        self.out.push_back(event);
                        self.take_events(false);
                    }
                    (Some((_, Waiting::Notice(_))), Err(r)) => self.fail(r),
                    (Some((_, Waiting::Push(push, id))), passed) => {
                        let admitted = self.exchange.admit_push(push, passed);
                        if self.apply(admitted, Bytes::new(), id) {
                            // The events read after the push, in order.
                            self.take_events(false);
                        }
                    }
                    (None, _) => {}
                }
                continue;
            }
            if let Some((check, _, _)) = self.held.as_mut() {
                let decided = std::task::ready!(check.poll(cx));
                if let Some((_, raw, id)) = self.held.take() {
                    if self.apply(decided, raw, id) {
                        // The events that waited behind it.
                        self.take_events(false);
                    }
                }
                continue;
            }
            if self.heavy.is_some() {
                return Poll::Ready(Next::Heavy);
            }
            if std::task::ready!(self.poll_upstream(cx)).is_none() {
                return Poll::Ready(Next::End);
            }
        }
    }
}

impl EventSource for SseBody {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            if let Some(offloaded) = self.offloaded.as_mut() {
                let back = std::task::ready!(offloaded.as_mut().poll(cx));
                self.offloaded = None;
                match back {
                    Some(mut events) => {
                        // The inspection's time is not the upstream's silence.
                        let deadline = tokio::time::Instant::now() + events.idle_timeout;
                        events.idle.as_mut().reset(deadline);
                        self.events = Some(events);
                    }
                    None => {
                        self.lost = Some(Reason::ShuttingDown);
                        return Poll::Ready(None);
                    }
                }
            }
            let Some(events) = self.events.as_mut() else {
                return Poll::Ready(None);
            };
            match std::task::ready!(events.poll_next(cx)) {
                Next::Event(b) => return Poll::Ready(Some(b)),
                Next::End => return Poll::Ready(None),
                Next::Heavy => {
                    if let Some(events) = self.events.take() {
                        self.offloaded = Some(Box::pin(events.inspect_heavy()));
                    }
                }
            }
        }
    }

    fn refused(&self) -> Option<Reason> {
        self.events.as_ref().map_or(self.lost, |e| e.refused)
    }
}
