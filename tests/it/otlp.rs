//! OpenTelemetry traces, exported to a real OTLP/HTTP receiver started by
//! the test: a hyper server on loopback that takes `POST /v1/traces` with
//! `application/x-protobuf` and decodes `ExportTraceServiceRequest` with
//! the `opentelemetry-proto` crate's generated types (the official protocol
//! definitions, through prost). Spans are read after the gateway's shutdown,
//! which flushes the exporter, so no test waits on the export schedule.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Value};

use crate::common::*;

/// A client's trace: its trace id and the id of its span.
pub const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const CLIENT_SPAN: &str = "00f067aa0ba902b7";

pub fn client_traceparent(sampled: bool) -> String {
    let flags = if sampled { "01" } else { "00" };
    format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-{flags}")
}

/// What the receiver was sent.
#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    service_names: Vec<String>,
    /// Requests that were not a protobuf `POST /v1/traces` that decodes.
    malformed: usize,
}

/// A real OTLP/HTTP traces receiver on 127.0.0.1 (port chosen by the OS).
pub struct Collector {
    addr: std::net::SocketAddr,
    received: Arc<Mutex<Received>>,
    connections: Arc<AtomicUsize>,
}

impl Collector {
    pub async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Received::default()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (r, c) = (received.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let r = r.clone();
                let serve = service_fn(move |req| receive(req, r.clone()));
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), serve),
                );
            }
        });
        Collector {
            addr,
            received,
            connections,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.addr)
    }

    /// The `[tracing]` section that exports here.
    pub fn section(&self, sample_ratio: f64) -> String {
        format!(
            "[tracing]\notlp_endpoint = \"{}\"\nsample_ratio = {sample_ratio:?}\nservice_name = \"gateway-under-test\"\nexport_interval = \"50ms\"\nexport_timeout = \"2s\"\n",
            self.endpoint()
        )
    }

    pub fn spans(&self) -> Vec<Span> {
        let r = self.received.lock().unwrap();
        assert_eq!(r.malformed, 0, "every export is a protobuf POST /v1/traces");
        r.spans.clone()
    }

    fn service_names(&self) -> Vec<String> {
        self.received.lock().unwrap().service_names.clone()
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

async fn receive(
    req: Request<Incoming>,
    into: Arc<Mutex<Received>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let protobuf = req
        .headers()
        .get("content-type")
        .is_some_and(|v| v == "application/x-protobuf");
    let right_place = req.method() == "POST" && req.uri().path() == "/v1/traces";
    let body = req.into_body().collect().await.map(|b| b.to_bytes());
    let decoded = match body {
        Ok(b) if protobuf && right_place => ExportTraceServiceRequest::decode(b).ok(),
        _ => None,
    };
    let mut r = into.lock().unwrap();
    let Some(export) = decoded else {
        r.malformed += 1;
        return Ok(answer(StatusCode::BAD_REQUEST, Bytes::new()));
    };
    for rs in export.resource_spans {
        let attrs = rs.resource.map(|res| res.attributes).unwrap_or_default();
        if let Some(name) = text_of(&attrs, "service.name") {
            r.service_names.push(name);
        }
        for ss in rs.scope_spans {
            r.spans.extend(ss.spans);
        }
    }
    let ok = ExportTraceServiceResponse::default().encode_to_vec();
    Ok(answer(StatusCode::OK, Bytes::from(ok)))
}

fn answer(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert("content-type", "application/x-protobuf".parse().unwrap());
    resp
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn text_of(attrs: &[KeyValue], key: &str) -> Option<String> {
    let kv = attrs.iter().find(|kv| kv.key == key)?;
    match kv.value.as_ref()?.value.as_ref()? {
        AnyValue::StringValue(s) => Some(s.clone()),
        AnyValue::IntValue(i) => Some(i.to_string()),
        other => Some(format!("{other:?}")),
    }
}

pub fn attr(span: &Span, key: &str) -> Option<String> {
    text_of(&span.attributes, key)
}

fn event_names(span: &Span) -> Vec<&str> {
    span.events.iter().map(|e| e.name.as_str()).collect()
}

/// Every attribute value of the span and its events, to check that none
/// carries what a client or a user wrote.
fn all_values(span: &Span) -> String {
    let events = span.events.iter().flat_map(|e| e.attributes.iter());
    span.attributes
        .iter()
        .chain(events)
        .map(|kv| format!("{:?} ", kv.value))
        .collect()
}

#[tokio::test]
async fn a_call_is_one_server_span_continuing_the_clients_trace() {
    let collector = Collector::start().await;
    let up = answering_ok().await;
    let gw = start_gateway(&config_text(&up.url(), "", &collector.section(1.0))).await;
    let args = json!({"note": "argument-value-never-exported"});
    let resp = call(&client(), &url(&gw), "t1", "get_room", args)
        .header("traceparent", client_traceparent(true))
        .header("tracestate", "vendor=opaque-value")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let request_id = resp.headers()["x-request-id"].to_str().unwrap().to_owned();
    gw.shutdown().await;

    let spans = collector.spans();
    assert_eq!(spans.len(), 1, "one span per request");
    let span = &spans[0];
    assert_eq!(hex(&span.trace_id), CLIENT_TRACE, "the client's trace");
    assert_eq!(
        hex(&span.parent_span_id),
        CLIENT_SPAN,
        "the client's span is the parent"
    );
    assert_eq!(span.kind, SpanKind::Server as i32);
    assert_eq!(attr(span, "portcullis.request_id"), Some(request_id));
    assert_eq!(attr(span, "mcp.method.name").as_deref(), Some("tools/call"));
    assert_eq!(attr(span, "portcullis.upstream").as_deref(), Some("test"));
    assert_eq!(
        attr(span, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(attr(span, "portcullis.operation_id"), None, "no MRTR round");
    assert_eq!(
        event_names(span),
        [
            "request_check",
            "access",
            // The gateway's own fetch of the tool list, as this caller, who
            // called without listing (`[arguments] schema`): its phases are
            // events of the call's span.
            "access",
            "state_check",
            "forward",
            "response_check",
            // The call itself.
            "state_check",
            "forward",
            "response_check",
            "record"
        ]
    );
    assert!(!all_values(span).contains("argument-value"), "{span:?}");
    assert_eq!(collector.service_names(), ["gateway-under-test"]);

    let seen = up.requests();
    let gateway_span = hex(&span.span_id);
    assert_eq!(
        seen[0].header("traceparent"),
        Some(format!("00-{CLIENT_TRACE}-{gateway_span}-01")),
        "the upstream's parent is the gateway's span"
    );
    assert_eq!(
        seen[0].header("tracestate").as_deref(),
        Some("vendor=opaque-value")
    );
}

/// Asks for a room on a first call; answers `complete` on a retry.
pub async fn asking_then_answering() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let result = if body["params"].get("inputResponses").is_some() {
            json!({"resultType": "complete", "content": [{"type": "text", "text": "booked"}]})
        } else {
            json!({"resultType": "input_required", "requestState": "upstream-state",
                   "inputRequests": {"room": {"method": "elicitation/create", "params": {"mode": "form",
                     "message": "Which room?", "requestedSchema": {"type": "object",
                       "properties": {"room_id": {"type": "string"}}, "required": ["room_id"]}}}}})
        };
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id_of(req), result),
        )]
    })
    .await
}

