//! OpenTelemetry traces: one server span per request, exported over
//! OTLP/HTTP (protobuf) in batches. The span continues a client's W3C
//! `traceparent`, the upstream receives the gateway's span as its parent,
//! and the pipeline marks its phases as span events. Off (no `[tracing]`
//! section) there is no provider, no exporter and no span: a request
//! carries an empty [`RequestTrace`], which costs nothing.
//!
//! Attributes carry ids and names the gateway owns or the protocol defines
//! (request id, operation id and round, MCP method, upstream id, refusal
//! code, HTTP status) — never a form value, a tool argument or a secret.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{HeaderExtractor, HeaderInjector, HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider,
};
use opentelemetry_sdk::Resource;

use crate::audit::{AuditSink, TraceIds};
use crate::config::TraceSettings;

/// The largest collector answer read (it is only checked for its status).
const MAX_COLLECTOR_ANSWER: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    #[error("OTLP exporter TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("OTLP exporter needs a Tokio runtime to send from")]
    NoRuntime,
}

/// The gateway's tracer and the provider that batches and exports its spans.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    propagator: TraceContextPropagator,
}

impl Telemetry {
    /// Build the exporter and the provider. Call from inside the runtime:
    /// exports are sent from its workers.
    pub fn start(settings: &TraceSettings) -> Result<Arc<Telemetry>, TelemetryError> {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| TelemetryError::NoRuntime)?;
        let client = CollectorClient::new(runtime, settings.export_timeout)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.to_string())
            .with_timeout(settings.export_timeout)
            .with_http_client(client)
            .build()?;
        let batch = BatchConfigBuilder::default()
            .with_scheduled_delay(settings.export_interval)
            .build();
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch)
            .build();
        let sampler =
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(settings.sample_ratio)));
        let resource = Resource::builder_empty()
            .with_service_name(settings.service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(sampler)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("portcullis");
        Ok(Arc::new(Telemetry {
            provider,
            tracer,
            propagator: TraceContextPropagator::new(),
        }))
    }

    /// Start `[audit.otlp]`'s export of `sink`'s events, when configured,
    /// with the same HTTP client the spans go out with. One that cannot
    /// start says so; the trail's other output goes on.
    pub fn export_audit(sink: &AuditSink) {
        let Some(settings) = sink.settings().otlp() else {
            return;
        };
        let started = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => CollectorClient::new(runtime, settings.export_timeout)
                .map_err(|e| e.to_string())
                .and_then(|client| sink.start_otlp(client).map_err(|e| e.to_string())),
            Err(_) => Err(TelemetryError::NoRuntime.to_string()),
        };
        if let Err(e) = started {
            tracing::error!("audit records to {}: {e}", settings.endpoint);
        }
    }

    /// Open the server span of one request: the child of the client's
    /// `traceparent` when it sent a valid one, a new trace otherwise. The
    /// trace headers are rewritten to the gateway's span, so the upstream
    /// (which receives them) sees the gateway as its parent.
    pub fn start_request(
        &self,
        method: &Method,
        headers: &mut HeaderMap,
        request_id: &str,
    ) -> RequestTrace {
        let parent = self.propagator.extract(&HeaderExtractor(headers));
        let span = self
            .tracer
            .span_builder(method.as_str().to_owned())
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("http.request.method", method.as_str().to_owned()),
                KeyValue::new("portcullis.request_id", request_id.to_owned()),
            ])
            .start_with_context(&self.tracer, &parent);
        let cx = parent.with_span(span);
        headers.remove("traceparent");
        headers.remove("tracestate");
        self.propagator
            .inject_context(&cx, &mut HeaderInjector(headers));
        RequestTrace(Some(cx))
    }

    /// Export what is still batched and stop the exporter. Blocking work,
    /// done off the runtime's workers while they keep sending.
    pub async fn shutdown(self: Arc<Self>) {
        let done = tokio::task::spawn_blocking(move || self.provider.shutdown()).await;
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("trace export at shutdown: {e}"),
            Err(e) => tracing::warn!("trace export at shutdown: {e}"),
        }
    }
}

