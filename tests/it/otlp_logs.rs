//! Audit events as OpenTelemetry log records (`[audit.otlp]`), exported to
//! a real OTLP/HTTP receiver started by the test: a hyper server on
//! loopback that takes `POST /v1/logs` and `POST /v1/traces` with
//! `application/x-protobuf` and decodes `ExportLogsServiceRequest` and
//! `ExportTraceServiceRequest` with the `opentelemetry-proto` crate's
//! generated types. Records are read after the gateway's shutdown, which
//! flushes the export.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Map, Value};

use crate::common::*;
use crate::failure_metrics::dead_address;
use crate::otlp::{asking_then_answering, client_traceparent, hex, text_of, CLIENT_TRACE};

/// What the receiver was sent.
#[derive(Default)]
struct Received {
    records: Vec<LogRecord>,
    scopes: Vec<String>,
    service_names: Vec<String>,
    spans: Vec<Span>,
    /// Requests that were not a protobuf POST to a signal path that decodes.
    malformed: usize,
}

/// A real OTLP/HTTP receiver for logs and traces on 127.0.0.1.
struct Collector {
    addr: std::net::SocketAddr,
    received: Arc<Mutex<Received>>,
}

impl Collector {
    async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Received::default()));
        let r = received.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let r = r.clone();
                let serve = service_fn(move |req| receive(req, r.clone()));
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), serve),
                );
            }
        });
        Collector { addr, received }
    }

    fn traces_endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.addr)
    }

    fn records(&self) -> Vec<LogRecord> {
        let r = self.received.lock().unwrap();
        assert_eq!(
            r.malformed, 0,
            "every export is a protobuf POST that decodes"
        );
        r.records.clone()
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
    let path = req.uri().path().to_owned();
    let post = req.method() == "POST";
    let body = match req.into_body().collect().await {
        Ok(b) if protobuf && post => b.to_bytes(),
        _ => Bytes::new(),
    };
    let mut r = into.lock().unwrap();
    let answer = match path.as_str() {
        "/v1/logs" => ExportLogsServiceRequest::decode(body).ok().map(|export| {
            for rl in export.resource_logs {
                let attrs = rl.resource.map(|res| res.attributes).unwrap_or_default();
                r.service_names.extend(text_of(&attrs, "service.name"));
                for sl in rl.scope_logs {
                    r.scopes.extend(sl.scope.map(|s| s.name));
                    r.records.extend(sl.log_records);
                }
            }
            ExportLogsServiceResponse::default().encode_to_vec()
        }),
        "/v1/traces" => ExportTraceServiceRequest::decode(body).ok().map(|export| {
            let spans = export
                .resource_spans
                .into_iter()
                .flat_map(|rs| rs.scope_spans);
            r.spans.extend(spans.flat_map(|ss| ss.spans));
            ExportTraceServiceResponse::default().encode_to_vec()
        }),
        _ => None,
    };
    let (status, body) = match answer {
        Some(ok) => (StatusCode::OK, Bytes::from(ok)),
        None => {
            r.malformed += 1;
            (StatusCode::BAD_REQUEST, Bytes::new())
        }
    };
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert("content-type", "application/x-protobuf".parse().unwrap());
    Ok(resp)
}

/// An OTLP value as the JSON value it was made from.
fn json_of(v: &AnyValue) -> Value {
    match v.value.as_ref() {
        Some(Any::StringValue(s)) => json!(s),
        Some(Any::BoolValue(b)) => json!(b),
        Some(Any::IntValue(i)) => json!(i),
        Some(Any::DoubleValue(d)) => json!(d),
        Some(Any::ArrayValue(a)) => Value::Array(a.values.iter().map(json_of).collect()),
        Some(Any::KvlistValue(m)) => Value::Object(members(&m.values)),
        other => panic!("no audit member is {other:?}"),
    }
}

fn members(kvs: &[KeyValue]) -> Map<String, Value> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), json_of(kv.value.as_ref().expect("a value"))))
        .collect()
}

