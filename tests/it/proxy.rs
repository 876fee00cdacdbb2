//! The proxy over real loopback HTTP: transport rules, faults of hostile
//! upstreams, streaming, cancellation, limits, admin endpoints.

use std::time::{Duration, Instant};

use crate::common::*;
use futures_util::StreamExt;
use serde_json::json;

fn ok_result(req: &Received) -> Vec<Step> {
    let body = result_json(
        &id_of(req),
        json!({"resultType": "complete", "content": [{"type": "text", "text": "hi"}]}),
    );
    vec![http_response("200 OK", "application/json", &body)]
}

async fn gateway_for(up: &ScriptedUpstream) -> portcullis::server::RunningGateway {
    start_gateway(&config_text(&up.url(), "", "")).await
}

#[tokio::test]
async fn a_json_answer_passes_byte_for_byte_with_forwarding_headers() {
    let up = ScriptedUpstream::start(|req| {
        // Odd spacing and key order must survive: the gateway never re-encodes.
        let body = format!("{{ \"result\" : {{\"resultType\":\"complete\",\"content\":[]}}, \"jsonrpc\":\"2.0\",\"id\":{} }}", id_of(req));
        vec![http_response("200 OK", "application/json", &body)]
    })
    .await;
    let gw = gateway_for(&up).await;
    let resp = call(
        &client(),
        &url(&gw),
        "a1",
        "get_room",
        json!({"room_id": "nook"}),
    )
    .header("authorization", "Bearer client-token")
    .header("mcp-param-region", "eu")
    .header("x-custom", "kept")
    .header("proxy-authorization", "Basic x")
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert_eq!(text, "{ \"result\" : {\"resultType\":\"complete\",\"content\":[]}, \"jsonrpc\":\"2.0\",\"id\":\"a1\" }");
    let got = &up.requests()[0];
    assert_eq!(
        got.body,
        call_body("a1", "get_room", json!({"room_id": "nook"})).into_bytes(),
        "body forwarded byte for byte"
    );
    assert_eq!(got.header("mcp-param-region").as_deref(), Some("eu"));
    assert_eq!(got.header("x-custom").as_deref(), Some("kept"));
    assert_eq!(
        got.header("authorization"),
        None,
        "client tokens are not passed through"
    );
    assert_eq!(got.header("proxy-authorization"), None);
    assert_eq!(got.header("x-forwarded-for").as_deref(), Some("127.0.0.1"));
    assert!(got
        .header("forwarded")
        .unwrap()
        .starts_with("for=127.0.0.1;proto=http"));
    assert_eq!(got.header("mcp-name").as_deref(), Some("get_room"));
    gw.shutdown().await;
}

#[tokio::test]
async fn notifications_get_202_from_the_upstream() {
    let up = ScriptedUpstream::start(|_| {
        vec![Step::Write(
            b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec(),
        )]
    })
    .await;
    let gw = gateway_for(&up).await;
    let resp = client()
        .post(url(&gw))
        .header("content-type", "application/json")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "notifications/cancelled")
        .body(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"7"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    assert!(resp.bytes().await.unwrap().is_empty());
    assert_eq!(up.requests().len(), 1);
    gw.shutdown().await;
}

async fn refusal(resp: reqwest::Response) -> (u16, serde_json::Value) {
    let status = resp.status().as_u16();
    (status, json_of(resp).await)
}

