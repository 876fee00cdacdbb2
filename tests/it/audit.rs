//! The provenance audit trail, from a real gateway process: one event per
//! MRTR step, sharing the operation id, and no trace anywhere of what the
//! user typed, of secrets, or of requestState contents.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_portcullis");
const TYPED: &str = "hunter2-typed-by-alice-7731";

async fn asking_upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let params = &body["params"];
        let result = if params.get("inputResponses").is_some() {
            json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]})
        } else {
            json!({"resultType": "input_required", "requestState": "upstream-state-SECRET-1",
                   "inputRequests": {"contact": {"method": "elicitation/create", "params": {"message": "<b>Who</b> should we notify?",
                     "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}, "note": {"type": "string"}, "password": {"type": "string"}}}}}}})
        };
        vec![http_response("200 OK", "application/json", &json!({"jsonrpc": "2.0", "id": body["id"], "result": result}).to_string())]
    })
    .await
}

#[tokio::test]
async fn the_trail_tells_the_story_and_never_what_was_typed() {
    let up = asking_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let audit_path = dir.path().join("audit.jsonl");
    let policy_dir = dir.path().join("policies");
    std::fs::create_dir(&policy_dir).unwrap();
    std::fs::write(
        policy_dir.join("strip.toml"),
        "[secret_fields]\naction = \"strip\"\n",
    )
    .unwrap();
    let config = format!(
        "[[listener]]\naddress = \"127.0.0.1:0\"\n[admin]\naddress = \"127.0.0.1:0\"\n[log]\nlevel = \"debug\"\n\
         [audit]\nsink = \"file\"\npath = \"{}\"\n[policies]\ndir = \"{}\"\n\
         [[upstream]]\nid = \"crm\"\nname = \"CRM\"\nurl = \"{}\"\npolicy = \"strip\"\n[[route]]\npath = \"/mcp\"\nupstream = \"crm\"\n",
        audit_path.display(),
        policy_dir.display(),
        up.url()
    );
    let cfg = dir.path().join("gw.toml");
    std::fs::write(&cfg, config).unwrap();
    let out = std::fs::File::create(dir.path().join("stdout")).unwrap();
    let err = std::fs::File::create(dir.path().join("stderr")).unwrap();
    let mut gw = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&cfg)
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap();
    let bound = bound_from_log(&dir.path().join("stderr"), 1, true).await;
    let (port, admin) = (bound.listeners[0].port(), bound.admin.unwrap().port());
    let c = client();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let deadline = Instant::now() + Duration::from_secs(15);
    while c
        .get(format!("http://127.0.0.1:{admin}/readyz"))
        .send()
        .await
        .map(|r| r.status() != 200)
        .unwrap_or(true)
    {
        assert!(Instant::now() < deadline, "gateway not ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let first = json_of(
        call(&c, &url, "1", "notify", json!({"who": "team"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    assert!(
        first["result"]["inputRequests"]["contact"]["params"]["requestedSchema"]["properties"]
            .get("password")
            .is_none(),
        "stripped"
    );
    let mut retry: Value =
        serde_json::from_str(&call_body("2", "notify", json!({"who": "team"}))).unwrap();
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] =
        json!({"contact": {"action": "accept", "content": {"name": "Alice", "note": TYPED}}});
    let done = json_of(
        call(&c, &url, "2", "notify", json!({}))
            .body(retry.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    // A second operation whose answer carries a token-shaped secret: refused.
    let token = format!("ghp_{}", "Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LmNbVc");
    let again = json_of(
        call(&c, &url, "3", "notify", json!({"who": "ops"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let mut leak: Value =
        serde_json::from_str(&call_body("4", "notify", json!({"who": "ops"}))).unwrap();
    leak["params"]["requestState"] = again["result"]["requestState"].clone();
    leak["params"]["inputResponses"] =
        json!({"contact": {"action": "accept", "content": {"name": "Bob", "note": token}}});
    let refused = json_of(
        call(&c, &url, "4", "notify", json!({}))
            .body(leak.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(refused["error"]["data"]["reason"], "secret_in_answer");

    assert!(Command::new("kill")
        .args(["-TERM", &gw.id().to_string()])
        .status()
        .unwrap()
        .success());
    let _ = gw.wait();

    let trail = std::fs::read_to_string(&audit_path).unwrap();
    let events: Vec<Value> = trail
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    for expected in [
        "input_required_received",
        "policy_verdict",
        "delivered",
        "retry_received",
        "forwarded",
        "operation_end",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let op = events[0]["operation"]
        .as_str()
        .expect("round-1 events carry the operation id")
        .to_owned();
    let story: Vec<&str> = events
        .iter()
        .filter(|e| e["operation"] == op.as_str())
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(story.first(), Some(&"input_required_received"), "{story:?}");
    assert_eq!(story.last(), Some(&"operation_end"), "{story:?}");
    let end = events
        .iter()
        .find(|e| e["operation"] == op.as_str() && e["event"] == "operation_end")
        .unwrap();
    assert_eq!(end["outcome"], "complete");
    assert!(
        events.iter().any(
            |e| e["event"] == "retry_received" && e["outcome"] == "secret_refused"
                || e["event"] == "refused"
        ),
        "{names:?}"
    );

    // Nothing the user typed, no secret, no state: in the trail, the logs, anywhere.
    let everything = format!(
        "{trail}{}{}",
        std::fs::read_to_string(dir.path().join("stdout")).unwrap(),
        std::fs::read_to_string(dir.path().join("stderr")).unwrap()
    );
    assert!(everything.len() > 1000, "the gateway wrote its logs");
    for secret in [
        TYPED,
        token.as_str(),
        "upstream-state-SECRET-1",
        state.as_str(),
        "Alice",
        "Bob",
    ] {
        assert!(
            !everything.contains(secret),
            "found {secret:?} in what the gateway wrote"
        );
    }
}
