//! Federated routes over loopback: one path answering as one server over
//! several real upstreams (the demo MCP server, rmcp, twice; scripted
//! upstreams where a test needs pages, silence or byte-level checks).

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

async fn start_demo() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(portcullis_demo::serve(listener, std::future::pending()));
    format!("http://{addr}/mcp")
}

/// A gateway whose `/mcp` federates `upstreams` (`(id, prefix, url)`).
/// A gateway whose `/mcp` federates `upstreams` (`(id, prefix, url)`);
/// `route_extra` goes into the route, `extra` after it (an `[audit]` there
/// replaces the default, off).
pub(crate) fn fed_config(
    upstreams: &[(&str, &str, &str)],
    route_extra: &str,
    extra: &str,
) -> String {
    let mut text = String::from(
        "[[listener]]\naddress = \"127.0.0.1:0\"\n\n[admin]\naddress = \"127.0.0.1:0\"\n\n",
    );
    if !extra.contains("[audit]") {
        text.push_str("[audit]\nsink = \"off\"\n\n");
    }
    for (id, prefix, url) in upstreams {
        text.push_str(&format!(
            "[[upstream]]\nid = \"{id}\"\nname = \"Upstream {id}\"\nurl = \"{url}\"\nprefix = \"{prefix}\"\nconnect_timeout = \"1s\"\nresponse_timeout = \"3s\"\n\n"
        ));
    }
    let ids: Vec<String> = upstreams
        .iter()
        .map(|(id, ..)| format!("\"{id}\""))
        .collect();
    text.push_str(&format!(
        "[[route]]\npath = \"/mcp\"\nname = \"team-tools\"\nupstreams = [{}]\n{route_extra}\n\n{extra}\n",
        ids.join(", ")
    ));
    text
}

fn federated_config(upstreams: &[(&str, &str, &str)], route_extra: &str) -> String {
    fed_config(upstreams, route_extra, "")
}

pub(crate) fn post(
    c: &reqwest::Client,
    url: &str,
    method: &str,
    name: Option<&str>,
    body: Value,
) -> reqwest::RequestBuilder {
    let mut r = c
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", method);
    if let Some(name) = name {
        r = r.header("mcp-name", name);
    }
    r.body(body.to_string())
}

pub(crate) fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}
    })
}

