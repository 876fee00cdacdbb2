//! An approver other than the caller (`approver = "approvers"`, issue 38)
//! decides on the gateway's approval page, over real loopback HTTP: the
//! caller's client is given the page's link as a URL-mode elicitation (a
//! 2026-07-28 `input_required`; a pushed `elicitation/create` in a
//! 2025-11-25 session), the call waits, and a second HTTP client — the
//! approver, authenticated by the route's API keys — approves or declines
//! on the admin listener. Only an approval lets the call reach the
//! upstream, which records every request it receives.

use serde_json::{json, Value};

use crate::common::legacy_post as post;
use crate::common::*;

pub(crate) const KEY: &str = "dev.portcullis/approval";
pub(crate) const ALICE: &str = "pcl_alice-test-key-0123456789abcdef";
pub(crate) const BOB: &str = "pcl_bob-test-key-0123456789abcdef";
pub(crate) const CAROL: &str = "pcl_carol-test-key-0123456789abcdef";

const SECOND: &str = "name = \"second\"\ntools = [\"cancel_booking\"]\napprover = \"approvers\"\napprovers = [\"bob\"]\napprover_groups = [\"security\"]\ntimeout = \"20s\"";

/// Answers every call with the params it got; lists `cancel_booking` as
/// destructive. Speaks both generations (a session at `initialize`).
pub(crate) async fn rooms() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = id_of(req);
        let stateless = req.header("mcp-protocol-version").as_deref() == Some(VERSION);
        let complete = |mut result: Value| {
            if stateless {
                result["resultType"] = json!("complete");
            }
            result
        };
        match body["method"].as_str() {
            Some("initialize") => {
                let result = json!({"protocolVersion": LEGACY_VERSION, "capabilities": {"tools": {}}, "serverInfo": {"name": "legacy", "version": "1"}});
                let body = result_json(&id, result);
                vec![Step::Write(
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: up-1\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes(),
                )]
            }
            Some("tools/list") => vec![http_response("200 OK", "application/json", &result_json(&id, complete(json!({"tools": [{"name": "cancel_booking",
                "inputSchema": {"type": "object", "properties": {"booking": {"type": "string"}, "notify": {"type": "boolean"}}},
                "annotations": {"destructiveHint": true}}]}))))],
            Some("tools/call") => vec![http_response(
                "200 OK",
                "application/json",
                &result_json(&id, complete(json!({"content": [{"type": "text", "text": "cancelled"}], "structuredContent": {"got": body["params"]}}))),
            )],
            _ => vec![Step::Write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec())],
        }
    })
    .await
}

pub(crate) fn calls(up: &ScriptedUpstream) -> Vec<Value> {
    up.requests()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter(|v| v["method"] == "tools/call")
        .collect()
}

/// Three API-key principals: alice calls, bob is named, carol is in the
/// `security` group.
pub(crate) fn keyed(up: &ScriptedUpstream, rule: &str) -> String {
    let hash = portcullis::identify::hash_key;
    let auth = format!(
        "[[auth]]\nname = \"keys\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"alice\"\nhash = \"{}\"\n[[auth.key]]\nprincipal = \"bob\"\nhash = \"{}\"\n[[auth.key]]\nprincipal = \"carol\"\ngroups = [\"security\"]\nhash = \"{}\"\n",
        hash(ALICE),
        hash(BOB),
        hash(CAROL),
    );
    let text = config_text(&up.url(), "", &format!("[[route.approval]]\n{rule}\n"));
    let text = text.replace(
        "[[route]]\npath = \"/mcp\"\nupstream = \"test\"\n",
        "[[route]]\npath = \"/mcp\"\nupstream = \"test\"\nauth = [\"keys\"]\n",
    );
    format!("{auth}\n{text}")
}

/// A 2026-07-28 call from a client with the given capabilities.
pub(crate) fn stateless_call(id: &str, caps: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": VERSION,
                  "io.modelcontextprotocol/clientCapabilities": caps},
        "name": "cancel_booking",
        "arguments": {"booking": "<b>B-1042</b>", "notify": true}}})
}

