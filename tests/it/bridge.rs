//! A 2025-11-25 client in front of an upstream that speaks only 2026-07-28:
//! the gateway answers `initialize` from the upstream's `server/discover`,
//! carries each request of the bridged session as a 2026-07-28 request,
//! pushes each `input_required` question on the call's stream and retries
//! with the client's answers, round after round. The upstream here is a
//! scripted 2026-07-28-only server that refuses `initialize`.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};

use portcullis::server::RunningGateway;

use crate::common::*;

/// A 2026-07-28-only server: `server/discover`; `tools/list`; tools that
/// ask (`ask_rounds`: two questions, then a third, then the result naming
/// the actions it got; `ask_secret`: a form for a password; `ask_forever`);
/// `plain`. `initialize` is refused as such a server refuses it.
pub(crate) async fn stateless_only(versions: Value) -> ScriptedUpstream {
    upstream(versions, false).await
}

/// As [`stateless_only`]; `sessions_too`: it also accepts `initialize`.
async fn upstream(versions: Value, sessions_too: bool) -> ScriptedUpstream {
    ScriptedUpstream::start(move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = id_of(req);
        let params = &body["params"];
        let result = match body["method"].as_str().unwrap_or_default() {
            "server/discover" => json!({"resultType": "complete", "supportedVersions": versions.clone(),
                "ttlMs": 60000, "cacheScope": "public",
                "capabilities": {"tools": {"listChanged": true}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "Upstream's own name", "version": "3.1.4"}},
                "instructions": "Call ask_rounds to try the questions."}),
            "initialize" if sessions_too => {
                let result = json!({"protocolVersion": LEGACY_VERSION, "capabilities": {"tools": {}},
                    "serverInfo": {"name": "Upstream's own name", "version": "1"}});
                let body = result_json(&id, result);
                let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: up-1\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                return vec![Step::Write(head.into_bytes())];
            }
            "initialize" => {
                let err = json!({"jsonrpc": "2.0", "id": serde_json::from_str::<Value>(&id).unwrap(),
                    "error": {"code": -32022, "message": "Unsupported protocol version"}});
                return vec![http_response("400 Bad Request", "application/json", &err.to_string())];
            }
            "tools/list" => json!({"resultType": "complete", "ttlMs": 1000, "cacheScope": "public",
                "tools": (["ask_rounds", "ask_secret", "ask_forever", "plain"].map(|n| json!({"name": n, "inputSchema": {"type": "object"}})))}),
            "tools/call" => call_result(params),
            _ => json!({"resultType": "complete"}),
        };
        vec![http_response("200 OK", "application/json", &result_json(&id, result))]
    })
    .await
}

fn form(message: &str, field: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": "string"}}}}})
}

fn call_result(params: &Value) -> Value {
    let answers = params.get("inputResponses");
    let asking = |requests: Value, state: &str| json!({"resultType": "input_required", "inputRequests": requests, "requestState": state});
    match (params["name"].as_str().unwrap_or_default(), answers) {
        ("ask_rounds", None) => asking(
            json!({"a": form("First name?", "first"), "b": form("Last name?", "last")}),
            "upstream-state-1",
        ),
        ("ask_rounds", Some(a)) if a.get("c").is_none() => {
            assert_eq!(params["requestState"], "upstream-state-1");
            asking(json!({"c": form("City?", "city")}), "upstream-state-2")
        }
        ("ask_rounds", Some(a)) => {
            assert_eq!(params["requestState"], "upstream-state-2");
            let action = |k: &str| a[k]["action"].as_str().unwrap_or("none").to_owned();
            let text = format!("c={}", action("c"));
            json!({"resultType": "complete", "content": [{"type": "text", "text": text}]})
        }
        ("ask_secret", _) => asking(json!({"pw": form("Your password?", "password")}), "s"),
        ("ask_forever", _) => asking(json!({"again": form("Once more?", "more")}), "f"),
        _ => json!({"resultType": "complete", "content": [{"type": "text", "text": "plain"}]}),
    }
}

