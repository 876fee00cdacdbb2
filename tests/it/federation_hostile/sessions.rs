//! A federated route's 2025-11-25 session and streams (and the 2026-07-28
//! listen stream) against upstreams that answer another version, a session
//! id too long to carry, a refused end or stream, an odd stream; and a
//! client that carries a session id to a route that did not issue it.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;

/// A 2025-11-25 upstream: `initialize` answers `version` (none when null)
/// with the session `sess-<tag>` (or `session` when given); `tools/list`
/// lists `echo`; DELETE and GET answer `end` and `stream`.
fn legacy_member(
    tag: &'static str,
    version: Value,
    session: Option<String>,
    end: &'static str,
    stream: Vec<Step>,
) -> impl Fn(&Received) -> Vec<Step> + Send + Sync + 'static {
    move |req| {
        if req.head.starts_with("DELETE") {
            return vec![Step::Write(
                format!("HTTP/1.1 {end}\r\ncontent-length: 0\r\n\r\n").into_bytes(),
            )];
        }
        if req.head.starts_with("GET") {
            return stream.clone();
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = id_of(req);
        match body["method"].as_str().unwrap_or("") {
            "initialize" => {
                let mut result = json!({"capabilities": {"tools": {}}, "serverInfo": {"name": tag, "version": "1"}});
                if !version.is_null() {
                    result["protocolVersion"] = version.clone();
                }
                let body = result_json(&id, result);
                let sid = session.clone().unwrap_or_else(|| format!("sess-{tag}"));
                vec![Step::Write(format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: {sid}\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                ).into_bytes())]
            }
            "tools/list" => vec![http_response(
                "200 OK",
                "application/json",
                &result_json(
                    &id,
                    json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
                ),
            )],
            _ => vec![Step::Write(
                b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec(),
            )],
        }
    }
}

fn sse_stream() -> Vec<Step> {
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    vec![
        sse_head(),
        sse_event(&changed.to_string()),
        Step::Sleep(Duration::from_millis(200)),
        sse_end(),
    ]
}

/// `initialize` on `url`: the session id and the answer.
async fn initialize(url: &str) -> (Option<String>, Value) {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = legacy_post(&client(), url, None, init)
        .send()
        .await
        .unwrap();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (session, json_of(resp).await)
}

