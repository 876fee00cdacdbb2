//! A 2026-07-28 client in front of an upstream that speaks only
//! 2025-11-25: the gateway opens the upstream session itself, carries each
//! request in it, turns a pushed request into an `input_required` question
//! whose sealed state names the upstream call it holds open, and delivers
//! the retry's answer to the waiting push. The upstream is a scripted
//! 2025-11-25-only server: a request without its session gets 400.

use std::time::Duration;

use serde_json::{json, Value};

use portcullis::server::RunningGateway;

use crate::common::*;
use crate::over_both_kinds;

const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}"#;

fn form(field: &str) -> Value {
    json!({"mode": "form", "message": format!("Your {field}?"),
        "requestedSchema": {"type": "object", "properties": {field: {"type": "string"}}}})
}

/// The scripted server: `initialize` opens session `up-1`; `ask` pushes a
/// form for `room` and, a moment later, ends with its result; `ask_secret`
/// pushes a form for a password.
pub(crate) async fn sessions_only() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = id_of(req);
        let in_session = req.header("mcp-session-id").as_deref() == Some("up-1");
        let method = body["method"].as_str().unwrap_or_default();
        let json_result = |result: Value| http_response("200 OK", "application/json", &result_json(&id, result));
        if method == "initialize" {
            let result = json!({"protocolVersion": LEGACY_VERSION,
                "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": {"name": "Its own name", "version": "2.0"}, "instructions": "Ask away."});
            let body = result_json(&id, result);
            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: up-1\r\ncontent-length: {}\r\n\r\n{body}", body.len());
            return vec![Step::Write(head.into_bytes())];
        }
        if !in_session {
            let err = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#;
            return vec![http_response("400 Bad Request", "application/json", err)];
        }
        if body.get("method").is_none() || method.starts_with("notifications/") {
            return vec![http_response("202 Accepted", "application/json", "")];
        }
        let push = |field: &str| {
            json!({"jsonrpc": "2.0", "id": "up-push-1", "method": "elicitation/create", "params": form(field)}).to_string()
        };
        let done = result_json(&id, json!({"content": [{"type": "text", "text": "booked"}]}));
        match (method, body["params"]["name"].as_str()) {
            ("tools/list", _) => vec![json_result(json!({"tools": (["ask", "ask_secret", "plain"].map(|n| json!({"name": n, "inputSchema": {"type": "object"}})))}))],
            ("tools/call", Some(tool @ ("ask" | "ask_secret"))) => {
                let field = if tool == "ask" { "room" } else { "password" };
                vec![sse_head(), sse_event(&push(field)), Step::Sleep(Duration::from_millis(700)), sse_event(&done), sse_end()]
            }
            _ => vec![json_result(json!({"content": [{"type": "text", "text": "plain"}]}))],
        }
    })
    .await
}

/// A config whose route knows its callers (API key `key-a` is alice): the
/// bridge keeps one upstream session per caller.
fn keyed(upstream_url: &str, upstream_extra: &str, extra: &str) -> String {
    let keys = "[[auth]]\nname = \"keys\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"alice\"\nhash = \"HASH_A\"\n"
        .replace("HASH_A", &portcullis::identify::hash_key("key-a"));
    config_text(upstream_url, upstream_extra, &format!("{keys}\n{extra}")).replace(
        "upstream = \"test\"\n",
        "upstream = \"test\"\nauth = [\"keys\"]\n",
    )
}

async fn post(gw: &RunningGateway, id: u32, method: &str, params: Value) -> Value {
    post_as(gw, Some("key-a"), id, method, params).await
}

async fn post_as(
    gw: &RunningGateway,
    key: Option<&str>,
    id: u32,
    method: &str,
    params: Value,
) -> Value {
    let mut params = params;
    params["_meta"] = serde_json::from_str(META).unwrap();
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut r = client()
        .post(url(gw))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", method);
    if let Some(name) = name {
        r = r.header("mcp-name", name);
    }
    if let Some(key) = key {
        r = r.bearer_auth(key);
    }
    json_of(r.body(body.to_string()).send().await.unwrap()).await
}

