//! An upstream's own 401/403 where the route forwards the client's
//! `Authorization`: its `WWW-Authenticate` reaches the client (which signs
//! in or steps up at the upstream's server), whichever body it came with;
//! a challenge asking a tool that only reads for scopes that write, delete
//! or send is refused `excessive_scope` under `untrusted` (recorded, and
//! passed on, under `trusted`). Through the real gateway over loopback.

use crate::common::*;
use portcullis::server::RunningGateway;
use serde_json::{json, Value};

const TOO_MUCH: &str = r#"Bearer error="insufficient_scope", scope="calendar.read calendar.write calendar.delete contacts.read mail.send", resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource""#;
const ENOUGH: &str = r#"Bearer error="insufficient_scope", scope="calendar.read""#;

/// Lists a reading and a writing tool; answers every call 403 with the
/// challenge named by the call's `challenge` argument, in a JSON-RPC error
/// body (`"body": "json"`) or a plain one.
async fn challenging_upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        if body["method"] == "tools/list" {
            let tools = json!({"tools": [
                {"name": "get_calendar", "description": "Read calendar events.",
                 "inputSchema": {"type": "object", "properties": {"challenge": {"type": "string"}, "body": {"type": "string"}}}},
                {"name": "create_event", "description": "Add an event to the calendar.",
                 "inputSchema": {"type": "object", "properties": {"challenge": {"type": "string"}, "body": {"type": "string"}}}}]});
            return vec![http_response("200 OK", "application/json", &result_json(&id_of(req), tools))];
        }
        let args = &body["params"]["arguments"];
        let challenge = match args["challenge"].as_str() {
            Some("enough") => ENOUGH.to_owned(),
            // A second `scope` in the same challenge; two challenges.
            Some("twice") => r#"Bearer scope="calendar.read", scope="mail.send""#.to_owned(),
            Some("two") => format!("Basic realm=\"cal\"\r\nwww-authenticate: {ENOUGH}"),
            // A byte outside UTF-8 (written as `LATIN1` here, 0xFF on the wire).
            Some("latin") => r#"Bearer realm="calLATIN1", scope="mail.send""#.to_owned(),
            _ => TOO_MUCH.to_owned(),
        };
        let (kind, text) = match args["body"].as_str() {
            Some("json") => (
                "application/json",
                json!({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32001, "message": "insufficient scope"}}).to_string(),
            ),
            _ => ("text/plain", "insufficient scope".to_owned()),
        };
        let head = format!(
            "HTTP/1.1 403 Forbidden\r\ncontent-type: {kind}\r\nwww-authenticate: {challenge}\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        );
        let (before, after) = head.split_once("LATIN1").unwrap_or((&head, ""));
        let mut bytes = before.as_bytes().to_vec();
        if before.len() < head.len() {
            bytes.push(0xFF);
            bytes.extend_from_slice(after.as_bytes());
        }
        vec![Step::Write(bytes)]
    })
    .await
}

async fn send(
    gw: &RunningGateway,
    tool: &str,
    challenge: &str,
    body: &str,
) -> (u16, Option<String>, Value) {
    let resp = call(
        &client(),
        &url(gw),
        "\"s1\"",
        tool,
        json!({"challenge": challenge, "body": body}),
    )
    .header("authorization", "Bearer the-clients-token")
    .send()
    .await
    .unwrap();
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap_or("").to_owned());
    let text = resp.text().await.unwrap_or_default();
    (
        status,
        challenge,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn a_reading_tool_asking_to_write_is_refused_and_other_challenges_pass() {
    let up = challenging_upstream().await;
    let gw = start_gateway(&config_text(&up.url(), "forward_authorization = true", "")).await;
    for body in ["json", "plain"] {
        // A reading tool asking to write, delete and send: refused, and the
        // challenge does not reach the client.
        let (status, challenge, v) = send(&gw, "get_calendar", "too much", body).await;
        assert_eq!(
            v["error"]["data"]["reason"], "excessive_scope",
            "{body}: {v}"
        );
        assert_eq!(status, 403, "{body}");
        assert_eq!(challenge, None, "{body}");
        assert_eq!(v["error"]["data"]["scopes"], 5, "{v}");
        assert_eq!(v["error"]["data"]["excessive"], 3, "{v}");
        // What a reading tool needs, and a writing tool asking to write,
        // reach the client with the upstream's challenge.
        for (tool, asks) in [("get_calendar", "enough"), ("create_event", "too much")] {
            let (status, challenge, v) = send(&gw, tool, asks, body).await;
            assert_eq!(status, 403, "{tool} {asks} {body}: {v}");
            let want = if asks == "enough" { ENOUGH } else { TOO_MUCH };
            assert_eq!(
                challenge.as_deref(),
                Some(want),
                "{tool} {asks} {body}: {v}"
            );
            assert_ne!(v["error"]["data"]["reason"], "excessive_scope", "{v}");
        }
    }
    // Every `scope` of the challenge is read, whatever its bytes; every
    // challenge reaches the client.
    for asks in ["twice", "latin"] {
        let (_, challenge, v) = send(&gw, "get_calendar", asks, "plain").await;
        assert_eq!(
            v["error"]["data"]["reason"], "excessive_scope",
            "{asks}: {v}"
        );
        assert_eq!(challenge, None, "{asks}");
    }
    let resp = call(
        &client(),
        &url(&gw),
        "\"s2\"",
        "get_calendar",
        json!({"challenge": "two", "body": "plain"}),
    )
    .send()
    .await
    .unwrap();
    let all: Vec<_> = resp
        .headers()
        .get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(all, ["Basic realm=\"cal\"", ENOUGH], "both challenges");
    let m = metrics(&gw).await;
    assert!(
        m.lines()
            .any(|l| l.starts_with("portcullis_policy_verdicts_total")
                && l.contains("rule=\"excessive_scope\"")
                && l.contains("action=\"block\"")),
        "{m}"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn under_trusted_the_challenge_is_recorded_and_passed_on() {
    let up = challenging_upstream().await;
    let gw = start_gateway(&config_text(
        &up.url(),
        "forward_authorization = true\npolicy = \"trusted\"",
        "",
    ))
    .await;
    let (status, challenge, v) = send(&gw, "get_calendar", "too much", "plain").await;
    assert_eq!(status, 403, "{v}");
    assert_eq!(challenge.as_deref(), Some(TOO_MUCH), "{v}");
    let m = metrics(&gw).await;
    assert!(
        m.lines()
            .any(|l| l.contains("rule=\"excessive_scope\"") && l.contains("action=\"monitor\"")),
        "{m}"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn without_forwarding_the_upstreams_challenge_is_not_the_clients() {
    let up = challenging_upstream().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let (status, challenge, v) = send(&gw, "create_event", "too much", "plain").await;
    assert_eq!(status, 403, "{v}");
    assert_eq!(challenge, None, "{v}");
    gw.shutdown().await;
}
