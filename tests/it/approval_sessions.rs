//! The gateway asks the person (`[[approval]]`) in a 2025-11-25 session,
//! over real loopback HTTP, in front of a scripted 2025-11-25 upstream: the
//! call's answer is an event stream whose first message is the gateway's
//! own `elicitation/create`; the client answers it with a POST of its own
//! (bound to the session and the waiting call, checked against the form,
//! single use), and only an approval lets the call go upstream, where its
//! messages then follow on the same stream.

use serde_json::{json, Value};

use crate::common::legacy_post as post;
use crate::common::*;

const RULE: &str = "[[route.approval]]\nname = \"cancel\"\ntools = [\"cancel_booking\"]\n";

/// A 2025-11-25 upstream's answer to `initialize`: session `up-1`.
fn initialized(id: &str) -> Vec<Step> {
    let result = json!({"protocolVersion": LEGACY_VERSION, "capabilities": {"tools": {}}, "serverInfo": {"name": "legacy", "version": "1"}});
    let body = result_json(id, result);
    vec![Step::Write(
        format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: up-1\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes(),
    )]
}

/// A 2025-11-25 upstream: a session at `initialize`; every call answered
/// with the params it got; answers and notifications accepted.
async fn legacy_rooms() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = id_of(req);
        match body["method"].as_str() {
            Some("initialize") => initialized(&id),
            Some("tools/call") => vec![http_response(
                "200 OK",
                "application/json",
                &result_json(&id, json!({"content": [{"type": "text", "text": "cancelled"}], "structuredContent": {"got": body["params"]}})),
            )],
            Some("tools/list") => vec![http_response("200 OK", "application/json", &result_json(&id, json!({"tools": [{"name": "cancel_booking",
                "inputSchema": {"type": "object", "properties": {"booking": {"type": "string"}}},
                "annotations": {"destructiveHint": true}}]})))],
            _ => vec![Step::Write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec())],
        }
    })
    .await
}

async fn initialize(c: &reqwest::Client, url: &str, capabilities: Value) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": LEGACY_VERSION,
        "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = post(c, url, None, init).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

fn calls(up: &ScriptedUpstream) -> Vec<Value> {
    up.requests()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter(|v| v["method"] == "tools/call")
        .collect()
}

/// The call `cancel_booking` in `session`: its event stream, read as it arrives.
async fn open_call(c: &reqwest::Client, url: &str, session: &str) -> EventStream {
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "cancel_booking", "arguments": {"booking": "B-7"}}});
    let resp = post(c, url, Some(session), call).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    EventStream::new(resp)
}

