//! 2025-11-25 sessions at their edges (issue 18), against a scripted
//! upstream over loopback: `notifications/elicitation/complete` only for a
//! URL-mode elicitation the gateway delivered in that session (and never on
//! 2026-07-28 streams), the text of a sampling answer scanned for secrets,
//! and DELETE ending the gateway's own session (its id refused, a push on a
//! stream still open withheld and answered by the gateway).

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::legacy_post as post;
use crate::common::*;

const LEGACY: &str = "2025-11-25";

/// The upstream reads what to do from the client's `x-script` header (the
/// gateway forwards end-to-end headers) and, for a completion, its params
/// from `x-complete` (raw JSON).
fn upstream(req: &Received) -> Vec<Step> {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
    let method = body.get("method").and_then(Value::as_str).unwrap_or("");
    let id = id_of(req);
    let script = req.header("x-script").unwrap_or_default();
    let complete = req.header("x-complete").map(|params| {
        sse_event(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{params}}}"#
        ))
    });
    let push = |id: &str, method: &str, params: Value| {
        sse_event(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )
    };
    let url_push = push(
        "77",
        "elicitation/create",
        json!({"mode": "url", "message": "Approve the payment in your browser",
               "url": "https://pay.example.com/approve", "elicitationId": "e-shown"}),
    );
    if req.head.starts_with("DELETE") {
        return vec![Step::Write(
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec(),
        )];
    }
    if req.head.starts_with("GET") {
        let mut steps = vec![sse_head(), Step::Write(chunk("id: g1\ndata: \n\n"))];
        match script.as_str() {
            // A push that comes after the client may have ended the session.
            "late-push" => steps.extend([
                Step::Sleep(Duration::from_millis(700)),
                push(
                    "late-1",
                    "elicitation/create",
                    json!({"message": "Which room?", "requestedSchema": {"type": "object",
                        "properties": {"room": {"type": "string", "enum": ["atrium", "nook"]}}}}),
                ),
            ]),
            _ => steps.extend(complete),
        }
        steps.extend([Step::Sleep(Duration::from_millis(100)), sse_end()]);
        return steps;
    }
    match method {
        "initialize" => {
            let result = json!({"protocolVersion": LEGACY, "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy", "version": "1"}});
            let body = result_json(&id, result);
            vec![Step::Write(
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: up-1\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes(),
            )]
        }
        "tools/call" => {
            let mut steps = vec![sse_head()];
            match script.as_str() {
                "sampling" => steps.push(push(
                    "88",
                    "sampling/createMessage",
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Summarise the booking"}}],
                           "maxTokens": 50}),
                )),
                "url" => steps.push(url_push),
                _ => {}
            }
            steps.extend(complete);
            steps.extend([
                sse_event(&result_json(
                    &id,
                    json!({"content": [{"type": "text", "text": "done"}]}),
                )),
                sse_end(),
            ]);
            steps
        }
        "subscriptions/listen" => {
            let mut steps = vec![sse_head()];
            steps.extend(complete);
            steps.extend([Step::Sleep(Duration::from_millis(100)), sse_end()]);
            steps
        }
        // A notification or a client's answer: accepted.
        _ if body.get("id").is_none() || body.get("method").is_none() => {
            vec![Step::Write(
                b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec(),
            )]
        }
        _ => vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id, json!({"tools": listing()["tools"]})),
        )],
    }
}

async fn initialize(c: &reqwest::Client, url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": LEGACY,
        "capabilities": {"elicitation": {"form": {}, "url": {}}, "sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = post(c, url, None, init).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// The JSON-RPC messages of an event stream, in order.
fn events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            let joined = data.join("\n");
            (!joined.trim().is_empty()).then(|| serde_json::from_str(&joined).unwrap())
        })
        .collect()
}

/// A tools/call in `session` whose upstream plays `script`, then completes
/// `complete` (params as JSON text) if given: the messages the client got.
async fn call(
    c: &reqwest::Client,
    url: &str,
    session: &str,
    script: &str,
    complete: Option<&str>,
) -> Vec<Value> {
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "pay", "arguments": {}}});
    let mut r = post(c, url, Some(session), call).header("x-script", script);
    if let Some(p) = complete {
        r = r.header("x-complete", p);
    }
    events(&r.send().await.unwrap().text().await.unwrap())
}