pub(crate) async fn send(c: &reqwest::Client, gw: &str, body: &Value) -> Value {
    let req = call(c, gw, "x", "cancel_booking", json!({}))
        .bearer_auth(ALICE)
        .body(body.to_string());
    json_of(req.send().await.unwrap()).await
}

/// The call, asked about with the page's link: the link and the state.
pub(crate) async fn linked(c: &reqwest::Client, gw: &str) -> (String, String) {
    let asked = send(
        c,
        gw,
        &stateless_call("a1", json!({"elicitation": {"url": {}}})),
    )
    .await;
    let question = &asked["result"]["inputRequests"][KEY];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["mode"], "url", "{asked}");
    let message = question["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"cancel_booking\"") && !message.contains("B-1042"),
        "the caller is told who decides, not the arguments: {message}"
    );
    let link = question["params"]["url"].as_str().unwrap().to_owned();
    (
        link,
        asked["result"]["requestState"].as_str().unwrap().to_owned(),
    )
}

/// The retry after the caller accepted the link: it waits for the approver.
pub(crate) fn retry(c: &reqwest::Client, gw: &str, state: &str) -> tokio::task::JoinHandle<Value> {
    let mut body = stateless_call("a2", json!({"elicitation": {"url": {}}}));
    body["params"]["requestState"] = json!(state);
    body["params"]["inputResponses"] = json!({ KEY: {"action": "accept"} });
    let (c, gw) = (c.clone(), gw.to_owned());
    tokio::spawn(async move { send(&c, &gw, &body).await })
}

