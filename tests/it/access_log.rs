//! `[log] access = true`: one line per request from the record exit, with
//! method, target, upstream, status, reason, duration and request id, and
//! never a value a person typed into a form.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_portcullis");
/// What the person types into the form: it must never be logged.
const TYPED: &str = "Zebra-Quartz-4711";

/// The gateway binary with `[log]` as given; its stderr lines arrive on the
/// channel. Returns the child and its data-plane address.
fn start(
    dir: &std::path::Path,
    upstream: &str,
    log: &str,
) -> (std::process::Child, mpsc::Receiver<String>, String) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let path = dir.join("gw.toml");
    std::fs::write(
        &path,
        format!(
            "[[listener]]\naddress = \"127.0.0.1:{port}\"\n[log]\nformat = \"json\"\n{log}\n\
             [[upstream]]\nid = \"asks\"\nname = \"Asks\"\nurl = \"{upstream}\"\n\
             [[route]]\npath = \"/mcp\"\nupstream = \"asks\"\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&path)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let listening = rx.iter().take(50).any(|l| l.contains("listening"));
    assert!(listening, "the gateway started");
    (child, rx, format!("http://127.0.0.1:{port}/mcp"))
}

/// Every line until `n` access lines arrived (or 10 s passed).
fn access_lines(rx: &mpsc::Receiver<String>, n: usize, all: &mut Vec<String>) -> Vec<Value> {
    let mut access = Vec::new();
    while access.len() < n {
        let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) else {
            panic!(
                "{} of {n} access lines; the log:\n{}",
                access.len(),
                all.join("\n")
            );
        };
        all.push(line.clone());
        let v: Value = serde_json::from_str(&line).unwrap_or_default();
        if v["target"] == "portcullis::access" {
            access.push(v["fields"].clone());
        }
    }
    access
}

#[tokio::test]
async fn one_access_line_per_request_with_names_and_numbers_only() {
    let up = always_asking("q", "Your name?", json!({"name": {"type": "string"}})).await;
    let dir = tempfile::tempdir().unwrap();
    let (mut gw, rx, url) = start(dir.path(), &up.url(), "access = true");
    let c = client();

    let first = json_of(
        call(&c, &url, "a1", "book_room", json!({"day": "monday"}))
            .header("x-request-id", "req-first")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let mut retry: Value =
        serde_json::from_str(&call_body("a2", "book_room", json!({"day": "monday"}))).unwrap();
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] =
        json!({"q": {"action": "accept", "content": {"name": TYPED}}});
    let answered = call(&c, &url, "a2", "book_room", json!({}))
        .body(retry.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    let _ = answered.bytes().await;
    // Headers that disagree with the body: refused before the upstream.
    let refused = call_with(
        &c,
        &url,
        "a3",
        "book_room",
        json!({}),
        &[("mcp-name", Some("other_tool"))],
    )
    .send()
    .await
    .unwrap();
    assert_eq!(refused.status(), 400);

    let mut all = Vec::new();
    let lines = access_lines(&rx, 3, &mut all);
    let _ = gw.kill();
    let _ = gw.wait();
    while let Ok(l) = rx.try_recv() {
        all.push(l);
    }

    let first = &lines[0];
    assert_eq!(first["request_id"], "req-first", "{first}");
    assert_eq!(first["method"], "tools/call");
    assert_eq!(first["target"], "book_room");
    assert_eq!(first["upstream"], "asks");
    assert_eq!(first["status"], 200);
    assert_eq!(first["reason"], "ok");
    assert!(
        first["duration_ms"].as_f64().is_some_and(|d| d > 0.0),
        "{first}"
    );
    assert_eq!(lines[1]["status"], 200);
    assert!(
        lines[1]["request_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "the gateway's own request id: {}",
        lines[1]
    );
    assert_eq!(lines[2]["status"], 400);
    assert_eq!(lines[2]["reason"], "header_mismatch");
    let log = all.join("\n");
    assert!(
        !log.contains(TYPED),
        "a typed value reached the log:\n{log}"
    );
    assert!(
        !log.contains("monday"),
        "an argument reached the log:\n{log}"
    );
}

#[tokio::test]
async fn no_access_lines_unless_asked_for() {
    let up = always_asking("q", "Your name?", json!({"name": {"type": "string"}})).await;
    let dir = tempfile::tempdir().unwrap();
    let (mut gw, rx, url) = start(dir.path(), &up.url(), "");
    let r = call(&client(), &url, "b1", "book_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let _ = r.bytes().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = gw.kill();
    let _ = gw.wait();
    let access: Vec<String> = rx
        .try_iter()
        .filter(|l| l.contains("portcullis::access"))
        .collect();
    assert!(access.is_empty(), "{access:?}");
}