/// `initialize` as a 2025-11-25 client sends it; the session id.
async fn initialize(gw_url: &str, caps: Value) -> (Value, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": caps,
        "clientInfo": {"name": "t", "version": "1"}}});
    let resp = legacy_post(&client(), gw_url, None, body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    (json_of(resp).await, session)
}

/// The messages of an event stream, read as they arrive.
pub(crate) struct Events {
    stream: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Events {
    pub(crate) fn of(resp: reqwest::Response) -> Events {
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        Events {
            stream: resp.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next message; `None` when the stream ended.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data = event.lines().find_map(|l| l.strip_prefix("data: "))?;
                return Some(serde_json::from_str(data).expect("a JSON message"));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.stream.next())
                .await
                .expect("the stream moves")?
                .ok()?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

async fn call_tool(gw_url: &str, session: &str, id: Value, tool: &str) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}});
    legacy_post(&client(), gw_url, Some(session), body)
        .send()
        .await
        .unwrap()
}

async fn answer(gw_url: &str, session: &str, push: &Value, result: Value) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": push["id"], "result": result});
    legacy_post(&client(), gw_url, Some(session), body)
        .send()
        .await
        .unwrap()
}

fn accept(field: &str, value: &str) -> Value {
    json!({"action": "accept", "content": {field: value}})
}

async fn bridged(extra: &str) -> (ScriptedUpstream, RunningGateway, String) {
    let up = stateless_only(json!(["2026-07-28"])).await;
    let gw = start_gateway(&config_text(&up.url(), "", extra)).await;
    let (_, session) = initialize(&url(&gw), json!({"elicitation": {}})).await;
    (up, gw, session)
}

#[tokio::test]
async fn initialize_is_answered_by_the_gateway_from_the_upstreams_discovery() {
    let up = stateless_only(json!(["2026-07-28"])).await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let (v, session) = initialize(&url(&gw), json!({"elicitation": {}})).await;
    let r = &v["result"];
    assert_eq!(r["protocolVersion"], LEGACY_VERSION);
    // The configured name, never the server's own; what needs a stream of
    // server messages is not offered.
    assert_eq!(
        r["serverInfo"],
        json!({"name": "Test upstream", "version": "3.1.4"})
    );
    assert_eq!(r["capabilities"], json!({"tools": {}}));
    assert_eq!(r["instructions"], "Call ask_rounds to try the questions.");
    assert!(r.get("resultType").is_none() && r.get("supportedVersions").is_none());
    assert!(session.starts_with("pss1."));
    // Its own initialize was tried first (and refused), then its discovery.
    let methods = |up: &ScriptedUpstream| -> Vec<String> {
        up.requests()
            .iter()
            .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["method"].to_string())
            .collect()
    };
    assert_eq!(methods(&up), ["\"initialize\"", "\"server/discover\""]);
    let discover = &up.requests()[1];
    assert_eq!(
        discover.header("mcp-method").as_deref(),
        Some("server/discover")
    );
    assert_eq!(
        discover.header("mcp-protocol-version").as_deref(),
        Some(VERSION)
    );
    // Remembered: the next session costs one discovery, no refused initialize.
    initialize(&url(&gw), json!({})).await;
    assert_eq!(methods(&up)[2..], ["\"server/discover\""]);
    gw.shutdown().await;
    // Configured: never asked initialize.
    let up = stateless_only(json!(["2026-07-28"])).await;
    let extra = "generations = [\"2026-07-28\"]";
    let gw = start_gateway(&config_text(&up.url(), extra, "")).await;
    initialize(&url(&gw), json!({})).await;
    assert_eq!(methods(&up), ["\"server/discover\""]);
    gw.shutdown().await;
}