async fn page(c: &reqwest::Client, link: &str, key: Option<&str>) -> (u16, String) {
    let mut req = c.get(link);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

pub(crate) fn csrf_of(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("the form's token")
        + 19;
    html[at..].split('"').next().unwrap().to_owned()
}

async fn decide(c: &reqwest::Client, link: &str, key: &str, csrf: &str, decision: &str) -> u16 {
    decide_form(c, link, key, &format!("csrf={csrf}&decision={decision}")).await
}

/// A decision's form, as written.
async fn decide_form(c: &reqwest::Client, link: &str, key: &str, form: &str) -> u16 {
    c.post(link)
        .bearer_auth(key)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_owned())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn an_approver_approves_on_the_page_and_the_call_goes_on_unchanged() {
    let up = rooms().await;
    let dir = tempfile::tempdir().unwrap();
    let trail = dir.path().join("audit.jsonl");
    let text = keyed(&up, SECOND).replace(
        "[audit]\nsink = \"off\"",
        &format!("[audit]\nsink = \"file\"\npath = \"{}\"", trail.display()),
    );
    let gw = start_gateway(&text).await;
    let (c, g) = (client(), url(&gw));
    let (link, state) = linked(&c, &g).await;
    let admin = gw.admin_addr.unwrap();
    assert!(
        link.starts_with(&format!("http://{admin}/approvals/")),
        "{link}"
    );
    let waiting = retry(&c, &g, &state);

    // Nobody unauthenticated, and not the caller (the rule does not name her).
    assert_eq!(page(&c, &link, None).await.0, 401);
    assert_eq!(
        page(&c, &link, Some("pcl_nobody-0123456789abcdef0123"))
            .await
            .0,
        401
    );
    assert_eq!(page(&c, &link, Some(ALICE)).await.0, 403);
    let (status, html) = page(&c, &link, Some(BOB)).await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("cancel_booking") && html.contains("notify"),
        "{html}"
    );
    assert!(
        html.contains("&lt;b&gt;B-1042&lt;/b&gt;") && !html.contains("<b>B-1042"),
        "the arguments as the form shows them, escaped: {html}"
    );
    assert!(html.contains("alice"), "who asked: {html}");
    let csrf = csrf_of(&html);
    // Alice cannot decide; a forged token decides nothing.
    assert_eq!(decide(&c, &link, ALICE, &csrf, "approve").await, 403);
    assert_eq!(decide(&c, &link, BOB, "forged", "approve").await, 403);
    let anonymous = c
        .post(&link)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&decision=approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    assert!(
        calls(&up).is_empty(),
        "nothing went upstream before the decision"
    );
    assert_eq!(decide(&c, &link, BOB, &csrf, "approve").await, 200);
    let done = waiting.await.unwrap();
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let got = calls(&up);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["params"]["arguments"]["booking"], "<b>B-1042</b>");
    assert!(got[0]["params"].get("inputResponses").is_none(), "{got:?}");
    // A replayed decision is refused: the approval is gone.
    let replayed = decide(&c, &link, BOB, &csrf, "decline").await;
    assert!(replayed == 404 || replayed == 409, "{replayed}");
    let m = metrics(&gw).await;
    for step in ["asked", "approved"] {
        assert!(
            m.contains(&format!(
                "portcullis_approvals_total{{rule=\"second\",step=\"{step}\",upstream=\"test\"}} 1"
            )),
            "{m}"
        );
    }
    // Each refused attempt is counted by why.
    for why in ["not_approver", "token_mismatch", "unauthenticated"] {
        assert!(
            m.contains(&format!(
                "portcullis_approval_decisions_refused_total{{rule=\"second\",upstream=\"test\",why=\"{why}\"}} 1"
            )),
            "{why}: {m}"
        );
    }
    gw.shutdown().await;
    // The trail: who asked (the event's principal), who decided, the rule,
    // the tool and the arguments' digest, never a value.
    let lines = std::fs::read_to_string(&trail).unwrap();
    // Who tried to decide and was refused, and why (never the form's token).
    let refused: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "approval_decision_refused")
        .collect();
    let tried: Vec<(&str, &str)> = refused
        .iter()
        .map(|e| {
            assert_eq!(e["rule"], "second", "{e}");
            assert_eq!(e["tool"], "cancel_booking", "{e}");
            assert_eq!(e["principal"], "alice", "the caller whose call waits: {e}");
            (
                e["attempted_by"].as_str().unwrap_or("-"),
                e["why"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        &tried[..3],
        [
            ("keys:alice", "not_approver"),
            ("keys:bob", "token_mismatch"),
            ("-", "unauthenticated")
        ],
        "{lines}"
    );
    assert!(!lines.contains(&csrf), "the form's token is not written");
    assert!(
        !lines.contains("B-1042"),
        "no argument value in the trail: {lines}"
    );
    let approved = lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "approval" && e["step"] == "approved")
        .unwrap_or_else(|| panic!("an approved step: {lines}"));
    assert_eq!(approved["decided_by"], "keys:bob", "{approved}");
    assert_eq!(approved["rule"], "second", "{approved}");
    assert_eq!(approved["tool"], "cancel_booking", "{approved}");
    assert!(
        approved["arguments_digest"]
            .as_str()
            .is_some_and(|d| !d.is_empty()),
        "{approved}"
    );
    assert!(
        approved.to_string().contains("alice"),
        "who asked: {approved}"
    );
}

#[tokio::test]
async fn an_approver_by_group_declines_and_nothing_is_forwarded() {
    let up = rooms().await;
    let gw = start_gateway(&keyed(&up, SECOND)).await;
    let (c, g) = (client(), url(&gw));
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);
    let (status, html) = page(&c, &link, Some(CAROL)).await;
    assert_eq!(status, 200, "{html}");
    assert_eq!(
        decide(&c, &link, CAROL, &csrf_of(&html), "decline").await,
        200
    );
    let v = waiting.await.unwrap();
    assert_eq!(v["error"]["data"]["reason"], "approval_declined", "{v}");
    assert_eq!(v["error"]["data"]["rule"], "second");
    assert!(calls(&up).is_empty());
    // The state was consumed: the same retry again is a replay.
    let again = retry(&c, &g, &state).await.unwrap();
    assert_eq!(
        again["error"]["data"]["reason"], "state_replayed",
        "{again}"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn an_approval_nobody_decides_expires_and_takes_no_late_decision() {
    let up = rooms().await;
    let rule = SECOND.replace("timeout = \"20s\"", "timeout = \"1s\"");
    let gw = start_gateway(&keyed(&up, &rule)).await;
    let (c, g) = (client(), url(&gw));
    let (link, state) = linked(&c, &g).await;
    let (_, html) = page(&c, &link, Some(BOB)).await;
    let csrf = csrf_of(&html);
    let v = retry(&c, &g, &state).await.unwrap();
    assert_eq!(v["error"]["data"]["reason"], "approval_expired", "{v}");
    let late = decide(&c, &link, BOB, &csrf, "approve").await;
    assert!(late == 404 || late == 410, "{late}");
    assert!(calls(&up).is_empty());
    let m = metrics(&gw).await;
    assert!(
        m.contains(
            "portcullis_approvals_total{rule=\"second\",step=\"expired\",upstream=\"test\"} 1"
        ),
        "{m}"
    );
    gw.shutdown().await;
}

/// A 2026-07-28 caller who declines the link withdraws the call: refused,
/// and its approval leaves the page.
#[tokio::test]
async fn a_caller_who_declines_the_link_withdraws_the_call() {
    let up = rooms().await;
    let gw = start_gateway(&keyed(&up, SECOND)).await;
    let (c, g) = (client(), url(&gw));
    let (link, state) = linked(&c, &g).await;
    assert_eq!(page(&c, &link, Some(BOB)).await.0, 200);
    let mut body = stateless_call("a2", json!({"elicitation": {"url": {}}}));
    body["params"]["requestState"] = json!(state);
    body["params"]["inputResponses"] = json!({ KEY: {"action": "decline"} });
    let v = send(&c, &g, &body).await;
    assert_eq!(v["error"]["data"]["reason"], "approval_declined", "{v}");
    assert_eq!(page(&c, &link, Some(BOB)).await.0, 404);
    assert!(calls(&up).is_empty());
    gw.shutdown().await;
}

/// A client without URL-mode elicitation is refused unless the rule's
/// fallback is the approvers; then its call waits unseen, and the approver
/// finds it listed on the page.
#[tokio::test]
async fn a_client_without_url_mode_waits_for_an_approver_who_finds_it_listed() {
    let up = rooms().await;
    let gw = start_gateway(&keyed(&up, SECOND)).await;
    let (c, g) = (client(), url(&gw));
    let v = send(
        &c,
        &g,
        &stateless_call("a1", json!({"elicitation": {"form": {}}})),
    )
    .await;
    assert_eq!(v["error"]["data"]["reason"], "approval_unavailable", "{v}");
    gw.shutdown().await;

    let rule = "name = \"second\"\ntools = [\"cancel_booking\"]\nfallback = \"approvers\"\napprovers = [\"bob\"]\ntimeout = \"20s\"";
    let gw = start_gateway(&keyed(&up, rule)).await;
    let g = url(&gw);
    let list = format!("http://{}/approvals", gw.admin_addr.unwrap());
    let waiting = {
        let (c, g) = (c.clone(), g.clone());
        tokio::spawn(async move { send(&c, &g, &stateless_call("a1", json!({}))).await })
    };
    let link = loop {
        let (status, html) = page(&c, &list, Some(BOB)).await;
        assert_eq!(status, 200, "{html}");
        if let Some(at) = html.find("href=\"/approvals/") {
            let id = html[at + 6..].split('"').next().unwrap().to_owned();
            break format!("http://{}{id}", gw.admin_addr.unwrap());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let (_, listed_for_alice) = page(&c, &list, Some(ALICE)).await;
    assert!(
        !listed_for_alice.contains("href=\"/approvals/"),
        "only an approver sees it: {listed_for_alice}"
    );
    let (_, html) = page(&c, &link, Some(BOB)).await;
    assert_eq!(
        decide(&c, &link, BOB, &csrf_of(&html), "approve").await,
        200
    );
    let done = waiting.await.unwrap();
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(calls(&up).len(), 1);
    gw.shutdown().await;
}

/// 2025-11-25: the link is pushed on the call's stream (URL mode, with an
/// `elicitationId`); the caller accepts it, the approver decides, the
/// completion is announced and the call goes on — or is refused.
#[tokio::test]
async fn a_session_call_gets_the_link_pushed_and_waits_for_the_approver() {
    for decision in ["approve", "decline"] {
        let up = rooms().await;
        let gw = start_gateway(&keyed(&up, SECOND)).await;
        let (c, g) = (client(), url(&gw));
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": LEGACY_VERSION,
            "capabilities": {"elicitation": {"url": {}}}, "clientInfo": {"name": "t", "version": "1"}}});
        let resp = post(&c, &g, None, init)
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let session = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "cancel_booking", "arguments": {"booking": "B-7"}}});
        let resp = post(&c, &g, Some(&session), call)
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap();
        let mut stream = EventStream::new(resp);
        let push = stream.next().await.expect("the link");
        assert_eq!(push["method"], "elicitation/create", "{push}");
        assert_eq!(push["params"]["mode"], "url", "{push}");
        let elicitation = push["params"]["elicitationId"].as_str().unwrap().to_owned();
        let link = push["params"]["url"].as_str().unwrap().to_owned();
        let accept = json!({"jsonrpc": "2.0", "id": push["id"], "result": {"action": "accept"}});
        let answered = post(&c, &g, Some(&session), accept)
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap();
        assert!(answered.status().is_success(), "{}", answered.status());
        let (_, html) = page(&c, &link, Some(BOB)).await;
        assert_eq!(decide(&c, &link, BOB, &csrf_of(&html), decision).await, 200);
        let done = stream.next().await.expect("the completion");
        assert_eq!(
            done["method"], "notifications/elicitation/complete",
            "{done}"
        );
        assert_eq!(done["params"]["elicitationId"], elicitation.as_str());
        let end = stream.next().await.expect("the call's end");
        match decision {
            "approve" => {
                assert_eq!(end["result"]["content"][0]["text"], "cancelled", "{end}");
                assert_eq!(calls(&up).len(), 1);
            }
            _ => {
                assert_eq!(end["error"]["data"]["reason"], "approval_declined", "{end}");
                assert!(calls(&up).is_empty());
            }
        }
        gw.shutdown().await;
    }
}

