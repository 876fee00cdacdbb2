//! 2025-11-25 sessions through the gateway, against a scripted upstream that
//! speaks the older generation: sealed session ids bound to caller and
//! upstream, pushed requests policed like MRTR questions, answers bound to
//! the push they answer, refused pushes answered by the gateway itself.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::legacy_post as post;
use crate::common::*;
use crate::over_both_kinds;

const LEGACY: &str = "2025-11-25";

/// What the scripted upstream does for each method.
fn legacy_upstream(push: Value) -> impl Fn(&Received) -> Vec<Step> + Send + Sync + 'static {
    move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let method = body.get("method").and_then(Value::as_str).unwrap_or("");
        let id = id_of(req);
        if req.head.starts_with("DELETE") {
            return vec![Step::Write(
                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec(),
            )];
        }
        if req.head.starts_with("GET") {
            return vec![
                sse_head(),
                Step::Write(chunk("id: g1\nretry: 500\ndata: \n\n")),
                sse_event(&json!({"jsonrpc": "2.0", "id": "g-push", "method": "elicitation/create", "params": push["params"].clone()}).to_string()),
                Step::Sleep(Duration::from_millis(200)),
                sse_end(),
            ];
        }
        match method {
            "initialize" => {
                let result = json!({"protocolVersion": LEGACY, "capabilities": {"tools": {}}, "serverInfo": {"name": "legacy", "version": "1"}});
                let body = result_json(&id, result);
                vec![Step::Write(
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: up-1\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes(),
                )]
            }
            "tools/call" => vec![
                sse_head(),
                sse_event(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p", "progress": 1, "message": "<b>working</b>"}}).to_string()),
                sse_event(&json!({"jsonrpc": "2.0", "id": 77, "method": push["method"].clone(), "params": push["params"].clone()}).to_string()),
                Step::Sleep(Duration::from_millis(300)),
                sse_event(&result_json(&id, json!({"content": [{"type": "text", "text": "done"}]}))),
                sse_end(),
            ],
            // A notification or a client's answer: accepted.
            _ if body.get("id").is_none() || body.get("method").is_none() => {
                vec![Step::Write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec())]
            }
            _ => vec![http_response("200 OK", "application/json", &result_json(&id, json!({"tools": listing()["tools"]})))],
        }
    }
}

fn room_push() -> Value {
    json!({"method": "elicitation/create", "params": {"message": "Which <b>room</b>?",
        "requestedSchema": {"type": "object", "properties": {"room": {"type": "string", "enum": ["atrium", "nook"]}, "note": {"type": "string"}}, "required": ["room"]}}})
}

fn password_push() -> Value {
    json!({"method": "elicitation/create", "params": {"message": "Unlock the vault",
        "requestedSchema": {"type": "object", "properties": {"password": {"type": "string"}}}}})
}

async fn initialize(c: &reqwest::Client, url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": LEGACY,
        "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = post(c, url, None, init).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        session.starts_with("pss1."),
        "the client holds the gateway's own session id: {session}"
    );
    session
}

/// The JSON-RPC messages of an event stream, in order.
fn events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            let joined = data.join("\n");
            (!joined.trim().is_empty()).then(|| serde_json::from_str(&joined).unwrap())
        })
        .collect()
}

async fn call_tool(c: &reqwest::Client, url: &str, session: &str) -> Vec<Value> {
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "book", "arguments": {}}});
    let text = post(c, url, Some(session), call)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    events(&text)
}

async fn gateway(up: &ScriptedUpstream, extra: &str) -> portcullis::server::RunningGateway {
    start_gateway(&config_text(&up.url(), "", extra)).await
}

