//! Criterion benchmarks of what tracing adds to one request: off (the
//! default: an extension lookup and no-op calls on an empty `RequestTrace`)
//! and on (a sampled server span continuing a client's `traceparent`, its
//! phase events and attributes, handed to the batch exporter).

use std::sync::Arc;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use portcullis::config::TraceSettings;
use portcullis::layers::RequestId;
use portcullis::telemetry::{Phase, RequestTrace, Telemetry};

/// The calls the pipeline makes on a request's trace, in order.
fn phases(trace: &RequestTrace) {
    let for_record = trace.clone();
    let for_ctx = trace.clone();
    trace.request_checked("tools/call");
    trace.phase(Phase::Access);
    for_ctx.phase(Phase::StateCheck);
    trace.forwarded("rooms");
    trace.phase(Phase::ResponseCheck);
    trace.responded(StatusCode::OK);
    for_record.phase(Phase::Record);
    black_box((for_record, for_ctx));
}

fn tracing_off(c: &mut Criterion) {
    let mut ext = http::Extensions::new();
    ext.insert(RequestId(Arc::from("0123456789abcdef")));
    c.bench_function("trace/off: lookup and no-op phase calls", |b| {
        b.iter(|| {
            let trace = black_box(&ext).get::<RequestTrace>().cloned();
            phases(&trace.unwrap_or_default());
        })
    });
}

fn tracing_on(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let _entered = runtime.enter();
    let settings = TraceSettings {
        // Nothing listens there: exports fail quietly, spans are still built and queued.
        endpoint: "http://127.0.0.1:9/v1/traces".parse().expect("uri"),
        sample_ratio: 1.0,
        service_name: "bench".into(),
        export_interval: Duration::from_millis(200),
        export_timeout: Duration::from_millis(100),
    };
    let telemetry = Telemetry::start(&settings).expect("telemetry");
    let parent =
        HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    c.bench_function("trace/on: sampled span, phases, propagation", |b| {
        b.iter(|| {
            let mut headers = HeaderMap::new();
            headers.insert("traceparent", parent.clone());
            let trace = telemetry.start_request(&Method::POST, &mut headers, "0123456789abcdef");
            phases(&trace);
            black_box(headers);
        })
    });
}

criterion_group!(benches, tracing_off, tracing_on);
criterion_main!(benches);