/// 2025-11-25: a caller who declines the link withdraws the call (its
/// approval is gone from the page); one nobody decides expires.
#[tokio::test]
async fn a_session_call_ends_when_the_caller_declines_the_link_or_nobody_decides() {
    for (answer, reason) in [
        ("decline", "approval_declined"),
        ("accept", "approval_expired"),
    ] {
        let up = rooms().await;
        let rule = SECOND.replace("timeout = \"20s\"", "timeout = \"1s\"");
        let gw = start_gateway(&keyed(&up, &rule)).await;
        let (c, g) = (client(), url(&gw));
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": LEGACY_VERSION,
            "capabilities": {"elicitation": {"url": {}}}, "clientInfo": {"name": "t", "version": "1"}}});
        let resp = post(&c, &g, None, init)
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap();
        let session = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "cancel_booking", "arguments": {"booking": "B-7"}}});
        let resp = post(&c, &g, Some(&session), call)
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap();
        let mut stream = EventStream::new(resp);
        let push = stream.next().await.expect("the link");
        let link = push["params"]["url"].as_str().unwrap().to_owned();
        let (_, html) = page(&c, &link, Some(BOB)).await;
        let csrf = csrf_of(&html);
        let reply = json!({"jsonrpc": "2.0", "id": push["id"], "result": {"action": answer}});
        post(&c, &g, Some(&session), reply)
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap();
        let end = stream.next().await.expect("the call's end");
        assert_eq!(end["error"]["data"]["reason"], reason, "{end}");
        let late = decide(&c, &link, BOB, &csrf, "approve").await;
        assert_eq!(late, 404, "the approval went with its call");
        assert!(calls(&up).is_empty());
        gw.shutdown().await;
    }
}