async fn legacy_tools(url: &str, session: &str) -> Value {
    let listed = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    json_of(
        legacy_post(&client(), url, Some(session), listed)
            .send()
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn the_first_upstreams_protocol_version_does_not_take_the_others_out_of_the_session() {
    for version in [json!("2025-06-18"), Value::Null, json!(7), json!("")] {
        let a = ScriptedUpstream::start(legacy_member(
            "a",
            version.clone(),
            None,
            "200 OK",
            sse_stream(),
        ))
        .await;
        let b = ScriptedUpstream::start(legacy_member(
            "b",
            json!(LEGACY_VERSION),
            None,
            "200 OK",
            sse_stream(),
        ))
        .await;
        let gw = start_gateway(&fed_config(
            &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
            "",
            "",
        ))
        .await;
        let (session, v) = initialize(&url(&gw)).await;
        assert_eq!(
            v["result"]["protocolVersion"], LEGACY_VERSION,
            "{version}: {v}"
        );
        let session = session.unwrap_or_else(|| panic!("{version}: no session: {v}"));
        let listed = legacy_tools(&url(&gw), &session).await;
        assert!(
            names(&listed["result"], "tools", "name").contains(&"b_echo".to_owned()),
            "{version}: the upstream that agreed with the client is in the session: {listed}"
        );
        assert!(
            left_out(&v["result"]).iter().any(|(u, _)| u == "up-a"),
            "{version}: {v}"
        );
        gw.shutdown().await;
    }
}

#[tokio::test]
async fn one_upstreams_long_session_id_does_not_make_the_routes_session_unusable() {
    let long = "s".repeat(12_000);
    let a = ScriptedUpstream::start(legacy_member(
        "a",
        json!(LEGACY_VERSION),
        Some(long),
        "200 OK",
        sse_stream(),
    ))
    .await;
    let b = ScriptedUpstream::start(legacy_member(
        "b",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        sse_stream(),
    ))
    .await;
    let gw = start_gateway(&fed_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "",
        "",
    ))
    .await;
    let (session, v) = initialize(&url(&gw)).await;
    let session = session.unwrap_or_else(|| panic!("no session: {v}"));
    let resp = legacy_post(
        &client(),
        &url(&gw),
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .send()
    .await
    .unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    assert_eq!(
        status,
        200,
        "the session id ({} bytes) is refused: {text}",
        session.len()
    );
    assert!(text.contains("b_echo"), "{text}");
    gw.shutdown().await;
}

#[tokio::test]
async fn an_upstream_refusing_the_end_of_a_session_or_its_stream_is_named_and_counted() {
    let a = ScriptedUpstream::start(legacy_member(
        "a",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        sse_stream(),
    ))
    .await;
    let refused = vec![http_response("404 Not Found", "text/plain", "no")];
    let b = ScriptedUpstream::start(legacy_member(
        "b",
        json!(LEGACY_VERSION),
        None,
        "500 Internal Server Error",
        refused,
    ))
    .await;
    let gw = start_gateway(&fed_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "",
        "",
    ))
    .await;
    let (session, _) = initialize(&url(&gw)).await;
    let session = session.unwrap();
    let stream = client()
        .get(url(&gw))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY_VERSION)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.text().await.unwrap().contains("list_changed"));
    let end = client()
        .delete(url(&gw))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY_VERSION)
        .send()
        .await
        .unwrap();
    assert!(end.status().is_success(), "{}", end.status());
    let m = metrics(&gw).await;
    let counted: Vec<&str> = m
        .lines()
        .filter(|l| {
            l.starts_with("portcullis_federation_left_out_total") && l.contains("upstream=\"up-b\"")
        })
        .collect();
    assert_eq!(
        counted.len(),
        2,
        "the GET and the DELETE each count up-b: {counted:?}"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn a_merged_stream_is_an_event_stream_whatever_one_upstream_answers() {
    let json_body = vec![http_response(
        "200 OK",
        "application/json",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
    )];
    let a = ScriptedUpstream::start(legacy_member(
        "a",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        json_body,
    ))
    .await;
    let b = ScriptedUpstream::start(legacy_member(
        "b",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        sse_stream(),
    ))
    .await;
    let gw = start_gateway(&fed_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "",
        "",
    ))
    .await;
    let (session, _) = initialize(&url(&gw)).await;
    let resp = client()
        .get(url(&gw))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session.unwrap())
        .header("mcp-protocol-version", LEGACY_VERSION)
        .send()
        .await
        .unwrap();
    let kind = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = resp
        .text()
        .await
        .unwrap_or_else(|e| format!("<broken body: {e}>"));
    assert_eq!(kind.as_deref(), Some("text/event-stream"), "{text}");
    assert!(text.contains("list_changed"), "{text}");
    assert!(!text.contains("\"result\""), "{text}");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_session_id_works_only_on_the_route_that_issued_it() {
    let stream = sse_stream;
    let a = ScriptedUpstream::start(legacy_member(
        "a",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        stream(),
    ))
    .await;
    let b = ScriptedUpstream::start(legacy_member(
        "b",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        stream(),
    ))
    .await;
    let more = "[[route]]\npath = \"/one\"\nupstream = \"up-a\"\n\n[[route]]\npath = \"/mcp2\"\nname = \"team-two\"\nupstreams = [\"up-a\", \"up-b\"]\n";
    let gw = start_gateway(&fed_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "",
        more,
    ))
    .await;
    let at = |path: &str| url(&gw).replace("/mcp", path);
    let mut sessions = Vec::new();
    for path in ["/mcp", "/one", "/mcp2"] {
        let (s, v) = initialize(&at(path)).await;
        sessions.push((path, s.unwrap_or_else(|| panic!("{path}: {v}"))));
    }
    let asked = a.requests().len() + b.requests().len();
    for (issued, session) in &sessions {
        for path in ["/mcp", "/one", "/mcp2"].iter().filter(|p| *p != issued) {
            let v = legacy_tools(&at(path), session).await;
            assert_eq!(
                reason(&v),
                "session_invalid",
                "{issued} used on {path}: {v}"
            );
        }
    }
    assert_eq!(
        a.requests().len() + b.requests().len(),
        asked,
        "nothing was forwarded"
    );
    for (issued, session) in &sessions {
        let v = legacy_tools(&at(issued), session).await;
        assert!(v.get("result").is_some(), "{issued}: {v}");
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn a_resource_update_on_the_merged_stream_names_the_exposed_uri() {
    let updated = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///x"}});
    let stream = vec![
        sse_head(),
        sse_event(&updated.to_string()),
        Step::Sleep(Duration::from_millis(200)),
        sse_end(),
    ];
    let a = ScriptedUpstream::start(legacy_member(
        "a",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        sse_stream(),
    ))
    .await;
    let b = ScriptedUpstream::start(legacy_member(
        "b",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        stream,
    ))
    .await;
    let alone = "[[route]]\npath = \"/one\"\nupstream = \"up-b\"\n";
    let gw = start_gateway(&fed_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "",
        alone,
    ))
    .await;
    let listen = |at: String| async move {
        let (session, _) = initialize(&at).await;
        let resp = client()
            .get(&at)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session.unwrap())
            .header("mcp-protocol-version", LEGACY_VERSION)
            .send()
            .await
            .unwrap();
        resp.text().await.unwrap()
    };
    let direct = listen(url(&gw).replace("/mcp", "/one")).await;
    assert!(
        direct.contains("\"file:///x\""),
        "the premise: a direct route delivers it: {direct}"
    );
    let text = listen(url(&gw)).await;
    assert!(text.contains("\"b+file:///x\""), "{text}");
    gw.shutdown().await;
}