#[tokio::test]
async fn a_bridged_session_carries_requests_as_2026_07_28_and_results_back_as_2025_11_25() {
    let (up, gw, session) = bridged("").await;
    let body = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"});
    let resp = legacy_post(&client(), &url(&gw), Some(&session), body)
        .send()
        .await
        .unwrap();
    let v = json_of(resp).await;
    assert_eq!(v["id"], "l");
    assert_eq!(v["result"]["tools"][0]["name"], "ask_rounds");
    for member in ["resultType", "ttlMs", "cacheScope"] {
        assert!(v["result"].get(member).is_none(), "{member} in {v}");
    }
    let sent = up.requests().pop().unwrap();
    let sent_body: Value = serde_json::from_slice(&sent.body).unwrap();
    let meta = &sent_body["params"]["_meta"];
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], VERSION);
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"elicitation": {"form": {}}})
    );
    assert_eq!(sent.header("mcp-method").as_deref(), Some("tools/list"));
    assert_eq!(sent.header("mcp-session-id"), None);
    // A call that asks nothing is one JSON body.
    let v = json_of(call_tool(&url(&gw), &session, json!(5), "plain").await).await;
    assert_eq!(v["result"]["content"][0]["text"], "plain");
    assert_eq!(
        up.requests().pop().unwrap().header("mcp-name").as_deref(),
        Some("plain")
    );
    // The gateway answers what 2026-07-28 has no place for.
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    let v = json_of(
        legacy_post(&client(), &url(&gw), Some(&session), ping)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v["result"], json!({}));
    let listen = client()
        .get(url(&gw))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY_VERSION)
        .send()
        .await
        .unwrap();
    assert_eq!(listen.status(), 405);
    let before = up.requests().len();
    let ended = client()
        .delete(url(&gw))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY_VERSION)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 200);
    let resp = call_tool(&url(&gw), &session, json!(6), "plain").await;
    assert_eq!(resp.status(), 404);
    assert_eq!(
        json_of(resp).await["error"]["data"]["reason"],
        "session_expired"
    );
    assert_eq!(
        up.requests().len(),
        before,
        "nothing of that reached the upstream"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn questions_are_pushed_and_the_answers_retried_round_after_round() {
    let (up, gw, session) = bridged("").await;
    let gw_url = url(&gw);
    let resp = call_tool(&gw_url, &session, json!("call-1"), "ask_rounds").await;
    let mut events = Events::of(resp);
    // Round one: two questions, each a pushed request under a sealed id.
    let (p1, p2) = (events.next().await.unwrap(), events.next().await.unwrap());
    for p in [&p1, &p2] {
        assert_eq!(p["method"], "elicitation/create");
        assert!(p["id"].as_str().unwrap().starts_with("psr1."), "{p}");
    }
    assert_eq!(p1["params"]["message"], "First name?");
    assert_eq!(
        answer(&gw_url, &session, &p2, accept("last", "Lovelace"))
            .await
            .status(),
        202
    );
    assert_eq!(
        answer(&gw_url, &session, &p1, accept("first", "Ada"))
            .await
            .status(),
        202
    );
    // The same push answered twice: refused, once used.
    let again = answer(&gw_url, &session, &p1, accept("first", "Ada")).await;
    assert_eq!(
        json_of(again).await["error"]["data"]["reason"],
        "state_replayed"
    );
    // Round two: one question; declined.
    let p3 = events.next().await.unwrap();
    assert_eq!(p3["params"]["message"], "City?");
    let declined = answer(&gw_url, &session, &p3, json!({"action": "decline"})).await;
    assert_eq!(declined.status(), 202);
    let last = events.next().await.unwrap();
    assert_eq!(last["id"], "call-1");
    assert_eq!(last["result"]["content"][0]["text"], "c=decline");
    assert!(last["result"].get("resultType").is_none());
    assert!(events.next().await.is_none());
    // The upstream got its own states back and both answers of round one.
    let sent: Vec<Value> = up
        .requests()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .filter(|b: &Value| b["method"] == "tools/call")
        .collect();
    assert_eq!(sent.len(), 3);
    let round_two = &sent[1]["params"];
    assert_eq!(round_two["requestState"], "upstream-state-1");
    assert_eq!(round_two["inputResponses"]["a"], accept("first", "Ada"));
    assert_eq!(round_two["inputResponses"]["b"], accept("last", "Lovelace"));
    let m = metrics(&gw).await;
    for line in [
        r#"portcullis_bridge_sessions_total{upstream="test"} 1"#,
        r#"portcullis_bridge_questions_total{outcome="pushed",upstream="test"} 3"#,
        r#"portcullis_bridge_questions_total{outcome="answered",upstream="test"} 3"#,
        r#"portcullis_requests_total{method="tools/call",outcome="ok",upstream="test"} 1"#,
    ] {
        assert!(m.contains(line), "{line} in\n{m}");
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn a_question_the_policy_refuses_never_reaches_the_client() {
    let (_up, gw, session) = bridged("").await;
    let v = json_of(call_tool(&url(&gw), &session, json!(3), "ask_secret").await).await;
    assert_eq!(v["id"], 3);
    assert_eq!(
        v["error"]["data"]["reason"], "secret_field_requested",
        "{v}"
    );
    assert!(!v.to_string().contains("Your password?"));
    gw.shutdown().await;
}

#[tokio::test]
async fn the_round_limit_ends_a_bridged_call() {
    let (_up, gw, session) = bridged("[state]\nmax_rounds = 2\n").await;
    let gw_url = url(&gw);
    let mut events = Events::of(call_tool(&gw_url, &session, json!(4), "ask_forever").await);
    for _ in 0..2 {
        let push = events.next().await.unwrap();
        assert_eq!(push["method"], "elicitation/create", "{push}");
        answer(&gw_url, &session, &push, accept("more", "yes")).await;
    }
    let last = events.next().await.unwrap();
    assert_eq!(last["id"], 4);
    assert_eq!(
        last["error"]["data"]["reason"], "round_limit_exceeded",
        "{last}"
    );
    assert!(events.next().await.is_none());
    gw.shutdown().await;
}

#[tokio::test]
async fn an_unanswered_question_ends_the_call_at_push_timeout() {
    let (up, gw, session) = bridged("[state]\npush_timeout = \"1s\"\n").await;
    let mut events = Events::of(call_tool(&url(&gw), &session, json!(8), "ask_rounds").await);
    let (p1, p2) = (events.next().await.unwrap(), events.next().await.unwrap());
    let mut withdrawn = Vec::new();
    let last = loop {
        let m = events.next().await.unwrap();
        if m["method"] == "notifications/cancelled" {
            withdrawn.push(m["params"]["requestId"].clone());
            continue;
        }
        break m;
    };
    withdrawn.sort_by_key(|v| v.to_string());
    let mut pushed = vec![p1["id"].clone(), p2["id"].clone()];
    pushed.sort_by_key(|v| v.to_string());
    assert_eq!(withdrawn, pushed);
    assert_eq!(last["id"], 8);
    assert_eq!(
        last["error"]["data"]["reason"], "operation_expired",
        "{last}"
    );
    let calls = up
        .requests()
        .iter()
        .filter(|r| r.header("mcp-method").as_deref() == Some("tools/call"))
        .count();
    assert_eq!(calls, 1, "no retry went upstream");
    let m = metrics(&gw).await;
    let line = r#"portcullis_bridge_questions_total{outcome="timed_out",upstream="test"} 2"#;
    assert!(m.contains(line), "{line} in\n{m}");
    let line = r#"portcullis_requests_total{method="tools/call",outcome="operation_expired",upstream="test"} 1"#;
    assert!(m.contains(line), "{line} in\n{m}");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_or_abandoned_call_ends_and_its_questions_cannot_be_answered() {
    let (up, gw, session) = bridged("").await;
    let gw_url = url(&gw);
    // Cancelled by the client: the stream ends with no response.
    let mut events = Events::of(call_tool(&gw_url, &session, json!(11), "ask_rounds").await);
    let push = events.next().await.unwrap();
    let _second = events.next().await.unwrap();
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 11, "reason": "user"}});
    let resp = legacy_post(&client(), &gw_url, Some(&session), cancel)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let mut rest = Vec::new();
    while let Some(m) = events.next().await {
        rest.push(m);
    }
    assert!(
        rest.iter()
            .all(|m| m["method"] == "notifications/cancelled"),
        "{rest:?}"
    );
    let late = answer(&gw_url, &session, &push, accept("first", "Ada")).await;
    assert_eq!(late.status(), 409);
    assert_eq!(
        json_of(late).await["error"]["data"]["reason"],
        "call_not_waiting"
    );
    // Abandoned: the client closes the stream; the call's questions go with it.
    let mut events = Events::of(call_tool(&gw_url, &session, json!(12), "ask_rounds").await);
    let push = events.next().await.unwrap();
    drop(events);
    let mut gone = false;
    for _ in 0..100 {
        let late = answer(&gw_url, &session, &push, accept("first", "Ada")).await;
        if late.status() == 409 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the abandoned call stopped waiting");
    let calls = up
        .requests()
        .iter()
        .filter(|r| r.header("mcp-method").as_deref() == Some("tools/call"))
        .count();
    assert_eq!(calls, 2, "neither call was retried upstream");
    gw.shutdown().await;
}

#[tokio::test]
async fn an_answer_must_reach_the_replica_that_holds_the_call() {
    let up = stateless_only(json!(["2026-07-28"])).await;
    let keys = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(keys.path(), portcullis::mrtr::seal::new_key_line("shared")).unwrap();
    let shared = format!("[state]\nkeys_file = \"{}\"\n", keys.path().display());
    let one = start_gateway(&config_text(&up.url(), "", &shared)).await;
    let two = start_gateway(&config_text(&up.url(), "", &shared)).await;
    // The session is good on either replica ...
    let (_, session) = initialize(&url(&one), json!({"elicitation": {}})).await;
    let v = json_of(call_tool(&url(&two), &session, json!(1), "plain").await).await;
    assert_eq!(v["result"]["content"][0]["text"], "plain");
    // ... but a call's answers must come back to the replica that pushed them.
    let mut events = Events::of(call_tool(&url(&one), &session, json!(2), "ask_rounds").await);
    let (p1, p2) = (events.next().await.unwrap(), events.next().await.unwrap());
    let elsewhere = answer(&url(&two), &session, &p1, accept("first", "Ada")).await;
    assert_eq!(elsewhere.status(), 409);
    let v = json_of(elsewhere).await;
    assert_eq!(v["error"]["data"]["reason"], "call_not_waiting");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another instance"),
        "{v}"
    );
    // Refused there without being used up: the right replica still takes it.
    assert_eq!(
        answer(&url(&one), &session, &p1, accept("first", "Ada"))
            .await
            .status(),
        202
    );
    assert_eq!(
        answer(&url(&one), &session, &p2, accept("last", "L"))
            .await
            .status(),
        202
    );
    let p3 = events.next().await.unwrap();
    answer(&url(&one), &session, &p3, accept("city", "Paris")).await;
    assert_eq!(
        events.next().await.unwrap()["result"]["content"][0]["text"],
        "c=accept"
    );
    one.shutdown().await;
    two.shutdown().await;
}

#[tokio::test]
async fn an_upstream_that_speaks_2025_11_25_keeps_its_own_sessions() {
    let both = upstream(json!(["2026-07-28"]), true).await;
    let gw = start_gateway(&config_text(&both.url(), "", "")).await;
    for _ in 0..2 {
        let (v, session) = initialize(&url(&gw), json!({})).await;
        // The upstream's own answer, in the gateway's session around its own.
        assert_eq!(v["result"]["serverInfo"]["name"], "Upstream's own name");
        assert!(session.starts_with("pss1."));
    }
    let methods: Vec<String> = both
        .requests()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["method"].to_string())
        .collect();
    assert_eq!(
        methods,
        ["\"initialize\"", "\"initialize\""],
        "no discovery"
    );
    gw.shutdown().await;
    // Configured as speaking 2025-11-25: the same, never asked anything else.
    let extra = "generations = [\"2025-11-25\", \"2026-07-28\"]";
    let gw = start_gateway(&config_text(&both.url(), extra, "")).await;
    initialize(&url(&gw), json!({})).await;
    assert_eq!(both.requests().len(), 3);
    gw.shutdown().await;
}