/// A JSON line without `ts` and without any `null` member (a member not
/// known yet is no attribute).
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, v)| !v.is_null() && k != "ts")
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

fn nanos_of(ts: &str) -> u64 {
    let t = humantime::parse_rfc3339(ts).expect("ts is RFC 3339");
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// One MRTR operation over two requests, traced by the client: every JSON
/// line of the file trail is one log record at the traces' collector, with
/// the same members, the line's time, and the span of the request it
/// happened in; nothing the user typed, no state.
#[tokio::test]
async fn every_audit_event_is_a_log_record_at_the_traces_collector() {
    let collector = Collector::start().await;
    let up = asking_then_answering().await;
    let dir = tempfile::tempdir().unwrap();
    let trail = dir.path().join("audit.jsonl");
    let audit = format!(
        "[audit]\nsink = \"file\"\npath = \"{}\"\n\n[audit.otlp]\nexport_interval = \"50ms\"\n",
        trail.display()
    );
    let tracing = format!(
        "[tracing]\notlp_endpoint = \"{}\"\nservice_name = \"gateway-under-test\"\nexport_interval = \"50ms\"\n",
        collector.traces_endpoint()
    );
    let text = config_text(&up.url(), "", &tracing).replace("[audit]\nsink = \"off\"\n", &audit);
    let gw = start_gateway(&text).await;
    let c = client();
    let first = call(&c, &url(&gw), "r1", "book_room", json!({}))
        .header("traceparent", client_traceparent(true))
        .send()
        .await
        .unwrap();
    let first = crate::common::json_of(first).await;
    let state = first["result"]["requestState"]
        .as_str()
        .expect("a question")
        .to_owned();
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

    let lines: Vec<Value> = std::fs::read_to_string(&trail)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let records = collector.records();
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    for kind in [
        "input_required_received",
        "delivered",
        "retry_received",
        "forwarded",
        "operation_end",
    ] {
        assert!(events.contains(&kind), "{kind} in {events:?}");
    }
    assert_eq!(records.len(), lines.len(), "one record per line");
    let spans = collector.received.lock().unwrap().spans.clone();
    for (line, record) in lines.iter().zip(&records) {
        let event = line["event"].as_str().unwrap();
        assert_eq!(record.event_name, event);
        assert_eq!(record.body.as_ref().map(json_of), Some(json!(event)));
        assert_eq!(
            Value::Object(members(&record.attributes)),
            without_nulls(line.clone()),
            "the record holds the line's members"
        );
        let ts = nanos_of(line["ts"].as_str().unwrap());
        assert!(
            record.time_unix_nano.abs_diff(ts) < 1_000_000,
            "{event}: the line's time"
        );
        assert_eq!(
            (record.severity_number, record.severity_text.as_str()),
            (9, "INFO")
        );
        assert_eq!(
            hex(&record.trace_id),
            CLIENT_TRACE,
            "{event}: the client's trace"
        );
        assert_eq!(record.flags & 0xff, 1, "sampled");
        let request_id = line["request_id"].as_str().unwrap();
        let span = spans
            .iter()
            .find(|s| crate::otlp::attr(s, "portcullis.request_id").as_deref() == Some(request_id))
            .expect("the request's span");
        assert_eq!(
            record.span_id, span.span_id,
            "{event}: the span of its request"
        );
        let all = format!("{record:?}");
        assert!(!all.contains("typed-by-the-user"), "{all}");
        assert!(!all.contains(&state), "no sealed state in a record");
    }
    let r = collector.received.lock().unwrap();
    assert!(
        r.scopes.iter().all(|s| s == "portcullis.audit"),
        "{:?}",
        r.scopes
    );
    assert!(r.service_names.iter().all(|s| s == "gateway-under-test"));
}

/// With a collector that never answers and a queue of 16, a burst of
/// questions is answered all the same; what did not fit is counted as
/// `queue_full`, what the collector did not take as `write_failed`.
#[tokio::test]
async fn records_that_cannot_go_out_are_counted_and_never_hold_a_request() {
    // Accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let up = asking_then_answering().await;
    let audit = format!(
        "[audit]\nsink = \"off\"\n\n[audit.otlp]\nendpoint = \"http://{silent_addr}/v1/logs\"\nmax_queue = 16\nexport_interval = \"20ms\"\nexport_timeout = \"300ms\"\n"
    );
    let text = config_text(&up.url(), "", "").replace("[audit]\nsink = \"off\"\n", &audit);
    let gw = start_gateway(&text).await;
    let m = metrics(&gw).await;
    let full = r#"portcullis_audit_dropped_total{cause="queue_full",sink="otlp"}"#;
    let failed = r#"portcullis_audit_dropped_total{cause="write_failed",sink="otlp"}"#;
    assert!(
        m.contains(&format!("{full} 0")),
        "the series start at zero\n{m}"
    );
    let c = client();
    for i in 0..20 {
        let resp = call(&c, &url(&gw), &format!("q{i}"), "book_room", json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "answered while the collector hangs");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let m = loop {
        let m = metrics(&gw).await;
        if value(&m, failed) >= 1.0 || std::time::Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        value(&m, full) >= 1.0,
        "a burst over the bound is dropped\n{m}"
    );
    assert!(
        value(&m, failed) >= 1.0,
        "an export that timed out is lost\n{m}"
    );
    gw.shutdown().await;
    held.abort();

    // Nothing listening at all: every record is lost as write_failed.
    let (dead, _hold) = dead_address();
    let audit = format!(
        "[audit]\nsink = \"off\"\n\n[audit.otlp]\nendpoint = \"http://{dead}/v1/logs\"\nexport_interval = \"20ms\"\nexport_timeout = \"300ms\"\n"
    );
    let text = config_text(&up.url(), "", "").replace("[audit]\nsink = \"off\"\n", &audit);
    let gw = start_gateway(&text).await;
    let resp = call(&c, &url(&gw), "d1", "book_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let m = loop {
        let m = metrics(&gw).await;
        if value(&m, failed) >= 2.0 || std::time::Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        value(&m, failed) >= 2.0,
        "received and delivered, both lost\n{m}"
    );
    gw.shutdown().await;
}

/// The value of one series on a /metrics page (0 when absent).
fn value(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// A reload that changes `[audit.otlp]` sends the next events to the new
/// collector, and what the replaced export still held reaches the old one
/// (its batches wait an hour: only the shutdown of the replaced sink, off
/// the runtime's workers, sends them), with no request held meanwhile.
#[tokio::test]
async fn a_reload_moves_the_export_and_the_replaced_one_delivers_what_it_held() {
    let (old, new) = (Collector::start().await, Collector::start().await);
    let up = asking_then_answering().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    let write = |collector: &Collector| {
        let audit = format!(
            "[audit]\nsink = \"off\"\n\n[audit.otlp]\nendpoint = \"http://{}/v1/logs\"\nexport_interval = \"1h\"\n",
            collector.addr
        );
        let text = config_text(&up.url(), "", "").replace("[audit]\nsink = \"off\"\n", &audit);
        std::fs::write(&path, text).unwrap();
    };
    write(&old);
    install_crypto();
    let config = portcullis::config::GatewayConfig::load(&path).unwrap();
    let gw = portcullis::server::RunningGateway::start(config)
        .await
        .unwrap();
    let c = client();
    let asked = call(&c, &url(&gw), "a1", "book_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 200);
    write(&new);
    gw.reload().await.unwrap();
    let asked = call(&c, &url(&gw), "a2", "book_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while old.records().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gw.shutdown().await;
    let request_ids = |c: &Collector| -> Vec<String> {
        let mut ids: Vec<String> = c
            .records()
            .iter()
            .filter_map(|r| text_of(&r.attributes, "request_id"))
            .collect();
        ids.dedup();
        ids
    };
    let (before, after) = (request_ids(&old), request_ids(&new));
    assert_eq!(
        before.len(),
        1,
        "the first call's events, at the old collector: {before:?}"
    );
    assert_eq!(
        after.len(),
        1,
        "the second call's, at the new one: {after:?}"
    );
    assert_ne!(before, after);
}
