//! Turns the generic layers' errors (load shed, deadline) into the JSON-RPC
//! refusals every client understands, so the connection's service never
//! fails: hyper needs a service whose error type is `Infallible`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use tower::{BoxError, Service};

use crate::pipeline::body::ProxyBody;

/// How an error becomes a response.
pub type ToResponse = fn(BoxError) -> Response<ProxyBody>;

pub struct Recover<S> {
    inner: S,
    to_response: ToResponse,
    /// An error from `poll_ready`, answered by the next call.
    pending: Option<Response<ProxyBody>>,
}

impl<S: Clone> Clone for Recover<S> {
    /// A clone starts without a pending answer: that belongs to the caller
    /// whose `poll_ready` produced it.
    fn clone(&self) -> Self {
        Recover::new(self.inner.clone(), self.to_response)
    }
}

impl<S> Recover<S> {
    pub fn new(inner: S, to_response: ToResponse) -> Self {
        Recover {
            inner,
            to_response,
            pending: None,
        }
    }
}

impl<S, R> Service<R> for Recover<S>
where
    S: Service<R, Response = Response<ProxyBody>>,
    S::Error: Into<BoxError>,
{
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = RecoverFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        match self.inner.poll_ready(cx) {
            Poll::Ready(Err(e)) => {
                self.pending = Some((self.to_response)(e.into()));
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn call(&mut self, req: R) -> Self::Future {
        match self.pending.take() {
            Some(resp) => RecoverFuture {
                inner: None,
                ready: Some(resp),
                to_response: self.to_response,
            },
            None => RecoverFuture {
                inner: Some(self.inner.call(req)),
                ready: None,
                to_response: self.to_response,
            },
        }
    }
}

pin_project_lite::pin_project! {
    pub struct RecoverFuture<F> {
        #[pin]
        inner: Option<F>,
        ready: Option<Response<ProxyBody>>,
        to_response: ToResponse,
    }
}

impl<F, E> Future for RecoverFuture<F>
where
    F: Future<Output = Result<Response<ProxyBody>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<ProxyBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(resp) = this.ready.take() {
            return Poll::Ready(Ok(resp));
        }
        match this.inner.as_pin_mut() {
            None => Poll::Ready(Ok((this.to_response)("no response".into()))),
            Some(f) => match std::task::ready!(f.poll(cx)) {
                Ok(resp) => Poll::Ready(Ok(resp)),
                Err(e) => Poll::Ready(Ok((this.to_response)(e.into()))),
            },
        }
    }
}
