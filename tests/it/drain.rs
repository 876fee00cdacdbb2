//! Shutdown as a load balancer and a streaming client see it: a stream still
//! open at `drain_timeout` ends with a final JSON-RPC error event
//! (`shutting_down`) instead of a torn connection; `pre_stop_delay` keeps
//! serving while `/readyz` answers 503.

use std::time::{Duration, Instant};

use crate::common::*;
use portcullis::server::RunningGateway;
use serde_json::{json, Value};

/// A gateway in front of the demo server, with `shutdown` as its
/// `[shutdown]` settings.
async fn demo_gateway(shutdown: &str) -> RunningGateway {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(portcullis_demo::serve(listener, std::future::pending()));
    let demo = format!("http://{addr}/mcp");
    start_gateway(&config_text(&demo, "", shutdown)).await
}

#[tokio::test]
async fn a_stream_open_at_the_drain_deadline_ends_with_a_shutting_down_event() {
    let gw = demo_gateway("[shutdown]\ndrain_timeout = \"600ms\"").await;
    let mut body = open_room_report(&gw, "long", 20, 300).await;

    let started = Instant::now();
    let shutdown = tokio::spawn(gw.shutdown());
    let mut rest = String::new();
    while let Some(chunk) = futures_util::StreamExt::next(&mut body).await {
        rest.push_str(&String::from_utf8_lossy(
            &chunk.expect("the stream ends cleanly"),
        ));
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(550) && took < Duration::from_secs(3),
        "cut at the drain deadline, not before or long after: {took:?}"
    );
    let last = rest
        .split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .last()
        .unwrap_or_else(|| panic!("no event after the drain began: {rest:?}"));
    let v: Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["id"], "long", "{v}");
    assert_eq!(v["error"]["data"]["reason"], "shutting_down", "{v}");
    assert!(
        !rest.contains("Room report:"),
        "the tool had not finished: {rest}"
    );
    tokio::time::timeout(Duration::from_secs(3), shutdown)
        .await
        .expect("the gateway stops after the cut")
        .unwrap();
}

#[tokio::test]
async fn a_stream_that_finishes_within_the_drain_is_not_cut() {
    let gw = demo_gateway("[shutdown]\ndrain_timeout = \"5s\"").await;
    let resp = call(
        &client(),
        &url(&gw),
        "short",
        "room_report",
        json!({"steps": 3, "delay_ms": 200}),
    )
    .send()
    .await
    .unwrap();
    let shutdown = tokio::spawn(gw.shutdown());
    let text = resp.text().await.unwrap();
    assert!(text.contains("Room report: checked 3 rooms"), "{text}");
    assert!(!text.contains("shutting_down"), "{text}");
    shutdown.await.unwrap();
}

#[tokio::test]
async fn the_pre_stop_delay_serves_on_while_readiness_says_503() {
    let gw = demo_gateway("[shutdown]\npre_stop_delay = \"1500ms\"\ndrain_timeout = \"1s\"").await;
    let (mcp, ready) = (
        url(&gw),
        format!("http://{}/readyz", gw.admin_addr.unwrap()),
    );
    let c = client();
    assert_eq!(c.get(&ready).send().await.unwrap().status(), 200);
    let started = Instant::now();
    let shutdown = tokio::spawn(gw.shutdown());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(c.get(&ready).send().await.unwrap().status(), 503);
    // A new connection, as a load balancer that has not noticed yet opens.
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let args = json!({"room_id": "nook"});
    let served = call(&fresh, &mcp, "during", "get_room", args.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), 200);
    assert!(json_of(served).await["result"].is_object());
    assert!(started.elapsed() < Duration::from_millis(1400));

    tokio::time::sleep(Duration::from_millis(2200).saturating_sub(started.elapsed())).await;
    let after = call(&fresh, &mcp, "after", "get_room", args).send().await;
    assert!(
        after.is_err(),
        "no longer accepting after the delay: {after:?}"
    );
    shutdown.await.unwrap();
}

/// SIGTERM may come while another part of the process holds the gateway
/// (the config file watcher in the middle of a reload): the drain still
/// waits for the open stream, and returns only after it ended.
#[tokio::test]
async fn a_gateway_held_elsewhere_still_waits_for_open_streams() {
    let gw = demo_gateway("[shutdown]\ndrain_timeout = \"5s\"").await;
    let mcp = url(&gw);
    let gw = std::sync::Arc::new(gw);
    let watcher = std::sync::Arc::clone(&gw);
    let resp = call(
        &client(),
        &mcp,
        "held",
        "room_report",
        json!({"steps": 4, "delay_ms": 250}),
    )
    .send()
    .await
    .unwrap();
    let shutdown = tokio::spawn(gw.shutdown_shared());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !shutdown.is_finished(),
        "the drain returned while a stream was open"
    );
    let text = resp.text().await.unwrap();
    assert!(text.contains("Room report: checked 4 rooms"), "{text}");
    tokio::time::timeout(Duration::from_secs(5), shutdown)
        .await
        .expect("the drain ends once the stream did")
        .unwrap();
    drop(watcher);
}
