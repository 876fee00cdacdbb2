//! The gateway as the MRTR boundary: sealed requestState, checked retries,
//! validated answers, round limits, single use — over real loopback HTTP,
//! with an upstream that records everything that reaches it.

use std::time::Duration;

use crate::common::*;
use crate::over_both_kinds;
use serde_json::{json, Value};

/// An upstream that asks which room (round 1, requestState "upstream-state-1"),
/// and on any retry answers `complete` echoing what it received.
async fn room_upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = body["id"].clone();
        let params = &body["params"];
        let result = if params.get("inputResponses").is_some() || params.get("requestState").is_some() {
            json!({"resultType": "complete", "content": [{"type": "text", "text": "booked"}],
                   "structuredContent": {"gotState": params.get("requestState"), "gotResponses": params.get("inputResponses")}})
        } else {
            json!({"resultType": "input_required", "requestState": "upstream-state-1/+=\u{e9}",
                   "inputRequests": {"room": {"method": "elicitation/create", "params": {"mode": "form", "message": "Which room?",
                     "requestedSchema": {"type": "object", "properties": {
                        "room_id": {"type": "string", "enum": ["atrium", "studio-b", "nook"]},
                        "note": {"type": "string", "maxLength": 200}},
                      "required": ["room_id"]}}}}})
        };
        let message = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        vec![http_response("200 OK", "application/json", &message)]
    })
    .await
}

fn retry_body(id: &str, tool: &str, args: Value, state: &str, responses: Value) -> String {
    let mut v: Value = serde_json::from_str(&call_body(id, tool, args)).unwrap();
    v["params"]["requestState"] = json!(state);
    v["params"]["inputResponses"] = responses;
    v.to_string()
}

