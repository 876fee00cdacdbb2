//! The two ends of a bridged call's messages: the event stream the 2025-11-25
//! client reads (fed by the task that carries the call), and the messages of
//! one checked 2026-07-28 answer, read one at a time.

use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Response};
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::mpsc;

use super::super::body::{EventSource, ProxyBody};
use super::super::sse::{event_for, SseFramer};
use crate::headers::X_ACCEL_BUFFERING;
use crate::model::{Reason, Refusal};

/// What the carrying task sends the client's stream.
pub(crate) enum Out {
    /// One JSON-RPC message.
    Message(Bytes),
    /// The stream ends; with the reason when the gateway refused the call.
    End(Option<Reason>),
}

/// The client's side: the events the carrying task sends, in order.
struct Fed {
    rx: mpsc::Receiver<Out>,
    refused: Option<Reason>,
    ended: bool,
}

impl EventSource for Fed {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match std::task::ready!(self.rx.poll_recv(cx)) {
            Some(Out::Message(message)) => Poll::Ready(Some(event_for(&message))),
            Some(Out::End(reason)) => {
                self.refused = reason;
                self.ended = true;
                Poll::Ready(None)
            }
            // The task ended without saying so (it panicked): the stream ends.
            None => {
                self.ended = true;
                self.refused.get_or_insert(Reason::InternalError);
                Poll::Ready(None)
            }
        }
    }

    fn refused(&self) -> Option<Reason> {
        self.refused
    }
}

/// An event-stream response fed through the returned sender.
pub(crate) fn stream() -> (mpsc::Sender<Out>, Response<ProxyBody>) {
    let (tx, rx) = mpsc::channel(16);
    let source = Fed {
        rx,
        refused: None,
        ended: false,
    };
    let mut resp = Response::new(ProxyBody::stream(Box::new(source)));
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(X_ACCEL_BUFFERING.clone(), HeaderValue::from_static("no"));
    (tx, resp)
}

/// Whether a JSON-RPC message is a response (a result or an error).
pub(super) fn is_response(m: &Value) -> bool {
    m.get("result").is_some() || m.get("error").is_some()
}

/// An event stream that ends at once: the answer to a call the client
/// cancelled before anything was said (nothing more is sent for it).
pub(super) fn ended() -> Response<ProxyBody> {
    let (tx, resp) = stream();
    let _ = tx.try_send(Out::End(None));
    resp
}

/// The messages of one checked answer from the upstream: a JSON body's one
/// message, or each event's.
pub(crate) struct Messages {
    body: ProxyBody,
    framer: Option<SseFramer>,
    max: usize,
}

impl Messages {
    pub(crate) fn new(resp: Response<ProxyBody>, max: usize) -> Messages {
        let (head, body) = resp.into_parts();
        Messages::of(&head.headers, body, max)
    }

    /// The messages of `body`, sent under `headers`.
    pub(super) fn of(headers: &http::HeaderMap, body: ProxyBody, max: usize) -> Messages {
        let stream = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        Messages {
            body,
            framer: stream.then(|| SseFramer::new(max)),
            max,
        }
    }

    /// Why the gateway cut the answer's stream, when it did.
    pub(crate) fn refused(&self) -> Option<Reason> {
        self.body.refused()
    }

    /// Whether the answer is an event stream (else one JSON body).
    pub(super) fn is_stream(&self) -> bool {
        self.framer.is_some()
    }

    /// The next message; `None` at the end. The gateway already checked
    /// every byte; what does not read as JSON here is skipped.
    pub(crate) async fn next(&mut self) -> Result<Option<Value>, Refusal> {
        let Some(framer) = self.framer.as_mut() else {
            return self.whole().await;
        };
        loop {
            while let Ok(Some(event)) = framer.next_event() {
                if let Some(m) = event
                    .data
                    .and_then(|d| crate::json::parse_value(d.as_bytes()).ok())
                {
                    return Ok(Some(m));
                }
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        framer.push(&data);
                    }
                }
                Some(Err(never)) => match never {},
            }
        }
    }

    /// The response among the messages (the others, notifications, are
    /// passed over); `None` when the answer ended without one.
    pub(crate) async fn response(&mut self) -> Result<Option<Value>, Refusal> {
        while let Some(m) = self.next().await? {
            if is_response(&m) {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    /// A JSON body's message (once; then the end).
    async fn whole(&mut self) -> Result<Option<Value>, Refusal> {
        let mut bytes = BytesMut::new();
        while let Some(frame) = self.body.frame().await {
            let Ok(data) = frame.unwrap_or_else(|never| match never {}).into_data() else {
                continue;
            };
            if bytes.len() + data.len() > self.max {
                return Err(Refusal::new(
                    Reason::UpstreamResponseTooLarge,
                    "the upstream's answer is over max_response_body_bytes",
                ));
            }
            bytes.extend_from_slice(&data);
        }
        if bytes.is_empty() {
            return Ok(None);
        }
        crate::json::parse_value(&bytes).map(Some).map_err(|_| {
            Refusal::new(
                Reason::UpstreamBadResponse,
                "the upstream's answer is not one JSON-RPC message",
            )
        })
    }
}