fn sent(up: &ScriptedUpstream) -> Vec<Value> {
    up.requests()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

fn retry_params(tool: &str, state: &Value, answer: Value) -> Value {
    json!({"name": tool, "arguments": {}, "inputResponses": {"answer": answer}, "requestState": state})
}

#[tokio::test]
async fn an_older_server_is_found_out_and_carried_in_a_session_of_its_own() {
    let up = sessions_only().await;
    let gw = start_gateway(&keyed(&up.url(), "", "")).await;
    let v = post(&gw, 1, "tools/list", json!({})).await;
    let r = &v["result"];
    assert_eq!(r["tools"][0]["name"], "ask", "{v}");
    assert_eq!(
        (&r["resultType"], &r["ttlMs"], &r["cacheScope"]),
        (&json!("complete"), &json!(0), &json!("private"))
    );
    let methods: Vec<Value> = sent(&up).iter().map(|b| b["method"].clone()).collect();
    assert_eq!(
        methods,
        [
            json!("tools/list"),
            json!("server/discover"),
            json!("initialize"),
            json!("notifications/initialized"),
            json!("tools/list")
        ],
        "refused, not a 2026-07-28 server (no discovery), a 2025-11-25 one (initialize)"
    );
    let carried = &up.requests()[4];
    assert_eq!(carried.header("mcp-session-id").as_deref(), Some("up-1"));
    assert_eq!(
        carried.header("mcp-protocol-version").as_deref(),
        Some(LEGACY_VERSION)
    );
    assert!(carried.header("mcp-method").is_none());
    assert!(
        sent(&up)[4]["params"].get("_meta").is_none(),
        "the session carries version and capabilities"
    );
    let init = &sent(&up)[2]["params"];
    assert_eq!(init["capabilities"], json!({"elicitation": {"form": {}}}));
    // Known now, and the session kept: one request upstream per request.
    let v = post(
        &gw,
        2,
        "tools/call",
        json!({"name": "plain", "arguments": {}}),
    )
    .await;
    assert_eq!(v["result"]["content"][0]["text"], "plain");
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(up.requests().len(), 6);
    // server/discover: the gateway's, from the upstream's initialize.
    let v = post(&gw, 3, "server/discover", json!({})).await;
    let d = &v["result"];
    assert_eq!(d["supportedVersions"], json!([VERSION]));
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "Test upstream"
    );
    assert_eq!(d["capabilities"], json!({"tools": {}}));
    assert_eq!(d["instructions"], "Ask away.");
    assert_eq!(up.requests().len(), 6);
    gw.shutdown().await;
}

#[tokio::test]
async fn a_pushed_request_becomes_a_question_and_the_retry_answers_the_waiting_push() {
    let up = sessions_only().await;
    let extra = "generations = [\"2025-11-25\"]";
    let gw = start_gateway(&config_text(&up.url(), extra, "")).await;
    let v = post(
        &gw,
        1,
        "tools/call",
        json!({"name": "ask", "arguments": {}}),
    )
    .await;
    assert_eq!(
        sent(&up)[0]["method"],
        "initialize",
        "configured: never asked as 2026-07-28"
    );
    let r = &v["result"];
    assert_eq!(r["resultType"], "input_required", "{v}");
    let q = &r["inputRequests"]["answer"];
    assert_eq!(q["method"], "elicitation/create");
    assert_eq!(q["params"]["message"], "Your room?");
    assert_eq!(
        q["params"]["_meta"]["dev.portcullis/provenance"]["upstream"]["name"],
        "Test upstream"
    );
    let state = r["requestState"].clone();
    assert!(state.as_str().unwrap().starts_with("pbh1."));
    // An answer that is not what was asked: refused, the push still waits.
    let wrong = post(
        &gw,
        2,
        "tools/call",
        retry_params(
            "ask",
            &state,
            json!({"action": "accept", "content": {"room": 7}}),
        ),
    )
    .await;
    assert_eq!(
        wrong["error"]["data"]["reason"], "invalid_answer",
        "{wrong}"
    );
    let answer = json!({"action": "accept", "content": {"room": "nook"}});
    let done = post(
        &gw,
        3,
        "tools/call",
        retry_params("ask", &state, answer.clone()),
    )
    .await;
    assert_eq!(done["id"], 3);
    assert_eq!(done["result"]["content"][0]["text"], "booked", "{done}");
    // The upstream got the answer under its own id, in its session.
    let answered: Vec<Value> = sent(&up)
        .into_iter()
        .filter(|b| b.get("result").is_some())
        .collect();
    assert_eq!(
        answered,
        [json!({"jsonrpc": "2.0", "id": "up-push-1", "result": answer})]
    );
    // Once.
    let again = post(
        &gw,
        4,
        "tools/call",
        retry_params("ask", &state, json!({"action": "decline"})),
    )
    .await;
    assert_eq!(
        again["error"]["data"]["reason"], "call_not_waiting",
        "{again}"
    );
    // Another tool's retry with this state: refused.
    let v = post(
        &gw,
        5,
        "tools/call",
        json!({"name": "ask", "arguments": {}}),
    )
    .await;
    let state = v["result"]["requestState"].clone();
    let other = post(
        &gw,
        6,
        "tools/call",
        retry_params("plain", &state, json!({"action": "decline"})),
    )
    .await;
    assert_eq!(
        other["error"]["data"]["reason"], "state_target_mismatch",
        "{other}"
    );
    let mut changed = retry_params("ask", &state, json!({"action": "decline"}));
    changed["arguments"] = json!({"room": "elsewhere"});
    let changed = post(&gw, 7, "tools/call", changed).await;
    assert_eq!(
        changed["error"]["data"]["reason"], "state_arguments_mismatch",
        "{changed}"
    );
    // Carried under an id of the gateway's own: clients number alike.
    let ids: Vec<Value> = sent(&up)
        .into_iter()
        .filter(|b| b["method"] == "tools/call")
        .map(|b| b["id"].clone())
        .collect();
    assert!(
        ids.iter()
            .all(|i| i.as_str().is_some_and(|i| i.starts_with("portcullis-"))),
        "{ids:?}"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn a_refused_push_never_becomes_a_question() {
    let up = sessions_only().await;
    let gw = start_gateway(&config_text(
        &up.url(),
        "generations = [\"2025-11-25\"]",
        "",
    ))
    .await;
    let v = post(
        &gw,
        1,
        "tools/call",
        json!({"name": "ask_secret", "arguments": {}}),
    )
    .await;
    // The upstream's call goes on to its result; the client never saw the form.
    assert_eq!(v["result"]["content"][0]["text"], "booked", "{v}");
    assert!(!v.to_string().contains("password"));
    let answered: Vec<Value> = sent(&up)
        .into_iter()
        .filter(|b| b.get("error").is_some())
        .collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0]["id"], "up-push-1");
    assert_eq!(
        answered[0]["error"]["data"]["reason"],
        "secret_field_requested"
    );
    gw.shutdown().await;
}

