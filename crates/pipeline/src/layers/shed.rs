//! Load shedding: at most `max_in_flight_requests` requests are handled at
//! once, gateway-wide; one more is answered 503 `overloaded` (with
//! `Retry-After`) at once instead of queueing. A slot is held until the
//! response head is out, and given back however the request ends.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Response};
use tower::{Layer, Service};

use super::refusal_response;
use crate::model::{Reason, Refusal};
use crate::pipeline::body::ProxyBody;

/// The gateway-wide count of requests being handled, and its limit. A
/// counter, not a semaphore: nothing ever waits for a slot.
#[derive(Clone)]
pub(crate) struct InFlight {
    now: Arc<AtomicUsize>,
    max: usize,
}

impl InFlight {
    /// Requests being handled now.
    #[cfg(test)]
    pub(crate) fn current(&self) -> usize {
        self.now.load(Ordering::Acquire)
    }

    pub(crate) fn new(max: usize) -> Self {
        InFlight {
            now: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// One slot, or `None` when all are taken.
    fn admit(&self) -> Option<Slot> {
        let before = self.now.fetch_add(1, Ordering::AcqRel);
        // The slot exists (and gives the increment back) either way.
        let slot = Slot(self.now.clone());
        (before < self.max).then_some(slot)
    }
}

/// A taken slot, given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Clone)]
pub(crate) struct LoadShedLayer {
    in_flight: InFlight,
}

impl LoadShedLayer {
    pub(crate) fn new(in_flight: InFlight) -> Self {
        LoadShedLayer { in_flight }
    }
}

impl<S> Layer<S> for LoadShedLayer {
    type Service = LoadShed<S>;
    fn layer(&self, inner: S) -> LoadShed<S> {
        LoadShed {
            inner,
            in_flight: self.in_flight.clone(),
        }
    }
}

#[derive(Clone)]
pub struct LoadShed<S> {
    inner: S,
    in_flight: InFlight,
}

fn overloaded() -> Response<ProxyBody> {
    let mut resp = refusal_response(&Refusal::new(
        Reason::Overloaded,
        "the gateway is handling as many requests as it is configured to; retry shortly",
    ));
    resp.headers_mut()
        .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

impl<S, R> Service<R> for LoadShed<S>
where
    S: Service<R, Response = Response<ProxyBody>, Error = Infallible>,
{
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = ShedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        match self.in_flight.admit() {
            Some(slot) => ShedFuture::Admitted {
                inner: self.inner.call(req),
                slot: Some(slot),
            },
            None => ShedFuture::Shed {
                answer: Some(overloaded()),
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner future holding its slot, or the 503 answer.
    #[project = ShedProj]
    pub enum ShedFuture<F> {
        Admitted { #[pin] inner: F, slot: Option<Slot> },
        Shed { answer: Option<Response<ProxyBody>> },
    }
}

impl<F> Future for ShedFuture<F>
where
    F: Future<Output = Result<Response<ProxyBody>, Infallible>>,
{
    type Output = Result<Response<ProxyBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ShedProj::Admitted { inner, slot } => {
                let answer = std::task::ready!(inner.poll(cx));
                slot.take();
                Poll::Ready(answer)
            }
            ShedProj::Shed { answer } => Poll::Ready(Ok(answer.take().unwrap_or_else(overloaded))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    #[tokio::test]
    async fn over_the_limit_is_shed_and_a_slot_comes_back() {
        let in_flight = InFlight::new(1);
        let layer = LoadShedLayer::new(in_flight.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let rx = Arc::new(std::sync::Mutex::new(Some(rx)));
        let svc = layer.layer(tower::service_fn(move |_: ()| {
            let wait = rx.lock().unwrap().take();
            async move {
                if let Some(rx) = wait {
                    let _ = rx.await;
                }
                Ok::<_, Infallible>(Response::new(ProxyBody::empty()))
            }
        }));
        let first = tokio::spawn(svc.clone().oneshot(()));
        while in_flight.current() == 0 {
            tokio::task::yield_now().await;
        }
        let shed = svc.clone().oneshot(()).await.unwrap();
        assert_eq!(shed.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(shed.headers()[http::header::RETRY_AFTER], "1");
        tx.send(()).unwrap();
        assert_eq!(first.await.unwrap().unwrap().status(), http::StatusCode::OK);
        assert_eq!(in_flight.current(), 0);
        let again = svc.oneshot(()).await.unwrap();
        assert_eq!(again.status(), http::StatusCode::OK);
    }
}