/// The operator decides any approval with a request signed with the
/// gateway's `[state]` keys; a signature by other keys decides nothing.
#[tokio::test]
async fn the_operator_decides_with_a_signed_request() {
    let up = rooms().await;
    let dir = tempfile::tempdir().unwrap();
    let keys_path = dir.path().join("keys");
    std::fs::write(&keys_path, portcullis::mrtr::seal::new_key_line("k1")).unwrap();
    let text = format!(
        "{}\n[state]\nkeys_file = \"{}\"\n",
        keyed(&up, SECOND),
        keys_path.display()
    );
    let gw = start_gateway(&text).await;
    let (c, g) = (client(), url(&gw));
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);
    let path = link
        .split_once("/approvals")
        .map(|(_, p)| format!("/approvals{p}"))
        .unwrap();
    let keys = portcullis::mrtr::seal::StateKeys::from_file(&keys_path).unwrap();
    let other =
        portcullis::mrtr::seal::StateKeys::parse(&portcullis::mrtr::seal::new_key_line("k1"))
            .unwrap();
    let get = |keys: &portcullis::mrtr::seal::StateKeys| {
        let auth = portcullis::signed::sign(keys, "GET", &path, b"").unwrap();
        c.get(&link)
            .header("authorization", auth.to_str().unwrap().to_owned())
            .send()
    };
    assert_eq!(get(&other).await.unwrap().status(), 401);
    let html = get(&keys).await.unwrap().text().await.unwrap();
    let body = format!("csrf={}&decision=approve", csrf_of(&html));
    let auth = portcullis::signed::sign(&keys, "POST", &path, body.as_bytes()).unwrap();
    let decided = c
        .post(&link)
        .header("authorization", auth)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200);
    let done = waiting.await.unwrap();
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(calls(&up).len(), 1);
    gw.shutdown().await;
}