/// The phases of the pipeline, as span events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Head, identity, rate limit, body read and parse.
    RequestCheck,
    /// Permission and the per-target rate limit.
    Access,
    /// The MRTR retry check or the 2025-11-25 answer check.
    StateCheck,
    /// The upstream's response head arrived.
    Forward,
    /// The upstream's answer was inspected (the head, for a stream).
    ResponseCheck,
    /// The response ended and the request record was written.
    Record,
}

impl Phase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::RequestCheck => "request_check",
            Phase::Access => "access",
            Phase::StateCheck => "state_check",
            Phase::Forward => "forward",
            Phase::ResponseCheck => "response_check",
            Phase::Record => "record",
        }
    }
}

/// One request's span, or nothing when tracing is off (the default): every
/// method is then a no-op on `None`.
#[derive(Clone, Default)]
pub struct RequestTrace(Option<Context>);

impl RequestTrace {
    pub(crate) fn off() -> RequestTrace {
        RequestTrace(None)
    }

    /// The ids of this request's span, for the audit records of events
    /// that happen in it (`None` when tracing is off).
    pub(crate) fn ids(&self) -> Option<TraceIds> {
        let cx = self.0.as_ref()?;
        let span = cx.span();
        let sc = span.span_context();
        sc.is_valid().then(|| TraceIds {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            sampled: sc.is_sampled(),
        })
    }

    pub fn phase(&self, phase: Phase) {
        if let Some(cx) = &self.0 {
            cx.span().add_event(phase.as_str(), Vec::new());
        }
    }

    /// The request check passed: the MCP method is known.
    pub fn request_checked(&self, mcp_method: &'static str) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            span.set_attribute(KeyValue::new("mcp.method.name", mcp_method));
            span.add_event(Phase::RequestCheck.as_str(), Vec::new());
        }
    }

    /// The upstream answered with a response head.
    pub fn forwarded(&self, upstream: &str) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            span.set_attribute(KeyValue::new("portcullis.upstream", upstream.to_owned()));
            span.add_event(Phase::Forward.as_str(), Vec::new());
        }
    }

    /// The MRTR operation (gateway-minted id) and round this request is part of.
    pub(crate) fn operation(&self, operation: &str, round: u32) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            span.set_attribute(KeyValue::new(
                "portcullis.operation_id",
                operation.to_owned(),
            ));
            span.set_attribute(KeyValue::new("portcullis.round", i64::from(round)));
        }
    }

    /// The gateway refused the request with this stable reason code.
    pub(crate) fn refused(&self, code: &'static str) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            span.set_attribute(KeyValue::new("portcullis.refusal", code));
            span.set_status(Status::error(code));
        }
    }

    /// The response head the client receives.
    pub fn responded(&self, status: http::StatusCode) {
        if let Some(cx) = &self.0 {
            let code = i64::from(status.as_u16());
            cx.span()
                .set_attribute(KeyValue::new("http.response.status_code", code));
        }
    }
}

/// Sends OTLP requests with the gateway's own hyper client on the runtime's
/// workers: the batch processor exports from a thread of its own, which
/// has no reactor, so each send is spawned onto the runtime and awaited.
#[derive(Debug)]
struct CollectorClient {
    runtime: tokio::runtime::Handle,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl CollectorClient {
    fn new(runtime: tokio::runtime::Handle, timeout: Duration) -> Result<Self, rustls::Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let tls = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(CollectorClient {
            runtime,
            client,
            timeout,
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for CollectorClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let timeout = self.timeout;
        let send = async move {
            let resp = client.request(request.map(Full::new)).await?;
            let (head, body) = resp.into_parts();
            let body = Limited::new(body, MAX_COLLECTOR_ANSWER).collect().await?;
            Ok::<_, HttpError>(Response::from_parts(head, body.to_bytes()))
        };
        let sent = self
            .runtime
            .spawn(async move { tokio::time::timeout(timeout, send).await });
        match sent.await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err("the collector did not answer in time".into()),
            Err(e) => Err(Box::new(e)),
        }
    }
}
