//! Every failure the gateway sees is a metric: an upstream's own 4xx, a
//! Redis that is not there (each of its three users), audit lines that
//! cannot be written — provoked for real through a gateway on loopback and
//! read back from its /metrics page.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

/// The value of the series whose line starts with `series` (name and
/// labels as the text format writes them, labels sorted), 0 when absent.
fn value(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// /metrics, once `series` has reached `at_least` (the writer thread and
/// Redis probes count after the response), or after 10 s.
async fn metrics_when(
    gw: &portcullis::server::RunningGateway,
    series: &str,
    at_least: f64,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = metrics(gw).await;
        if value(&m, series) >= at_least || Instant::now() > deadline {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An address where nothing answers: bound and held, never listening.
pub(crate) fn dead_address() -> (std::net::SocketAddr, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    (addr, socket)
}

/// The README promises that `portcullis_upstream_errors_total` counts the
/// upstream's own refusals; each status and body shape an upstream can
/// answer with is counted once, under `upstream_refused`.
#[tokio::test]
async fn an_upstreams_own_4xx_is_an_upstream_error() {
    const STATUSES: &[&str] = &[
        "400 Bad Request",
        "401 Unauthorized",
        "403 Forbidden",
        "404 Not Found",
        "421 Misdirected Request",
        "429 Too Many Requests",
    ];
    const BODIES: &[(&str, &str)] = &[
        ("application/json", r#"{"error":"no"}"#),
        ("application/json", ""),
        ("text/html", "<h1>No</h1>"),
        ("text/event-stream", "event: message\ndata: {}\n\n"),
    ];
    let up = ScriptedUpstream::start(|req| {
        let v: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let n = v["params"]["arguments"]["n"].as_u64().unwrap_or(0) as usize;
        let status = STATUSES[n % STATUSES.len()];
        let (content_type, body) = BODIES[n / STATUSES.len() % BODIES.len()];
        vec![http_response(status, content_type, body)]
    })
    .await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let c = client();
    let total = STATUSES.len() * BODIES.len();
    for n in 0..total {
        let resp = call(&c, &url(&gw), &format!("r{n}"), "t", json!({"n": n}))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_client_error(), "{n}: {}", resp.status());
        let v = json_of(resp).await;
        assert_eq!(v["error"]["data"]["reason"], "upstream_refused", "{n}: {v}");
    }
    let m = metrics(&gw).await;
    let series = r#"portcullis_upstream_errors_total{reason="upstream_refused",upstream="test"}"#;
    assert_eq!(value(&m, series), total as f64, "{m}");
    gw.shutdown().await;
}

/// A server with one tool, which asks one harmless question on every call.
pub(crate) async fn asking_server() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let v: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let result = match v["method"].as_str() {
            Some("tools/list") => json!({"tools": [{"name": "book", "description": "Books a room",
                "inputSchema": {"type": "object"}}]}),
            _ => json!({"resultType": "input_required", "requestState": "upstream-state",
                "inputRequests": {"room": {"method": "elicitation/create", "params": {
                    "mode": "form", "message": "Which room?",
                    "requestedSchema": {"type": "object",
                        "properties": {"room": {"type": "string"}}}}}}}),
        };
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id_of(req), result),
        )]
    })
    .await
}

/// A question, then the retry that answers it: the gateway's state.
pub(crate) async fn ask_and_answer(c: &reqwest::Client, url: &str, n: usize) -> Value {
    let asked = json_of(
        call(c, url, &format!("q{n}"), "book", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("input_required: {asked}"))
        .to_owned();
    let mut retry: Value =
        serde_json::from_str(&call_body(&format!("a{n}"), "book", json!({}))).unwrap();
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] =
        json!({"room": {"action": "accept", "content": {"room": "nook"}}});
    let resp = call(c, url, &format!("a{n}"), "book", json!({}))
        .body(retry.to_string())
        .send()
        .await
        .unwrap();
    json_of(resp).await
}

