//! W3C trace context crosses the gateway: a client's `traceparent` and
//! `tracestate` reach the upstream unchanged, so traces of a client and its
//! MCP server join up even though the gateway exports no spans of its own.

use crate::common::*;
use serde_json::json;

#[tokio::test]
async fn traceparent_and_tracestate_reach_the_upstream_unchanged() {
    let up = ScriptedUpstream::start(|req| {
        let result = json!({"content": [{"type": "text", "text": "ok"}]});
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id_of(req), result),
        )]
    })
    .await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let state = "vendor=opaque-value";
    let resp = call(&client(), &url(&gw), "t1", "get_room", json!({}))
        .header("traceparent", parent)
        .header("tracestate", state)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let seen = up.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("traceparent").as_deref(), Some(parent));
    assert_eq!(seen[0].header("tracestate").as_deref(), Some(state));
    gw.shutdown().await;
}