#[tokio::test]
async fn an_mrtr_operation_carries_its_operation_id_and_round_on_every_round() {
    let collector = Collector::start().await;
    let up = asking_then_answering().await;
    let gw = start_gateway(&config_text(&up.url(), "", &collector.section(1.0))).await;
    let c = client();
    let first = call(&c, &url(&gw), "r1", "book_room", json!({}))
        .header("traceparent", client_traceparent(true))
        .send()
        .await
        .unwrap();
    let first = json_of(first).await;
    let state = first["result"]["requestState"].as_str().expect("state");
    let mut retry: Value = serde_json::from_str(&call_body("r2", "book_room", json!({}))).unwrap();
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] =
        json!({"room": {"action": "accept", "content": {"room_id": "typed-by-the-user"}}});
    let second = call(&c, &url(&gw), "r2", "book_room", json!({}))
        .header("traceparent", client_traceparent(true))
        .body(retry.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    gw.shutdown().await;

    let spans = collector.spans();
    assert_eq!(spans.len(), 2);
    let operation = attr(&spans[0], "portcullis.operation_id").expect("operation id");
    assert!(!operation.is_empty());
    assert_eq!(attr(&spans[0], "portcullis.round").as_deref(), Some("1"));
    assert_eq!(
        attr(&spans[1], "portcullis.operation_id"),
        Some(operation),
        "the retry belongs to the same operation"
    );
    assert_eq!(attr(&spans[1], "portcullis.round").as_deref(), Some("2"));
    for s in &spans {
        assert!(!all_values(s).contains("typed-by-the-user"), "{s:?}");
        assert!(!all_values(s).contains(state), "no sealed state in a span");
    }
}