// Over HTTP only: it asserts what reaches the upstream's HTTP server.
#[tokio::test]
async fn a_session_id_is_the_gateways_own_and_bound() {
    let up = ScriptedUpstream::start(legacy_upstream(room_push())).await;
    let gw = gateway(&up, "").await;
    let c = client();
    let session = initialize(&c, &url(&gw)).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let resp = post(&c, &url(&gw), Some(&session), list.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let last = up.requests().pop().unwrap();
    assert_eq!(
        last.header("mcp-session-id").as_deref(),
        Some("up-1"),
        "the upstream gets its own id back"
    );
    // Altered, foreign or unsealed ids are refused with 404: the client initializes again.
    let mut altered = session.clone().into_bytes();
    let at = altered.len() - 5;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    for bad in [
        String::from_utf8(altered).unwrap(),
        "up-1".into(),
        "pss1.garbage".into(),
    ] {
        let resp = post(&c, &url(&gw), Some(&bad), list.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{bad}");
        let v = json_of(resp).await;
        assert_eq!(v["error"]["data"]["reason"], "session_invalid", "{v}");
    }
    // DELETE ends the session upstream, with the upstream's own id.
    let resp = c
        .delete(url(&gw))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let last = up.requests().pop().unwrap();
    assert!(last.head.starts_with("DELETE"));
    assert_eq!(last.header("mcp-session-id").as_deref(), Some("up-1"));
    gw.shutdown().await;
}
over_both_kinds! { StdioSessions;
async fn a_session_belongs_to_its_caller() {
    let up = ScriptedUpstream::start(legacy_upstream(room_push())).await;
    let keys = "[[auth]]\nname = \"keys\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"alice\"\nhash = \"HASH_A\"\n[[auth.key]]\nprincipal = \"bob\"\nhash = \"HASH_B\"\n"
        .replace("HASH_A", &portcullis::identify::hash_key("key-a"))
        .replace("HASH_B", &portcullis::identify::hash_key("key-b"));
    let text = config_text(&up.url(), "", &keys).replace(
        "upstream = \"test\"\n",
        "upstream = \"test\"\nauth = [\"keys\"]\n",
    );
    let gw = start_gateway(&text).await;
    let c = client();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = post(&c, &url(&gw), None, init)
        .bearer_auth("key-a")
        .send()
        .await
        .unwrap();
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let ok = post(&c, &url(&gw), Some(&session), list.clone())
        .bearer_auth("key-a")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let stolen = post(&c, &url(&gw), Some(&session), list)
        .bearer_auth("key-b")
        .send()
        .await
        .unwrap();
    assert_eq!(stolen.status(), 404);
    assert_eq!(
        json_of(stolen).await["error"]["data"]["reason"],
        "session_invalid"
    );
    gw.shutdown().await;
}}

// Over HTTP only: it asserts what reaches the upstream's HTTP server.
#[tokio::test]
async fn a_pushed_form_is_policed_and_its_answer_bound_to_it() {
    let up = ScriptedUpstream::start(legacy_upstream(room_push())).await;
    let gw = gateway(&up, "").await;
    let c = client();
    let session = initialize(&c, &url(&gw)).await;
    let stream = call_tool(&c, &url(&gw), &session).await;
    assert_eq!(stream.len(), 3, "{stream:?}");
    assert_eq!(
        stream[0]["params"]["message"], "working",
        "notification text is made safe"
    );
    let push = &stream[1];
    assert_eq!(push["method"], "elicitation/create");
    assert_eq!(push["params"]["message"], "Which room?");
    assert!(push["params"]["_meta"]["dev.portcullis/provenance"].is_object());
    let token = push["id"].as_str().unwrap().to_owned();
    assert!(
        token.starts_with("psr1."),
        "the client answers the gateway's id: {token}"
    );
    assert_eq!(stream[2]["result"]["content"][0]["text"], "done");

    let answer = |id: &str, content: Value| json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": content}});
    // Not what was asked, a secret in an ordinary field, another session: refused, never forwarded.
    let before = up.requests().len();
    let other = initialize(&c, &url(&gw)).await;
    for (sid, content, reason) in [
        (&session, json!({"room": "ballroom"}), "invalid_answer"),
        (
            &session,
            json!({"room": "nook", "note": "4111 1111 1111 1111"}),
            "secret_in_answer",
        ),
        (&other, json!({"room": "nook"}), "answer_not_requested"),
    ] {
        let resp = post(&c, &url(&gw), Some(sid), answer(&token, content))
            .send()
            .await
            .unwrap();
        let v = json_of(resp).await;
        assert_eq!(v["error"]["data"]["reason"], reason, "{v}");
    }
    assert_eq!(
        up.requests().len(),
        before + 1,
        "only the second initialize reached the upstream"
    );
    // The answer it asked for goes upstream under the upstream's own id, once.
    let resp = post(
        &c,
        &url(&gw),
        Some(&session),
        answer(&token, json!({"room": "nook"})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 202);
    let forwarded: Value = serde_json::from_slice(&up.requests().pop().unwrap().body).unwrap();
    assert_eq!(
        forwarded,
        json!({"jsonrpc": "2.0", "id": 77, "result": {"action": "accept", "content": {"room": "nook"}}})
    );
    let again = post(
        &c,
        &url(&gw),
        Some(&session),
        answer(&token, json!({"room": "nook"})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(
        json_of(again).await["error"]["data"]["reason"],
        "state_replayed"
    );
    let forged = post(
        &c,
        &url(&gw),
        Some(&session),
        answer("77", json!({"room": "nook"})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(
        json_of(forged).await["error"]["data"]["reason"],
        "answer_not_requested"
    );
    gw.shutdown().await;
}
over_both_kinds! { StdioSessions;
async fn a_refused_push_is_answered_by_the_gateway_and_never_shown() {
    let up = ScriptedUpstream::start(legacy_upstream(password_push())).await;
    let gw = gateway(&up, "").await;
    let c = client();
    let session = initialize(&c, &url(&gw)).await;
    let stream = call_tool(&c, &url(&gw), &session).await;
    assert!(
        stream
            .iter()
            .all(|m| m.get("method") != Some(&json!("elicitation/create"))),
        "{stream:?}"
    );
    assert_eq!(
        stream.last().unwrap()["result"]["content"][0]["text"],
        "done"
    );
    // The gateway's own answer reached the upstream, in its session.
    let mut answered = None;
    for _ in 0..50 {
        answered = up.requests().into_iter().find(|r| {
            serde_json::from_slice::<Value>(&r.body)
                .is_ok_and(|v| v["id"] == 77 && v.get("error").is_some())
        });
        if answered.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answered = answered.expect("the upstream got an answer to its pushed request");
    assert_eq!(answered.header("mcp-session-id").as_deref(), Some("up-1"));
    let v: Value = serde_json::from_slice(&answered.body).unwrap();
    assert_eq!(v["error"]["data"]["reason"], "secret_field_requested");
    assert!(!String::from_utf8_lossy(&answered.body).contains("hunter"));
    gw.shutdown().await;
}}

// Over HTTP only: it asserts what reaches the upstream's HTTP server.
#[tokio::test]
async fn the_sessions_stream_of_server_messages_is_policed_and_resumable() {
    let up = ScriptedUpstream::start(legacy_upstream(room_push())).await;
    let gw = gateway(&up, "").await;
    let c = client();
    let session = initialize(&c, &url(&gw)).await;
    let resp = c
        .get(url(&gw))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY)
        .header("last-event-id", "g0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(
        text.starts_with("id: g1\nretry: 500\n"),
        "the priming event passes: {text}"
    );
    let messages = events(&text);
    assert_eq!(messages.len(), 1);
    assert!(messages[0]["id"].as_str().unwrap().starts_with("psr1."));
    assert_eq!(messages[0]["params"]["message"], "Which room?");
    let get = up
        .requests()
        .into_iter()
        .find(|r| r.head.starts_with("GET"))
        .unwrap();
    assert_eq!(get.header("last-event-id").as_deref(), Some("g0"));
    assert_eq!(get.header("mcp-session-id").as_deref(), Some("up-1"));
    gw.shutdown().await;
}
over_both_kinds! { StdioSessions;
async fn an_unanswered_push_ends_with_an_answer_to_the_upstream() {
    let up = ScriptedUpstream::start(legacy_upstream(room_push())).await;
    let gw = gateway(&up, "[state]\npush_timeout = \"300ms\"\n").await;
    let c = client();
    let session = initialize(&c, &url(&gw)).await;
    let stream = call_tool(&c, &url(&gw), &session).await;
    assert!(stream[1]["id"].as_str().unwrap().starts_with("psr1."));
    let mut expired = None;
    for _ in 0..100 {
        expired = up.requests().into_iter().find(|r| {
            serde_json::from_slice::<Value>(&r.body)
                .is_ok_and(|v| v["id"] == 77 && v.get("error").is_some())
        });
        if expired.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let v: Value = serde_json::from_slice(&expired.expect("timed out push answered").body).unwrap();
    assert_eq!(v["error"]["data"]["reason"], "operation_expired");
    gw.shutdown().await;
}}

over_both_kinds! { StdioSessions;
async fn a_stateless_only_route_refuses_sessions_with_the_versions_it_serves() {
    let up = ScriptedUpstream::start(legacy_upstream(room_push())).await;
    let text = config_text(&up.url(), "", "").replace(
        "upstream = \"test\"\n",
        "upstream = \"test\"\ngenerations = [\"2026-07-28\"]\n",
    );
    let gw = start_gateway(&text).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = post(&client(), &url(&gw), None, init).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let v = json_of(resp).await;
    assert_eq!(v["error"]["code"], -32022);
    assert_eq!(v["error"]["data"]["supported"], json!(["2026-07-28"]));
    gw.shutdown().await;
}}
