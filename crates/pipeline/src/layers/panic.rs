//! Panic catching: a panic while a request is handled (when its future is
//! made or polled) answers 500 `internal_error` and is counted; the
//! connection and the gateway keep serving.

use std::convert::Infallible;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Response;
use tower::{Layer, Service};

use super::refusal_response;
use crate::model::{Reason, Refusal};
use crate::pipeline::body::ProxyBody;
use crate::pipeline::record::Metrics;

#[derive(Clone)]
pub struct CatchPanicLayer {
    metrics: Arc<Metrics>,
}

impl CatchPanicLayer {
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        CatchPanicLayer { metrics }
    }
}

impl<S> Layer<S> for CatchPanicLayer {
    type Service = CatchPanic<S>;
    fn layer(&self, inner: S) -> CatchPanic<S> {
        CatchPanic {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct CatchPanic<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

fn panicked(metrics: &Metrics) -> Response<ProxyBody> {
    metrics.panicked();
    tracing::error!("a request handler panicked; answered 500 internal_error");
    refusal_response(&Refusal::new(
        Reason::InternalError,
        "the gateway failed while handling this request",
    ))
}

impl<S, R> Service<R> for CatchPanic<S>
where
    S: Service<R, Response = Response<ProxyBody>, Error = Infallible>,
{
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = PanicFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let inner = catch_unwind(AssertUnwindSafe(|| self.inner.call(req))).ok();
        PanicFuture {
            inner,
            metrics: Some(self.metrics.clone()),
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner future, polled so that a panic becomes a 500 answer.
    pub struct PanicFuture<F> {
        #[pin]
        inner: Option<F>,
        // Taken when the answer is given (the panic counter needs it once).
        metrics: Option<Arc<Metrics>>,
    }
}

impl<F> Future for PanicFuture<F>
where
    F: Future<Output = Result<Response<ProxyBody>, Infallible>>,
{
    type Output = Result<Response<ProxyBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let polled = match this.inner.as_mut().as_pin_mut() {
            Some(fut) => catch_unwind(AssertUnwindSafe(|| fut.poll(cx))).ok(),
            // `call` itself panicked.
            None => None,
        };
        match polled {
            Some(Poll::Pending) => Poll::Pending,
            Some(Poll::Ready(answer)) => Poll::Ready(answer),
            None => {
                // The panicked future is not polled again.
                this.inner.set(None);
                let resp = match this.metrics.take() {
                    Some(m) => panicked(&m),
                    None => refusal_response(&Refusal::new(
                        Reason::InternalError,
                        "the gateway failed while handling this request",
                    )),
                };
                Poll::Ready(Ok(resp))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_panic_in_call_or_poll_answers_500_and_is_counted() {
        let metrics = Metrics::new().unwrap();
        let layer = CatchPanicLayer::new(metrics.clone());
        let in_call = layer.layer(tower::service_fn(
            |_: ()| -> std::future::Ready<Result<Response<ProxyBody>, Infallible>> {
                panic!("in call")
            },
        ));
        let resp = in_call.oneshot(()).await.unwrap();
        assert_eq!(resp.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
        let in_poll = layer.layer(tower::service_fn(|_: ()| async {
            if true {
                panic!("in poll");
            }
            Ok::<_, Infallible>(Response::new(ProxyBody::empty()))
        }));
        let resp = in_poll.oneshot(()).await.unwrap();
        assert_eq!(resp.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
        let text = String::from_utf8_lossy(&metrics.render()).into_owned();
        assert!(text.contains("portcullis_panics_total 2"), "{text}");
    }
}