async fn list(c: &reqwest::Client, url: &str, method: &str, cursor: Option<&str>) -> Value {
    let mut params = json!({"_meta": meta()});
    if let Some(cursor) = cursor {
        params["cursor"] = json!(cursor);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    json_of(post(c, url, method, None, body).send().await.unwrap()).await
}

pub(crate) fn names(result: &Value, items: &str, member: &str) -> Vec<String> {
    result[items]
        .as_array()
        .unwrap_or_else(|| panic!("no {items}: {result}"))
        .iter()
        .map(|t| t[member].as_str().unwrap_or("<not a string>").to_owned())
        .collect()
}

#[tokio::test]
async fn tools_of_every_upstream_are_listed_under_their_prefixes_and_called_by_them() {
    let (a, b) = (start_demo().await, start_demo().await);
    let gw = start_gateway(&federated_config(
        &[("rooms-a", "ra", &a), ("rooms-b", "rb", &b)],
        "",
    ))
    .await;
    let c = client();
    let v = list(&c, &url(&gw), "tools/list", None).await;
    let listed = names(&v["result"], "tools", "name");
    assert!(listed.contains(&"ra_get_room".to_owned()), "{listed:?}");
    assert!(listed.contains(&"rb_get_room".to_owned()), "{listed:?}");
    assert!(listed
        .iter()
        .all(|n| n.starts_with("ra_") || n.starts_with("rb_")));
    // The configured order: every item of the first upstream, then the second's.
    let first_b = listed.iter().position(|n| n.starts_with("rb_")).unwrap();
    assert!(listed[..first_b].iter().all(|n| n.starts_with("ra_")));
    let tool = &v["result"]["tools"][first_b];
    assert_eq!(tool["_meta"]["dev.portcullis/upstream"]["id"], "rooms-b");
    assert_eq!(
        tool["_meta"]["dev.portcullis/upstream"]["name"],
        "Upstream rooms-b"
    );
    let discover = json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": meta()}});
    let v = json_of(
        post(&c, &url(&gw), "server/discover", None, discover)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        v["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "team-tools",
        "{v}"
    );
    assert!(v["result"].get("serverInfo").is_none(), "{v}");
    let instructions = v["result"]["instructions"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"));
    assert!(
        instructions.starts_with("## Upstream rooms-a\n\n"),
        "{instructions}"
    );
    assert!(
        instructions.contains("\n\n## Upstream rooms-b\n\n"),
        "{instructions}"
    );
    assert!(v["result"]["capabilities"]["tools"].is_object(), "{v}");
    for prefixed in ["ra_get_room", "rb_get_room"] {
        let v = json_of(
            call(&c, &url(&gw), "g1", prefixed, json!({"room_id": "atrium"}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert!(v["result"]["content"].is_array(), "{prefixed}: {v}");
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn a_name_without_a_known_prefix_is_refused_with_the_prefixes() {
    let a = start_demo().await;
    let gw = start_gateway(&federated_config(&[("rooms-a", "ra", &a)], "")).await;
    let c = client();
    for name in ["get_room", "zz_get_room", "ra-get_room", "RA_get_room"] {
        let resp = call(&c, &url(&gw), "u1", name, json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        let v = json_of(resp).await;
        assert_eq!(v["error"]["data"]["reason"], "unknown_name", "{name}: {v}");
        assert_eq!(v["error"]["code"], -32602);
        assert!(
            v["error"]["message"].as_str().unwrap().contains("\"ra\""),
            "{v}"
        );
    }
    gw.shutdown().await;
}

/// An upstream that lists `count` tools named `<tag>-<n>`, `page` at a time,
/// and says what it received.
async fn paging(tag: &'static str, count: usize, page: usize) -> ScriptedUpstream {
    ScriptedUpstream::start(move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let start: usize = body["params"]["cursor"]
            .as_str()
            .and_then(|c| c.strip_prefix("at:"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let end = (start + page).min(count);
        let tools: Vec<Value> = (start..end)
            .map(|n| json!({"name": format!("{tag}-{n}"), "description": "Lists things.", "inputSchema": {"type": "object"}}))
            .collect();
        let mut result = json!({"resultType": "complete", "tools": tools, "ttlMs": 1000 * (page as u64)});
        if end < count {
            result["nextCursor"] = json!(format!("at:{end}"));
        }
        vec![http_response("200 OK", "application/json", &result_json(&id_of(req), result))]
    })
    .await
}

#[tokio::test]
async fn pages_of_three_upstreams_are_walked_with_the_gateways_cursor() {
    let ups = [
        paging("x", 5, 2).await,
        paging("y", 1, 2).await,
        paging("z", 4, 2).await,
    ];
    let urls: Vec<String> = ups.iter().map(ScriptedUpstream::url).collect();
    let gw = start_gateway(&federated_config(
        &[
            ("ux", "px", &urls[0]),
            ("uy", "py", &urls[1]),
            ("uz", "pz", &urls[2]),
        ],
        "",
    ))
    .await;
    let c = client();
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let v = list(&c, &url(&gw), "tools/list", cursor.as_deref()).await;
        pages += 1;
        all.extend(names(&v["result"], "tools", "name"));
        match v["result"]["nextCursor"].as_str() {
            Some(next) => {
                assert!(next.starts_with("pfc1."), "{next}");
                assert!(!next.contains("at:"), "the upstreams' cursors are sealed");
                cursor = Some(next.to_owned());
            }
            None => break,
        }
        assert!(pages < 10);
    }
    let expected: Vec<String> = [
        "px_x-0", "px_x-1", "py_y-0", "pz_z-0", "pz_z-1", "px_x-2", "px_x-3", "pz_z-2", "pz_z-3",
        "px_x-4",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(all, expected);
    assert_eq!(pages, 3);
    // The upstream with one page was asked once.
    assert_eq!(ups[1].requests().len(), 1);
    // Each upstream got its own cursor back, byte for byte.
    let asked: Value = serde_json::from_slice(&ups[2].requests()[1].body).unwrap();
    assert_eq!(asked["params"]["cursor"], "at:2");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_forged_or_foreign_cursor_is_refused() {
    let up = paging("x", 5, 2).await;
    let gw = start_gateway(&federated_config(&[("ux", "px", &up.url())], "")).await;
    let c = client();
    let first = list(&c, &url(&gw), "tools/list", None).await;
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    let mut altered = cursor.clone().into_bytes();
    let at = altered.len() - 4;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    for bad in [altered.as_str(), "at:2", "pfc1.", ""] {
        let v = list(&c, &url(&gw), "tools/list", Some(bad)).await;
        assert_eq!(v["error"]["data"]["reason"], "cursor_invalid", "{bad}: {v}");
    }
    // A tools/list cursor does not page prompts.
    let v = list(&c, &url(&gw), "prompts/list", Some(&cursor)).await;
    assert_eq!(v["error"]["data"]["reason"], "cursor_invalid", "{v}");
    // Nothing the client wrote reached the upstream as its cursor.
    assert!(up.requests().iter().all(|r| {
        let b: Value = serde_json::from_slice(&r.body).unwrap();
        b["params"]["cursor"].is_null()
    }));
    gw.shutdown().await;
}

#[tokio::test]
async fn a_dead_and_a_slow_upstream_are_left_out_and_named() {
    let good = paging("g", 2, 10).await;
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        format!("http://{addr}/mcp")
    };
    let slow = ScriptedUpstream::start(|_| vec![Step::Sleep(Duration::from_secs(5))]).await;
    let gw = start_gateway(&federated_config(
        &[
            ("good", "g", &good.url()),
            ("dead", "d", &dead),
            ("slow", "s", &slow.url()),
        ],
        "fanout_timeout = \"500ms\"",
    ))
    .await;
    let c = client();
    let v = list(&c, &url(&gw), "tools/list", None).await;
    assert_eq!(names(&v["result"], "tools", "name"), ["g_g-0", "g_g-1"]);
    let unavailable = &v["result"]["_meta"]["dev.portcullis/federation"]["unavailable"];
    let left: Vec<(&str, &str)> = unavailable
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["upstream"].as_str().unwrap(),
                u["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        left,
        [
            ("dead", "upstream_unreachable"),
            ("slow", "upstream_timeout")
        ]
    );
    // A call to the dead one gets the usual upstream error, naming it.
    let v = json_of(
        call(&c, &url(&gw), "c1", "d_anything", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v["error"]["data"]["reason"], "upstream_unreachable", "{v}");
    assert_eq!(v["error"]["data"]["upstream"], "Upstream dead", "{v}");
    let m = metrics(&gw).await;
    assert!(
        m.contains("portcullis_federation_left_out_total{method=\"tools/list\",reason=\"upstream_unreachable\",upstream=\"dead\"} 1"),
        "{m}"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn the_same_tool_on_two_upstreams_is_two_tools() {
    let same = || {
        ScriptedUpstream::start(|req| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            let result = match body["method"].as_str() {
                Some("tools/list") => {
                    json!({"tools": [{"name": "search", "inputSchema": {"type": "object"}}]})
                }
                _ => {
                    json!({"content": [{"type": "text", "text": format!("called {}", body["params"]["name"])}]})
                }
            };
            vec![http_response(
                "200 OK",
                "application/json",
                &result_json(&id_of(req), result),
            )]
        })
    };
    let (one, two) = (same().await, same().await);
    let gw = start_gateway(&federated_config(
        &[("one", "one", &one.url()), ("two", "two", &two.url())],
        "",
    ))
    .await;
    let c = client();
    let v = list(&c, &url(&gw), "tools/list", None).await;
    assert_eq!(
        names(&v["result"], "tools", "name"),
        ["one_search", "two_search"]
    );
    let v = json_of(
        call(&c, &url(&gw), "s", "two_search", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v["result"]["content"][0]["text"], "called \"search\"");
    assert_eq!(one.requests().len(), 1, "only the list reached the first");
    let sent = &two.requests()[1];
    assert!(
        sent.head.to_ascii_lowercase().contains("mcp-name: search"),
        "{}",
        sent.head
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn a_state_issued_for_one_upstream_cannot_be_replayed_at_another() {
    let (a, b) = (start_demo().await, start_demo().await);
    let gw = start_gateway(&federated_config(
        &[("rooms-a", "ra", &a), ("rooms-b", "rb", &b)],
        "",
    ))
    .await;
    let c = client();
    let args = json!({"room_hint": "something big", "day": "2026-12-03", "hour": 10});
    let v = json_of(
        call(&c, &url(&gw), "m1", "ra_book_room", args.clone())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v["result"]["resultType"], "input_required", "{v}");
    let state = v["result"]["requestState"].as_str().unwrap().to_owned();
    let key = v["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let answer = json!({key.clone(): {"action": "accept", "content": {"room_id": "nook"}}});
    let retry = |tool: &str| {
        let mut body: Value = serde_json::from_str(&call_body("m2", tool, args.clone())).unwrap();
        body["params"]["requestState"] = json!(state);
        body["params"]["inputResponses"] = answer.clone();
        call(&c, &url(&gw), "m2", tool, json!({})).body(body.to_string())
    };
    let v = json_of(retry("rb_book_room").send().await.unwrap()).await;
    assert_eq!(
        v["error"]["data"]["reason"], "state_upstream_mismatch",
        "{v}"
    );
    let v = json_of(retry("ra_book_room").send().await.unwrap()).await;
    assert!(
        v["result"]["resultType"] != "input_required" || v["result"]["requestState"].is_string(),
        "{v}"
    );
    assert!(v.get("error").is_none(), "{v}");
    gw.shutdown().await;
}

/// A 2025-11-25 upstream with its own session id `sess-<tag>`: `echo` says
/// which session it was called in, `ask` pushes a question first; its GET
/// stream says the tools changed.
fn legacy(tag: &'static str) -> impl Fn(&Received) -> Vec<Step> + Send + Sync + 'static {
    move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = id_of(req);
        let head = req.head.to_ascii_lowercase();
        let session = head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .unwrap_or("none")
            .to_owned();
        if req.head.starts_with("DELETE") {
            return vec![Step::Write(
                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec(),
            )];
        }
        if req.head.starts_with("GET") {
            let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            return vec![
                sse_head(),
                sse_event(&changed.to_string()),
                Step::Sleep(Duration::from_millis(300)),
                sse_end(),
            ];
        }
        let method = body["method"].as_str().unwrap_or("");
        let text = |t: String| result_json(&id, json!({"content": [{"type": "text", "text": t}]}));
        match method {
            "initialize" => {
                let result = json!({"protocolVersion": LEGACY_VERSION, "capabilities": {"tools": {"listChanged": true}},
                    "serverInfo": {"name": format!("server {tag}"), "version": "1"}, "instructions": format!("Use {tag} carefully.")});
                let body = result_json(&id, result);
                vec![Step::Write(format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: sess-{tag}\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                ).into_bytes())]
            }
            "tools/list" => vec![http_response("200 OK", "application/json", &result_json(&id, json!({"tools": [
                {"name": "echo", "inputSchema": {"type": "object"}}, {"name": "ask", "inputSchema": {"type": "object"}}]})))],
            "tools/call" if body["params"]["name"] == "ask" => vec![
                sse_head(),
                sse_event(&json!({"jsonrpc": "2.0", "id": format!("q-{tag}"), "method": "elicitation/create", "params": {
                    "message": "Which room?", "requestedSchema": {"type": "object", "properties": {"room": {"type": "string"}}}}}).to_string()),
                Step::Sleep(Duration::from_millis(300)),
                sse_event(&text(format!("{tag} asked"))),
                sse_end(),
            ],
            "tools/call" => vec![http_response("200 OK", "application/json", &text(format!("{tag} in {session}")))],
            _ => vec![Step::Write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec())],
        }
    }
}

#[tokio::test]
async fn a_legacy_session_spans_every_upstream() {
    let (a, b) = (
        ScriptedUpstream::start(legacy("a")).await,
        ScriptedUpstream::start(legacy("b")).await,
    );
    let gw = start_gateway(&federated_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "",
    ))
    .await;
    let c = client();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = legacy_post(&c, &url(&gw), None, init).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(session.starts_with("pss1."), "{session}");
    let v = json_of(resp).await;
    assert_eq!(v["result"]["serverInfo"]["name"], "team-tools", "{v}");
    assert_eq!(
        v["result"]["capabilities"]["tools"]["listChanged"], true,
        "{v}"
    );
    assert_eq!(
        v["result"]["instructions"],
        "## Upstream up-a\n\nUse a carefully.\n\n## Upstream up-b\n\nUse b carefully.",
        "{v}"
    );
    let s = Some(session.as_str());
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        legacy_post(&c, &url(&gw), s, done)
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    let listed = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let v = json_of(legacy_post(&c, &url(&gw), s, listed).send().await.unwrap()).await;
    assert_eq!(
        names(&v["result"], "tools", "name"),
        ["a_echo", "a_ask", "b_echo", "b_ask"]
    );
    // Each upstream is called in its own session.
    for (tool, said) in [("a_echo", "a in sess-a"), ("b_echo", "b in sess-b")] {
        let called = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": {}}});
        let v = json_of(legacy_post(&c, &url(&gw), s, called).send().await.unwrap()).await;
        assert_eq!(v["result"]["content"][0]["text"], said, "{v}");
    }
    // A question pushed by b is answered back to b, and only b.
    let asked = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "b_ask", "arguments": {}}});
    let text = legacy_post(&c, &url(&gw), s, asked)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let push: Value = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|m| m["method"] == "elicitation/create")
        .unwrap_or_else(|| panic!("{text}"));
    let push_id = push["id"].as_str().unwrap().to_owned();
    assert!(push_id.starts_with("psr1."), "{push_id}");
    let before = (a.requests().len(), b.requests().len());
    let answer = json!({"jsonrpc": "2.0", "id": push_id, "result": {"action": "accept", "content": {"room": "nook"}}});
    let resp = legacy_post(&c, &url(&gw), s, answer).send().await.unwrap();
    assert_eq!(resp.status(), 202, "{}", resp.text().await.unwrap());
    assert_eq!(
        (a.requests().len(), b.requests().len()),
        (before.0, before.1 + 1)
    );
    let reached: Value = serde_json::from_slice(&b.requests().last().unwrap().body).unwrap();
    assert_eq!(reached["id"], "q-b", "b gets its own id back");
    // The GET stream merges both upstreams' streams.
    let stream = c
        .get(url(&gw))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY_VERSION)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let text = stream.text().await.unwrap();
    assert_eq!(
        text.matches("notifications/tools/list_changed").count(),
        2,
        "{text}"
    );
    // DELETE ends the session at every upstream, then at the gateway.
    let end = c
        .delete(url(&gw))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY_VERSION)
        .send()
        .await
        .unwrap();
    assert!(end.status().is_success(), "{}", end.status());
    for up in [&a, &b] {
        assert!(up.requests().iter().any(|r| r.head.starts_with("DELETE")));
    }
    let again = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
    let v = json_of(legacy_post(&c, &url(&gw), s, again).send().await.unwrap()).await;
    assert_eq!(v["error"]["data"]["reason"], "session_expired", "{v}");
    gw.shutdown().await;
}

#[tokio::test]
async fn permissions_name_the_exposed_tools() {
    let (a, b) = (start_demo().await, start_demo().await);
    let gw = start_gateway(&federated_config(
        &[("rooms-a", "ra", &a), ("rooms-b", "rb", &b)],
        "[[route.deny]]\ntools = [\"rb_*\", \"ra_book_room\"]\n",
    ))
    .await;
    let c = client();
    let v = list(&c, &url(&gw), "tools/list", None).await;
    let listed = names(&v["result"], "tools", "name");
    assert!(
        listed
            .iter()
            .all(|n| n.starts_with("ra_") && n != "ra_book_room"),
        "{listed:?}"
    );
    assert!(!listed.is_empty());
    let v = json_of(
        call(
            &c,
            &url(&gw),
            "p",
            "rb_get_room",
            json!({"room_id": "nook"}),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(v["error"]["data"]["reason"], "tool_not_permitted", "{v}");
    gw.shutdown().await;
}

/// An upstream with resources and templates; `resources/read` echoes the URI it got.
async fn with_resources(tag: &'static str) -> ScriptedUpstream {
    ScriptedUpstream::start(move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let result = match body["method"].as_str() {
            Some("resources/list") => json!({"resources": [{"uri": format!("file:///{tag}/a_b+c.md"), "name": "notes"}]}),
            Some("resources/templates/list") => json!({"resourceTemplates": [{"uriTemplate": "file:///{path}", "name": "any file"}]}),
            Some("resources/read") => {
                let uri = body["params"]["uri"].clone();
                json!({"contents": [{"uri": uri, "text": format!("{tag} read {uri}")}]})
            }
            _ => json!({"tools": []}),
        };
        vec![http_response("200 OK", "application/json", &result_json(&id_of(req), result))]
    })
    .await
}

#[tokio::test]
async fn resources_are_exposed_under_a_uri_prefix_and_read_from_their_upstream() {
    let (a, b) = (with_resources("a").await, with_resources("b").await);
    let gw = start_gateway(&federated_config(
        &[("up-a", "a", &a.url()), ("up-b", "b-2", &b.url())],
        "",
    ))
    .await;
    let c = client();
    let v = list(&c, &url(&gw), "resources/list", None).await;
    assert_eq!(
        names(&v["result"], "resources", "uri"),
        ["a+file:///a/a_b+c.md", "b-2+file:///b/a_b+c.md"]
    );
    let v = list(&c, &url(&gw), "resources/templates/list", None).await;
    assert_eq!(
        names(&v["result"], "resourceTemplates", "uriTemplate"),
        ["a+file:///{path}", "b-2+file:///{path}"]
    );
    let read = json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"_meta": meta(), "uri": "b-2+file:///b/a_b+c.md"}});
    let v = json_of(
        post(
            &c,
            &url(&gw),
            "resources/read",
            Some("b-2+file:///b/a_b+c.md"),
            read,
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        v["result"]["contents"][0]["text"], "b read \"file:///b/a_b+c.md\"",
        "{v}"
    );
    // The contents name the resource as the client knows it.
    assert_eq!(
        v["result"]["contents"][0]["uri"], "b-2+file:///b/a_b+c.md",
        "{v}"
    );
    let got: Value = serde_json::from_slice(&b.requests().last().unwrap().body).unwrap();
    assert_eq!(
        got["params"]["uri"], "file:///b/a_b+c.md",
        "its own URI, byte for byte"
    );
    assert!(
        b.requests()
            .last()
            .unwrap()
            .head
            .contains("file:///b/a_b+c.md"),
        "Mcp-Name too"
    );
    let unknown = json!({"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {"_meta": meta(), "uri": "file:///etc/passwd"}});
    let v = json_of(
        post(
            &c,
            &url(&gw),
            "resources/read",
            Some("file:///etc/passwd"),
            unknown,
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(v["error"]["data"]["reason"], "unknown_name", "{v}");
    gw.shutdown().await;
}

#[tokio::test]
async fn one_upstreams_limit_does_not_slow_another() {
    let (a, b) = (answering_ok().await, answering_ok().await);
    let gw = start_gateway(&federated_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "\n[rate_limits]\nper_principal_upstream = { rate = \"2/m\" }\n",
    ))
    .await;
    let c = client();
    let status = |v: &Value| {
        v["error"]["data"]["reason"]
            .as_str()
            .unwrap_or("ok")
            .to_owned()
    };
    let mut seen = Vec::new();
    for tool in ["a_x", "a_x", "a_x", "b_x", "b_x"] {
        let v = json_of(
            call(&c, &url(&gw), "r", tool, json!({}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        seen.push(status(&v));
    }
    assert_eq!(seen, ["ok", "ok", "rate_limited", "ok", "ok"]);
    gw.shutdown().await;
}

#[test]
fn check_refuses_prefixes_that_could_collide_or_are_no_names() {
    let bin = env!("CARGO_BIN_EXE_portcullis");
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // The default prefix is the id, and an id may hold '_'.
        (
            "id = \"git_hub\"",
            "id = \"files\"\nprefix = \"gh\"",
            "",
            "prefix",
            "\"git_hub\" cannot prefix names",
        ),
        (
            "id = \"gh\"",
            "id = \"files\"\nprefix = \"gh\"",
            "",
            "prefix",
            "also upstream \"gh\"'s",
        ),
        (
            "id = \"gh\"\nprefix = \"GH\"",
            "id = \"files\"",
            "",
            "prefix",
            "cannot prefix",
        ),
        (
            "id = \"gh\"",
            "id = \"files\"",
            "name = \"files\"",
            "route[0].name",
            "is an upstream's id",
        ),
    ];
    for (first, second, route_extra, field, says) in cases {
        let text = format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n[[upstream]]\n{first}\nname = \"One\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
             [[upstream]]\n{second}\nname = \"Two\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
             [[route]]\npath = \"/mcp\"\nupstreams = [\"{}\", \"files\"]\n{route_extra}\n",
            first.split('"').nth(1).unwrap()
        );
        let path = dir.path().join("gw.toml");
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(bin)
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{first} / {second}: {err}");
        assert!(
            err.contains(field) && err.contains(says),
            "{first} / {second}: {err}"
        );
    }
    let route_errors = [
        ("upstream = \"files\"\nupstreams = [\"files\"]", "not both"),
        ("upstreams = []", "at least one upstream"),
        ("upstreams = [\"files\", \"files\"]", "named twice"),
        (
            "upstream = \"files\"\nfanout_timeout = \"1s\"",
            "only a federated route",
        ),
        ("path_typo = 1", "needs upstream"),
    ];
    for (route, says) in route_errors {
        let text = format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n[[upstream]]\nid = \"files\"\nname = \"Files\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
             [[route]]\npath = \"/mcp\"\n{route}\n"
        );
        let path = dir.path().join("gw.toml");
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(bin)
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{route}: {err}");
        assert!(err.contains(says), "{route}: {err}");
    }
}

#[test]
fn explain_takes_an_upstream_of_a_federated_route() {
    let bin = env!("CARGO_BIN_EXE_portcullis");
    let dir = tempfile::tempdir().unwrap();
    let text = "[[listener]]\naddress = \"127.0.0.1:0\"\n\
        [[upstream]]\nid = \"rooms\"\nname = \"Rooms\"\nurl = \"http://127.0.0.1:9/mcp\"\npolicy = \"untrusted\"\n\
        [[upstream]]\nid = \"files\"\nname = \"Files\"\nurl = \"http://127.0.0.1:9/mcp\"\npolicy = \"trusted\"\n\
        [[route]]\npath = \"/mcp\"\nupstreams = [\"files\", \"rooms\"]\n";
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, text).unwrap();
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/explain/hostile.json");
    let run = |upstream: &str| {
        let out = std::process::Command::new(bin)
            .args(["explain", "--json", "--config"])
            .arg(&path)
            .args(["--upstream", upstream, "--target", "book_room", seed])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        v
    };
    let rooms = run("rooms");
    let files = run("files");
    assert_eq!(rooms["upstream"]["policy"], "untrusted", "{rooms}");
    assert_eq!(files["upstream"]["policy"], "trusted", "{files}");
}

#[tokio::test]
async fn a_name_too_long_once_prefixed_or_listed_twice_is_removed_and_audited() {
    let long = "t".repeat(125);
    let listing = json!({"tools": [
        {"name": "ok", "inputSchema": {"type": "object"}},
        {"name": long, "inputSchema": {"type": "object"}},
        {"name": "ok", "inputSchema": {"type": "object"}},
    ]});
    let up = ScriptedUpstream::start(move |req| {
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id_of(req), listing.clone()),
        )]
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let text = federated_config(&[("up", "abc", &up.url())], "").replace(
        "sink = \"off\"",
        &format!("sink = \"file\"\npath = \"{}\"", audit.display()),
    );
    let gw = start_gateway(&text).await;
    let c = client();
    let v = list(&c, &url(&gw), "tools/list", None).await;
    // 125 + "abc_" is 129 characters; "ok" is listed twice: which of its
    // definitions the upstream runs nobody can tell, so neither is delivered.
    assert!(names(&v["result"], "tools", "name").is_empty(), "{v}");
    gw.shutdown().await;
    let lines = std::fs::read_to_string(&audit).unwrap();
    let removed: Vec<Value> = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["rule"] == "name" && e["action"] == "remove")
        .collect();
    assert_eq!(removed.len(), 3, "{lines}");
    assert!(
        lines.contains("listed twice") && lines.contains("longer than 128"),
        "{lines}"
    );
}

/// A 2026-07-28 upstream whose `subscriptions/listen` stream acknowledges,
/// then says each subscribed resource was updated, then ends.
async fn listening(tag: &'static str) -> ScriptedUpstream {
    ScriptedUpstream::start(move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let filter = body["params"]["notifications"].clone();
        let mut steps = vec![
            sse_head(),
            sse_event(&json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {"notifications": filter}}).to_string()),
        ];
        for uri in filter["resourceSubscriptions"].as_array().cloned().unwrap_or_default() {
            steps.push(sse_event(&json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}).to_string()));
        }
        steps.push(sse_event(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {"from": tag}}}).to_string()));
        steps.push(sse_end());
        steps
    })
    .await
}

