//! The gateway as an OAuth protected resource, and upstream credentials,
//! where no authorization server is needed to tell: the metadata document
//! from config alone (the issuer here is a closed port), the challenges,
//! the config checks, the client's token never reaching the upstream, and
//! a token endpoint that cannot be reached. The sign-in flows against a
//! real authorization server (oidc-provider) are in
//! tests/interop/test/oauth.test.mjs.

use crate::common::*;
use portcullis::config::GatewayConfig;
use serde_json::json;

/// A closed port on loopback: the issuer is down for the whole test.
const DOWN: &str = "http://127.0.0.1:9";

fn protected(upstream_url: &str, upstream_extra: &str) -> String {
    config_text(upstream_url, upstream_extra, "").replace(
        "[[route]]\npath = \"/mcp\"\nupstream = \"test\"",
        "[[route]]\npath = \"/mcp\"\nupstream = \"test\"\nauth = [\"corp\"]",
    ) + &format!(
        r#"
[[auth]]
name = "corp"
type = "oauth"
issuer = "{DOWN}/realms/mcp"
scopes = ["mcp:tools", "mcp:admin"]
required_scopes = ["mcp:tools"]
jwks_ready_timeout = "0s"
"#
    )
}

#[tokio::test]
async fn the_metadata_is_served_from_config_while_the_issuer_is_down() {
    let up = answering_ok().await;
    let gw = start_gateway(&protected(&up.url(), "")).await;
    let c = client();
    let base = format!("http://{}", gw.addrs[0]);
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let resp = c.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        assert_eq!(resp.headers()["content-type"], "application/json");
        let doc = json_of(resp).await;
        assert_eq!(
            doc,
            json!({
                "resource": format!("{base}/mcp"),
                "authorization_servers": [format!("{DOWN}/realms/mcp")],
                "scopes_supported": ["mcp:tools", "mcp:admin"],
                "bearer_methods_supported": ["header"],
                "resource_name": "Test upstream"
            }),
            "{path}"
        );
    }
    let other = c
        .get(format!("{base}/.well-known/oauth-protected-resource/other"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
    assert_eq!(
        json_of(other).await["error"]["data"]["reason"],
        "route_not_found"
    );
    let post = c
        .post(format!("{base}/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
    assert_eq!(post.headers()["allow"], "GET, HEAD");
    // A name the listener does not serve cannot make the document name it.
    let rebound = c
        .get(format!("{base}/.well-known/oauth-protected-resource/mcp"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 421);
}

#[tokio::test]
async fn challenges_point_at_the_metadata_and_ask_for_the_required_scopes() {
    let up = answering_ok().await;
    let gw = start_gateway(&protected(&up.url(), "")).await;
    let c = client();
    let base = format!("http://{}", gw.addrs[0]);
    let md = format!("{base}/.well-known/oauth-protected-resource/mcp");
    let none = call(&c, &url(&gw), "1", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 401);
    assert_eq!(
        none.headers()["www-authenticate"],
        format!(r#"Bearer resource_metadata="{md}", scope="mcp:tools""#).as_str()
    );
    assert_eq!(
        json_of(none).await["error"]["data"]["reason"],
        "authentication_required"
    );
    // A JWT the gateway has no key for (the issuer is down): refused, still
    // pointing at the metadata; an opaque token with nowhere to introspect.
    for token in [
        "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJhIn0.c2ln",
        "opaque-123",
    ] {
        let bad = call_with(
            &c,
            &url(&gw),
            "2",
            "get_room",
            json!({}),
            &[("authorization", Some(&format!("Bearer {token}")))],
        )
        .send()
        .await
        .unwrap();
        assert_eq!(bad.status(), 401, "{token}");
        let challenge = bad.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.starts_with(&format!(
                r#"Bearer resource_metadata="{md}", scope="mcp:tools", error="invalid_token""#
            )),
            "{challenge}"
        );
        assert_eq!(
            json_of(bad).await["error"]["data"]["reason"],
            "invalid_credentials"
        );
    }
    assert!(up.requests().is_empty(), "nothing reached the upstream");
}

#[test]
fn oauth_config_mistakes_are_named() {
    let up = "http://127.0.0.1:9/mcp";
    for (text, field) in [
        (protected(up, "forward_authorization = true"), "route[0].auth"),
        (
            protected(up, "").replace("address = \"127.0.0.1:0\"\n\n[admin]", "address = \"127.0.0.1:0\"\nserver_names = [\"*\"]\n\n[admin]"),
            "route[0].resource",
        ),
        (protected(up, "").replace("auth = [\"corp\"]", "auth = [\"corp\"]\nresource = \"http://mcp.example.com/mcp\""), "route[0].resource"),
        (
            config_text(up, "[upstream.credential]\ntype = \"static\"\nsecret_env = \"PORTCULLIS_TEST_NO_SUCH_VAR\"", ""),
            "upstream[0].credential.secret_env",
        ),
        (
            config_text(up, "forward_authorization = true\n[upstream.credential]\ntype = \"static\"\nsecret_env = \"HOME\"", ""),
            "upstream[0].credential",
        ),
        (
            config_text(up, "", "").replace("upstream = \"test\"", "upstream = \"test\"\nresource = \"https://mcp.example.com/mcp\""),
            "route[0].resource",
        ),
        (
            config_text(up, "[upstream.credential]\ntype = \"token_exchange\"\ntoken_url = \"https://idp.example.com/token\"\nclient_id = \"gw\"\nclient_secret_env = \"HOME\"", ""),
            "route[0].auth",
        ),
    ] {
        let e = GatewayConfig::parse(&text, std::path::Path::new("gw.toml")).expect_err(&text);
        let shown = e.to_string();
        assert!(shown.contains(field), "want {field} in: {shown}");
    }
}

#[tokio::test]
async fn the_upstream_gets_its_own_credential_never_the_clients() {
    std::env::set_var("PORTCULLIS_TEST_UPSTREAM_KEY", "upstream-secret");
    let up = answering_ok().await;
    let extra =
        "[upstream.credential]\ntype = \"static\"\nsecret_env = \"PORTCULLIS_TEST_UPSTREAM_KEY\"";
    let gw = start_gateway(&config_text(&up.url(), extra, "")).await;
    let c = client();
    let resp = call_with(
        &c,
        &url(&gw),
        "1",
        "get_room",
        json!({}),
        &[("authorization", Some("Bearer client-token"))],
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let seen = up.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("authorization").as_deref(),
        Some("Bearer upstream-secret")
    );
    assert!(!seen[0].head.contains("client-token"));

    let named = "[upstream.credential]\ntype = \"static\"\nheader = \"X-Api-Key\"\nsecret_env = \"PORTCULLIS_TEST_UPSTREAM_KEY\"";
    let up2 = answering_ok().await;
    let gw2 = start_gateway(&config_text(&up2.url(), named, "")).await;
    let resp = call_with(
        &c,
        &url(&gw2),
        "1",
        "get_room",
        json!({}),
        &[("authorization", Some("Bearer client-token"))],
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let seen = up2.requests();
    assert_eq!(
        seen[0].header("x-api-key").as_deref(),
        Some("upstream-secret")
    );
    assert_eq!(seen[0].header("authorization"), None);
}

#[tokio::test]
async fn a_token_endpoint_that_cannot_be_reached_is_the_upstreams_named_failure() {
    std::env::set_var("PORTCULLIS_TEST_CLIENT_SECRET", "cs-9f8e7d");
    let up = answering_ok().await;
    let extra = format!(
        "[upstream.credential]\ntype = \"client_credentials\"\ntoken_url = \"{DOWN}/token\"\nclient_id = \"gw\"\nclient_secret_env = \"PORTCULLIS_TEST_CLIENT_SECRET\""
    );
    let gw = start_gateway(&config_text(&up.url(), &extra, "")).await;
    let c = client();
    // A list, as a client starts (a call would make the gateway fetch the
    // list first, and try the credential twice).
    let resp = list(&c, &url(&gw)).send().await.unwrap();
    assert_eq!(resp.status(), 502);
    let body = json_of(resp).await;
    assert_eq!(
        body["error"]["data"]["reason"],
        "upstream_credential_unavailable"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("Test upstream"), "{message}");
    assert!(!message.contains("cs-9f8e7d"), "no secret in {message}");
    assert!(up.requests().is_empty());
    let m = metrics(&gw).await;
    assert!(
        m.contains(
            r#"portcullis_upstream_credential_failures_total{kind="unreachable",upstream="test"} 1"#
        ),
        "{m}"
    );
    // Also the upstream's error, where dashboards and alerts already look.
    assert!(
        m.contains(
            r#"portcullis_upstream_errors_total{reason="upstream_credential_unavailable",upstream="test"} 1"#
        ),
        "{m}"
    );
}

#[tokio::test]
async fn an_upstream_refusing_the_gateways_credential_is_not_the_clients_401() {
    std::env::set_var("PORTCULLIS_TEST_UPSTREAM_KEY2", "stale-key");
    let up = ScriptedUpstream::start(|_| {
        vec![Step::Write(
            b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer resource_metadata=\"https://elsewhere.example/.well-known/oauth-protected-resource\"\r\ncontent-length: 0\r\n\r\n".to_vec(),
        )]
    })
    .await;
    let extra =
        "[upstream.credential]\ntype = \"static\"\nsecret_env = \"PORTCULLIS_TEST_UPSTREAM_KEY2\"";
    let gw = start_gateway(&config_text(&up.url(), extra, "")).await;
    let resp = call(&client(), &url(&gw), "1", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    assert!(
        resp.headers().get("www-authenticate").is_none(),
        "the upstream's challenge is not the client's"
    );
    let body = json_of(resp).await;
    assert_eq!(body["error"]["data"]["reason"], "upstream_refused");
    assert_eq!(body["error"]["data"]["upstreamStatus"], 401);
}

#[tokio::test]
async fn a_token_the_upstream_refuses_is_dropped_and_the_next_request_gets_a_new_one() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    std::env::set_var("PORTCULLIS_TEST_CLIENT_SECRET2", "cs-2b7e");
    // The token endpoint's side only: each answer a new token (t1, t2, …).
    let issued = Arc::new(AtomicUsize::new(0));
    let counter = issued.clone();
    let tokens = ScriptedUpstream::start(move |_| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let body = format!(r#"{{"access_token":"t{n}","token_type":"Bearer","expires_in":3600}}"#);
        vec![http_response("200 OK", "application/json", &body)]
    })
    .await;
    // The upstream refuses t1 (say it was revoked) and takes any other.
    let up = ScriptedUpstream::start(|req| {
        if req.header("authorization").as_deref() == Some("Bearer t1") {
            return vec![Step::Write(
                b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n".to_vec(),
            )];
        }
        let result = json!({"content": [{"type": "text", "text": "ok"}]});
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id_of(req), result),
        )]
    })
    .await;
    let extra = format!(
        "[upstream.credential]\ntype = \"client_credentials\"\ntoken_url = \"http://{}/token\"\nclient_id = \"gw\"\nclient_secret_env = \"PORTCULLIS_TEST_CLIENT_SECRET2\"",
        tokens.addr
    );
    let gw = start_gateway(&config_text(&up.url(), &extra, "")).await;
    let c = client();
    // A list first, as a client starts (a call would make the gateway fetch
    // the list itself first, with t1).
    let first = list(&c, &url(&gw)).send().await.unwrap();
    assert_eq!(first.status(), 502, "t1 refused by the upstream");
    let second = call(&c, &url(&gw), "2", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        second.status(),
        200,
        "a new token, not the refused one again"
    );
    let third = call(&c, &url(&gw), "3", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(third.status(), 200);
    assert_eq!(
        issued.load(Ordering::SeqCst),
        2,
        "t2 is cached for the third call"
    );
    let sent: Vec<_> = up
        .requests()
        .iter()
        .map(|r| r.header("authorization"))
        .collect();
    assert_eq!(
        sent,
        [
            Some("Bearer t1".into()),
            Some("Bearer t2".into()),
            Some("Bearer t2".into())
        ]
    );
    let asked = tokens.requests();
    assert!(
        asked[0].head.starts_with("POST /token"),
        "{}",
        asked[0].head
    );
    let form = String::from_utf8_lossy(&asked[0].body).to_string();
    assert!(form.contains("grant_type=client_credentials"), "{form}");
}

/// A `tools/list`, as a 2026-07-28 client sends it.
fn list(c: &reqwest::Client, url: &str) -> reqwest::RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    c.post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/list")
        .body(body.to_string())
}
