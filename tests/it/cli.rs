//! The `portcullis` binary: check, run with graceful SIGTERM drain, demo.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_portcullis");

/// The one port a test still picks before a process binds it: `portcullis
/// demo` starts its example server on `--upstream` and its config must
/// name that address before it starts (every other listener is port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_ready(admin: u16) {
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(r) = c
            .get(format!("http://127.0.0.1:{admin}/readyz"))
            .send()
            .await
        {
            if r.status() == 200 {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("gateway not ready on admin port {admin}");
}

/// A gateway config whose listener and admin ports the OS picks (the
/// test reads them from the log), routing to the demo server at `upstream`.
fn gateway_config(dir: &std::path::Path, upstream: SocketAddr) -> std::path::PathBuf {
    gateway_config_with(dir, "gateway.toml", upstream, "")
}

fn gateway_config_with(
    dir: &std::path::Path,
    file: &str,
    upstream: SocketAddr,
    extra: &str,
) -> std::path::PathBuf {
    let text = format!(
        "[[listener]]\naddress = \"127.0.0.1:0\"\n[admin]\naddress = \"127.0.0.1:0\"\n[shutdown]\ndrain_timeout = \"10s\"\n\
         [[upstream]]\nid = \"rooms\"\nname = \"Rooms\"\nurl = \"http://{upstream}/mcp\"\n[[route]]\npath = \"/mcp/rooms\"\nupstream = \"rooms\"\n{extra}"
    );
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path
}

/// `portcullis demo-upstream` on a port the OS picks; its address.
async fn demo_upstream(dir: &std::path::Path) -> (Killed, SocketAddr) {
    let (stderr, log) = log_file(dir, "demo-upstream.log");
    let child = Killed(
        Command::new(BIN)
            .args(["demo-upstream", "--listen", "127.0.0.1:0"])
            .stderr(stderr)
            .spawn()
            .unwrap(),
    );
    let bound = bound_from_log(&log, 1, false).await;
    (child, bound.listeners[0])
}

/// `portcullis run --config cfg`; where it listens, once it is ready.
async fn run_gateway(dir: &std::path::Path, name: &str, cfg: &std::path::Path) -> (Killed, Bound) {
    let (stderr, log) = log_file(dir, &format!("{name}.log"));
    let child = Killed(
        Command::new(BIN)
            .args(["run", "--config"])
            .arg(cfg)
            .stderr(stderr)
            .spawn()
            .unwrap(),
    );
    let bound = bound_from_log(&log, 1, true).await;
    wait_ready(bound.admin.expect("admin").port()).await;
    (child, bound)
}

#[test]
fn check_accepts_the_shipped_configs() {
    let out = Command::new(BIN)
        .args(["check", "--config", "config/demo.toml"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("ok (1 listener(s), 1 upstream(s), 1 route(s))"));
}

#[test]
fn check_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[[listener]]\naddress = \"127.0.0.1:1\"\n\n[[upstream]]\nid = \"a\"\nname = \"A\"\nurl = \"http://127.0.0.1:2/mcp\"\ntimeout = \"5s\"\n").unwrap();
    let out = Command::new(BIN)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:8:1", path.display())), "{err}");
    assert!(err.contains("unknown key `timeout`"), "{err}");

    let missing = Command::new(BIN)
        .args(["check", "--config", "/nonexistent.toml"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read"));
}

/// `check --baseline`: what a CI review of a config change runs. Each
/// weakened control on its own line, exit 1; an honest change (reordered,
/// strengthened) exit 0; a broken baseline exit 2.
#[test]
fn check_against_a_baseline_names_each_weakened_control() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, upstream: &str, hosts: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!("[[listener]]\naddress = \"127.0.0.1:0\"\n[[upstream]]\nid = \"api\"\nname = \"API\"\n{upstream}\n[[route]]\npath = \"/mcp\"\nupstream = \"api\"\n[policies]\ndir = \"{name}.d\"\n"),
        )
        .unwrap();
        let policies = dir.path().join(format!("{name}.d"));
        std::fs::create_dir_all(&policies).unwrap();
        std::fs::write(
            policies.join("p.toml"),
            format!("[url_mode]\nallowed_hosts = {hosts}\n"),
        )
        .unwrap();
        path
    };
    let https = "url = \"https://api.internal/mcp\"\npolicy = \"p\"";
    let plain = "url = \"http://api.internal/mcp\"\nallow_plaintext = true\npolicy = \"p\"";
    let reviewed = write(
        "reviewed.toml",
        https,
        "[\"api.internal\", \"docs.internal\"]",
    );
    let drifted = write("drifted.toml", plain, "[]");
    let honest = write(
        "honest.toml",
        https,
        "[\"docs.internal\", \"api.internal\"]",
    );
    let check = |config: &std::path::Path, baseline: &std::path::Path| {
        Command::new(BIN)
            .args(["check", "--config"])
            .arg(config)
            .arg("--baseline")
            .arg(baseline)
            .output()
            .unwrap()
    };
    let out = check(&drifted, &reviewed);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for line in [
        "upstream \"api\" upstream.url: https -> http",
        "upstream \"api\" upstream.allow_plaintext: false -> true",
        "upstream \"api\" url_mode.allowed_hosts: [api.internal, docs.internal] -> [*]",
    ] {
        assert!(err.contains(line), "{line} in\n{err}");
    }
    assert!(err.contains("3 security control(s) weakened"), "{err}");
    let out = check(&honest, &reviewed);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = check(&reviewed, &drifted);
    assert_eq!(out.status.code(), Some(0), "stronger than the baseline");
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "[[listener]]\nadress = 1\n").unwrap();
    assert_eq!(check(&reviewed, &broken).status.code(), Some(2));
}