/// A rule that lets approvals be remembered offers the approver a
/// "remember" box; ticked, the approval is kept as the caller's own would
/// be: the same caller's next call of the tool goes on without a page. An
/// approval given without the box is not kept.
#[tokio::test]
async fn an_approver_may_remember_an_approval_the_rule_lets_be_remembered() {
    let up = rooms().await;
    let rule = format!("{SECOND}\nremember = \"caller\"\nremember_for = \"1h\"");
    let gw = start_gateway(&keyed(&up, &rule)).await;
    let (c, g) = (client(), url(&gw));
    let approve = |remember: bool| {
        let (c, g) = (c.clone(), g.clone());
        async move {
            let (link, state) = linked(&c, &g).await;
            let waiting = retry(&c, &g, &state);
            let (status, html) = page(&c, &link, Some(BOB)).await;
            assert_eq!(status, 200, "{html}");
            assert!(html.contains("name=\"remember\""), "offered: {html}");
            let form = format!(
                "csrf={}&decision=approve{}",
                csrf_of(&html),
                if remember { "&remember=1" } else { "" }
            );
            assert_eq!(decide_form(&c, &link, BOB, &form).await, 200);
            let done = waiting.await.unwrap();
            assert_eq!(done["result"]["content"][0]["text"], "cancelled", "{done}");
        }
    };
    // Not ticked: the next call is asked about again.
    approve(false).await;
    approve(true).await;
    assert_eq!(calls(&up).len(), 2);
    // Remembered: forwarded at once, no question.
    let again = send(
        &c,
        &g,
        &stateless_call("a3", json!({"elicitation": {"url": {}}})),
    )
    .await;
    assert_eq!(
        again["result"]["content"][0]["text"], "cancelled",
        "{again}"
    );
    assert_eq!(calls(&up).len(), 3);
    gw.shutdown().await;
}

/// Nobody decides their own call on the page, even where the rule names
/// them; `scheme:name` names one scheme's principal (carol is `keys:carol`,
/// not the `other:carol` the rule names).
#[tokio::test]
async fn nobody_decides_their_own_call_and_an_approver_may_be_named_with_a_scheme() {
    const NAMES: &str = "name = \"second\"\ntools = [\"cancel_booking\"]\napprover = \"approvers\"\napprovers = [\"alice\", \"keys:bob\", \"other:carol\"]\ntimeout = \"20s\"";
    let up = rooms().await;
    let gw = start_gateway(&keyed(&up, NAMES)).await;
    let c = client();
    let g = url(&gw);
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);
    let (status, html) = page(&c, &link, Some(BOB)).await;
    assert_eq!(status, 200, "keys:bob is named: {html}");
    let csrf = csrf_of(&html);
    assert_eq!(page(&c, &link, Some(ALICE)).await.0, 403, "the caller");
    assert_eq!(decide(&c, &link, ALICE, &csrf, "approve").await, 403);
    assert_eq!(
        page(&c, &link, Some(CAROL)).await.0,
        403,
        "another scheme's carol"
    );
    assert!(calls(&up).is_empty());
    assert_eq!(decide(&c, &link, BOB, &csrf, "approve").await, 200);
    let done = waiting.await.unwrap();
    assert!(done.get("result").is_some(), "{done}");
    assert_eq!(calls(&up).len(), 1);
    gw.shutdown().await;
}