#[tokio::test]
async fn transport_violations_get_their_documented_errors_and_never_reach_the_upstream() {
    let up = ScriptedUpstream::start(ok_result).await;
    // A route serving 2026-07-28 only: POST, stateless.
    let text = config_text(&up.url(), "", "").replace(
        "upstream = \"test\"\n",
        "upstream = \"test\"\ngenerations = [\"2026-07-28\"]\n",
    );
    let gw = start_gateway(&text).await;
    let c = client();
    let u = url(&gw);

    // Both generations (the default) serve GET and DELETE too.
    let both = gateway_for(&up).await;
    let put = c.put(url(&both)).send().await.unwrap();
    assert_eq!(
        (put.status().as_u16(), &put.headers()["allow"]),
        (
            405,
            &"GET, POST, DELETE"
                .parse::<reqwest::header::HeaderValue>()
                .unwrap()
        )
    );
    both.shutdown().await;

    let get = c.get(&u).send().await.unwrap();
    assert_eq!(get.headers()["allow"], "POST");
    let (s, v) = refusal(get).await;
    assert_eq!(
        (s, v["error"]["data"]["reason"].as_str()),
        (405, Some("method_not_allowed"))
    );
    let (s, _) = refusal(c.delete(&u).send().await.unwrap()).await;
    assert_eq!(s, 405);

    let batch = format!("[{}]", call_body("1", "get_room", json!({})));
    let (s, v) = refusal(
        call(&c, &u, "1", "get_room", json!({}))
            .body(batch)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (
            s,
            v["error"]["code"].as_i64(),
            v["error"]["data"]["reason"].as_str()
        ),
        (400, Some(-32600), Some("batch_not_supported"))
    );

    let (s, v) = refusal(
        call_with(
            &c,
            &u,
            "1",
            "get_room",
            json!({}),
            &[("content-type", Some("text/plain"))],
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error"]["data"]["reason"].as_str()),
        (415, Some("unsupported_media_type"))
    );

    let (s, v) = refusal(
        call(&c, &u, "1", "get_room", json!({}))
            .body("{not json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (
            s,
            v["error"]["code"].as_i64(),
            v["error"]["data"]["reason"].as_str()
        ),
        (400, Some(-32700), Some("invalid_json"))
    );

    let (s, v) = refusal(
        call_with(
            &c,
            &u,
            "h1",
            "get_room",
            json!({}),
            &[("mcp-name", Some("book_room"))],
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        (
            s,
            v["error"]["code"].as_i64(),
            v["error"]["data"]["reason"].as_str()
        ),
        (400, Some(-32020), Some("header_mismatch"))
    );
    assert_eq!(v["id"], "h1", "the error answers the request's id");
    assert_eq!(v["error"]["data"]["upstream"], "Test upstream");

    let dup = call(&c, &u, "h3", "get_room", json!({})).header("mcp-name", "delete_everything");
    let (s, v) = refusal(dup.send().await.unwrap()).await;
    assert_eq!(
        (
            s,
            v["error"]["code"].as_i64(),
            v["error"]["data"]["reason"].as_str()
        ),
        (400, Some(-32020), Some("header_mismatch")),
        "a repeated Mcp-Name is refused"
    );

    let (s, v) = refusal(
        call_with(
            &c,
            &u,
            "h2",
            "get_room",
            json!({}),
            &[("mcp-method", Some("tools/list"))],
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32020)));

    let (s, v) = refusal(
        call_with(
            &c,
            &u,
            "v1",
            "get_room",
            json!({}),
            &[("mcp-protocol-version", Some("2025-06-18"))],
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        (
            s,
            v["error"]["code"].as_i64(),
            v["error"]["data"]["reason"].as_str()
        ),
        (400, Some(-32022), Some("unsupported_protocol_version"))
    );
    assert_eq!(v["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(v["error"]["data"]["requested"], "2025-06-18");

    // Refused before its body is read: the answer says the connection
    // closes, so the client's next request goes on a new one (under a
    // multi-threaded gateway the old one is cut off while the client may
    // still be writing).
    let big = "x".repeat(2 << 20);
    let resp = call(&c, &u, "1", "get_room", json!({"pad": big}))
        .send()
        .await
        .unwrap();
    let closes = resp
        .headers()
        .get("connection")
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    let (s, v) = refusal(resp).await;
    assert_eq!(
        (s, v["error"]["data"]["reason"].as_str(), closes.as_deref()),
        (413, Some("body_too_large"), Some("close"))
    );

    let (s, v) = refusal(
        call(
            &c,
            &format!("http://{}/elsewhere", gw.addrs[0]),
            "1",
            "get_room",
            json!({}),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error"]["data"]["reason"].as_str()),
        (404, Some("route_not_found"))
    );

    assert!(
        up.requests().is_empty(),
        "nothing refused reached the upstream"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn origin_allowlist_refuses_other_origins() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = start_gateway(&config_text(
        &up.url(),
        "",
        "[security]\nallowed_origins = [\"https://app.example.com\"]",
    ))
    .await;
    let c = client();
    let (s, v) = refusal(
        call(&c, &url(&gw), "1", "get_room", json!({}))
            .header("origin", "https://evil.example")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error"]["data"]["reason"].as_str()),
        (403, Some("origin_not_allowed"))
    );
    let ok = call(&c, &url(&gw), "2", "get_room", json!({}))
        .header("origin", "https://app.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let no_origin = call(&c, &url(&gw), "3", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        no_origin.status(),
        200,
        "non-browser clients send no Origin"
    );
    assert_eq!(up.requests().len(), 2);
    gw.shutdown().await;
}

async fn expect_upstream_error(
    script: impl Fn(&Received) -> Vec<Step> + Send + Sync + 'static,
    status: u16,
    reason: &str,
) {
    let up = ScriptedUpstream::start(script).await;
    let gw = gateway_for(&up).await;
    let c = client();
    let started = Instant::now();
    let (s, v) = refusal(
        call(&c, &url(&gw), "f1", "get_room", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error"]["data"]["reason"].as_str()),
        (status, Some(reason)),
        "{v}"
    );
    assert_eq!(v["id"], "f1");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The gateway keeps serving: a healthy upstream on the next request works.
    let good = ScriptedUpstream::start(ok_result).await;
    let gw2 = gateway_for(&good).await;
    assert_eq!(
        call(&c, &url(&gw2), "f2", "get_room", json!({}))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // And the same gateway still answers (with the same error) rather than hanging.
    let (s2, _) = refusal(
        call(&c, &url(&gw), "f3", "get_room", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s2, status);
    gw.shutdown().await;
    gw2.shutdown().await;
}

#[tokio::test]
async fn upstream_down_is_upstream_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let gw = start_gateway(&config_text(&dead, "", "")).await;
    let (s, v) = refusal(
        call(&client(), &url(&gw), "d1", "get_room", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (
            s,
            v["error"]["code"].as_i64(),
            v["error"]["data"]["reason"].as_str()
        ),
        (502, Some(-32001), Some("upstream_unreachable"))
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn upstream_too_slow_is_upstream_timeout() {
    expect_upstream_error(
        |_| vec![Step::Sleep(Duration::from_secs(4))],
        504,
        "upstream_timeout",
    )
    .await;
}

#[tokio::test]
async fn upstream_closing_mid_body_is_connection_closed() {
    expect_upstream_error(
        |_| vec![Step::Write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{\"jsonrpc\":\"2.0\",".to_vec()), Step::Close],
        502,
        "upstream_connection_closed",
    )
    .await;
}

#[tokio::test]
async fn upstream_closing_before_answering_is_connection_closed() {
    expect_upstream_error(|_| vec![Step::Close], 502, "upstream_connection_closed").await;
}

#[tokio::test]
async fn upstream_invalid_json_is_bad_response() {
    expect_upstream_error(
        |_| {
            vec![http_response(
                "200 OK",
                "application/json",
                "{\"jsonrpc\":\"2.0\",\"id\":",
            )]
        },
        502,
        "upstream_bad_response",
    )
    .await;
}

#[tokio::test]
async fn upstream_html_error_page_is_bad_response_with_its_status() {
    let up = ScriptedUpstream::start(|_| {
        vec![http_response(
            "500 Internal Server Error",
            "text/html",
            "<html><body>oops</body></html>",
        )]
    })
    .await;
    let gw = gateway_for(&up).await;
    let (s, v) = refusal(
        call(&client(), &url(&gw), "e1", "get_room", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error"]["data"]["reason"].as_str()),
        (502, Some("upstream_bad_response"))
    );
    assert_eq!(v["error"]["data"]["upstreamStatus"], 500);
    gw.shutdown().await;
}

#[tokio::test]
async fn upstream_json_rpc_errors_pass_through_with_their_status() {
    let up = ScriptedUpstream::start(|req| {
        let body = json!({"jsonrpc":"2.0","id": serde_json::from_str::<serde_json::Value>(&id_of(req)).unwrap(),"error":{"code":-32602,"message":"Unknown tool"}}).to_string();
        vec![http_response("400 Bad Request", "application/json", &body)]
    })
    .await;
    let gw = gateway_for(&up).await;
    let (s, v) = refusal(
        call(&client(), &url(&gw), "u1", "nope", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32602)));
    gw.shutdown().await;
}

#[tokio::test]
async fn upstream_answer_for_another_id_is_a_protocol_violation() {
    expect_upstream_error(
        |_| {
            vec![http_response(
                "200 OK",
                "application/json",
                r#"{"jsonrpc":"2.0","id":"someone-else","result":{}}"#,
            )]
        },
        502,
        "upstream_protocol_violation",
    )
    .await;
}

#[tokio::test]
async fn an_oversized_upstream_answer_is_refused_not_truncated() {
    let up = ScriptedUpstream::start(|req| {
        let text = "y".repeat(300_000);
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(
                &id_of(req),
                json!({"resultType":"complete","content":[{"type":"text","text":text}]}),
            ),
        )]
    })
    .await;
    let gw = start_gateway(&config_text(
        &up.url(),
        "",
        "[limits]\nmax_response_body_bytes = 100000",
    ))
    .await;
    let (s, v) = refusal(
        call(&client(), &url(&gw), "big", "get_room", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error"]["data"]["reason"].as_str()),
        (502, Some("upstream_response_too_large"))
    );
    gw.shutdown().await;
}

fn progress(id_token: &str, i: u32) -> String {
    json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken": id_token, "progress": i, "total": 3}}).to_string()
}

/// Reads an SSE response, returning (arrival time since `t0`, data) per event.
async fn read_events(resp: reqwest::Response, t0: Instant) -> Vec<(Duration, String)> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if !data.is_empty() {
                out.push((t0.elapsed(), data.join("\n")));
            }
        }
    }
    out
}

#[tokio::test]
async fn progress_events_reach_the_client_as_the_upstream_sends_them() {
    let up = ScriptedUpstream::start(|req| {
        let id = id_of(req);
        let mut steps = vec![sse_head()];
        for i in 1..=3 {
            steps.push(sse_event(&progress("progress-s1", i)));
            steps.push(Step::Sleep(Duration::from_millis(400)));
        }
        steps.push(sse_event(&result_json(
            &id,
            json!({"resultType":"complete","content":[]}),
        )));
        steps.push(sse_end());
        steps
    })
    .await;
    let gw = gateway_for(&up).await;
    let t0 = Instant::now();
    let resp = call(&client(), &url(&gw), "s1", "room_report", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["x-accel-buffering"], "no");
    let events = read_events(resp, t0).await;
    assert_eq!(events.len(), 4, "{events:?}");
    // Each progress event arrives when it was sent: the upstream spaces them
    // 400 ms apart, so a buffering proxy would deliver them together with the
    // final response. Judged by the gaps, which a loaded machine cannot fake.
    let gap = |a: usize, b: usize| events[b].0.saturating_sub(events[a].0);
    assert!(
        gap(0, 3) >= Duration::from_millis(1000),
        "first progress only {:?} before the final response",
        gap(0, 3)
    );
    assert!(
        gap(0, 1) >= Duration::from_millis(250),
        "progress events bunched: {:?}",
        gap(0, 1)
    );
    assert!(
        gap(1, 2) >= Duration::from_millis(250),
        "progress events bunched: {:?}",
        gap(1, 2)
    );
    assert!(events[0].1.contains("notifications/progress"));
    let last: serde_json::Value = serde_json::from_str(&events[3].1).unwrap();
    assert_eq!(last["id"], "s1");
    gw.shutdown().await;
}

#[tokio::test]
async fn dropping_the_client_cancels_the_upstream_stream() {
    let up = ScriptedUpstream::start(|_| {
        let mut steps = vec![sse_head()];
        for i in 1..=40 {
            steps.push(sse_event(&progress("p", i)));
            steps.push(Step::Sleep(Duration::from_millis(100)));
        }
        steps
    })
    .await;
    let gw = start_gateway(&config_text(&up.url(), "", "").replace(
        "stream_idle_timeout = \"2s\"",
        "stream_idle_timeout = \"30s\"",
    ))
    .await;
    let resp = call(&client(), &url(&gw), "c1", "room_report", json!({}))
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("notifications/progress"));
    drop(stream);
    // The upstream sees its connection go away within a couple of events.
    let deadline = Instant::now() + Duration::from_secs(3);
    while up.cancelled() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(up.cancelled(), 1, "upstream stream was not cancelled");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_server_to_client_request_on_the_stream_is_refused() {
    let up = ScriptedUpstream::start(|_| {
        vec![
            sse_head(),
            sse_event(&progress("p", 1)),
            sse_event(r#"{"jsonrpc":"2.0","id":99,"method":"elicitation/create","params":{"message":"password?","requestedSchema":{"type":"object","properties":{}}}}"#),
            sse_end(),
        ]
    })
    .await;
    let gw = gateway_for(&up).await;
    let events = read_events(
        call(&client(), &url(&gw), "r1", "room_report", json!({}))
            .send()
            .await
            .unwrap(),
        Instant::now(),
    )
    .await;
    assert_eq!(events.len(), 2, "{events:?}");
    let err: serde_json::Value = serde_json::from_str(&events[1].1).unwrap();
    assert_eq!(err["id"], "r1");
    assert_eq!(
        err["error"]["data"]["reason"],
        "upstream_protocol_violation"
    );
    assert!(
        !events.iter().any(|e| e.1.contains("password")),
        "the smuggled request never reaches the client"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn a_stream_that_ends_without_a_response_gets_an_error_event() {
    let up = ScriptedUpstream::start(|_| vec![sse_head(), sse_event(&progress("p", 1)), sse_end()])
        .await;
    let gw = gateway_for(&up).await;
    let events = read_events(
        call(&client(), &url(&gw), "n1", "room_report", json!({}))
            .send()
            .await
            .unwrap(),
        Instant::now(),
    )
    .await;
    let err: serde_json::Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(err["error"]["data"]["reason"], "upstream_bad_response");
    assert_eq!(err["id"], "n1");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_stream_cut_mid_event_gets_an_error_event() {
    let up = ScriptedUpstream::start(|_| {
        vec![
            sse_head(),
            sse_event(&progress("p", 1)),
            Step::Write(chunk("data: {\"jsonrpc\":")),
            Step::Close,
        ]
    })
    .await;
    let gw = gateway_for(&up).await;
    let events = read_events(
        call(&client(), &url(&gw), "m1", "room_report", json!({}))
            .send()
            .await
            .unwrap(),
        Instant::now(),
    )
    .await;
    let err: serde_json::Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(err["error"]["data"]["reason"], "upstream_connection_closed");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_silent_stream_times_out_with_an_error_event() {
    let up = ScriptedUpstream::start(|_| {
        vec![
            sse_head(),
            sse_event(&progress("p", 1)),
            Step::Sleep(Duration::from_secs(10)),
        ]
    })
    .await;
    let gw = start_gateway(&config_text(&up.url(), "", "").replace(
        "stream_idle_timeout = \"2s\"",
        "stream_idle_timeout = \"500ms\"",
    ))
    .await;
    let t0 = Instant::now();
    let events = read_events(
        call(&client(), &url(&gw), "t1", "room_report", json!({}))
            .send()
            .await
            .unwrap(),
        t0,
    )
    .await;
    let err: serde_json::Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(err["error"]["data"]["reason"], "upstream_timeout");
    assert!(t0.elapsed() < Duration::from_secs(3));
    gw.shutdown().await;
}

#[tokio::test]
async fn admin_endpoints_report_health_readiness_and_metrics() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = gateway_for(&up).await;
    let c = client();
    call(&c, &url(&gw), "1", "get_room", json!({}))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    call_with(
        &c,
        &url(&gw),
        "2",
        "get_room",
        json!({}),
        &[("mcp-name", Some("x"))],
    )
    .send()
    .await
    .unwrap()
    .bytes()
    .await
    .unwrap();
    let admin = gw.admin_addr.unwrap();
    assert_eq!(
        c.get(format!("http://{admin}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        c.get(format!("http://{admin}/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let metrics = c
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            r#"portcullis_requests_total{method="tools/call",outcome="ok",upstream="test"} 1"#
        ),
        "{metrics}"
    );
    assert!(metrics.contains(r#"portcullis_requests_total{method="tools/call",outcome="header_mismatch",upstream="test"} 1"#), "{metrics}");
    assert!(metrics.contains("portcullis_upstream_duration_seconds_bucket"));
    assert!(metrics.contains(
        "portcullis_request_duration_seconds_count{stream=\"false\",upstream=\"test\"} 2"
    ));
    gw.shutdown().await;
}

#[tokio::test]
async fn a_slow_header_client_is_disconnected() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = start_gateway(&config_text(
        &up.url(),
        "",
        "[limits]\nheader_read_timeout = \"300ms\"",
    ))
    .await;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(gw.addrs[0]).await.unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let t0 = Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "connection still open after 3 s");
    assert!(t0.elapsed() < Duration::from_secs(2));
    gw.shutdown().await;
}

#[tokio::test]
async fn shutdown_drains_in_flight_requests() {
    let up = ScriptedUpstream::start(|req| {
        let mut s = vec![Step::Sleep(Duration::from_millis(800))];
        s.extend(ok_result(req));
        s
    })
    .await;
    let gw = gateway_for(&up).await;
    let u = url(&gw);
    let admin = gw.admin_addr.unwrap();
    let c = client();
    let in_flight = tokio::spawn({
        let c = c.clone();
        let u = u.clone();
        async move {
            call(&c, &u, "slow", "get_room", json!({}))
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stopping = tokio::spawn(gw.shutdown());
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Not ready any more, and no new connections accepted.
    let fresh = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let readyz = fresh
        .get(format!("http://{admin}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(readyz.status(), 503, "readiness reports the drain");
    assert!(
        fresh.post(&u).body("{}").send().await.is_err(),
        "a new connection was accepted while draining"
    );
    assert_eq!(
        in_flight.await.unwrap(),
        200,
        "the in-flight request completed"
    );
    stopping.await.unwrap();
}

#[tokio::test]
async fn http2_clients_are_served() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = gateway_for(&up).await;
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let resp = call(&h2, &url(&gw), "h2", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_2);
    assert_eq!(json_of(resp).await["id"], "h2");
    gw.shutdown().await;
}

#[tokio::test]
async fn every_response_carries_a_request_id_that_the_upstream_also_sees() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = gateway_for(&up).await;
    let c = client();
    let resp = call(&c, &url(&gw), "q1", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    let id = resp.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(!id.is_empty());
    assert_eq!(
        up.requests()[0].header("x-request-id").as_deref(),
        Some(id.as_str())
    );
    let given = call(&c, &url(&gw), "q2", "get_room", json!({}))
        .header("x-request-id", "trace-abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(
        given.headers()["x-request-id"],
        "trace-abc-123",
        "a sane incoming id is kept"
    );
    let refused = c.get(url(&gw)).send().await.unwrap();
    assert!(
        refused.headers().contains_key("x-request-id"),
        "refusals carry one too"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn promtool_accepts_the_metrics_exposition() {
    let Ok(out) = std::process::Command::new("promtool")
        .arg("--version")
        .output()
    else {
        assert!(
            std::env::var_os("PORTCULLIS_REQUIRE_PEERS").is_none(),
            "promtool is required (PORTCULLIS_REQUIRE_PEERS is set)"
        );
        eprintln!("skipped: promtool not installed");
        return;
    };
    assert!(out.status.success());
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = gateway_for(&up).await;
    let c = client();
    call(&c, &url(&gw), "m1", "get_room", json!({}))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    call_with(
        &c,
        &url(&gw),
        "m2",
        "get_room",
        json!({}),
        &[("mcp-name", Some("x"))],
    )
    .send()
    .await
    .unwrap()
    .bytes()
    .await
    .unwrap();
    let metrics = metrics(&gw).await;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let result = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
    assert!(
        result.status.success() && report.trim().is_empty(),
        "promtool check metrics: {report}"
    );
    gw.shutdown().await;
}

/// The upstream's connections are kept and used again across JSON answers,
/// event streams read to their final message, and empty 202s: a new
/// connection per request would double the kernel's work per request.
#[tokio::test]
async fn upstream_connections_are_used_again_across_json_streams_and_202s() {
    let up = ScriptedUpstream::start(|req| {
        let body = String::from_utf8_lossy(&req.body);
        if body.contains("notifications/") {
            return vec![Step::Write(
                b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec(),
            )];
        }
        let id = id_of(req);
        let done = result_json(&id, json!({"content": [{"type": "text", "text": "done"}]}));
        if body.contains("\"stream\"") {
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": format!("progress-{id}"), "progress": 1}});
            return vec![
                sse_head(),
                sse_event(&progress.to_string()),
                sse_event(&done),
                sse_end(),
            ];
        }
        vec![http_response("200 OK", "application/json", &done)]
    })
    .await;
    let gw = gateway_for(&up).await;
    let c = client();
    for n in 0..6 {
        let tool = if n % 2 == 0 { "stream" } else { "plain" };
        let resp = call(&c, &url(&gw), &format!("r{n}"), tool, json!({}))
            .send()
            .await
            .expect("answer");
        assert_eq!(resp.status(), 200);
        let text = resp.text().await.expect("body");
        assert!(text.contains("done"), "{text}");
        // A stream's end follows its final message: the connection goes
        // back once it has arrived (read in the background).
        tokio::time::sleep(Duration::from_millis(100)).await;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "x"}});
        let resp = c
            .post(url(&gw))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", VERSION)
            .header("mcp-method", "notifications/cancelled")
            .body(note.to_string())
            .send()
            .await
            .expect("answer");
        assert_eq!(resp.status(), 202, "{:?}", resp.text().await);
    }
    assert_eq!(up.requests().len(), 12);
    assert_eq!(up.connections(), 1, "one connection, kept");
}