#[tokio::test]
async fn sigterm_drains_in_flight_requests_then_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, upstream) = demo_upstream(dir.path()).await;
    let cfg = gateway_config(dir.path(), upstream);
    let (mut gw, bound) = run_gateway(dir.path(), "gateway", &cfg).await;
    let (port, admin) = (bound.listeners[0].port(), bound.admin.unwrap().port());

    let url = format!("http://127.0.0.1:{port}/mcp/rooms");
    let slow = tokio::spawn({
        let url = url.clone();
        async move {
            let resp = call(
                &client(),
                &url,
                "slow",
                "room_report",
                json!({"steps": 4, "delay_ms": 250}),
            )
            .send()
            .await
            .unwrap();
            resp.text().await.unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = gw.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ready = client()
        .get(format!("http://127.0.0.1:{admin}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503, "draining gateway reports not ready");

    let body = slow.await.unwrap();
    assert!(
        body.contains("\"resultType\":\"complete\""),
        "in-flight stream finished: {body}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = gw.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "gateway did not exit after draining"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status:?}");
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err(),
        "listener closed"
    );
}

/// Runs a shell script; returns its stdout, failing the test on a non-zero exit.
fn sh(script: &str) -> String {
    let out = Command::new("sh").arg("-c").arg(script).output().unwrap();
    assert!(
        out.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A demo whose port is taken says which flag moves it, and starts nothing.
#[test]
fn demo_names_the_flag_that_moves_a_taken_port() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap().to_string();
    for (flag, hint) in [("--listen", "pass --listen"), ("--admin", "pass --admin")] {
        let other = if flag == "--listen" {
            "--admin"
        } else {
            "--listen"
        };
        let out = Command::new(BIN)
            .args(["demo", flag, &at, other, "127.0.0.1:0"])
            .args(["--upstream", &format!("127.0.0.1:{}", free_port())])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{said}");
        assert!(said.contains(&format!("cannot listen on {at}")), "{said}");
        assert!(said.contains(hint), "{said}");
    }
}

#[tokio::test]
async fn demo_prints_lines_that_run_as_printed() {
    assert!(
        Command::new("jq").arg("--version").output().is_ok(),
        "the demo's retry line needs jq: install it (apt-get install jq)"
    );
    let upstream = free_port();
    // The shipped config, moved by the demo's own flags (0: the OS picks).
    let mut demo = Killed(
        Command::new(BIN)
            .args(["demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .args(["--upstream", &format!("127.0.0.1:{upstream}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = demo.0.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    // Keep reading after the help text: the audit trail goes to stdout too.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let lines: Vec<String> = tokio::task::spawn_blocking(move || {
        lines_rx
            .iter()
            .take_while(|l| !l.contains("Ctrl-C"))
            .collect()
    })
    .await
    .unwrap();
    // The gateway's port is the OS's pick: the printed lines say it.
    let url = lines
        .iter()
        .find_map(|l| l.strip_prefix("URL="))
        .unwrap_or_else(|| panic!("no URL= line: {lines:?}"))
        .to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp/rooms"),
        "{url}"
    );
    let flow = lines
        .iter()
        .find(|l| l.contains(" demo --flow --url "))
        .unwrap_or_else(|| panic!("no --flow line: {lines:?}"));
    assert!(flow.ends_with(&url), "{flow}");
    let start = lines
        .iter()
        .position(|l| l.starts_with("URL="))
        .unwrap_or_else(|| panic!("no URL= line: {lines:?}"));
    assert_eq!(lines[start], format!("URL={url}"));
    // The script, cut into its blank-line separated blocks: the helper, then one per step.
    let script = lines[start..].join("\n");
    let blocks: Vec<&str> = script.split("\n\n").collect();
    let block = |marker: &str| {
        *blocks
            .iter()
            .find(|b| b.contains(marker))
            .unwrap_or_else(|| panic!("no block with {marker:?} in {script}"))
    };
    let head = blocks[0];

    let list = sh(&format!("{head}\n{}", block("# 1. list")));
    assert!(
        list.contains("book_room") && list.contains("room_report"),
        "{list}"
    );

    // The seed's request, its retry as printed, and the same retry again.
    let (ask, retry) = (block("# 2."), block("# 3."));
    let answers = json_lines(&sh(&format!("{head}\n{ask}\n{retry}\n{retry}")));
    assert_eq!(answers.len(), 3, "{answers:?}");
    let asked = &answers[0]["result"];
    assert_eq!(answers[0]["id"], 7);
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    assert_eq!(
        asked["inputRequests"]["room"]["params"]["message"],
        "'the big room' matches more than one room. Which did you mean?"
    );
    assert!(
        asked["requestState"].as_str().unwrap().starts_with("pcs1."),
        "{asked}"
    );
    assert!(
        asked["_meta"]["dev.portcullis/provenance"].is_object(),
        "{asked}"
    );
    let done = &answers[1];
    assert_eq!(done["id"], 8);
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(done.to_string().contains("Booked studio-b"), "{done}");
    assert_eq!(
        answers[2]["error"]["data"]["reason"], "state_replayed",
        "the demo config makes states single-use: {}",
        answers[2]
    );

    let stream = sh(&format!("{head}\n{}", block("# a streamed answer")));
    assert!(stream.contains("notifications/progress"), "{stream}");
    assert!(stream.contains("\"resultType\":\"complete\""), "{stream}");
    let refusal = sh(&format!("{head}\n{}", block("# a refusal")));
    assert!(refusal.starts_with("HTTP/1.1 400"), "{refusal}");
    assert!(refusal.contains("header_mismatch"), "{refusal}");

    let transcript = sh(flow);
    for expected in [
        "\"id\": 7",
        "\"resultType\": \"input_required\"",
        "matches more than one room",
        "\"requestState\": \"pcs1.",
        "dev.portcullis/provenance",
        "\"id\": 8",
        "\"inputResponses\"",
        "Booked studio-b",
    ] {
        assert!(
            transcript.contains(expected),
            "{expected:?} missing from:\n{transcript}"
        );
    }
}

#[test]
fn demo_flow_without_a_gateway_says_what_to_do() {
    let out = Command::new(BIN)
        .args(["demo", "--flow", "--url", "http://127.0.0.1:1/mcp/rooms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach the gateway") && err.contains("portcullis demo"),
        "{err}"
    );
}

#[tokio::test]
async fn two_gateway_processes_with_shared_keys_serve_each_others_retries() {
    let dir = tempfile::tempdir().unwrap();
    let keygen = Command::new(BIN)
        .args(["keygen", "--id", "k1"])
        .output()
        .unwrap();
    assert!(keygen.status.success());
    let key = String::from_utf8(keygen.stdout).unwrap();
    assert!(key.starts_with("k1:") && key.trim().len() > 40, "{key}");
    std::fs::write(dir.path().join("keys"), &key).unwrap();
    let (_up, upstream) = demo_upstream(dir.path()).await;
    let shared = "[state]\nkeys_file = \"keys\"\n";
    let a_cfg = gateway_config_with(dir.path(), "a.toml", upstream, shared);
    let b_cfg = gateway_config_with(dir.path(), "b.toml", upstream, shared);
    let (_a, a) = run_gateway(dir.path(), "a", &a_cfg).await;
    let (_b, b) = run_gateway(dir.path(), "b", &b_cfg).await;
    let (a_port, b_port) = (a.listeners[0].port(), b.listeners[0].port());

    let c = client();
    let a_url = format!("http://127.0.0.1:{a_port}/mcp/rooms");
    let b_url = format!("http://127.0.0.1:{b_port}/mcp/rooms");
    let first = json_of(
        call(
            &c,
            &a_url,
            "1",
            "book_room",
            json!({"day": "2026-09-17", "hour": 9, "room_hint": "the big room"}),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap();
    let mut retry: serde_json::Value = serde_json::from_str(&call_body(
        "2",
        "book_room",
        json!({"day": "2026-09-17", "hour": 9, "room_hint": "the big room"}),
    ))
    .unwrap();
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] =
        json!({"room": {"action": "accept", "content": {"room_id": "studio-b"}}});
    let done = json_of(
        call(&c, &b_url, "2", "book_room", json!({}))
            .body(retry.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(done.to_string().contains("studio-b"), "{done}");
}