over_both_kinds! { StdioSessions;
/// Over HTTP, and with the upstream a stdio program of the 2025-11-25
/// generation: the push held on one instance, its answer refused at another.
async fn the_retry_must_reach_the_instance_that_holds_the_call_in_time() {
    let up = sessions_only().await;
    let keys = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(keys.path(), portcullis::mrtr::seal::new_key_line("shared")).unwrap();
    let shared = format!(
        "[state]\nkeys_file = \"{}\"\npush_timeout = \"1s\"\n",
        keys.path().display()
    );
    let extra = "generations = [\"2025-11-25\"]";
    let one = start_gateway(&keyed(&up.url(), extra, &shared)).await;
    let two = start_gateway(&keyed(&up.url(), extra, &shared)).await;
    let v = post(
        &one,
        1,
        "tools/call",
        json!({"name": "ask", "arguments": {}}),
    )
    .await;
    let state = v["result"]["requestState"].clone();
    let answer = json!({"action": "accept", "content": {"room": "nook"}});
    let elsewhere = post(
        &two,
        2,
        "tools/call",
        retry_params("ask", &state, answer.clone()),
    )
    .await;
    assert_eq!(
        elsewhere["error"]["data"]["reason"], "call_not_waiting",
        "{elsewhere}"
    );
    assert!(elsewhere["error"]["message"]
        .as_str()
        .unwrap()
        .contains("another gateway instance"));
    let done = post(
        &one,
        3,
        "tools/call",
        retry_params("ask", &state, answer.clone()),
    )
    .await;
    assert_eq!(done["result"]["content"][0]["text"], "booked", "{done}");
    // Held no longer than push_timeout.
    let v = post(
        &one,
        4,
        "tools/call",
        json!({"name": "ask", "arguments": {}}),
    )
    .await;
    let state = v["result"]["requestState"].clone();
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let late = post(&one, 5, "tools/call", retry_params("ask", &state, answer)).await;
    let reason = late["error"]["data"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason == "state_expired" || reason == "call_not_waiting",
        "{late}"
    );
    let m = metrics(&one).await;
    for line in [
        r#"portcullis_bridge_sessions_total{upstream="test"} 1"#,
        r#"portcullis_bridge_questions_total{outcome="pushed",upstream="test"} 2"#,
        r#"portcullis_bridge_questions_total{outcome="answered",upstream="test"} 1"#,
        r#"portcullis_bridge_questions_total{outcome="timed_out",upstream="test"} 1"#,
    ] {
        assert!(m.contains(line), "{line} in\n{m}");
    }
    one.shutdown().await;
    two.shutdown().await;
}}

#[tokio::test]
async fn callers_the_gateway_cannot_tell_apart_never_share_an_upstream_session() {
    let up = sessions_only().await;
    let gw = start_gateway(&config_text(
        &up.url(),
        "generations = [\"2025-11-25\"]",
        "",
    ))
    .await;
    for id in 1..=2 {
        let v = post_as(
            &gw,
            None,
            id,
            "tools/call",
            json!({"name": "plain", "arguments": {}}),
        )
        .await;
        assert_eq!(v["result"]["content"][0]["text"], "plain", "{v}");
    }
    // Each anonymous call opened its own session and ended it.
    let mut deletes = 0;
    for _ in 0..100 {
        deletes = up
            .requests()
            .iter()
            .filter(|r| r.head.starts_with("DELETE"))
            .count();
        if deletes == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(deletes, 2);
    let initializes = sent(&up)
        .iter()
        .filter(|b| b["method"] == "initialize")
        .count();
    assert_eq!(initializes, 2);
    gw.shutdown().await;
}
