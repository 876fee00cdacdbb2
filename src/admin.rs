//! The admin listener: liveness, readiness and Prometheus metrics, kept off
//! the data-plane listeners; and the pinned listings (rug pulls):
//! `GET /listings?upstream=ID` (names and digests), `GET /listings/held`
//! (a held definition's text, for review) and `POST /listings/accept`, the
//! one request here that changes state. Every `/listings` request must be
//! signed with the gateway's `[state]` keys (`signed.rs`) and name
//! an address as its Host (a page that rebinds a name to loopback cannot
//! read them); an acceptance is answered only to a peer on loopback, only
//! with the `X-Portcullis-Admin` header and a JSON body, and never with an
//! `Origin`: `portcullis listings accept --config FILE` on the gateway's
//! host (or in its pod), nobody else. And the approval page
//! (`approvals/`), where an approver decides a call an `[[approval]]`
//! rule holds for them.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

use std::net::SocketAddr;

use arc_swap::ArcSwap;

use crate::pipeline::record::Metrics;
use crate::pipeline::Gateway;

mod approvals;
mod listings;

pub use approvals::{operator_sign_in_token, OPERATOR_TOKEN_LIFETIME};

pub(crate) fn text(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// The running gateway, whose listing store the listings routes read.
pub type Current = Arc<ArcSwap<Gateway>>;

/// `/readyz` is 200 when the server says it serves (not draining) and it
/// is warm: the first JWKS key sets are in (or their `jwks_ready_timeout`
/// is over) and every `eager` stdio program's first start is over.
fn ready(metrics: &Metrics, warm: &AtomicBool) -> bool {
    metrics.is_ready() && warm.load(Ordering::Acquire)
}

async fn route(
    req: Request<Incoming>,
    peer: SocketAddr,
    metrics: &Metrics,
    warm: &AtomicBool,
    current: Option<&Current>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if path == "/listings" || path.starts_with("/listings/") {
        return match current {
            Some(current) => listings::answer(req, peer, &current.load_full()).await,
            None => text(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
        };
    }
    if approvals::is_page(path) {
        return match current {
            Some(current) => approvals::answer(req, &current.load_full()).await,
            None => text(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
        };
    }
    answer(&req, metrics, ready(metrics, warm))
}

fn answer(req: &Request<Incoming>, metrics: &Metrics, ready: bool) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "text/plain", "ok\n"),
        "/readyz" if ready => text(StatusCode::OK, "text/plain", "ready\n"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "text/plain", "not ready\n"),
        "/metrics" => text(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /healthz, /readyz or /metrics\n",
        ),
    }
}

/// Serve the admin routes until `shutdown`. `warm` is set once the first
/// JWKS key sets are in and the eager programs started (see [`ready`]).
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    warm: Arc<AtomicBool>,
    current: Option<Current>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.changed() => return,
            r = listener.accept() => match r { Ok(s) => s, Err(_) => continue },
        };
        let metrics = metrics.clone();
        let warm = warm.clone();
        let current = current.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let metrics = metrics.clone();
                let warm = warm.clone();
                let current = current.clone();
                async move {
                    let r = route(req, peer, &metrics, &warm, current.as_ref()).await;
                    Ok::<_, Infallible>(r)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
