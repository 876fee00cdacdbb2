//! The tracing layer (only in the stack when `[tracing]` is configured):
//! opens the request's server span before the pipeline runs, hands it to
//! the phases in the request's extensions; the request record holds it
//! until the response body has ended, so a stream's span covers the stream.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use http::{Request, Response};
use hyper::body::Incoming;
use tower::{Layer, Service};

use super::{LayeredBody, RequestId};
use crate::telemetry::Telemetry;

#[derive(Clone)]
pub struct TraceLayer(pub Arc<Telemetry>);

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
    telemetry: Arc<Telemetry>,
}

impl<S> Service<Request<Incoming>> for TraceRequests<S>
where
    S: Service<Request<Incoming>, Response = Response<LayeredBody>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<LayeredBody>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<LayeredBody>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Incoming>) -> Self::Future {
        let id = req.extensions().get::<RequestId>().map(|r| r.0.clone());
        let method = req.method().clone();
        let trace =
            self.telemetry
                .start_request(&method, req.headers_mut(), id.as_deref().unwrap_or("-"));
        req.extensions_mut().insert(trace.clone());
        let answered = self.inner.call(req);
        Box::pin(async move {
            let resp = answered.await?;
            trace.responded(resp.status());
            // The request record keeps the span open until the body ends.
            Ok::<_, Infallible>(resp)
        })
    }
}
