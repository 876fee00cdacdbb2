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

use bytes::Bytes;
use http_body::Body;
use hyper::body::Incoming;
use tokio::time::Sleep;

use super::exchange::{Carrier, Disposition, Exchange};
use super::gate::Gate;
use crate::model::{Reason, Refusal};
use crate::pipeline::body::EventSource;
use crate::pipeline::refuse::error_bytes;
use crate::pipeline::sse::{
    event_for, event_id_only, event_with_id, SseError, SseEvent, SseFramer,
};

pub struct SseBody {
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
    /// The final message waiting for its gate.
    gate: Option<(Gate, Bytes)>,
    upstream: Option<Incoming>,
    framer: SseFramer,
    out: VecDeque<Bytes>,
    idle: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    refused: Option<Reason>,
    /// Resolves when the drain deadline passes.
    cut_off: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl SseBody {
    pub fn new(exchange: Exchange, upstream: Incoming) -> Self {
        let framer = SseFramer::new(exchange.max_message_bytes);
        let idle_timeout = exchange.ctx.route.upstream.settings.stream_idle_timeout;
        let cut_off = exchange.ctx.gateway.metrics.drain.cut_off();
        let events = Events {
            exchange,
            heavy: None,
            gate: None,
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
    /// End the stream with an error event and let go of the upstream.
    fn fail(&mut self, refusal: Refusal) {
        self.refused = Some(refusal.reason);
        self.heavy = None;
        let ctx = &self.exchange.ctx;
        if refusal.reason.is_upstream_failure() {
            ctx.gateway
                .metrics
                .upstream_error(&ctx.route.upstream.label, refusal.reason);
        }
        let body = error_bytes(ctx.id(), &refusal, Some(ctx.upstream_name()));
        self.out.push_back(event_for(&body));
        self.upstream = None;
    }

    /// The final message: through its gate, then out; the upstream is done.
    fn finish_with(&mut self, message: Bytes, asking: bool) {
        self.upstream = None;
        match self.exchange.gate(asking) {
            None => self.out.push_back(message),
            Some(gate) => self.gate = Some((gate, message)),
        }
    }

    /// Inspect the events buffered so far. On the workers (`!offloaded`),
    /// one over `inline_inspection_bytes` stops the loop, left in `heavy`.
    fn take_events(&mut self, offloaded: bool) {
        loop {
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
            let id = ev.id.as_deref();
            match self.exchange.inspect(data.as_bytes(), Carrier::Stream) {
                Disposition::Notify => self.out.push_back(ev.raw),
                Disposition::NotifyRewritten(message) | Disposition::Pushed(message) => {
                    self.out.push_back(event_with_id(id, &message))
                }
                // The event's id still reaches the client, so it can resume
                // from it: a comment line carries it.
                Disposition::Withheld => {
                    if let Some(id) = id {
                        self.out.push_back(event_id_only(id));
                    }
                }
                Disposition::Final => return self.finish_with(ev.raw, false),
                Disposition::FinalRewritten(message) => {
                    return self.finish_with(event_with_id(id, &message), false)
                }
                Disposition::Ask(message) => {
                    return self.finish_with(event_with_id(id, &message), true)
                }
                Disposition::Refuse(r) => return self.fail(r),
            }
        }
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
            let open = self.upstream.is_some() || self.gate.is_some();
            if open && self.cut_off.as_mut().poll(cx).is_ready() {
                self.gate = None;
                self.fail(Refusal::new(
                    Reason::ShuttingDown,
                    "the gateway is shutting down and ended this stream; retry the request",
                ));
                continue;
            }
            if let Some((gate, _)) = self.gate.as_mut() {
                let passed = std::task::ready!(gate.as_mut().poll(cx));
                if let Some((_, message)) = self.gate.take() {
                    match passed {
                        Ok(()) => self.out.push_back(message),
                        Err(r) => self.fail(r),
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