#[tokio::test]
async fn ratio_zero_keeps_only_traces_the_client_sampled() {
    let collector = Collector::start().await;
    let up = answering_ok().await;
    let gw = start_gateway(&config_text(&up.url(), "", &collector.section(0.0))).await;
    let c = client();
    let unsampled = client_traceparent(false);
    for parent in [None, Some(unsampled.as_str())] {
        let mut req = call(&c, &url(&gw), "t1", "get_room", json!({}));
        if let Some(p) = parent {
            req = req.header("traceparent", p);
        }
        assert_eq!(req.send().await.unwrap().status(), 200);
    }
    gw.shutdown().await;
    assert!(
        collector.spans().is_empty(),
        "nothing sampled, nothing exported"
    );
    let seen = up.requests();
    for r in &seen {
        let tp = r
            .header("traceparent")
            .expect("the trace is still propagated");
        assert!(tp.ends_with("-00"), "not sampled: {tp}");
    }
    assert!(seen[1]
        .header("traceparent")
        .unwrap()
        .contains(CLIENT_TRACE));

    // The client's sampled flag wins over the ratio (parent-based sampling).
    let collector = Collector::start().await;
    let gw = start_gateway(&config_text(&up.url(), "", &collector.section(0.0))).await;
    let resp = call(&c, &url(&gw), "t2", "get_room", json!({}))
        .header("traceparent", client_traceparent(true))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    gw.shutdown().await;
    let spans = collector.spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(hex(&spans[0].trace_id), CLIENT_TRACE);
}

#[tokio::test]
async fn with_tracing_off_nothing_connects_to_a_collector() {
    let collector = Collector::start().await;
    let up = answering_ok().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let resp = call(&client(), &url(&gw), "t1", "get_room", json!({}))
        .header("traceparent", client_traceparent(true))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    gw.shutdown().await;
    assert_eq!(collector.connections(), 0, "no exporter at all");
    assert_eq!(
        up.requests()[0].header("traceparent"),
        Some(client_traceparent(true)),
        "without spans of its own the gateway passes the client's context on"
    );
}

#[tokio::test]
async fn a_refused_request_is_a_span_with_its_reason() {
    let collector = Collector::start().await;
    let up = answering_ok().await;
    let gw = start_gateway(&config_text(&up.url(), "", &collector.section(1.0))).await;
    let resp = call_with(
        &client(),
        &url(&gw),
        "t1",
        "get_room",
        json!({}),
        &[("mcp-method", Some("tools/list"))],
    )
    .header("traceparent", client_traceparent(true))
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 400);
    gw.shutdown().await;
    let spans = collector.spans();
    assert_eq!(spans.len(), 1);
    let span = &spans[0];
    assert!(attr(span, "portcullis.refusal").is_some(), "{span:?}");
    assert_eq!(
        attr(span, "http.response.status_code").as_deref(),
        Some("400")
    );
    let status = span.status.as_ref().expect("status");
    assert_eq!(status.code, 2, "STATUS_CODE_ERROR");
    assert!(up.requests().is_empty());
}
