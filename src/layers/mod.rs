//! The generic layers every request passes through, outermost first, built
//! with `tower::ServiceBuilder` around the MCP pipeline:
//!
//! 1. request id ([`request_id`]): kept or minted, on the request and the response;
//! 2. panic catching (`tower-http`): a panic in one request answers 500
//!    `internal_error` and is counted; the gateway keeps serving;
//! 3. load shedding (`tower`): more than `max_in_flight_requests` at once
//!    are answered 503 `overloaded` at once instead of queueing;
//! 4. a deadline (`tower`): no response head within `request_timeout`
//!    answers 504 `gateway_timeout`.
//!
//! With `[tracing]` configured, the trace layer ([`trace`]) sits right after
//! the request id: the request's span and the W3C trace headers.
//!
//! The MCP phases stay typed code in [`crate::pipeline`]: they share one
//! request context, which layers would have to pass through extensions.

mod recover;
pub mod request_id;
mod trace;

use std::any::Any;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Request, Response};
use hyper::body::Incoming;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::error::Overloaded;
use tower::timeout::error::Elapsed;
use tower::util::BoxCloneService;
use tower::{BoxError, Layer, ServiceBuilder};
use tower_http::catch_panic::CatchPanicLayer;

use crate::model::{Reason, Refusal};
use crate::pipeline::body::ProxyBody;
use crate::pipeline::record::Metrics;
use crate::pipeline::refuse::error_response;

pub use request_id::{RequestId, RequestIdLayer, X_REQUEST_ID};

/// The body a layered response carries (the panic layer boxes it).
pub type LayeredBody = tower_http::body::UnsyncBoxBody<bytes::Bytes, BoxError>;

/// The whole service one connection's requests go through.
pub type ConnectionService = BoxCloneService<Request<Incoming>, Response<LayeredBody>, Infallible>;

/// What the layers need, shared by every connection.
#[derive(Clone)]
pub struct LayerSettings {
    pub max_in_flight: usize,
    pub request_timeout: Duration,
    pub metrics: Arc<Metrics>,
    /// Shared by every connection, so the limit is gateway-wide.
    pub in_flight: GlobalConcurrencyLimitLayer,
    /// OpenTelemetry traces, when configured (the trace layer is left out otherwise).
    pub telemetry: Option<Arc<crate::telemetry::Telemetry>>,
}

impl LayerSettings {
    pub fn new(max_in_flight: usize, request_timeout: Duration, metrics: Arc<Metrics>) -> Self {
        LayerSettings {
            max_in_flight,
            request_timeout,
            metrics,
            in_flight: GlobalConcurrencyLimitLayer::new(max_in_flight),
            telemetry: None,
        }
    }

    pub fn with_telemetry(mut self, telemetry: Option<Arc<crate::telemetry::Telemetry>>) -> Self {
        self.telemetry = telemetry;
        self
    }
}

fn refusal_response(refusal: &Refusal) -> Response<ProxyBody> {
    error_response(None, refusal, None)
}

/// A refusal from the generic layers (load shed, deadline).
fn layer_error(e: BoxError) -> Response<ProxyBody> {
    if e.is::<Overloaded>() {
        let mut resp = refusal_response(&Refusal::new(
            Reason::Overloaded,
            "the gateway is handling as many requests as it is configured to; retry shortly",
        ));
        resp.headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
        return resp;
    }
    if e.is::<Elapsed>() {
        return refusal_response(&Refusal::new(
            Reason::GatewayTimeout,
            "the gateway could not answer within its request_timeout",
        ));
    }
    refusal_response(&Refusal::new(Reason::InternalError, "the gateway failed"))
}

/// Wrap the pipeline's service for one connection in the generic layers.
pub fn around<S>(inner: S, settings: &LayerSettings) -> ConnectionService
where
    S: tower::Service<Request<Incoming>, Response = Response<ProxyBody>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let metrics = settings.metrics.clone();
    let on_panic = move |_: Box<dyn Any + Send + 'static>| {
        metrics.panicked();
        tracing::error!("a request handler panicked; answered 500 internal_error");
        refusal_response(&Refusal::new(
            Reason::InternalError,
            "the gateway failed while handling this request",
        ))
    };
    let timeout = settings.request_timeout;
    let limited = ServiceBuilder::new()
        .load_shed()
        .layer(settings.in_flight.clone())
        .map_request(move |mut req: Request<Incoming>| {
            let at = std::time::Instant::now() + timeout;
            req.extensions_mut().insert(crate::model::Deadline(at));
            req
        })
        .timeout(timeout)
        .service(inner);
    let guarded = ServiceBuilder::new()
        .layer(CatchPanicLayer::custom(on_panic))
        .service(recover::Recover::new(limited, layer_error));
    // Two stacks rather than an optional layer: with tracing off a request
    // does not pass through it at all.
    match &settings.telemetry {
        Some(t) => BoxCloneService::new(
            ServiceBuilder::new()
                .layer(RequestIdLayer)
                .layer(trace::TraceLayer(t.clone()))
                .service(guarded),
        ),
        None => BoxCloneService::new(RequestIdLayer.layer(guarded)),
    }
}
