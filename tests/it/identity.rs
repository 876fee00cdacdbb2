//! Who is calling, how often, and what they may call — through the real
//! proxy on loopback: API keys, JWT, mTLS, tool permissions, rate limits
//! (local and shared through a real Redis), and principal-bound state.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

fn ok_result(req: &Received) -> Vec<Step> {
    let body = result_json(
        &id_of(req),
        json!({"resultType": "complete", "content": [], "tools": [{"name": "get_room"}, {"name": "book_room"}, {"name": "delete_room"}], "ttlMs": 0, "cacheScope": "private"}),
    );
    vec![http_response("200 OK", "application/json", &body)]
}

fn hash(key: &str) -> String {
    portcullis::identify::hash_key(key)
}

const ALICE: &str = "pcl_alice-test-key-0123456789abcdef";
const BOB: &str = "pcl_bob-test-key-0123456789abcdef";

/// A config with an API-key scheme (alice: staff, bob: contractors) on /mcp.
fn keyed_config(upstream: &str, route_extra: &str, extra: &str) -> String {
    let base = config_text(upstream, "", extra);
    let auth = format!(
        "[[auth]]\nname = \"keys\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"alice\"\ngroups = [\"staff\"]\nhash = \"{}\"\n[[auth.key]]\nprincipal = \"bob\"\ngroups = [\"contractors\"]\nhash = \"{}\"\n",
        hash(ALICE),
        hash(BOB)
    );
    let with_route = base.replace(
        "[[route]]\npath = \"/mcp\"\nupstream = \"test\"\n",
        &format!(
            "[[route]]\npath = \"/mcp\"\nupstream = \"test\"\nauth = [\"keys\"]\n{route_extra}\n"
        ),
    );
    format!("{auth}\n{with_route}")
}

#[tokio::test]
async fn api_keys_identify_callers_and_are_never_passed_upstream() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = start_gateway(&keyed_config(&up.url(), "", "")).await;
    let c = client();
    let none = call(&c, &url(&gw), "a1", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 401);
    assert!(none.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer"));
    assert_eq!(
        json_of(none).await["error"]["data"]["reason"],
        "authentication_required"
    );
    let bad = call(&c, &url(&gw), "a2", "get_room", json!({}))
        .bearer_auth("pcl_wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    let v = json_of(bad).await;
    assert_eq!(v["error"]["data"]["reason"], "invalid_credentials");
    assert!(
        !v.to_string().contains("pcl_wrong"),
        "the credential is never echoed"
    );
    let good = call(&c, &url(&gw), "a3", "get_room", json!({}))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(good.status(), 200);
    assert_eq!(
        up.calls().len(),
        1,
        "refused calls never reached the upstream"
    );
    assert_eq!(up.requests()[0].header("authorization"), None);
    gw.shutdown().await;
}

#[tokio::test]
async fn jwt_bearer_tokens_are_verified() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "an-hs256-secret-that-is-long-enough-0123456789";
    std::fs::write(dir.path().join("jwt.secret"), secret).unwrap();
    let up = ScriptedUpstream::start(ok_result).await;
    let auth = format!(
        "[[auth]]\nname = \"corp\"\ntype = \"jwt\"\nissuer = \"https://idp.example\"\naudience = \"portcullis\"\nalgorithms = [\"HS256\"]\nhs256_secret_file = \"{}\"\n",
        dir.path().join("jwt.secret").display()
    );
    let text = format!(
        "{auth}\n{}",
        config_text(&up.url(), "", "").replace(
            "upstream = \"test\"\n\n",
            "upstream = \"test\"\nauth = [\"corp\"]\n\n"
        )
    );
    let gw = start_gateway(&text).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let token = |claims: Value| {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    let c = client();
    let good = token(
        json!({"iss": "https://idp.example", "aud": "portcullis", "sub": "carol", "exp": now + 60, "groups": ["staff"]}),
    );
    assert_eq!(
        call(&c, &url(&gw), "j1", "get_room", json!({}))
            .bearer_auth(&good)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    for (claims, why) in [
        (
            json!({"iss": "https://idp.example", "aud": "portcullis", "sub": "carol", "exp": now - 3600}),
            "expired",
        ),
        (
            json!({"iss": "https://evil.example", "aud": "portcullis", "sub": "carol", "exp": now + 60}),
            "issuer",
        ),
        (
            json!({"iss": "https://idp.example", "aud": "other", "sub": "carol", "exp": now + 60}),
            "audience",
        ),
    ] {
        let resp = call(&c, &url(&gw), "j2", "get_room", json!({}))
            .bearer_auth(token(claims))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{why}");
        let v = json_of(resp).await;
        assert_eq!(
            v["error"]["data"]["reason"], "invalid_credentials",
            "{why}: {v}"
        );
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn permissions_refuse_and_filter() {
    let up = ScriptedUpstream::start(ok_result).await;
    let rules = "[[route.allow]]\ngroups = [\"staff\"]\ntools = [\"get_*\", \"book_*\"]\n[[route.allow]]\ngroups = [\"contractors\"]\ntools = [\"get_*\"]\n[[route.deny]]\ntools = [\"delete_*\"]\n";
    let gw = start_gateway(&keyed_config(&up.url(), rules, "")).await;
    let c = client();
    let denied = call(&c, &url(&gw), "p1", "book_room", json!({}))
        .bearer_auth(BOB)
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 403);
    assert_eq!(
        json_of(denied).await["error"]["data"]["reason"],
        "tool_not_permitted"
    );
    assert!(
        up.requests().is_empty(),
        "a denied call never reaches the upstream"
    );
    assert_eq!(
        call(&c, &url(&gw), "p2", "book_room", json!({}))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let list_body = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}}});
    let list = c
        .post(url(&gw))
        .bearer_auth(BOB)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/list")
        .body(list_body.to_string())
        .send()
        .await
        .unwrap();
    let v = json_of(list).await;
    let names: Vec<&str> = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_room"], "bob sees only what he may call");
    gw.shutdown().await;
}

