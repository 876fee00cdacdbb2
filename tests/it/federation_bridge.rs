//! A federated route over a server of each generation, driven by a client
//! of each: the route bridges the member that does not speak the client's
//! generation, so every client sees and calls every member's tools, and a
//! question reaches the client in its own generation (an `input_required`
//! answer for a 2026-07-28 client, a pushed `elicitation/create` for a
//! 2025-11-25 session). The members are the scripted servers of the bridge
//! tests: a 2026-07-28-only server (it refuses `initialize`) and a
//! 2025-11-25-only one (it refuses any request outside its session).

use serde_json::{json, Value};

use portcullis::server::RunningGateway;

use crate::bridge::{stateless_only, Events};
use crate::bridge_legacy::sessions_only;
use crate::common::*;
use crate::federation::{fed_config, meta, names, post};

/// The two members (`new`: 2026-07-28 only; `old`: 2025-11-25 only) behind
/// one route, in that order; what each speaks found out on first use, or
/// `configured` (`generations`).
async fn both_generations(
    configured: bool,
) -> (ScriptedUpstream, ScriptedUpstream, RunningGateway) {
    let new = stateless_only(json!(["2026-07-28"])).await;
    let old = sessions_only().await;
    let mut config = fed_config(
        &[("new", "new", &new.url()), ("old", "old", &old.url())],
        "",
        "",
    );
    if configured {
        for (up, generation) in [(&new, VERSION), (&old, LEGACY_VERSION)] {
            let at = format!("url = \"{}\"\n", up.url());
            config = config.replace(&at, &format!("{at}generations = [\"{generation}\"]\n"));
        }
        assert_eq!(config.matches("generations = ").count(), 2, "{config}");
    }
    let gw = start_gateway(&config).await;
    (new, old, gw)
}

/// A 2026-07-28 request to the route.
async fn ask(gw: &RunningGateway, id: u32, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = meta();
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let resp = post(&client(), &url(gw), method, name.as_deref(), body)
        .send()
        .await
        .unwrap();
    json_of(resp).await
}

/// The methods `up` was sent, in order.
fn methods(up: &ScriptedUpstream) -> Vec<String> {
    up.requests()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter_map(|b| b["method"].as_str().map(str::to_owned))
        .collect()
}

fn text_of(v: &Value) -> &str {
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {v}"))
}

#[tokio::test]
async fn a_2026_07_28_client_sees_and_calls_the_older_member_and_answers_its_question() {
    for configured in [false, true] {
        let (_new, old, gw) = both_generations(configured).await;
        let v = ask(&gw, 1, "tools/list", json!({})).await;
        assert_eq!(
            names(&v["result"], "tools", "name"),
            [
                "new_ask_rounds",
                "new_ask_secret",
                "new_ask_forever",
                "new_plain",
                "old_ask",
                "old_ask_secret",
                "old_plain"
            ],
            "{v}"
        );
        assert!(
            v["result"]["_meta"]["dev.portcullis/federation"].is_null(),
            "{v}"
        );
        // One server, described by both members (the older one's description
        // is its `initialize`, asked by the gateway).
        let v = ask(&gw, 7, "server/discover", json!({})).await;
        let text = v["result"]["instructions"].as_str().unwrap_or_default();
        assert!(text.contains("## Upstream new\n\nCall ask_rounds"), "{v}");
        assert!(text.contains("## Upstream old\n\nAsk away."), "{v}");
        assert!(
            v["result"]["_meta"]["dev.portcullis/federation"].is_null(),
            "{v}"
        );
        for (id, tool) in [(2, "new_plain"), (3, "old_plain")] {
            let v = ask(
                &gw,
                id,
                "tools/call",
                json!({"name": tool, "arguments": {}}),
            )
            .await;
            assert_eq!(text_of(&v), "plain", "{tool}: {v}");
        }
        // The older member's pushed question: an `input_required` round.
        let v = ask(
            &gw,
            4,
            "tools/call",
            json!({"name": "old_ask", "arguments": {}}),
        )
        .await;
        let r = &v["result"];
        assert_eq!(r["resultType"], "input_required", "{v}");
        assert_eq!(
            r["inputRequests"]["answer"]["params"]["message"],
            "Your room?"
        );
        let state = r["requestState"].clone();
        let answer = json!({"action": "accept", "content": {"room": "nook"}});
        // The question's state leads only to the member that asked it.
        let elsewhere = json!({"name": "new_plain", "arguments": {}, "inputResponses": {"answer": answer},
        "requestState": state});
        let v = ask(&gw, 6, "tools/call", elsewhere).await;
        assert_eq!(v["error"]["data"]["reason"], "state_invalid", "{v}");
        let retry = json!({"name": "old_ask", "arguments": {}, "inputResponses": {"answer": answer},
        "requestState": state});
        let done = ask(&gw, 5, "tools/call", retry).await;
        assert_eq!(done["id"], 5);
        assert_eq!(text_of(&done), "booked", "{done}");
        // The older member got the answer under its own id, in its session.
        let answered: Vec<Value> = old
            .requests()
            .iter()
            .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .filter(|b| b.get("result").is_some())
            .collect();
        assert_eq!(answered.len(), 1, "{answered:?}");
        assert_eq!(answered[0]["id"], "up-push-1");
        assert_eq!(answered[0]["result"]["content"]["room"], "nook");
        // Found out by a refused request and a failed discovery; configured,
        // asked in its own generation from the first request on.
        let asked = methods(&old);
        let discovered = asked.iter().any(|m| m == "server/discover");
        assert_eq!(discovered, !configured, "{asked:?}");
        gw.shutdown().await;
    }
}

