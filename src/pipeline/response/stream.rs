//! An upstream event stream, inspected event by event and forwarded as each
//! event completes. Ends after the final response, or with a JSON-RPC error
//! event when anything goes wrong; letting go of the upstream closes its
//! connection, which is how MCP cancels the upstream request.

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
use super::gate::{Gate, Held};
use crate::model::{Reason, Refusal};
use crate::pipeline::body::EventSource;
use crate::pipeline::refuse::error_bytes;
use crate::pipeline::sse::{event_for, event_id_only, event_with_id, SseError, SseFramer};

pub struct SseBody {
    exchange: Exchange,
    /// The final message waiting for its gate.
    gate: Option<(Gate, Bytes)>,
    /// A message waiting for its check (its raw event and id); the events
    /// after it wait in the framer.
    held: Option<(Held, Bytes, Option<String>)>,
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
        SseBody {
            exchange,
            gate: None,
            held: None,
            upstream: Some(upstream),
            framer,
            out: VecDeque::new(),
            idle: Box::pin(tokio::time::sleep(idle_timeout)),
            idle_timeout,
            refused: None,
            cut_off,
        }
    }

    /// End the stream with an error event and let go of the upstream.
    fn fail(&mut self, refusal: Refusal) {
        self.refused = Some(refusal.reason);
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

    fn take_events(&mut self) {
        while self.held.is_none() {
            let ev = match self.framer.next_event() {
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
    /// (the stream ended, or the event waits for its check).
    fn apply(&mut self, disposition: Disposition, raw: Bytes, id: Option<String>) -> bool {
        let event_id = id.as_deref();
        match disposition {
            Disposition::Notify => self.out.push_back(raw),
            Disposition::NotifyRewritten(message) | Disposition::Pushed(message) => {
                self.out.push_back(event_with_id(event_id, &message))
            }
            // The event's id still reaches the client, so it can resume
            // from it: a comment line carries it.
            Disposition::Withheld => {
                if let Some(id) = event_id {
                    self.out.push_back(event_id_only(id));
                }
            }
            Disposition::Held(check) => {
                self.held = Some((check, raw, id));
                return false;
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
                    self.take_events();
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
}

impl EventSource for SseBody {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Poll::Ready(Some(b));
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
            if let Some((check, _, _)) = self.held.as_mut() {
                let decided = std::task::ready!(check.poll(cx));
                if let Some((_, raw, id)) = self.held.take() {
                    if self.apply(decided, raw, id) {
                        // The events that waited behind it.
                        self.take_events();
                    }
                }
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
            if std::task::ready!(self.poll_upstream(cx)).is_none() {
                return Poll::Ready(None);
            }
        }
    }

    fn refused(&self) -> Option<Reason> {
        self.refused
    }
}