fn answer(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

async fn send_answer(c: &reqwest::Client, url: &str, session: &str, body: Value) -> (u16, String) {
    let resp = post(c, url, Some(session), body).send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test]
async fn an_approved_session_call_goes_upstream_after_the_pushed_question() {
    let up = legacy_rooms().await;
    let gw = start_gateway(&config_text(&up.url(), "", RULE)).await;
    let c = client();
    let g = url(&gw);
    let session = initialize(&c, &g, json!({"elicitation": {}})).await;
    let mut stream = open_call(&c, &g, &session).await;
    let push = stream.next().await.expect("the gateway's question");
    assert_eq!(push["method"], "elicitation/create", "{push}");
    assert!(push["params"]["message"]
        .as_str()
        .unwrap()
        .contains("\"cancel_booking\""));
    assert_eq!(
        push["params"]["_meta"]["dev.portcullis/provenance"]["asker"],
        "gateway"
    );
    assert!(push["id"].as_str().unwrap().starts_with("psr1."), "{push}");
    assert!(
        calls(&up).is_empty(),
        "nothing went upstream before the decision"
    );
    // Another session cannot answer it.
    let other = initialize(&c, &g, json!({"elicitation": {}})).await;
    let approve = answer(
        &push["id"],
        json!({"action": "accept", "content": {"approve": true}}),
    );
    let (_, v) = send_answer(&c, &g, &other, approve.clone()).await;
    assert!(v.contains("answer_not_requested"), "{v}");
    // A forged or altered id answers nothing the gateway asked.
    let id = push["id"].as_str().unwrap();
    let last = if id.ends_with('A') { 'B' } else { 'A' };
    for forged in [
        format!("{}{last}", &id[..id.len() - 1]),
        "psr1.forged".to_owned(),
    ] {
        let body = answer(
            &json!(forged),
            json!({"action": "accept", "content": {"approve": true}}),
        );
        let (_, v) = send_answer(&c, &g, &session, body).await;
        assert!(v.contains("answer_not_requested"), "{v}");
    }
    // An answer outside the form is refused; the question still waits.
    let unfit = answer(
        &push["id"],
        json!({"action": "accept", "content": {"approve": "yes"}}),
    );
    let (_, v) = send_answer(&c, &g, &session, unfit).await;
    assert!(v.contains("invalid_answer"), "{v}");
    let (status, _) = send_answer(&c, &g, &session, approve.clone()).await;
    assert_eq!(status, 202);
    let done = stream.next().await.expect("the call's result");
    assert_eq!(done["id"], 5, "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "cancelled", "{done}");
    let got = calls(&up);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["params"]["arguments"], json!({"booking": "B-7"}));
    assert!(!got[0].to_string().contains("approve"), "{got:?}");
    // No answer the upstream never asked for reached it.
    let answers = up
        .requests()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter(|v| v.get("result").is_some())
        .count();
    assert_eq!(answers, 0);
    // The same answer again: used.
    let (_, v) = send_answer(&c, &g, &session, approve).await;
    assert!(
        v.contains("state_replayed") || v.contains("call_not_waiting"),
        "{v}"
    );
    assert_eq!(calls(&up).len(), 1);
    gw.shutdown().await;
}

#[tokio::test]
async fn a_declined_or_cancelled_session_call_is_refused_on_its_stream() {
    let up = legacy_rooms().await;
    let gw = start_gateway(&config_text(&up.url(), "", RULE)).await;
    let c = client();
    let g = url(&gw);
    let session = initialize(&c, &g, json!({"elicitation": {}})).await;
    for result in [
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
        json!({"action": "accept", "content": {"approve": false}}),
    ] {
        let mut stream = open_call(&c, &g, &session).await;
        let push = stream.next().await.unwrap();
        let (status, _) = send_answer(&c, &g, &session, answer(&push["id"], result.clone())).await;
        assert_eq!(status, 202);
        let refused = stream.next().await.expect("the refusal");
        assert_eq!(refused["id"], 5);
        assert_eq!(
            refused["error"]["data"]["reason"], "approval_declined",
            "{result}: {refused}"
        );
        assert_eq!(refused["error"]["data"]["rule"], "cancel");
        assert!(stream.next().await.is_none(), "the stream ends");
    }
    assert!(
        calls(&up).is_empty(),
        "no declined call reached the upstream"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn an_unanswered_session_question_expires_and_a_client_without_elicitation_is_refused() {
    let up = legacy_rooms().await;
    let rule = format!("{RULE}timeout = \"1s\"\n");
    let gw = start_gateway(&config_text(&up.url(), "", &rule)).await;
    let c = client();
    let g = url(&gw);
    let session = initialize(&c, &g, json!({"elicitation": {}})).await;
    let mut stream = open_call(&c, &g, &session).await;
    let push = stream.next().await.unwrap();
    let expired = stream.next().await.expect("the refusal");
    assert_eq!(
        expired["error"]["data"]["reason"], "approval_expired",
        "{expired}"
    );
    // A late answer finds no call waiting.
    let late = answer(
        &push["id"],
        json!({"action": "accept", "content": {"approve": true}}),
    );
    let (_, v) = send_answer(&c, &g, &session, late).await;
    assert!(
        v.contains("call_not_waiting") || v.contains("state_expired"),
        "{v}"
    );

    let blind = initialize(&c, &g, json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "cancel_booking", "arguments": {"booking": "B-7"}}});
    let v = json_of(post(&c, &g, Some(&blind), call).send().await.unwrap()).await;
    assert_eq!(v["error"]["data"]["reason"], "approval_unavailable", "{v}");
    assert!(calls(&up).is_empty());
    gw.shutdown().await;
}

#[tokio::test]
async fn an_approval_remembered_for_the_session_holds_in_that_session_only() {
    let up = legacy_rooms().await;
    let rule = format!("{RULE}remember = \"session\"\n");
    let gw = start_gateway(&config_text(&up.url(), "", &rule)).await;
    let c = client();
    let g = url(&gw);
    let session = initialize(&c, &g, json!({"elicitation": {}})).await;
    let mut stream = open_call(&c, &g, &session).await;
    let push = stream.next().await.unwrap();
    let schema = &push["params"]["requestedSchema"]["properties"];
    assert_eq!(schema["remember"]["type"], "boolean", "{push}");
    let ticked = answer(
        &push["id"],
        json!({"action": "accept", "content": {"approve": true, "remember": true}}),
    );
    let (status, _) = send_answer(&c, &g, &session, ticked).await;
    assert_eq!(status, 202);
    assert_eq!(
        stream.next().await.unwrap()["result"]["content"][0]["text"],
        "cancelled"
    );
    // The same session: not asked again.
    let mut again = open_call(&c, &g, &session).await;
    let first = again.next().await.unwrap();
    assert_eq!(
        first["result"]["content"][0]["text"], "cancelled",
        "{first}"
    );
    // Another session: asked.
    let other = initialize(&c, &g, json!({"elicitation": {}})).await;
    let mut theirs = open_call(&c, &g, &other).await;
    assert_eq!(theirs.next().await.unwrap()["method"], "elicitation/create");
    // The client goes away: the waiting call ends with its stream.
    drop(theirs);
    assert_eq!(calls(&up).len(), 2);
    gw.shutdown().await;
}

/// A 2025-11-25 upstream whose call asks one question of its own (pushed
/// on the call's stream), then answers.
async fn asking_rooms() -> ScriptedUpstream {
    asking_rooms_writing(false).await
}

/// [`asking_rooms`]; `one_write`: its question and result leave in one
/// write (one chunk), so the gateway reads both before it has decided on
/// the question.
async fn asking_rooms_writing(one_write: bool) -> ScriptedUpstream {
    ScriptedUpstream::start(move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = id_of(req);
        match body["method"].as_str() {
            Some("initialize") => initialized(&id),
            Some("tools/call") => {
                let question = json!({"jsonrpc": "2.0", "id": "up-q", "method": "elicitation/create",
                    "params": {"message": "Which reason?", "requestedSchema": {"type": "object",
                        "properties": {"reason": {"type": "string"}}}}});
                let done = result_json(&id, json!({"content": [{"type": "text", "text": "cancelled"}]}));
                if one_write {
                    let both = format!("event: message\ndata: {question}\n\nevent: message\ndata: {done}\n\n");
                    return vec![sse_head(), Step::Write(chunk(&both)), sse_end()];
                }
                vec![sse_head(), sse_event(&question.to_string()), sse_event(&done), sse_end()]
            }
            _ => vec![Step::Write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec())],
        }
    })
    .await
}

