//! The deadline: a request whose response head is not ready within
//! `request_timeout` is answered 504 `gateway_timeout` (its pipeline future is
//! dropped). The deadline goes on the request's extensions
//! ([`crate::model::Deadline`]) so the pipeline's record counts such a cut as
//! a timeout, not as a client that went away.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use tokio::time::Sleep;
use tower::{Layer, Service};

use super::refusal_response;
use crate::model::{Reason, Refusal};
use crate::pipeline::body::ProxyBody;

#[derive(Clone, Copy)]
pub(crate) struct DeadlineLayer {
    timeout: Duration,
}

impl DeadlineLayer {
    pub(crate) fn new(timeout: Duration) -> Self {
        DeadlineLayer { timeout }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;
    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            timeout: self.timeout,
        }
    }
}

#[derive(Clone)]
pub struct Deadline<S> {
    inner: S,
    timeout: Duration,
}

fn timed_out() -> Response<ProxyBody> {
    refusal_response(&Refusal::new(
        Reason::GatewayTimeout,
        "the gateway could not answer within its request_timeout",
    ))
}

impl<S, B> Service<Request<B>> for Deadline<S>
where
    S: Service<Request<B>, Response = Response<ProxyBody>, Error = Infallible>,
{
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let at = tokio::time::Instant::now() + self.timeout;
        req.extensions_mut()
            .insert(crate::model::Deadline(at.into_std()));
        DeadlineFuture {
            inner: self.inner.call(req),
            sleep: tokio::time::sleep_until(at),
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner future, raced against the request's deadline.
    pub struct DeadlineFuture<F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: Sleep,
    }
}

impl<F> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<Response<ProxyBody>, Infallible>>,
{
    type Output = Result<Response<ProxyBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(answer) = this.inner.poll(cx) {
            return Poll::Ready(answer);
        }
        std::task::ready!(this.sleep.poll(cx));
        Poll::Ready(Ok(timed_out()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    #[tokio::test]
    async fn no_head_within_the_timeout_answers_504() {
        let layer = DeadlineLayer::new(Duration::from_millis(50));
        let slow = layer.layer(tower::service_fn(|req: Request<()>| async move {
            assert!(req.extensions().get::<crate::model::Deadline>().is_some());
            std::future::pending::<()>().await;
            Ok::<_, Infallible>(Response::new(ProxyBody::empty()))
        }));
        let resp = slow.oneshot(Request::new(())).await.unwrap();
        assert_eq!(resp.status(), http::StatusCode::GATEWAY_TIMEOUT);
        let quick = layer.layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(ProxyBody::empty()))
        }));
        let resp = quick.oneshot(Request::new(())).await.unwrap();
        assert_eq!(resp.status(), http::StatusCode::OK);
    }
}
