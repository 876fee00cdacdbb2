//! A hostile client of a federated route: exposed names spelled otherwise,
//! `Mcp-Name` in disagreement, completion references that lead nowhere,
//! cursors replayed by another caller, at another route or list, after a
//! reload, and batches.

use serde_json::{json, Value};

use super::*;

/// An upstream that says which name or URI it was asked for.
async fn echoing() -> ScriptedUpstream {
    serving(|m, body| {
        let p = &body["params"];
        let got = match m {
            "tools/call" | "prompts/get" => p["name"].clone(),
            "resources/read" => p["uri"].clone(),
            "completion/complete" => p["ref"].clone(),
            // It lists what the tests call (the gateway checks calls
            // against the listing).
            "tools/list" => {
                // And one named outside the characters a tool name may use.
                let mut tools = crate::common::listing()["tools"].clone();
                if let Some(t) = tools.as_array_mut() {
                    t.push(json!({"name": "\u{e9}", "inputSchema": {"type": "object"}}));
                }
                return Some(json!({ "tools": tools }));
            }
            "prompts/list" => return Some(json!({"prompts": crate::common::listing()["prompts"]})),
            "resources/templates/list" => {
                return Some(json!({"resourceTemplates": crate::common::listing()["resourceTemplates"]}))
            }
            _ => return None,
        };
        let text = got.to_string();
        Some(match m {
            "tools/call" => json!({"resultType": "complete", "content": [{"type": "text", "text": text}]}),
            "prompts/get" => json!({"resultType": "complete", "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}),
            "resources/read" => json!({"resultType": "complete", "contents": [{"uri": "file:///x", "text": text}]}),
            _ => json!({"resultType": "complete", "completion": {"values": [text]}}),
        })
    })
    .await
}

fn asked_of(up: &ScriptedUpstream) -> Vec<Value> {
    up.requests()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .collect()
}

#[tokio::test]
async fn an_exposed_name_spelled_otherwise_reaches_no_upstream() {
    // "g" is a prefix of "gh": the first separator decides, never a longest match.
    let (gh, g) = (echoing().await, echoing().await);
    let gw = start_gateway(&fed_config(
        &[("github", "gh", &gh.url()), ("files", "g", &g.url())],
        "",
        "",
    ))
    .await;
    let tools = [
        "\u{ff47}\u{ff48}_x",
        "g\u{04bb}_x",
        "GH_x",
        "Gh_x",
        "gh+x",
        "gh%5Fx",
        "gh\u{200b}_x",
        "\u{200b}gh_x",
        " gh_x",
        "gh _x",
        "_x",
        "x",
        "gh",
        "gh-_x",
        "ghx_y",
        "gh\u{ff3f}x",
        "gh\u{2f}x",
    ];
    for name in tools {
        let (status, v) = ask(
            &url(&gw),
            "tools/call",
            Some(name),
            json!({"name": name, "arguments": {}}),
        )
        .await;
        assert_eq!((status, reason(&v)), (400, "unknown_name"), "{name:?}: {v}");
    }
    let uris = [
        "gh_file:///x",
        "GH+file:///x",
        "gh%2Bfile:///x",
        "+file:///x",
        "file:///x",
        "gh\u{ff0b}file:///x",
    ];
    for uri in uris {
        let (status, v) = ask(&url(&gw), "resources/read", Some(uri), json!({"uri": uri})).await;
        assert_eq!((status, reason(&v)), (400, "unknown_name"), "{uri:?}: {v}");
    }
    assert!(
        gh.requests().is_empty() && g.requests().is_empty(),
        "nothing was forwarded"
    );
    // What the separators do say, each to its upstream, with its own name.
    for (name, to, own) in [
        ("gh_x", &gh, "x"),
        ("g_x", &g, "x"),
        ("gh__x", &gh, "_x"),
        ("g_gh_x", &g, "gh_x"),
    ] {
        let (_, v) = ask(
            &url(&gw),
            "tools/call",
            Some(name),
            json!({"name": name, "arguments": {}}),
        )
        .await;
        assert!(v.get("result").is_some(), "{name}: {v}");
        let sent = to.requests().last().unwrap().clone();
        assert_eq!(
            serde_json::from_slice::<Value>(&sent.body).unwrap()["params"]["name"],
            own
        );
        assert_eq!(
            sent.header("mcp-name").as_deref(),
            Some(name_header(own).as_str()),
            "{name}"
        );
    }
    // A name outside the listing rules' characters is routed to its
    // upstream too, but the listing rules took that tool out of the list:
    // the call is refused as never listed, and reaches no one.
    let before = gh.calls().len();
    let (_, v) = ask(
        &url(&gw),
        "tools/call",
        Some("gh_\u{e9}"),
        json!({"name": "gh_\u{e9}", "arguments": {}}),
    )
    .await;
    assert_eq!(v["error"]["data"]["reason"], "not_listed", "{v}");
    assert_eq!(v["error"]["data"]["upstream"], "Upstream github", "{v}");
    assert_eq!(gh.calls().len(), before);
    let (_, v) = ask(
        &url(&gw),
        "resources/read",
        Some("g+gh+file:///x"),
        json!({"uri": "g+gh+file:///x"}),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    assert_eq!(
        asked_of(&g).last().unwrap()["params"]["uri"],
        "gh+file:///x"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn an_mcp_name_header_that_disagrees_with_the_exposed_name_is_refused_before_any_upstream() {
    let gh = echoing().await;
    let gw = start_gateway(&fed_config(&[("github", "gh", &gh.url())], "", "")).await;
    let base64 = |s: &str| {
        use base64::Engine;
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
    };
    for header in [
        "gh_y".to_owned(),
        "x".to_owned(),
        "GH_x".to_owned(),
        base64("gh_y"),
        base64("x"),
    ] {
        let resp = call_with(
            &client(),
            &url(&gw),
            "h",
            "gh_x",
            json!({}),
            &[("mcp-name", Some(&header))],
        )
        .send()
        .await
        .unwrap();
        assert_eq!(resp.status(), 400, "{header}");
        let v = json_of(resp).await;
        assert_eq!(reason(&v), "header_mismatch", "{header}: {v}");
    }
    assert!(gh.requests().is_empty());
    // The base64 form of the exposed name is the same name.
    let resp = call_with(
        &client(),
        &url(&gw),
        "h",
        "gh_x",
        json!({}),
        &[("mcp-name", Some(&base64("gh_x")))],
    )
    .send()
    .await
    .unwrap();
    assert!(json_of(resp).await.get("result").is_some());
    assert_eq!(gh.calls()[0].header("mcp-name").as_deref(), Some("x"));
    gw.shutdown().await;
}

#[tokio::test]
async fn a_completion_goes_where_its_reference_leads_or_nowhere() {
    let (gh, g) = (echoing().await, echoing().await);
    let gw = start_gateway(&fed_config(
        &[("github", "gh", &gh.url()), ("files", "g", &g.url())],
        "",
        "",
    ))
    .await;
    let complete =
        |reference: Value| json!({"ref": reference, "argument": {"name": "a", "value": "b"}});
    for (reference, to, own) in [
        (
            json!({"type": "ref/prompt", "name": "gh_greet"}),
            &gh,
            json!({"type": "ref/prompt", "name": "greet"}),
        ),
        (
            json!({"type": "ref/resource", "uri": "g+file:///{p}"}),
            &g,
            json!({"type": "ref/resource", "uri": "file:///{p}"}),
        ),
    ] {
        let (_, v) = ask(
            &url(&gw),
            "completion/complete",
            None,
            complete(reference.clone()),
        )
        .await;
        assert!(v.get("result").is_some(), "{reference}: {v}");
        assert_eq!(asked_of(to).last().unwrap()["params"]["ref"], own);
    }
    let before = (gh.requests().len(), g.requests().len());
    for (reference, why) in [
        (
            json!({"type": "ref/prompt", "name": "greet"}),
            "unknown_name",
        ),
        (
            json!({"type": "ref/prompt", "uri": "gh_greet"}),
            "unknown_name",
        ),
        (
            json!({"type": "ref/resource", "uri": "gh_file:///x"}),
            "unknown_name",
        ),
        (json!({"type": "ref/prompt", "name": 5}), "unknown_name"),
        (
            json!({"type": "ref/tool", "name": "gh_greet"}),
            "invalid_request",
        ),
        (json!("gh_greet"), "invalid_request"),
        (Value::Null, "invalid_request"),
    ] {
        let (status, v) = ask(
            &url(&gw),
            "completion/complete",
            None,
            complete(reference.clone()),
        )
        .await;
        assert_eq!((status, reason(&v)), (400, why), "{reference}: {v}");
    }
    assert_eq!((gh.requests().len(), g.requests().len()), before);
    gw.shutdown().await;
}

fn keys_config() -> String {
    let hash = portcullis::identify::hash_key;
    format!(
        "[[auth]]\nname = \"keys\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"alice\"\nhash = \"{}\"\n[[auth.key]]\nprincipal = \"bob\"\nhash = \"{}\"\n",
        hash(ALICE),
        hash(BOB)
    )
}

const ALICE: &str = "pcl_alice-fed-key-0123456789abcdef";
const BOB: &str = "pcl_bob-fed-key-0123456789abcdef";

#[tokio::test]
async fn a_cursor_pages_only_the_list_route_and_caller_it_was_issued_to() {
    let (x, y) = (paging("x", 4, 1).await, paging("y", 4, 1).await);
    let second = "[[route]]\npath = \"/mcp2\"\nname = \"team-two\"\nupstreams = [\"ux\", \"uy\"]\nauth = [\"keys\"]\n";
    let gw = start_gateway(&fed_config(
        &[("ux", "px", &x.url()), ("uy", "py", &y.url())],
        "auth = [\"keys\"]",
        &format!("{second}\n{}", keys_config()),
    ))
    .await;
    let mcp2 = url(&gw).replace("/mcp", "/mcp2");
    let first = tools_page(&url(&gw), None, Some(ALICE)).await;
    let cursor = first["result"]["nextCursor"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    let asked = x.requests().len() + y.requests().len();
    for (at, key) in [(url(&gw), BOB), (mcp2.clone(), ALICE), (mcp2, BOB)] {
        let v = tools_page(&at, Some(&cursor), Some(key)).await;
        assert_eq!(reason(&v), "cursor_invalid", "{at} as {key}: {v}");
    }
    let (_, v) = ask_as(
        &url(&gw),
        "prompts/list",
        None,
        json!({"cursor": cursor}),
        Some(ALICE),
    )
    .await;
    assert_eq!(reason(&v), "cursor_invalid", "{v}");
    assert_eq!(
        x.requests().len() + y.requests().len(),
        asked,
        "nothing reached an upstream"
    );
    let v = tools_page(&url(&gw), Some(&cursor), Some(ALICE)).await;
    assert_eq!(names(&v["result"], "tools", "name"), ["px_x-1", "py_y-1"]);
    gw.shutdown().await;
}

#[tokio::test]
async fn a_cursor_naming_an_upstream_a_reload_removed_is_refused_not_followed() {
    let (x, y) = (paging("x", 4, 1).await, paging("y", 4, 1).await);
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, portcullis::mrtr::seal::new_key_line("k1")).unwrap();
    let state = format!("[state]\nkeys_file = \"{}\"\n", keys.display());
    let path = dir.path().join("gateway.toml");
    std::fs::write(
        &path,
        fed_config(
            &[("ux", "px", &x.url()), ("uy", "py", &y.url())],
            "",
            &state,
        ),
    )
    .unwrap();
    install_crypto();
    let config = portcullis::config::GatewayConfig::load(&path).unwrap();
    let gw = portcullis::server::RunningGateway::start(config)
        .await
        .unwrap();
    let first = tools_page(&url(&gw), None, None).await;
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    // uy leaves the route; ux stays (its own cursor would still work).
    std::fs::write(&path, fed_config(&[("ux", "px", &x.url())], "", &state)).unwrap();
    gw.reload().await.unwrap();
    let asked = y.requests().len();
    let v = tools_page(&url(&gw), Some(&cursor), None).await;
    assert_eq!(reason(&v), "cursor_invalid", "{v}");
    assert_eq!(y.requests().len(), asked);
    let v = tools_page(&url(&gw), None, None).await;
    assert_eq!(names(&v["result"], "tools", "name"), ["px_x-0"], "{v}");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_batch_reaches_no_upstream_of_a_federated_route() {
    let gh = echoing().await;
    let gw = start_gateway(&fed_config(&[("github", "gh", &gh.url())], "", "")).await;
    let one = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": meta(), "name": "gh_x", "arguments": {}}});
    for generation in [VERSION, LEGACY_VERSION] {
        let resp = client()
            .post(url(&gw))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", generation)
            .header("mcp-method", "tools/call")
            .header("mcp-name", "gh_x")
            .body(json!([one, one]).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        assert_eq!(reason(&json_of(resp).await), "batch_not_supported");
    }
    assert!(gh.requests().is_empty());
    gw.shutdown().await;
}