/// A Redis that is not there: each of its users (the rate limiter, the
/// pinned listings, the single-use store) counts its failed calls and what
/// it did instead, and says it is down.
#[tokio::test]
async fn a_missing_redis_is_counted_per_backend_with_its_fallbacks() {
    let up = asking_server().await;
    let (dead, _held) = dead_address();
    let redis = format!("redis://{dead}");
    // Changed listings are allowed: a call is not held back for the pins.
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(
        policies.path().join("allow.toml"),
        "extends = \"untrusted\"\n[listing]\non_change = \"allow\"\n",
    )
    .unwrap();
    let extra = format!(
        "[policies]\ndir = \"{}\"\n\
         [rate_limits]\nbackend = \"redis\"\nredis_url = \"{redis}\"\nredis_failure = \"local\"\n\
         per_principal = {{ rate = \"100/s\", burst = 100 }}\n\
         [state]\nsingle_use_backend = \"redis\"\nredis_url = \"{redis}\"\n",
        policies.path().display()
    );
    let gw = start_gateway(&config_text(&up.url(), "policy = \"allow\"", &extra)).await;
    let c = client();
    let list = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": VERSION}}});
    let listed = c
        .post(url(&gw))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/list")
        .body(list.to_string())
        .send()
        .await
        .unwrap();
    let listed = json_of(listed).await;
    for n in 0..3 {
        let answered = ask_and_answer(&c, &url(&gw), n).await;
        assert_eq!(
            answered["error"]["data"]["reason"], "state_store_unavailable",
            "{answered}"
        );
    }
    let m = metrics(&gw).await;
    let count = |s: &str| value(&m, s);
    // The limiter tried at start (and retries each second); each request was
    // limited by this instance's own limits.
    assert!(
        count(r#"portcullis_redis_errors_total{backend="throttle",error="connect"}"#) >= 1.0,
        "{m}"
    );
    assert!(
        count(r#"portcullis_redis_fallbacks_total{backend="throttle",outcome="local"}"#) >= 7.0,
        "{m}"
    );
    assert_eq!(
        count(r#"portcullis_redis_unavailable{backend="throttle"}"#),
        1.0,
        "{m}"
    );
    // The list could not be compared with the pins: refused or delivered
    // unchecked, as `[listing] on_change` says.
    assert!(
        count(r#"portcullis_redis_errors_total{backend="listings",error="connect"}"#) >= 1.0,
        "{m}"
    );
    let listings =
        count(r#"portcullis_redis_fallbacks_total{backend="listings",outcome="refused"}"#)
            + count(r#"portcullis_redis_fallbacks_total{backend="listings",outcome="unchecked"}"#);
    assert_eq!(listings, 1.0, "{listed}\n{m}");
    assert_eq!(
        count(r#"portcullis_redis_unavailable{backend="listings"}"#),
        1.0,
        "{m}"
    );
    // Each retry was refused: its state could not be checked.
    assert!(
        count(r#"portcullis_redis_errors_total{backend="replay",error="connect"}"#) >= 3.0,
        "{m}"
    );
    assert_eq!(
        count(r#"portcullis_redis_fallbacks_total{backend="replay",outcome="refused"}"#),
        3.0,
        "{m}"
    );
    assert_eq!(
        count(r#"portcullis_redis_unavailable{backend="replay"}"#),
        1.0,
        "{m}"
    );
    gw.shutdown().await;
}

/// Without Redis nothing is reported as Redis: no series at all.
#[tokio::test]
async fn without_redis_there_are_no_redis_series() {
    let up = asking_server().await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let _ = ask_and_answer(&client(), &url(&gw), 0).await;
    let m = metrics(&gw).await;
    assert!(!m.contains("portcullis_redis_"), "{m}");
    gw.shutdown().await;
}

/// An audit file that cannot be opened: every line the gateway meant to
/// write is counted as lost, per sink and cause.
#[tokio::test]
async fn audit_lines_that_cannot_be_written_are_counted() {
    let up = asking_server().await;
    let dir = tempfile::tempdir().unwrap();
    // A link into a directory that is not there: it cannot be opened.
    let path = dir.path().join("audit.jsonl");
    std::os::unix::fs::symlink(dir.path().join("gone").join("audit.jsonl"), &path).unwrap();
    let text = config_text(&up.url(), "", "").replace(
        "[audit]\nsink = \"off\"",
        &format!("[audit]\nsink = \"file\"\npath = \"{}\"", path.display()),
    );
    let gw = start_gateway(&text).await;
    let m = metrics(&gw).await;
    let lost = r#"portcullis_audit_dropped_total{cause="write_failed",sink="file"}"#;
    assert!(
        m.contains(&format!("{lost} 0")),
        "the series starts at zero\n{m}"
    );
    let _ = ask_and_answer(&client(), &url(&gw), 0).await;
    let m = metrics_when(&gw, lost, 1.0).await;
    assert!(value(&m, lost) >= 1.0, "{m}");
    assert_eq!(
        value(
            &m,
            r#"portcullis_audit_dropped_total{cause="queue_full",sink="file"}"#
        ),
        0.0
    );
    gw.shutdown().await;
}

/// The book's metrics table: every family the registry exports (those with
/// no series yet included) has a row naming each of its labels, and every
/// row names a family that exists.
#[test]
fn the_book_lists_every_metric_with_its_labels() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/src/reference/metrics.md"
    ))
    .unwrap();
    let start = page
        .find("| metric | type | labels | meaning |")
        .expect("docs/src/reference/metrics.md has a metrics table");
    let rows: Vec<(String, String)> = page[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells.get(1)?.trim_matches('`').to_owned();
            Some((name, cells.get(3)?.to_string()))
        })
        .collect();
    let families = portcullis::pipeline::record::Metrics::new()
        .unwrap()
        .families();
    let mut problems = Vec::new();
    for f in &families {
        if f.name.starts_with("process_") {
            if !rows.iter().any(|(n, _)| n == "process_*") {
                problems.push("no process_* row".to_owned());
            }
            continue;
        }
        let Some((_, labels)) = rows.iter().find(|(n, _)| *n == f.name) else {
            problems.push(format!("{} ({}) has no row", f.name, f.help));
            continue;
        };
        for label in &f.labels {
            if !labels.contains(&format!("`{label}`")) {
                problems.push(format!("{}: label `{label}` not in its row", f.name));
            }
        }
    }
    for (name, _) in &rows {
        let known = name == "process_*" || families.iter().any(|f| &f.name == name);
        if !known {
            problems.push(format!("{name} is in the book but not registered"));
        }
    }
    assert!(families.len() > 20, "{families:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
