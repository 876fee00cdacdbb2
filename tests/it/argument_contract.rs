//! Arguments against the listing (`[arguments] schema`, on in `untrusted`),
//! through the real gateway over loopback: a stateless client calls without
//! listing first, the gateway fetches every page of the list itself (once),
//! and each call is checked against the definition it delivered. The
//! scripted upstream records what reached it.

use crate::common::*;
use serde_json::{json, Value};

/// Lists `set_role` on a first page and `get_room` on a second, and
/// answers every call with the arguments it got.
async fn paged_upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let result = match (body["method"].as_str(), body["params"]["cursor"].as_str()) {
            (Some("tools/list"), None) => json!({"tools": [{"name": "set_role",
                "inputSchema": {"type": "object", "properties": {"role": {"type": "string", "enum": ["viewer", "editor"]}},
                    "required": ["role"]}}], "nextCursor": "p2"}),
            (Some("tools/list"), Some(_)) => json!({"tools": [{"name": "get_room",
                "inputSchema": {"type": "object", "properties": {"room": {"type": "string"}, "seats": {"type": "integer", "minimum": 1}}}}]}),
            _ => json!({"content": [{"type": "text", "text": "done"}], "structuredContent": {"got": body["params"]["arguments"]}}),
        };
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id_of(req), result),
        )]
    })
    .await
}

fn methods(up: &ScriptedUpstream) -> Vec<String> {
    up.requests()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .map(|b| b["method"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_call_is_held_to_the_listed_definition_fetched_once_over_every_page() {
    let up = paged_upstream().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let c = client();
    let send = |name: &'static str, args: Value| {
        let (c, u) = (c.clone(), url(&gw));
        async move { json_of(call(&c, &u, "\"c1\"", name, args).send().await.unwrap()).await }
    };

    // On the second page: found, forwarded as sent.
    let ok = send("get_room", json!({"room": "A-12", "seats": 4})).await;
    assert_eq!(
        ok["result"]["structuredContent"]["got"]["room"], "A-12",
        "{ok}"
    );
    assert_eq!(methods(&up), ["tools/list", "tools/list", "tools/call"]);

    // A value smuggled as an array where a string enum is declared.
    let v = send("set_role", json!({"role": ["viewer", "admin"]})).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert_eq!(v["error"]["data"]["reason"], "arguments_invalid", "{v}");
    assert!(v["error"]["data"]["path"].is_string(), "{v}");
    assert!(!v.to_string().contains("admin"), "never the value: {v}");
    // Outside bounds, and a property the schema does not declare.
    let v = send("get_room", json!({"room": "A", "seats": 0})).await;
    assert_eq!(v["error"]["data"]["reason"], "arguments_invalid", "{v}");
    let v = send("set_role", json!({"role": "editor", "grant": "owner"})).await;
    assert_eq!(v["error"]["data"]["reason"], "undeclared_argument", "{v}");
    // A tool the list does not name.
    let v = send("delete_everything", json!({})).await;
    assert_eq!(v["error"]["data"]["reason"], "not_listed", "{v}");

    let ok = send("set_role", json!({"role": "editor"})).await;
    assert_eq!(
        ok["result"]["structuredContent"]["got"]["role"], "editor",
        "{ok}"
    );
    // Nothing refused reached the upstream, and the list was fetched once
    // (a miss in a list this recent is not asked again).
    assert_eq!(
        methods(&up),
        ["tools/list", "tools/list", "tools/call", "tools/call"]
    );
    gw.shutdown().await;
}

/// A completion completes one argument while the prompt's other arguments
/// are still unwritten: a required one missing is no problem (the
/// conformance suite's `completion-complete` names one of two required
/// arguments); an argument the prompt does not declare is.
#[tokio::test]
async fn a_completion_is_checked_for_its_argument_name_only() {
    use crate::federation::{meta, post};
    let up = ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let result = match body["method"].as_str() {
            Some("prompts/list") => json!({"prompts": [{"name": "plan_trip", "arguments": [
                {"name": "city", "required": true}, {"name": "season", "required": true}]}]}),
            _ => json!({"completion": {"values": ["spring", "summer"], "hasMore": false}}),
        };
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id_of(req), result),
        )]
    })
    .await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let c = client();
    let complete = |name: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "completion/complete", "params": {"_meta": meta(),
            "ref": {"type": "ref/prompt", "name": "plan_trip"}, "argument": {"name": name, "value": "s"}}});
        post(&c, &url(&gw), "completion/complete", None, body)
    };
    let ok = json_of(complete("season").send().await.unwrap()).await;
    assert_eq!(ok["result"]["completion"]["values"][0], "spring", "{ok}");
    let v = json_of(complete("budget").send().await.unwrap()).await;
    assert_eq!(v["error"]["data"]["reason"], "undeclared_argument", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("prompt"),
        "{v}"
    );
    gw.shutdown().await;
}