/// A GET stream of `session` whose upstream completes `complete`.
async fn listen(
    c: &reqwest::Client,
    url: &str,
    session: &str,
    complete: &str,
) -> (u16, Vec<Value>) {
    let resp = c
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", LEGACY)
        .header("x-complete", complete)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, events(&resp.text().await.unwrap()))
}

fn completions(messages: &[Value]) -> usize {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/elicitation/complete")
        .count()
}

fn refused_with(messages: &[Value], reason: &str) -> bool {
    messages
        .last()
        .is_some_and(|m| m["error"]["data"]["reason"] == reason)
}

async fn gateway(up: &ScriptedUpstream) -> portcullis::server::RunningGateway {
    start_gateway(&config_text(&up.url(), "", "")).await
}

#[tokio::test]
async fn an_elicitation_completes_only_where_the_gateway_delivered_it() {
    let up = ScriptedUpstream::start(upstream).await;
    // Straight at the upstream, a completion for any id reaches the client.
    let direct = call(
        &client(),
        &up.url(),
        "up-1",
        "",
        Some(r#"{"elicitationId":"e-never"}"#),
    )
    .await;
    assert_eq!(completions(&direct), 1, "the danger is real: {direct:?}");

    let gw = gateway(&up).await;
    let (c, u) = (client(), url(&gw));
    let session = initialize(&c, &u).await;
    // Before the elicitation is shown, its completion is refused.
    let early = call(&c, &u, &session, "", Some(r#"{"elicitationId":"e-shown"}"#)).await;
    assert_eq!(completions(&early), 0, "{early:?}");
    assert!(
        refused_with(&early, "upstream_protocol_violation"),
        "{early:?}"
    );

    // Shown in this session, then completed on the same stream: delivered,
    // after the push (order kept), and the result follows.
    let shown = call(
        &c,
        &u,
        &session,
        "url",
        Some(r#"{"elicitationId":"e-shown"}"#),
    )
    .await;
    assert_eq!(shown.len(), 3, "{shown:?}");
    assert_eq!(shown[0]["params"]["elicitationId"], "e-shown");
    assert_eq!(shown[1]["method"], "notifications/elicitation/complete");
    assert_eq!(shown[2]["result"]["content"][0]["text"], "done");
    // On the session's other stream too (another request, same session).
    let (status, got) = listen(&c, &u, &session, r#"{"elicitationId":"e-shown"}"#).await;
    assert_eq!((status, completions(&got)), (200, 1), "{got:?}");

    // Any other id, spelling or shape: refused, never delivered.
    let others = [
        r#"{"elicitationId":"e-other"}"#,
        r#"{"elicitationId":"E-SHOWN"}"#,
        r#"{"elicitationId":"e-shown "}"#,
        r#"{"elicitationId":"e\u2011shown"}"#,
        r#"{"elicitationId":"e-shown\u0000"}"#,
        r#"{"elicitationId":""}"#,
        r#"{"elicitationId":7}"#,
        r#"{"elicitationId":null}"#,
        r#"{"elicitationId":["e-shown"]}"#,
        r#"{}"#,
    ];
    for params in others {
        let got = call(&c, &u, &session, "", Some(params)).await;
        assert_eq!(completions(&got), 0, "{params}: {got:?}");
        assert!(
            refused_with(&got, "upstream_protocol_violation"),
            "{params}: {got:?}"
        );
        let (_, got) = listen(&c, &u, &session, params).await;
        assert_eq!(completions(&got), 0, "GET {params}: {got:?}");
    }
    // Shown in another session of the same caller: not this one's.
    let other = initialize(&c, &u).await;
    let got = call(&c, &u, &other, "", Some(r#"{"elicitationId":"e-shown"}"#)).await;
    assert_eq!(completions(&got), 0, "{got:?}");
    let metrics = metrics(&gw).await;
    assert!(
        metrics.contains("portcullis_upstream_errors_total{reason=\"upstream_protocol_violation\",upstream=\"test\"}"),
        "counted: {metrics}"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn no_elicitation_completes_on_a_2026_stream() {
    let up = ScriptedUpstream::start(upstream).await;
    let gw = gateway(&up).await;
    let c = client();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}}});
    for (method, params) in [
        (
            "subscriptions/listen",
            json!({"_meta": meta, "notifications": {}}),
        ),
        (
            "tools/call",
            json!({"_meta": meta, "name": "pay", "arguments": {}}),
        ),
    ] {
        for complete in [r#"{"elicitationId":"e-shown"}"#, r#"{"elicitationId":"x"}"#] {
            let mut r = c
                .post(url(&gw))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", VERSION)
                .header("mcp-method", method)
                .header("x-complete", complete)
                .body(
                    json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": params})
                        .to_string(),
                );
            if method == "tools/call" {
                r = r.header("mcp-name", "pay");
            }
            let got = events(&r.send().await.unwrap().text().await.unwrap());
            assert_eq!(completions(&got), 0, "{method}: {got:?}");
            assert!(
                refused_with(&got, "upstream_protocol_violation"),
                "{method}: {got:?}"
            );
        }
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn a_secret_in_an_answer_to_pushed_sampling_is_refused() {
    let up = ScriptedUpstream::start(upstream).await;
    let gw = gateway(&up).await;
    let (c, u) = (client(), url(&gw));
    let session = initialize(&c, &u).await;
    // Built at run time: no well-formed token sits in the source.
    let token: String = format!(
        "ghp_{}",
        (0..36)
            .map(|i| b"aB3dE5fG7hJ9kLmN2pQ4rS6tU8vW0xYz1Ac"[(i * 7) % 35] as char)
            .collect::<String>()
    );
    let carriers = [
        json!({"type": "text", "text": format!("Booked. Token: {token}")}),
        json!([{"type": "text", "text": "ok"}, {"type": "text", "text": "4111 1111 1111 1111"}]),
        json!([{"type": "tool_use", "id": "t", "name": "w", "input": {"auth": token}}]),
        json!([{"type": "tool_result", "toolUseId": "t", "content": [{"type": "text", "text": token}]}]),
    ];
    for content in carriers {
        let stream = call(&c, &u, &session, "sampling", None).await;
        let push = stream
            .iter()
            .find(|m| m["method"] == "sampling/createMessage")
            .expect("pushed");
        let token_id = push["id"].as_str().unwrap().to_owned();
        let before = up.requests().len();
        let answer = json!({"jsonrpc": "2.0", "id": token_id,
            "result": {"role": "assistant", "model": "m", "content": content}});
        let resp = post(&c, &u, Some(&session), answer).send().await.unwrap();
        let v = json_of(resp).await;
        assert_eq!(v["error"]["data"]["reason"], "secret_in_answer", "{v}");
        assert!(!v.to_string().contains(&token) && !v.to_string().contains("4111"));
        assert_eq!(up.requests().len(), before, "nothing forwarded");
    }
    // An ordinary answer goes upstream.
    let stream = call(&c, &u, &session, "sampling", None).await;
    let push = stream
        .iter()
        .find(|m| m["method"] == "sampling/createMessage")
        .unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": push["id"],
        "result": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "Room 4, Friday"}}});
    let resp = post(&c, &u, Some(&session), answer).send().await.unwrap();
    assert_eq!(resp.status(), 202);
    let forwarded: Value = serde_json::from_slice(&up.requests().pop().unwrap().body).unwrap();
    assert_eq!(forwarded["id"], "88");
    gw.shutdown().await;
}

#[tokio::test]
async fn delete_ends_the_gateways_own_session() {
    let up = ScriptedUpstream::start(upstream).await;
    let gw = gateway(&up).await;
    let (c, u) = (client(), url(&gw));
    let session = initialize(&c, &u).await;
    // A question delivered before the end, answered after it.
    let stream = call(&c, &u, &session, "sampling", None).await;
    let pushed = stream
        .iter()
        .find(|m| m["method"] == "sampling/createMessage")
        .unwrap()
        .clone();
    // A stream of server messages opened before the end, pushing after it.
    let listening = c
        .get(&u)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY)
        .header("x-script", "late-push")
        .send()
        .await
        .unwrap();
    assert_eq!(listening.status(), 200);
    let resp = c
        .delete(&u)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let forwarded = up.requests().len();

    // Every use of the ended id is refused: a request, a notification, the
    // answer to the earlier question, a new stream, another DELETE.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let note = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    let answer = json!({"jsonrpc": "2.0", "id": pushed["id"],
        "result": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "ok"}}});
    for body in [list, note, answer] {
        let resp = post(&c, &u, Some(&session), body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{body}");
        assert_eq!(
            json_of(resp).await["error"]["data"]["reason"],
            "session_expired",
            "{body}"
        );
    }
    let get = c
        .get(&u)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 404);
    let again = c
        .delete(&u)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
    assert_eq!(
        up.requests().len(),
        forwarded,
        "none of it reached the upstream"
    );

    // The push on the stream opened before: withheld, and the upstream got
    // the gateway's own answer in its session.
    let got = events(&listening.text().await.unwrap());
    assert!(
        got.iter().all(|m| m["method"] != "elicitation/create"),
        "{got:?}"
    );
    let mut answered = None;
    for _ in 0..100 {
        answered = up
            .requests()
            .into_iter()
            .find(|r| serde_json::from_slice::<Value>(&r.body).is_ok_and(|v| v["id"] == "late-1"));
        if answered.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answered = answered.expect("the upstream's late push was answered");
    let v: Value = serde_json::from_slice(&answered.body).unwrap();
    assert_eq!(v["error"]["data"]["reason"], "session_expired");

    // Another session of the same caller is untouched.
    let fresh = initialize(&c, &u).await;
    let resp = post(
        &c,
        &u,
        Some(&fresh),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    gw.shutdown().await;
}

#[tokio::test]
async fn a_refused_delete_leaves_the_session_open() {
    // An upstream that does not let clients end sessions (405).
    let up = ScriptedUpstream::start(|req: &Received| {
        if req.head.starts_with("DELETE") {
            return vec![Step::Write(
                b"HTTP/1.1 405 Method Not Allowed\r\nallow: GET, POST\r\ncontent-length: 0\r\n\r\n"
                    .to_vec(),
            )];
        }
        upstream(req)
    })
    .await;
    let gw = gateway(&up).await;
    let (c, u) = (client(), url(&gw));
    let session = initialize(&c, &u).await;
    let resp = c
        .delete(&u)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    let resp = post(
        &c,
        &u,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200, "the session goes on");
    gw.shutdown().await;
}

#[tokio::test]
async fn every_instance_sharing_the_store_sees_the_session_end_and_what_it_was_shown() {
    if !crate::throttle_redis::redis_installed() {
        return;
    }
    let redis = TcpRedis::start().await;
    let up = ScriptedUpstream::start(upstream).await;
    let keys = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(keys.path(), portcullis::mrtr::seal::new_key_line("shared")).unwrap();
    let shared = format!(
        "[state]\nkeys_file = \"{}\"\nsingle_use_backend = \"redis\"\nredis_url = \"{}\"\n",
        keys.path().display(),
        redis.url()
    );
    let a = start_gateway(&config_text(&up.url(), "", &shared)).await;
    let b = start_gateway(&config_text(&up.url(), "", &shared)).await;
    let (c, ua, ub) = (client(), url(&a), url(&b));
    let session = initialize(&c, &ua).await;
    // Shown through one instance, completed through the other.
    let shown = call(&c, &ua, &session, "url", None).await;
    assert_eq!(shown[0]["params"]["elicitationId"], "e-shown", "{shown:?}");
    let (status, got) = listen(&c, &ub, &session, r#"{"elicitationId":"e-shown"}"#).await;
    assert_eq!((status, completions(&got)), (200, 1), "{got:?}");
    let got = call(
        &c,
        &ub,
        &session,
        "",
        Some(r#"{"elicitationId":"e-other"}"#),
    )
    .await;
    assert!(refused_with(&got, "upstream_protocol_violation"), "{got:?}");
    // Ended through one instance, refused by the other.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let resp = post(&c, &ub, Some(&session), list.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = c
        .delete(&ua)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = post(&c, &ub, Some(&session), list).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(
        json_of(resp).await["error"]["data"]["reason"],
        "session_expired"
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// A `redis-server` on a free loopback TCP port (the single-use store takes a
/// `redis://` URL), killed on drop.
struct TcpRedis {
    port: u16,
    child: std::process::Child,
}

impl TcpRedis {
    async fn start() -> TcpRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let redis = TcpRedis { port, child };
        for _ in 0..500 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return redis;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("redis-server did not come up");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for TcpRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
