//! The response body the gateway sends: a whole inspected message, nothing,
//! or an inspected event stream. Its error type is `Infallible`: failures on a
//! stream become a final JSON-RPC error event, never a torn connection.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::record::{Outcome, RequestRecord};
use crate::model::Reason;

/// An event stream the response phase inspects as it goes.
pub(crate) trait EventSource: Send {
    /// The next event's bytes, already inspected; `None` at the end.
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>>;
    /// Why the stream was cut, when it was.
    fn refused(&self) -> Option<Reason>;
}

pub struct ProxyBody {
    kind: Kind,
    record: Option<RequestRecord>,
}

enum Kind {
    Full(Option<Bytes>),
    Stream(Box<dyn EventSource>),
}

impl ProxyBody {
    pub(crate) fn full(bytes: Bytes) -> Self {
        ProxyBody {
            kind: Kind::Full(Some(bytes).filter(|b| !b.is_empty())),
            record: None,
        }
    }

    pub(crate) fn empty() -> Self {
        ProxyBody {
            kind: Kind::Full(None),
            record: None,
        }
    }

    pub(crate) fn stream(source: Box<dyn EventSource>) -> Self {
        ProxyBody {
            kind: Kind::Stream(source),
            record: None,
        }
    }

    /// Why the gateway cut this stream, when it did (a whole body: never).
    pub(crate) fn refused(&self) -> Option<Reason> {
        match &self.kind {
            Kind::Stream(s) => s.refused(),
            Kind::Full(_) => None,
        }
    }

    /// Attach the request's record; it is closed when the body ends.
    pub(crate) fn recorded(mut self, mut record: RequestRecord) -> Self {
        if matches!(self.kind, Kind::Stream(_)) {
            record.set_streamed();
        }
        self.record = Some(record);
        if matches!(self.kind, Kind::Full(None)) {
            self.finish();
        }
        self
    }

    fn finish(&mut self) {
        if let Some(r) = self.record.as_mut() {
            if let Kind::Stream(s) = &self.kind {
                if let Some(reason) = s.refused() {
                    r.set_outcome(Outcome::Refused(reason));
                }
            }
            r.finish();
        }
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let polled = match &mut this.kind {
            Kind::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Kind::Stream(s) => s.poll_event(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        };
        match &polled {
            Poll::Ready(None) => this.finish(),
            Poll::Ready(Some(_)) if matches!(this.kind, Kind::Full(None)) => this.finish(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.kind, Kind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Stream(_) => SizeHint::default(),
        }
    }
}
