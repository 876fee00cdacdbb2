//! The forward phase's connections to a stdio upstream: each one an
//! in-memory pipe whose other end is served by the program's HTTP face,
//! so the pooled hyper client, its timeouts and the response phases work
//! on a program exactly as on a server across the network.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::DuplexStream;

use super::face;
use super::pool::StdioUpstream;

/// How much one direction of the pipe buffers before the writer waits.
const PIPE_BYTES: usize = 256 * 1024;

/// The connector of a stdio upstream's pool.
#[derive(Clone)]
pub struct StdioConnector {
    upstream: Arc<StdioUpstream>,
}

impl StdioConnector {
    pub(crate) fn new(upstream: Arc<StdioUpstream>) -> StdioConnector {
        StdioConnector { upstream }
    }
}

/// The gateway's end of a pipe.
pub struct Pipe(TokioIo<DuplexStream>);

impl Connection for Pipe {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for Pipe {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Pipe {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl tower::Service<http::Uri> for StdioConnector {
    type Response = Pipe;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Pipe, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
        let upstream = self.upstream.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| face::serve(upstream.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(theirs), service)
                .await;
        });
        Box::pin(async move { Ok(Pipe(TokioIo::new(ours))) })
    }
}
