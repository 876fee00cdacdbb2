//! The generic layers every request passes through, outermost first, as
//! tower layers around the MCP pipeline:
//!
//! 1. request id ([`request_id`]): kept or minted, on the request and the response;
//! 2. panic catching ([`panic`]): a panic in one request answers 500
//!    `internal_error` and is counted; the gateway keeps serving;
//! 3. load shedding ([`shed`]): more than `max_in_flight_requests` at once
//!    are answered 503 `overloaded` at once instead of queueing;
//! 4. a deadline ([`deadline`]): no response head within `request_timeout`
//!    answers 504 `gateway_timeout`.
//!
//! 2a. with `[tracing]` configured, the trace layer ([`trace`]) right after
//!    the request id: the request's span and the W3C trace headers (without
//!    it the layer only checks an `Option`).
//!
//! Each layer's service is a small struct of `Arc`s and its future a named
//! type, so the stack is built once per connection, cloning it per request
//! costs a few reference counts, and the pipeline's [`ProxyBody`] reaches
//! hyper unboxed. (The stack was `tower-http`'s CatchPanic and `tower`'s
//! LoadShed, GlobalConcurrencyLimit and Timeout behind a `BoxCloneService`:
//! a boxed service clone, a semaphore future and a boxed response body on
//! every request; see bench/README.md for what dropping them bought.)
//!
//! The MCP phases stay typed code in [`crate::pipeline`]: they share one
//! request context, which layers would have to pass through extensions.

pub(crate) mod deadline;
pub(crate) mod panic;
pub(crate) mod request_id;
pub(crate) mod shed;
pub(crate) mod trace;

use std::sync::Arc;
use std::time::Duration;

use http::Response;
use tower::ServiceBuilder;

use crate::model::Refusal;
use crate::pipeline::body::ProxyBody;
use crate::pipeline::record::Metrics;
use crate::pipeline::refuse::error_response;

pub(crate) use deadline::DeadlineLayer;
pub use panic::CatchPanicLayer;
pub use request_id::{RequestId, RequestIdLayer, X_REQUEST_ID};
pub(crate) use shed::{InFlight, LoadShedLayer};

/// The whole service one connection's requests go through.
pub(crate) type Layered<S> = request_id::SetRequestId<
    trace::TraceRequests<panic::CatchPanic<shed::LoadShed<deadline::Deadline<S>>>>,
>;

/// What the layers need, shared by every connection.
#[derive(Clone)]
pub struct LayerSettings {
    pub(crate) request_timeout: Duration,
    pub(crate) metrics: Arc<Metrics>,
    /// Shared by every connection, so the limit is gateway-wide.
    pub(crate) in_flight: InFlight,
    /// OpenTelemetry traces, when configured.
    pub(crate) telemetry: Option<Arc<crate::telemetry::Telemetry>>,
}

impl LayerSettings {
    pub fn new(max_in_flight: usize, request_timeout: Duration, metrics: Arc<Metrics>) -> Self {
        LayerSettings {
            request_timeout,
            metrics,
            in_flight: InFlight::new(max_in_flight),
            telemetry: None,
        }
    }

    pub fn with_telemetry(mut self, telemetry: Option<Arc<crate::telemetry::Telemetry>>) -> Self {
        self.telemetry = telemetry;
        self
    }
}

/// A refusal from one of the layers, as the JSON-RPC error response every
/// client understands.
fn refusal_response(refusal: &Refusal) -> Response<ProxyBody> {
    error_response(None, refusal, None)
}

/// Wrap the pipeline's service for one connection in the generic layers.
pub(crate) fn around<S>(inner: S, settings: &LayerSettings) -> Layered<S> {
    ServiceBuilder::new()
        .layer(RequestIdLayer)
        .layer(trace::TraceLayer(settings.telemetry.clone()))
        .layer(CatchPanicLayer::new(settings.metrics.clone()))
        .layer(LoadShedLayer::new(settings.in_flight.clone()))
        .layer(DeadlineLayer::new(settings.request_timeout))
        .service(inner)
}