#[tokio::test]
async fn a_subscription_stream_is_every_upstreams_with_its_own_uris() {
    let (a, b) = (listening("a").await, listening("b").await);
    let gw = start_gateway(&federated_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "",
    ))
    .await;
    let c = client();
    let listen = |uris: Value| {
        let body = json!({"jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen", "params": {"_meta": meta(),
            "notifications": {"toolsListChanged": true, "resourceSubscriptions": uris}}});
        post(&c, &url(&gw), "subscriptions/listen", None, body)
    };
    let resp = listen(json!(["b+file:///x.md", "a+file:///y_z.md", "b+mem://q"]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let messages: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let updated: Vec<&str> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/resources/updated")
        .map(|m| m["params"]["uri"].as_str().unwrap())
        .collect();
    let mut sorted = updated.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["a+file:///y_z.md", "b+file:///x.md", "b+mem://q"],
        "{text}"
    );
    assert_eq!(
        messages
            .iter()
            .filter(|m| m["method"] == "notifications/tools/list_changed")
            .count(),
        2
    );
    let got = |up: &ScriptedUpstream| -> Value {
        let b: Value = serde_json::from_slice(&up.requests()[0].body).unwrap();
        b["params"]["notifications"]["resourceSubscriptions"].clone()
    };
    assert_eq!(got(&a), json!(["file:///y_z.md"]));
    assert_eq!(got(&b), json!(["file:///x.md", "mem://q"]));
    let v = json_of(listen(json!(["c+file:///x"])).send().await.unwrap()).await;
    assert_eq!(v["error"]["data"]["reason"], "unknown_name", "{v}");
    gw.shutdown().await;
}