#[tokio::test]
#[ignore = "finding: a 2025-11-25 tasks/get|result|cancel (no requestState in that generation) is refused with state_missing on a federated route; its task ids carry no upstream"]
async fn a_2025_task_request_reaches_the_upstream_that_runs_the_task() {
    let a = ScriptedUpstream::start(legacy_member(
        "a",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        sse_stream(),
    ))
    .await;
    let b = ScriptedUpstream::start(legacy_member(
        "b",
        json!(LEGACY_VERSION),
        None,
        "200 OK",
        sse_stream(),
    ))
    .await;
    let gw = start_gateway(&fed_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "",
        "",
    ))
    .await;
    let (session, _) = initialize(&url(&gw)).await;
    let get =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "t-1"}});
    let resp = legacy_post(&client(), &url(&gw), session.as_deref(), get)
        .send()
        .await
        .unwrap();
    let v = json_of(resp).await;
    assert_ne!(reason(&v), "state_missing", "{v}");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_2026_listen_stream_merges_every_upstreams_notifications() {
    let listening = || {
        ScriptedUpstream::start(|req| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            if body["method"] != "subscriptions/listen" {
                return vec![Step::Write(
                    b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec(),
                )];
            }
            let acknowledged = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": body["id"]}}});
            let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": body["id"]}}});
            vec![
                sse_head(),
                sse_event(&acknowledged.to_string()),
                sse_event(&changed.to_string()),
                Step::Sleep(Duration::from_secs(6)),
                sse_end(),
            ]
        })
    };
    let (a, b) = (listening().await, listening().await);
    let gw = start_gateway(&fed_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "fanout_timeout = \"1s\"",
        "",
    ))
    .await;
    let body = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
        "params": {"_meta": meta(), "notifications": {"toolsListChanged": true}}});
    let resp = client()
        .post(url(&gw))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let mut stream = futures_util::StreamExt::boxed(resp.bytes_stream());
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while text.matches("list_changed").count() < 2 && Instant::now() < deadline {
        let next = tokio::time::timeout(
            Duration::from_millis(500),
            futures_util::StreamExt::next(&mut stream),
        )
        .await;
        match next {
            Ok(Some(Ok(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(_) => break,
            Err(_) => {}
        }
    }
    assert_eq!(
        text.matches("notifications/tools/list_changed").count(),
        2,
        "{text}"
    );
    gw.shutdown().await;
}
