//! W3C trace context across the gateway, with `[tracing]` on: the gateway's
//! span continues the client's trace, and the upstream receives the
//! gateway's span as its parent (same trace id, the client's `tracestate`
//! kept). A malformed `traceparent` starts a new trace instead of crossing.
//! (With tracing off the client's headers pass unchanged: see `otlp`.)

use crate::common::*;
use crate::otlp::{client_traceparent, hex, Collector, CLIENT_TRACE};
use serde_json::json;

#[tokio::test]
async fn the_upstream_is_a_child_of_the_gateways_span_in_the_clients_trace() {
    let collector = Collector::start().await;
    let up = answering_ok().await;
    let gw = start_gateway(&config_text(&up.url(), "", &collector.section(1.0))).await;
    let state = "vendor=opaque-value";
    let resp = call(&client(), &url(&gw), "t1", "get_room", json!({}))
        .header("traceparent", client_traceparent(true))
        .header("tracestate", state)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    gw.shutdown().await;
    let spans = collector.spans();
    assert_eq!(spans.len(), 1);
    let seen = up.requests();
    assert_eq!(seen.len(), 1);
    let sent = seen[0].header("traceparent").expect("traceparent upstream");
    let parts: Vec<&str> = sent.split('-').collect();
    assert_eq!(parts.len(), 4, "{sent}");
    assert_eq!(parts[1], CLIENT_TRACE, "same trace id");
    assert_eq!(
        parts[2],
        hex(&spans[0].span_id),
        "parent = the gateway's span"
    );
    assert_ne!(sent, client_traceparent(true), "not the client's header");
    assert_eq!(seen[0].header("tracestate").as_deref(), Some(state));
}

#[tokio::test]
async fn a_malformed_traceparent_starts_a_new_trace() {
    let collector = Collector::start().await;
    let up = answering_ok().await;
    let gw = start_gateway(&config_text(&up.url(), "", &collector.section(1.0))).await;
    let c = client();
    let malformed = [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "zz-not-a-trace-context",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
    ];
    for bad in malformed {
        let resp = call(&c, &url(&gw), "t1", "get_room", json!({}))
            .header("traceparent", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{bad}");
    }
    gw.shutdown().await;
    let spans = collector.spans();
    assert_eq!(spans.len(), malformed.len());
    for (span, req) in spans.iter().zip(up.requests()) {
        assert!(span.parent_span_id.is_empty(), "a root span: {span:?}");
        let sent = req.header("traceparent").expect("traceparent upstream");
        assert_eq!(
            sent,
            format!("00-{}-{}-01", hex(&span.trace_id), hex(&span.span_id))
        );
    }
}