/// An upstream that answers `subscriptions/listen` with one whole JSON
/// answer (a method-not-found error, or the result that ends a listen)
/// instead of a stream.
async fn answering_whole(error: bool) -> ScriptedUpstream {
    ScriptedUpstream::start(move |req| {
        let id: Value = serde_json::from_str(&id_of(req)).unwrap_or_default();
        let body = match error {
            true => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
            false => json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete"}}),
        };
        vec![http_response("200 OK", "application/json", &body.to_string())]
    })
    .await
}

#[tokio::test]
async fn an_upstream_answering_a_listen_whole_is_left_out_of_the_merged_stream() {
    for error in [true, false] {
        let (a, b) = (answering_whole(error).await, listening("b").await);
        let gw = start_gateway(&federated_config(
            &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
            "",
        ))
        .await;
        let c = client();
        let body = json!({"jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen", "params": {"_meta": meta(),
            "notifications": {"toolsListChanged": true}}});
        let resp = post(&c, &url(&gw), "subscriptions/listen", None, body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let media = resp.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(media.starts_with("text/event-stream"), "{media}");
        let text = resp.text().await.unwrap();
        // Every line of the merged stream is an event-stream line; every
        // event is b's, whole.
        for line in text.lines().filter(|l| !l.is_empty()) {
            assert!(
                ["data:", "id:", "event:", "retry:", ":"]
                    .iter()
                    .any(|p| line.starts_with(p)),
                "not an event-stream line: {line:?} in {text}"
            );
        }
        let froms: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .filter(|m| m["method"] == "notifications/tools/list_changed")
            .map(|m| m["params"]["_meta"]["from"].clone())
            .collect();
        assert_eq!(froms, [json!("b")], "{text}");
        let m = metrics(&gw).await;
        assert!(
            m.lines().any(|l| l.starts_with("portcullis_federation_")
                && l.contains("up-a")
                && l.contains("subscriptions/listen")),
            "a is counted as left out: {m}"
        );
        gw.shutdown().await;

        // With no upstream streaming, the first whole answer is the route's.
        let (a, b) = (answering_whole(error).await, answering_whole(error).await);
        let gw = start_gateway(&federated_config(
            &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
            "",
        ))
        .await;
        let v = json_of(
            post(&client(), &url(&gw), "subscriptions/listen", None, body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        match error {
            true => assert_eq!(v["error"]["code"], -32601, "{v}"),
            false => assert_eq!(v["result"]["resultType"], "complete", "{v}"),
        }
        gw.shutdown().await;
    }
}

#[tokio::test]
async fn an_empty_prefix_exposes_names_as_they_are_and_never_shadows_a_prefix() {
    let tools = |names: &'static [&'static str]| {
        ScriptedUpstream::start(move |req| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            let result = match body["method"].as_str() {
                Some("tools/list") => {
                    let tools: Vec<Value> = names
                        .iter()
                        .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                        .collect();
                    json!({ "tools": tools })
                }
                _ => {
                    json!({"content": [{"type": "text", "text": format!("ran {}", body["params"]["name"])}]})
                }
            };
            vec![http_response(
                "200 OK",
                "application/json",
                &result_json(&id_of(req), result),
            )]
        })
    };
    // The plain upstream lists `gh_issues`, which reads as the other's.
    let plain = tools(&["search", "gh_issues", "read_file"]).await;
    let gh = tools(&["issues"]).await;
    let text = federated_config(
        &[("plain", "", &plain.url()), ("github", "gh", &gh.url())],
        "",
    );
    let gw = start_gateway(&text).await;
    let c = client();
    let v = list(&c, &url(&gw), "tools/list", None).await;
    assert_eq!(
        names(&v["result"], "tools", "name"),
        ["search", "read_file", "gh_issues"]
    );
    for (tool, ran) in [
        ("read_file", "ran \"read_file\""),
        ("gh_issues", "ran \"issues\""),
        ("search", "ran \"search\""),
    ] {
        let v = json_of(
            call(&c, &url(&gw), "e", tool, json!({}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(v["result"]["content"][0]["text"], ran, "{tool}: {v}");
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn a_completion_goes_to_the_upstream_its_reference_names() {
    let echo = || {
        ScriptedUpstream::start(|req| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            let got = body["params"]["ref"].clone();
            let result = json!({"completion": {"values": [got.to_string()]}});
            vec![http_response(
                "200 OK",
                "application/json",
                &result_json(&id_of(req), result),
            )]
        })
    };
    let (a, b) = (echo().await, echo().await);
    let gw = start_gateway(&federated_config(
        &[("up-a", "a", &a.url()), ("up-b", "b", &b.url())],
        "",
    ))
    .await;
    let c = client();
    let complete = |reference: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 8, "method": "completion/complete", "params": {"_meta": meta(),
            "ref": reference, "argument": {"name": "room", "value": "at"}}});
        post(&c, &url(&gw), "completion/complete", None, body)
    };
    let v = json_of(
        complete(json!({"type": "ref/prompt", "name": "b_plan"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        v["result"]["completion"]["values"][0], r#"{"type":"ref/prompt","name":"plan"}"#,
        "{v}"
    );
    let v = json_of(
        complete(json!({"type": "ref/resource", "uri": "a+file:///{path}"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        v["result"]["completion"]["values"][0], r#"{"type":"ref/resource","uri":"file:///{path}"}"#,
        "{v}"
    );
    assert_eq!((a.requests().len(), b.requests().len()), (1, 1));
    for bad in [
        json!({"type": "ref/prompt", "name": "c_plan"}),
        json!({"type": "ref/tool", "name": "a_x"}),
        json!("a_x"),
    ] {
        let v = json_of(complete(bad.clone()).send().await.unwrap()).await;
        let reason = v["error"]["data"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            reason == "unknown_name" || reason == "invalid_request",
            "{bad}: {v}"
        );
    }
    assert_eq!((a.requests().len(), b.requests().len()), (1, 1));
    gw.shutdown().await;
}

#[tokio::test]
async fn each_upstreams_part_of_a_merged_answer_is_counted_under_its_id() {
    let good = paging("g", 2, 10).await;
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        format!("http://{addr}/mcp")
    };
    let gw = start_gateway(&federated_config(
        &[("good", "g", &good.url()), ("dead", "d", &dead)],
        "",
    ))
    .await;
    let c = client();
    for _ in 0..3 {
        list(&c, &url(&gw), "tools/list", None).await;
    }
    let m = metrics(&gw).await;
    for line in [
        r#"portcullis_requests_total{method="tools/list",outcome="ok",upstream="team-tools"} 3"#,
        r#"portcullis_requests_total{method="tools/list",outcome="ok",upstream="good"} 3"#,
        r#"portcullis_requests_total{method="tools/list",outcome="upstream_unreachable",upstream="dead"} 3"#,
    ] {
        assert!(m.contains(line), "{line}\n{m}");
    }
    gw.shutdown().await;
}
