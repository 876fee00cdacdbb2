//! An upstream response's body, whichever kind of pool it came from.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::pool::PooledBody;
use super::Https;
use crate::stdio::StdioConnector;

/// The body of an upstream's answer: reading it drives the connection it
/// arrives on (see [`super::pool`]).
pub enum UpstreamBody {
    Http(PooledBody<Https>),
    Stdio(PooledBody<StdioConnector>),
}

impl UpstreamBody {
    /// The answer is complete; see [`PooledBody::release`].
    pub fn release(self) {
        match self {
            UpstreamBody::Http(b) => b.release(),
            UpstreamBody::Stdio(b) => b.release(),
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            UpstreamBody::Http(b) => Pin::new(b).poll_frame(cx),
            UpstreamBody::Stdio(b) => Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpstreamBody::Http(b) => b.is_end_stream(),
            UpstreamBody::Stdio(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamBody::Http(b) => b.size_hint(),
            UpstreamBody::Stdio(b) => b.size_hint(),
        }
    }
}