/// The gateway's pushed approval is its call's first round of questions:
/// the upstream's own question after the approval is the second, under the
/// same `max_rounds` (with 1 it is withheld and the upstream told why; with
/// 2 it reaches the client).
#[tokio::test]
async fn the_pushed_approval_counts_against_the_calls_rounds() {
    for (max_rounds, reaches_client) in [(1, false), (2, true)] {
        let up = asking_rooms().await;
        let (gw, seen) = approved_call(&up, max_rounds).await;
        let asked = seen.iter().any(|m| m["method"] == "elicitation/create");
        assert_eq!(asked, reaches_client, "max_rounds {max_rounds}: {seen:?}");
        let last = seen.last().expect("the call's result");
        assert_eq!(last["id"], 5, "{last}");
        assert_eq!(last["result"]["content"][0]["text"], "cancelled", "{last}");
        let refused_upstream = told_round_limit(&up, !reaches_client).await;
        assert_eq!(refused_upstream, !reaches_client, "max_rounds {max_rounds}");
        gw.shutdown().await;
    }
}

/// A gateway in front of `up` under `max_rounds`, and a call whose pushed
/// approval the person accepts: what the call's stream delivered after it.
async fn approved_call(
    up: &ScriptedUpstream,
    max_rounds: u32,
) -> (portcullis::server::RunningGateway, Vec<Value>) {
    let extra = format!("[state]\nmax_rounds = {max_rounds}\n\n{RULE}");
    let gw = start_gateway(&config_text(&up.url(), "", &extra)).await;
    let c = client();
    let g = url(&gw);
    let session = initialize(&c, &g, json!({"elicitation": {}})).await;
    let mut stream = open_call(&c, &g, &session).await;
    let push = stream.next().await.expect("the gateway's question");
    assert_eq!(push["method"], "elicitation/create", "{push}");
    let approve = answer(
        &push["id"],
        json!({"action": "accept", "content": {"approve": true}}),
    );
    assert_eq!(send_answer(&c, &g, &session, approve).await.0, 202);
    let mut seen = Vec::new();
    while let Some(message) = stream.next().await {
        seen.push(message);
    }
    (gw, seen)
}

/// Whether the upstream was told its question went over the round limit.
/// The gateway posts that answer from a task of its own, which may still be
/// on its way when the client's stream has ended: an expected answer is
/// waited for (a few seconds at most).
async fn told_round_limit(up: &ScriptedUpstream, expected: bool) -> bool {
    let told = || {
        up.requests()
            .iter()
            .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .filter(|v| v["id"] == "up-q")
            .any(|v| v["error"]["data"]["reason"] == "round_limit_exceeded")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while expected && !told() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    told()
}

/// The upstream's question and its result in one chunk: the question is
/// delivered first, the result after it, however the two were read.
#[tokio::test]
async fn a_question_and_the_result_in_one_write_reach_the_client_in_order() {
    let up = asking_rooms_writing(true).await;
    let (gw, seen) = approved_call(&up, 2).await;
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0]["method"], "elicitation/create", "{seen:?}");
    assert_eq!(seen[1]["id"], 5, "{seen:?}");
    assert_eq!(seen[1]["result"]["content"][0]["text"], "cancelled");
    gw.shutdown().await;
}
