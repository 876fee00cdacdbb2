//! Request ids: the client's `X-Request-Id` when it is a sane token, else a
//! new one (a per-process random prefix and a counter: unique and cheap, not
//! secret). The id is set on the request (so the upstream gets it), kept in
//! its extensions for the phases and logs, and returned on the response.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use http::header::Entry;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use tower::{Layer, Service};

pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The request's id, in its extensions.
#[derive(Debug, Clone)]
pub struct RequestId(pub Arc<str>);

fn sane(v: &HeaderValue) -> bool {
    (1..=64).contains(&v.len())
        && v.as_bytes()
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(b))
}

fn mint() -> HeaderValue {
    static PREFIX: OnceLock<[u8; 8]> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        let id = crate::mrtr::seal::new_operation_id();
        let mut p = [b'0'; 8];
        for (d, s) in p.iter_mut().zip(id.bytes()) {
            *d = s;
        }
        p
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut buf = [0u8; 8 + 1 + 16];
    buf[..8].copy_from_slice(prefix);
    buf[8] = b'-';
    let hex = b"0123456789abcdef";
    let digits = (64 - n.leading_zeros()).div_ceil(4).max(1) as usize;
    for i in 0..digits {
        buf[9 + i] = hex[((n >> (4 * (digits - 1 - i))) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&buf[..9 + digits]).unwrap_or(HeaderValue::from_static("unknown"))
}

#[derive(Clone, Copy, Debug, Default)]
pub struct RequestIdLayer;

impl<S> Layer<S> for RequestIdLayer {
    type Service = SetRequestId<S>;
    fn layer(&self, inner: S) -> SetRequestId<S> {
        SetRequestId { inner }
    }
}

#[derive(Clone, Debug)]
pub struct SetRequestId<S> {
    inner: S,
}

impl<S, B, RB> Service<Request<B>> for SetRequestId<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = WithRequestId<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let value = assign(req.headers_mut());
        let text: Arc<str> = Arc::from(value.to_str().unwrap_or("-"));
        req.extensions_mut().insert(RequestId(text));
        WithRequestId {
            inner: self.inner.call(req),
            value: Some(value),
        }
    }
}

/// The request's id: the client's when sane, else a new one, left on the
/// request (one value: the upstream gets exactly one) with one header look-up.
fn assign(headers: &mut HeaderMap) -> HeaderValue {
    match headers.entry(&X_REQUEST_ID) {
        Entry::Occupied(mut e) if sane(e.get()) => {
            let kept = e.get().clone();
            if e.iter().nth(1).is_some() {
                e.insert(kept.clone());
            }
            kept
        }
        Entry::Occupied(mut e) => {
            let minted = mint();
            e.insert(minted.clone());
            minted
        }
        Entry::Vacant(e) => e.insert(mint()).clone(),
    }
}

pin_project_lite::pin_project! {
    /// The inner response, with the request's id set on it.
    pub struct WithRequestId<F> {
        #[pin]
        inner: F,
        value: Option<HeaderValue>,
    }
}

impl<F, RB, E> Future for WithRequestId<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = Result<Response<RB>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut resp = std::task::ready!(this.inner.poll(cx))?;
        if let Some(v) = this.value.take() {
            resp.headers_mut().insert(X_REQUEST_ID.clone(), v);
        }
        Poll::Ready(Ok(resp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sane_and_distinct() {
        let a = mint();
        let b = mint();
        assert_ne!(a, b);
        assert!(sane(&a) && sane(&b), "{a:?}");
        assert!(!sane(&HeaderValue::from_static("bad id\twith tab")));
        assert!(!sane(&HeaderValue::from_static("")));
    }

    #[test]
    fn a_sane_id_is_kept_once_and_a_bad_one_replaced() {
        let mut h = HeaderMap::new();
        h.append(&X_REQUEST_ID, HeaderValue::from_static("trace-abc-123"));
        h.append(&X_REQUEST_ID, HeaderValue::from_static("second"));
        assert_eq!(assign(&mut h), "trace-abc-123");
        assert_eq!(h.get_all(&X_REQUEST_ID).iter().count(), 1);
        h.insert(&X_REQUEST_ID, HeaderValue::from_static("bad id"));
        let v = assign(&mut h);
        assert!(sane(&v) && h[&X_REQUEST_ID] == v, "{v:?}");
        assert!(assign(&mut HeaderMap::new()).len() > 9);
    }
}