/// `initialize` of a 2025-11-25 client that answers forms; its session id.
async fn initialize(gw: &RunningGateway) -> (Value, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "1"}}});
    let resp = legacy_post(&client(), &url(gw), None, body)
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

async fn in_session(gw: &RunningGateway, session: &str, body: Value) -> reqwest::Response {
    legacy_post(&client(), &url(gw), Some(session), body)
        .send()
        .await
        .unwrap()
}

fn call(id: Value, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}})
}

#[tokio::test]
async fn a_2025_11_25_session_sees_and_calls_the_newer_member_and_answers_its_questions() {
    for configured in [false, true] {
        let (new, _old, gw) = both_generations(configured).await;
        let (v, session) = initialize(&gw).await;
        let r = &v["result"];
        assert_eq!(r["protocolVersion"], LEGACY_VERSION, "{v}");
        assert!(r["_meta"]["dev.portcullis/federation"].is_null(), "{v}");
        assert_eq!(r["serverInfo"]["name"], "team-tools");
        let text = r["instructions"].as_str().unwrap_or_default();
        assert!(text.contains("## Upstream new\n\nCall ask_rounds"), "{v}");
        assert!(text.contains("## Upstream old\n\nAsk away."), "{v}");
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let v = json_of(in_session(&gw, &session, list).await).await;
        assert_eq!(
            names(&v["result"], "tools", "name"),
            [
                "new_ask_rounds",
                "new_ask_secret",
                "new_ask_forever",
                "new_plain",
                "old_ask",
                "old_ask_secret",
                "old_plain"
            ],
            "{v}"
        );
        for (id, tool) in [(3, "new_plain"), (4, "old_plain")] {
            let v = json_of(in_session(&gw, &session, call(json!(id), tool)).await).await;
            assert_eq!(text_of(&v), "plain", "{tool}: {v}");
        }
        // The newer member's questions: pushed on the call's stream, round
        // after round, and answered in the session.
        let resp = in_session(&gw, &session, call(json!("c"), "new_ask_rounds")).await;
        let mut events = Events::of(resp);
        let reply = |push: &Value, field: &str, value: &str| {
            json!({"jsonrpc": "2.0", "id": push["id"],
            "result": {"action": "accept", "content": {field: value}}})
        };
        let (p1, p2) = (events.next().await.unwrap(), events.next().await.unwrap());
        assert_eq!(p1["method"], "elicitation/create", "{p1}");
        for (p, field, value) in [(&p1, "first", "Ada"), (&p2, "last", "Lovelace")] {
            let resp = in_session(&gw, &session, reply(p, field, value)).await;
            assert_eq!(resp.status(), 202, "{}", json_of(resp).await);
        }
        let p3 = events.next().await.unwrap();
        assert_eq!(p3["params"]["message"], "City?");
        let resp = in_session(&gw, &session, reply(&p3, "city", "London")).await;
        assert_eq!(resp.status(), 202);
        let last = events.next().await.unwrap();
        assert_eq!(last["id"], "c");
        assert_eq!(text_of(&last), "c=accept", "{last}");
        // The newer member was asked in 2026-07-28, never in a session.
        let sent = new.requests();
        assert!(sent.iter().all(|r| r.header("mcp-session-id").is_none()));
        let tried = methods(&new).iter().any(|m| m == "initialize");
        assert_eq!(
            tried, !configured,
            "its initialize tried only when not configured"
        );
        // The older member's own push reaches the session as it is.
        let resp = in_session(&gw, &session, call(json!("o"), "old_ask")).await;
        let mut events = Events::of(resp);
        let push = events.next().await.unwrap();
        assert_eq!(push["method"], "elicitation/create", "{push}");
        let resp = in_session(&gw, &session, reply(&push, "room", "nook")).await;
        assert_eq!(resp.status(), 202);
        let last = events.next().await.unwrap();
        assert_eq!(last["id"], "o");
        assert_eq!(text_of(&last), "booked", "{last}");
        gw.shutdown().await;
    }
}
