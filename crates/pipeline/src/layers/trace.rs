//! The tracing layer: opens the request's server span before the pipeline
//! runs and hands it to the phases in the request's extensions; the request
//! record holds it until the response body has ended, so a stream's span
//! covers the stream. Without `[tracing]` it holds no exporter and a request
//! passes through with one `Option` check (no span, no allocation).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::{Request, Response};
use hyper::body::Incoming;
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use super::RequestId;
use crate::telemetry::{RequestTrace, Telemetry};

#[derive(Clone)]
pub(crate) struct TraceLayer(pub Option<Arc<Telemetry>>);

impl<S> Layer<S> for TraceLayer {
    type Service = TraceRequests<S>;

    fn layer(&self, inner: S) -> TraceRequests<S> {
        TraceRequests {
            inner,
            telemetry: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct TraceRequests<S> {
    inner: S,
    telemetry: Option<Arc<Telemetry>>,
}

impl<S, B> Service<Request<Incoming>> for TraceRequests<S>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = Traced<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Incoming>) -> Self::Future {
        let trace = self.telemetry.as_ref().map(|telemetry| {
            let id = req.extensions().get::<RequestId>().map(|r| r.0.clone());
            let method = req.method().clone();
            let trace =
                telemetry.start_request(&method, req.headers_mut(), id.as_deref().unwrap_or("-"));
            req.extensions_mut().insert(trace.clone());
            trace
        });
        Traced {
            inner: self.inner.call(req),
            trace,
        }
    }
}

pin_project! {
    /// The pipeline's answer; its status goes on the span when it comes.
    pub struct Traced<F> {
        #[pin]
        inner: F,
        trace: Option<RequestTrace>,
    }
}

impl<F, B, E> Future for Traced<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = ready!(this.inner.poll(cx));
        if let (Some(trace), Ok(resp)) = (this.trace.as_ref(), &out) {
            trace.responded(resp.status());
        }
        Poll::Ready(out)
    }
}
