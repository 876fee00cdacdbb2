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
fn dead_address() -> (std::net::SocketAddr, tokio::net::TcpSocket) {
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
