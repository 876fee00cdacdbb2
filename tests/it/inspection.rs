//! One crafted answer must not stall every client: a large upstream message
//! is inspected off the runtime's workers, in its upstream's lane, and a
//! lane that is full refuses (`inspection_busy`) instead of queueing without
//! end. The gateway runs in-process on the test's current-thread runtime,
//! so a timer task on that thread stops ticking whenever the gateway's
//! work holds the thread: the test reads how long the longest stall was.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use portcullis::server::RunningGateway;

use crate::common::*;

/// A tools/list result of about `bytes`, costly to read per byte: many
/// items, each with a name, a short description and a small schema.
fn big_list(bytes: usize) -> Value {
    let item = |i: usize| {
        json!({"name": format!("t{i}"), "description": "Books a room.",
               "inputSchema": {"type": "object", "properties": {"room": {"type": "string", "description": ""}}}})
    };
    let per_item = item(0).to_string().len() + 1;
    json!({"tools": (0..bytes / per_item).map(item).collect::<Vec<_>>()})
}

#[derive(Clone, Copy, Debug)]
enum Carrier {
    Body,
    Event,
}

/// An upstream that answers every request (all have id 7) with `result`,
/// as a JSON body or as the one event of a stream. The bytes are made once:
/// the upstream shares the test's thread, and must not hold it itself.
async fn answering_with(result: Value, carrier: Carrier) -> ScriptedUpstream {
    let message = result_json("7", result);
    let steps = match carrier {
        Carrier::Body => vec![http_response("200 OK", "application/json", &message)],
        Carrier::Event => vec![sse_head(), sse_event(&message), sse_end()],
    };
    ScriptedUpstream::start(move |_| steps.clone()).await
}

/// A debug build inspects a list of megabytes for seconds, and for longer
/// on a loaded machine; these tests measure stalls and refusals, never how
/// long the inspection takes, so the client waits as long as it must.
fn patient_client() -> reqwest::Client {
    install_crypto();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .expect("client")
}

async fn list_tools(gw: &RunningGateway) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    patient_client()
        .post(url(gw))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/list")
        .body(body.to_string())
        .send()
        .await
        .expect("the gateway answers")
}

/// Run `work` beside a task that ticks every millisecond on this thread;
/// the longest time between two ticks is how long the thread was held.
async fn longest_stall<F: Future>(work: F) -> (F::Output, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut worst = Duration::ZERO;
            let mut last = Instant::now();
            while !stop.load(Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let now = Instant::now();
                worst = worst.max(now - last);
                last = now;
            }
            worst
        }
    });
    let out = work.await;
    stop.store(true, Ordering::Release);
    (out, ticker.await.expect("the ticker ran"))
}

/// Inspection of a large list held the runtime thread as long as it took
/// when the gateway inspects everything inline (`inline_inspection_bytes`
/// above the message), and does not with the default: the timer keeps
/// ticking. Both carriers (a JSON body and an event).
#[tokio::test(flavor = "current_thread")]
async fn a_large_answer_is_inspected_off_the_runtime_thread() {
    let list = big_list(3 << 20);
    for carrier in [Carrier::Body, Carrier::Event] {
        let up = answering_with(list.clone(), carrier).await;
        let mut stalls = Vec::new();
        for inline in ["inline_inspection_bytes = 16777216", ""] {
            // The shared runtime: the gateway's requests run on this test's
            // thread, where the ticker sees a stall (a per-core worker is a
            // thread of its own).
            let extra = format!("[limits]\n{inline}\n[runtime]\nmodel = \"shared\"\n");
            let gw = start_gateway(&config_text(&up.url(), "", &extra)).await;
            // Warm: the connection to the upstream and the first request's costs.
            let _ = list_tools(&gw).await.bytes().await;
            let (body, stall) = longest_stall(async {
                let resp = list_tools(&gw).await;
                assert_eq!(resp.status(), 200, "{carrier:?}");
                resp.bytes().await.expect("body")
            })
            .await;
            // Inspected either way: a verdict the policy gives, or the list.
            let text = String::from_utf8_lossy(&body);
            assert!(
                text.contains("max_text_bytes") || text.contains("\"t1\""),
                "{carrier:?}: {}",
                &text[..text.len().min(300)]
            );
            stalls.push(stall);
            gw.shutdown().await;
        }
        let (inline, offloaded) = (stalls[0], stalls[1]);
        assert!(
            inline >= Duration::from_millis(100),
            "{carrier:?}: the message is too cheap to show a stall inline ({inline:?})"
        );
        assert!(
            offloaded * 4 < inline,
            "{carrier:?}: the runtime thread stalled {offloaded:?} with the default (inline: {inline:?})"
        );
    }
}

/// One upstream's lane holds `heavy_inspections_per_upstream` large
/// messages and `heavy_inspection_queue` waiting; one more is refused with
/// `inspection_busy` (503, `Retry-After`), counted, while the first is
/// delivered.
#[tokio::test(flavor = "current_thread")]
async fn a_full_lane_refuses_with_inspection_busy() {
    let up = answering_with(big_list(2 << 20), Carrier::Body).await;
    let extra = "[limits]\ninline_inspection_bytes = 1024\nheavy_inspections_per_upstream = 1\nheavy_inspection_queue = 0\n";
    let gw = start_gateway(&config_text(&up.url(), "", extra)).await;
    let first = tokio::spawn({
        let url = url(&gw);
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": {}}}});
            let resp = patient_client()
                .post(url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", VERSION)
                .header("mcp-method", "tools/list")
                .body(body.to_string())
                .send()
                .await
                .expect("answered");
            (resp.status(), resp.bytes().await.expect("body"))
        }
    });
    // The first answer is being inspected: its turn in the lane has begun
    // (counted as it starts), and the inspection takes seconds, far longer
    // than the second answer takes to arrive.
    let started = r#"portcullis_heavy_inspections_total{outcome="offloaded",upstream="test"} 1"#;
    while !metrics(&gw).await.contains(started) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = list_tools(&gw).await;
    assert_eq!(second.status(), 503);
    assert_eq!(second.headers()["retry-after"], "1");
    let v = json_of(second).await;
    assert_eq!(v["error"]["data"]["reason"], "inspection_busy", "{v}");
    assert_eq!(v["error"]["data"]["upstream"], "Test upstream", "{v}");
    let (status, _) = first.await.expect("the first request");
    assert_eq!(status, 200, "the first message was inspected and answered");
    let m = metrics(&gw).await;
    for line in [
        r#"portcullis_heavy_inspections_total{outcome="refused",upstream="test"} 1"#,
        r#"portcullis_heavy_inspections_total{outcome="offloaded",upstream="test"} 1"#,
        r#"portcullis_requests_total{method="tools/list",outcome="inspection_busy",upstream="test"} 1"#,
        r#"portcullis_heavy_inspections_waiting{upstream="test"} 0"#,
    ] {
        assert!(m.contains(line), "{line} in\n{m}");
    }
    gw.shutdown().await;
}
