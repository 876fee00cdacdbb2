//! Every event of an operation carries its operation id and round once they
//! are known: a first question the policy refuses still reads as one story
//! under an id of its own; a retry whose state opened but failed a later
//! check names that state's operation; one whose state does not open has
//! none to name. `duration_ms` moves in milliseconds (the gateway's clock).

use std::time::Duration;

use crate::common::*;
use portcullis::config::GatewayConfig;
use portcullis::model::ManualClock;
use portcullis::server::RunningGateway;
use serde_json::{json, Value};

async fn upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let params = &body["params"];
        let field = if params["arguments"]["kind"] == "secret" {
            "password"
        } else {
            "name"
        };
        let result = if params.get("inputResponses").is_some() {
            json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]})
        } else {
            json!({"resultType": "input_required", "requestState": "up-1",
                   "inputRequests": {"who": {"method": "elicitation/create", "params": {"message": "Who?",
                     "requestedSchema": {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}}}}})
        };
        vec![http_response(
            "200 OK",
            "application/json",
            &json!({"jsonrpc": "2.0", "id": body["id"], "result": result}).to_string(),
        )]
    })
    .await
}

/// Send `body`; the response's JSON and its request id.
async fn send(url: &str, id: &str, body: String) -> (Value, String) {
    let resp = call(&client(), url, id, "ask", json!({}))
        .body(body)
        .send()
        .await
        .unwrap();
    let request_id = resp.headers()["x-request-id"].to_str().unwrap().to_owned();
    (json_of(resp).await, request_id)
}

fn retry(id: &str, kind: &str, state: &str, answer: Value) -> String {
    let mut r: Value = serde_json::from_str(&call_body(id, "ask", json!({"kind": kind}))).unwrap();
    r["params"]["requestState"] = json!(state);
    r["params"]["inputResponses"] = json!({"who": {"action": "accept", "content": answer}});
    r.to_string()
}

fn of_request<'a>(events: &'a [Value], request_id: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["request_id"] == request_id)
        .collect()
}

#[tokio::test]
async fn operation_and_round_are_on_every_event_once_known() {
    install_crypto();
    let up = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let trail = dir.path().join("audit.jsonl");
    let text = format!(
        "[[listener]]\naddress = \"127.0.0.1:0\"\n[audit]\nsink = \"file\"\npath = \"{}\"\n\
         [[upstream]]\nid = \"crm\"\nname = \"CRM\"\nurl = \"{}\"\n[[route]]\npath = \"/mcp\"\nupstream = \"crm\"\n",
        trail.display(),
        up.url()
    );
    let config = GatewayConfig::parse(&text, std::path::Path::new("gw.toml")).unwrap();
    let clock = ManualClock::starting_now();
    let gw = RunningGateway::start_with(config, Vec::new(), clock.clone())
        .await
        .unwrap();
    let url = url(&gw);

    // A first question asking for a password: refused, nothing minted.
    let (refused, first) = send(&url, "1", call_body("1", "ask", json!({"kind": "secret"}))).await;
    assert_eq!(refused["error"]["data"]["reason"], "secret_field_requested");
    // A question that passes, then retries against its state.
    let (asked, _) = send(&url, "2", call_body("2", "ask", json!({"kind": "plain"}))).await;
    let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    clock.advance(Duration::from_millis(1234));
    let (bad, invalid) = send(&url, "3", retry("3", "plain", &state, json!({"nme": "x"}))).await;
    assert_eq!(bad["error"]["data"]["reason"], "invalid_answer");
    let mut forged = state.clone();
    forged.push('A');
    let (bad, tampered) = send(
        &url,
        "4",
        retry("4", "plain", &forged, json!({"name": "x"})),
    )
    .await;
    assert_eq!(bad["error"]["data"]["reason"], "state_invalid");
    clock.advance(Duration::from_millis(1000));
    let (done, _) = send(&url, "5", retry("5", "plain", &state, json!({"name": "x"}))).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    gw.shutdown().await;

    let events: Vec<Value> = std::fs::read_to_string(&trail)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();

    let story = of_request(&events, &first);
    let names: Vec<&str> = story.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "input_required_received",
            "policy_verdict",
            "refused",
            "operation_end"
        ]
    );
    let op = story[0]["operation"].as_str().expect("an operation id");
    assert!(
        story
            .iter()
            .all(|e| e["operation"] == op && e["round"] == 1),
        "{story:#?}"
    );

    let delivered = events.iter().find(|e| e["event"] == "delivered").unwrap();
    let op2 = delivered["operation"].as_str().unwrap();
    assert_ne!(op, op2);
    let invalid = of_request(&events, &invalid);
    assert_eq!(invalid.len(), 1, "{invalid:#?}");
    assert_eq!(
        (
            invalid[0]["event"].as_str(),
            invalid[0]["operation"].as_str(),
            invalid[0]["round"].as_u64()
        ),
        (Some("retry_received"), Some(op2), Some(1)),
        "a state that opened names its operation"
    );
    let tampered = of_request(&events, &tampered);
    assert_eq!(
        tampered[0]["operation"],
        Value::Null,
        "a forged state has none"
    );

    let end = events
        .iter()
        .find(|e| e["event"] == "operation_end" && e["operation"] == op2)
        .unwrap();
    assert_eq!(end["outcome"], "complete");
    assert_eq!(end["duration_ms"], 2234, "{end}");
}