async fn first_round(c: &reqwest::Client, url: &str) -> (Value, String) {
    let v = json_of(
        call(c, url, "r1", "book_room", json!({"hint": "big"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let state = v["result"]["requestState"]
        .as_str()
        .expect("gateway requestState")
        .to_owned();
    (v, state)
}

async fn retry(
    c: &reqwest::Client,
    url: &str,
    tool: &str,
    args: Value,
    state: &str,
    responses: Value,
) -> (u16, Value) {
    let body = retry_body("r2", tool, args, state, responses);
    let resp = call(c, url, "r2", tool, json!({}))
        .body(body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), json_of(resp).await)
}

fn accept_room(room: &str) -> Value {
    json!({"room": {"action": "accept", "content": {"room_id": room}}})
}

over_both_kinds! {
async fn the_gateway_seals_its_own_state_and_gives_the_upstream_its_own_back() {
    let up = room_upstream().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let c = client();
    let (first, state) = first_round(&c, &url(&gw)).await;
    assert!(state.starts_with("pcs1."), "{state}");
    assert!(
        !first.to_string().contains("upstream-state-1"),
        "the upstream's state never reaches the client"
    );
    let (status, done) = retry(
        &c,
        &url(&gw),
        "book_room",
        json!({"hint": "big"}),
        &state,
        accept_room("nook"),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let got = &done["result"]["structuredContent"];
    assert_eq!(
        got["gotState"], "upstream-state-1/+=\u{e9}",
        "byte for byte"
    );
    assert_eq!(got["gotResponses"], accept_room("nook"));
    assert_eq!(up.requests().len(), 2);
    gw.shutdown().await;
}}

async fn refused_retry(
    state_of: impl Fn(&str) -> String,
    tool: &str,
    args: Value,
    responses: Value,
    reason: &str,
) -> Value {
    let up = room_upstream().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let c = client();
    let (_, state) = first_round(&c, &url(&gw)).await;
    let (status, v) = retry(&c, &url(&gw), tool, args, &state_of(&state), responses).await;
    assert_eq!(v["error"]["data"]["reason"], reason, "{v}");
    assert_eq!(status, 400);
    assert_eq!(v["id"], "r2");
    assert_eq!(
        up.requests().len(),
        1,
        "nothing of the retry reached the upstream"
    );
    gw.shutdown().await;
    v
}

/// The token with its last character replaced by a different one.
fn flip_last(s: &str) -> String {
    let last = if s.ends_with('A') { 'B' } else { 'A' };
    format!("{}{last}", &s[..s.len() - 1])
}

over_both_kinds! {
async fn altered_states_are_refused() {
    let args = json!({"hint": "big"});
    refused_retry(
        flip_last,
        "book_room",
        args.clone(),
        accept_room("nook"),
        "state_invalid",
    )
    .await;
    refused_retry(
        |s| s[..s.len() / 2].to_owned(),
        "book_room",
        args.clone(),
        accept_room("nook"),
        "state_invalid",
    )
    .await;
    refused_retry(
        |_| "upstream-state-1/+=\u{e9}".to_owned(),
        "book_room",
        args.clone(),
        accept_room("nook"),
        "state_invalid",
    )
    .await;
    refused_retry(
        |s| format!("{s}{}", "A".repeat(40_000)),
        "book_room",
        args,
        accept_room("nook"),
        "state_too_large",
    )
    .await;
}}

over_both_kinds! {
async fn a_state_is_bound_to_its_tool_and_arguments() {
    refused_retry(
        |s| s.to_owned(),
        "get_room",
        json!({"hint": "big"}),
        accept_room("nook"),
        "state_target_mismatch",
    )
    .await;
    refused_retry(
        |s| s.to_owned(),
        "book_room",
        json!({"hint": "small"}),
        accept_room("nook"),
        "state_arguments_mismatch",
    )
    .await;
}}

over_both_kinds! {
async fn answers_must_fit_what_was_asked() {
    let args = json!({"hint": "big"});
    let v = refused_retry(
        |s| s.to_owned(),
        "book_room",
        args.clone(),
        accept_room("penthouse"),
        "invalid_answer",
    )
    .await;
    assert_eq!(v["error"]["code"], -32602);
    assert_eq!(v["error"]["data"]["key"], "room");
    assert_eq!(v["error"]["data"]["field"], "room_id");
    refused_retry(
        |s| s.to_owned(),
        "book_room",
        args.clone(),
        json!({"room": {"action": "maybe"}}),
        "invalid_answer",
    )
    .await;
    refused_retry(
        |s| s.to_owned(),
        "book_room",
        args.clone(),
        json!({"room": {"action": "accept", "content": {}}}),
        "invalid_answer",
    )
    .await;
    let secret = "ghp_".to_owned() + &"a1B2c3D4e5".repeat(4)[..36];
    let leak =
        json!({"room": {"action": "accept", "content": {"room_id": "nook", "note": secret}}});
    let v = refused_retry(
        |s| s.to_owned(),
        "book_room",
        args,
        leak,
        "secret_in_answer",
    )
    .await;
    assert!(
        !v.to_string().contains(&secret),
        "the value never appears in the error"
    );
    assert_eq!(v["error"]["data"]["field"], "note");
}}

over_both_kinds! {
async fn input_responses_without_state_are_refused() {
    let up = room_upstream().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let mut body: Value =
        serde_json::from_str(&call_body("x1", "book_room", json!({"hint": "big"}))).unwrap();
    body["params"]["inputResponses"] = accept_room("nook");
    let resp = call(&client(), &url(&gw), "x1", "book_room", json!({}))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let v = json_of(resp).await;
    assert_eq!(v["error"]["data"]["reason"], "state_missing");
    assert!(up.requests().is_empty());
    gw.shutdown().await;
}}

over_both_kinds! {
async fn unasked_keys_and_content_of_declines_are_dropped() {
    let up = room_upstream().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let c = client();
    let (_, state) = first_round(&c, &url(&gw)).await;
    let responses = json!({"room": {"action": "decline", "content": {"room_id": "nook"}}, "smuggled": {"action": "accept", "content": {"x": 1}}});
    let (status, done) = retry(
        &c,
        &url(&gw),
        "book_room",
        json!({"hint": "big"}),
        &state,
        responses,
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["gotResponses"],
        json!({"room": {"action": "decline"}})
    );
    gw.shutdown().await;
}}

over_both_kinds! {
async fn a_state_from_another_gateway_deployment_is_refused() {
    let up = room_upstream().await;
    // gw1 generates its key; gw2 is another deployment with keys of its own.
    let gw1 = start_gateway(&config_text(&up.url(), "", "")).await;
    let keys = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(keys.path(), portcullis::mrtr::seal::new_key_line("other")).unwrap();
    let state_keys = format!("[state]\nkeys_file = \"{}\"\n", keys.path().display());
    let gw2 = start_gateway(&config_text(&up.url(), "", &state_keys)).await;
    let c = client();
    let (_, state) = first_round(&c, &url(&gw1)).await;
    let (_, v) = retry(
        &c,
        &url(&gw2),
        "book_room",
        json!({"hint": "big"}),
        &state,
        accept_room("nook"),
    )
    .await;
    assert_eq!(
        v["error"]["data"]["reason"], "state_unknown_key",
        "gw2 does not hold gw1's key: {v}"
    );
    gw1.shutdown().await;
    gw2.shutdown().await;
}}

over_both_kinds! {
async fn a_state_for_another_upstream_is_refused() {
    let up = room_upstream().await;
    let other = room_upstream().await;
    let text = format!(
        "{}\n[[upstream]]\nid = \"other\"\nname = \"Other\"\nurl = \"{}\"\n[[route]]\npath = \"/other\"\nupstream = \"other\"\n",
        config_text(&up.url(), "", ""),
        other.url()
    );
    let gw = start_gateway(&text).await;
    let c = client();
    let (_, state) = first_round(&c, &url(&gw)).await;
    let other_url = format!("http://{}/other", gw.addrs[0]);
    let (_, v) = retry(
        &c,
        &other_url,
        "book_room",
        json!({"hint": "big"}),
        &state,
        accept_room("nook"),
    )
    .await;
    assert_eq!(
        v["error"]["data"]["reason"], "state_upstream_mismatch",
        "{v}"
    );
    assert!(other.requests().is_empty());
    gw.shutdown().await;
}}

over_both_kinds! {
async fn an_expired_state_is_refused() {
    let up = room_upstream().await;
    let clock = portcullis::model::ManualClock::starting_now();
    let text = config_text(&up.url(), "", "[state]\nround_timeout = \"1s\"");
    let gw = start_gateway_with_clock(&text, clock.clone()).await;
    let c = client();
    let (_, state) = first_round(&c, &url(&gw)).await;
    clock.advance(Duration::from_millis(2100));
    let (_, v) = retry(
        &c,
        &url(&gw),
        "book_room",
        json!({"hint": "big"}),
        &state,
        accept_room("nook"),
    )
    .await;
    assert_eq!(v["error"]["data"]["reason"], "state_expired", "{v}");
    assert_eq!(up.requests().len(), 1);
    gw.shutdown().await;
}}

over_both_kinds! {
async fn a_question_loop_ends_at_the_round_limit() {
    // An upstream that asks again on every retry: a question loop.
    let up = always_asking("again", "Again?", json!({"ok": {"type": "boolean"}})).await;
    let gw = start_gateway(&config_text(&up.url(), "", "[state]\nmax_rounds = 3")).await;
    let c = client();
    let (_, mut state) = first_round(&c, &url(&gw)).await;
    let answer = json!({"again": {"action": "accept", "content": {"ok": true}}});
    for round in 2..=3 {
        let (_, v) = retry(
            &c,
            &url(&gw),
            "book_room",
            json!({"hint": "big"}),
            &state,
            answer.clone(),
        )
        .await;
        state = v["result"]["requestState"]
            .as_str()
            .unwrap_or_else(|| panic!("round {round}: {v}"))
            .to_owned();
    }
    let (status, v) = retry(
        &c,
        &url(&gw),
        "book_room",
        json!({"hint": "big"}),
        &state,
        answer,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["error"]["data"]["reason"], "round_limit_exceeded", "{v}");
    gw.shutdown().await;
}}

over_both_kinds! {
async fn single_use_states_cannot_be_replayed() {
    let up = room_upstream().await;
    let gw = start_gateway(&config_text(
        &up.url(),
        "single_use_tools = [\"book_room\"]",
        "",
    ))
    .await;
    let c = client();
    let (_, state) = first_round(&c, &url(&gw)).await;
    let (status, _) = retry(
        &c,
        &url(&gw),
        "book_room",
        json!({"hint": "big"}),
        &state,
        accept_room("nook"),
    )
    .await;
    assert_eq!(status, 200);
    let (_, v) = retry(
        &c,
        &url(&gw),
        "book_room",
        json!({"hint": "big"}),
        &state,
        accept_room("atrium"),
    )
    .await;
    assert_eq!(v["error"]["data"]["reason"], "state_replayed", "{v}");
    assert_eq!(
        up.requests().len(),
        2,
        "the replay never reached the upstream"
    );
    gw.shutdown().await;
}}

over_both_kinds! {
async fn refusals_are_counted_by_reason() {
    let up = room_upstream().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let c = client();
    let (_, state) = first_round(&c, &url(&gw)).await;
    retry(
        &c,
        &url(&gw),
        "book_room",
        json!({"hint": "other"}),
        &state,
        accept_room("nook"),
    )
    .await;
    let m = metrics(&gw).await;
    assert!(
        m.contains(
            r#"portcullis_request_state_refusals_total{reason="state_arguments_mismatch",upstream="test"} 1"#
        ),
        "{m}"
    );
    gw.shutdown().await;
}}

over_both_kinds! {
async fn escaped_member_names_cannot_smuggle_answers_past_the_retry_check() {
    let up = room_upstream().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let mut body: Value =
        serde_json::from_str(&call_body("e1", "book_room", json!({"hint": "big"}))).unwrap();
    body["params"]["inputResponses"] = accept_room("nook");
    let escaped = body
        .to_string()
        .replace("\"inputResponses\"", "\"input\\u0052esponses\"");
    assert!(escaped.contains("input\\u0052esponses"));
    let resp = call(&client(), &url(&gw), "e1", "book_room", json!({}))
        .body(escaped)
        .send()
        .await
        .unwrap();
    let v = json_of(resp).await;
    assert_eq!(v["error"]["data"]["reason"], "state_missing", "{v}");
    assert!(up.requests().is_empty());
    gw.shutdown().await;
}}