#[tokio::test]
async fn rate_limits_answer_429_with_retry_after() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = start_gateway(&keyed_config(
        &up.url(),
        "",
        "[rate_limits]\nper_principal = { rate = \"1/m\", burst = 2 }",
    ))
    .await;
    let c = client();
    for i in 0..2 {
        assert_eq!(
            call(&c, &url(&gw), &format!("r{i}"), "get_room", json!({}))
                .bearer_auth(ALICE)
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
    }
    let limited = call(&c, &url(&gw), "r3", "get_room", json!({}))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(limited.status(), 429);
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let v = json_of(limited).await;
    assert_eq!(v["error"]["data"]["reason"], "rate_limited");
    assert_eq!(v["error"]["data"]["scope"], "principal");
    // Another principal has its own budget.
    assert_eq!(
        call(&c, &url(&gw), "r4", "get_room", json!({}))
            .bearer_auth(BOB)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let m = metrics(&gw).await;
    assert!(
        m.contains(r#"portcullis_rate_limited_total{scope="principal",upstream="test"} 1"#),
        "{m}"
    );
    assert!(!m.contains("alice"), "principal names are never labels");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_state_is_bound_to_its_principal_and_questions_are_rate_limited() {
    let up = always_asking("q", "Which room?", json!({"room": {"type": "string"}})).await;
    let gw = start_gateway(&keyed_config(
        &up.url(),
        "",
        "[rate_limits]\ninput_required_rounds = { rate = \"2/m\" }",
    ))
    .await;
    let c = client();
    let first = json_of(
        call(&c, &url(&gw), "s1", "book_room", json!({}))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let mut retry: Value = serde_json::from_str(&call_body("s2", "book_room", json!({}))).unwrap();
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] =
        json!({"q": {"action": "accept", "content": {"room": "nook"}}});
    let stolen = call(&c, &url(&gw), "s2", "book_room", json!({}))
        .bearer_auth(BOB)
        .body(retry.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        json_of(stolen).await["error"]["data"]["reason"],
        "state_principal_mismatch"
    );
    // Alice's own retry is the second question she receives this minute; a third is refused.
    let second = json_of(
        call(&c, &url(&gw), "s2", "book_room", json!({}))
            .bearer_auth(ALICE)
            .body(retry.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    let third = json_of(
        call(&c, &url(&gw), "s3", "book_room", json!({}))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(third["error"]["data"]["reason"], "rate_limited", "{third}");
    assert_eq!(third["error"]["data"]["scope"], "input_required_rounds");
    gw.shutdown().await;
}

/// A `redis-server` on a unix socket in its own directory (no TCP port to
/// race for), killed on drop.
struct Redis(Child, tempfile::TempDir);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Redis {
    fn socket(&self) -> std::path::PathBuf {
        self.1.path().join("redis.sock")
    }
}

fn start_redis() -> Option<Redis> {
    let dir = tempfile::tempdir().ok()?;
    let socket = dir.path().join("redis.sock");
    let child = Command::new("redis-server")
        .args(["--port", "0", "--unixsocket"])
        .arg(&socket)
        .args([
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(c) => Some(Redis(c, dir)),
        Err(_) if std::env::var_os("PORTCULLIS_REQUIRE_PEERS").is_some() => {
            panic!("redis-server is required (PORTCULLIS_REQUIRE_PEERS is set)")
        }
        Err(_) => {
            eprintln!("skipped: redis-server not installed");
            None
        }
    }
}

#[tokio::test]
async fn two_gateways_share_one_limit_through_redis() {
    let Some(redis) = start_redis() else {
        return;
    };
    for _ in 0..50 {
        if tokio::net::UnixStream::connect(redis.socket())
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let up = ScriptedUpstream::start(ok_result).await;
    let limits = format!("[rate_limits]\nbackend = \"redis\"\nredis_url = \"redis+unix://{}?db=0\"\nper_principal = {{ rate = \"1/m\", burst = 3 }}", redis.socket().display());
    let a = start_gateway(&keyed_config(&up.url(), "", &limits)).await;
    let b = start_gateway(&keyed_config(&up.url(), "", &limits)).await;
    let c = client();
    let mut statuses = Vec::new();
    for (i, gw) in [&a, &b, &a, &b].iter().enumerate() {
        let s = call(&c, &url(gw), &format!("x{i}"), "get_room", json!({}))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        statuses.push(s);
    }
    assert_eq!(
        statuses,
        [200, 200, 200, 429],
        "the burst of 3 is shared by both instances"
    );
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn the_rounds_limit_also_holds_questions_inside_event_streams() {
    let up = ScriptedUpstream::start(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let result = json!({"resultType": "input_required", "requestState": "s",
            "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "Which room?",
              "requestedSchema": {"type": "object", "properties": {"room": {"type": "string"}}}}}}});
        let message = json!({"jsonrpc": "2.0", "id": body["id"], "result": result}).to_string();
        vec![sse_head(), sse_event(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}"#), sse_event(&message), sse_end()]
    })
    .await;
    let gw = start_gateway(&keyed_config(
        &up.url(),
        "",
        "[rate_limits]\ninput_required_rounds = { rate = \"1/m\" }",
    ))
    .await;
    let c = client();
    let last_event = |text: String| -> Value {
        let data = text
            .split("\n\n")
            .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
            .last()
            .unwrap_or_default()
            .to_owned();
        serde_json::from_str(&data).unwrap()
    };
    let first = call(&c, &url(&gw), "e1", "book_room", json!({}))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(first.headers()["content-type"], "text/event-stream");
    let first = last_event(first.text().await.unwrap());
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let second = last_event(
        call(&c, &url(&gw), "e2", "book_room", json!({}))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(
        second["error"]["data"]["reason"], "rate_limited",
        "{second}"
    );
    assert_eq!(second["error"]["data"]["scope"], "input_required_rounds");
    assert_eq!(second["id"], "e2");
    gw.shutdown().await;
}

/// Two key lists that each know an `alice`, and a third whose principal is
/// literally named `keys:alice`, all on /mcp; `route_extra` holds the rules.
fn three_schemes_config(upstream: &str, route_extra: &str) -> String {
    const CAROL: &str = "pcl_carol-test-key-0123456789abcdef";
    let base = config_text(upstream, "", "");
    let list = |name: &str, principal: &str, key: &str| {
        format!(
            "[[auth]]\nname = \"{name}\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"{principal}\"\nhash = \"{}\"\n",
            hash(key)
        )
    };
    let auth = [
        list("keys", "alice", ALICE),
        list("partner", "alice", BOB),
        list("guests", "keys:alice", CAROL),
    ]
    .concat();
    let with_route = base.replace(
        "[[route]]\npath = \"/mcp\"\nupstream = \"test\"\n",
        &format!(
            "[[route]]\npath = \"/mcp\"\nupstream = \"test\"\nauth = [\"keys\", \"partner\", \"guests\"]\n{route_extra}\n"
        ),
    );
    format!("{auth}\n{with_route}")
}

/// A permission rule names a principal by name (any scheme) or as
/// `scheme:name` (that scheme's only); a colon inside another scheme's
/// principal name is not a scheme.
#[tokio::test]
async fn a_permission_rule_may_name_one_schemes_principal() {
    const CAROL: &str = "pcl_carol-test-key-0123456789abcdef";
    let up = ScriptedUpstream::start(ok_result).await;
    let rules = "[[route.deny]]\nprincipals = [\"partner:alice\"]\ntools = [\"book_*\"]\n[[route.allow]]\nprincipals = [\"keys:alice\"]\ntools = [\"*\"]\n[[route.allow]]\nprincipals = [\"alice\"]\ntools = [\"get_*\", \"book_*\"]\n";
    let gw = start_gateway(&three_schemes_config(&up.url(), rules)).await;
    let c = client();
    let status = |key: &'static str, tool: &'static str| {
        let req = call(&c, &url(&gw), "q", tool, json!({})).bearer_auth(key);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status(ALICE, "book_room").await, 200, "keys:alice");
    assert_eq!(
        status(ALICE, "delete_room").await,
        200,
        "keys:alice may call anything"
    );
    assert_eq!(
        status(BOB, "get_room").await,
        200,
        "partner's alice is an alice"
    );
    assert_eq!(
        status(BOB, "book_room").await,
        403,
        "partner:alice is denied booking"
    );
    assert_eq!(
        status(BOB, "delete_room").await,
        403,
        "only keys:alice may delete"
    );
    // guests' principal named `keys:alice` is neither `keys:alice` nor `alice`.
    assert_eq!(status(CAROL, "get_room").await, 403);
    gw.shutdown().await;

    // A rule naming a scheme its route does not take is a config error.
    let text = three_schemes_config(&up.url(), rules).replace(
        "auth = [\"keys\", \"partner\", \"guests\"]",
        "auth = [\"keys\", \"guests\"]",
    );
    let err = portcullis::config::GatewayConfig::parse(&text, std::path::Path::new("g.toml"))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("route[0].deny.principals") && err.contains("\"partner\""),
        "{err}"
    );
}
