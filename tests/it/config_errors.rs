//! Config problems as an operator meets them, from the binary: `check`
//! lists every problem of a file broken several ways at once (full field
//! paths, "did you mean", absolute paths of unreadable files, TOML syntax in
//! words) and exits 2; `run` reports them as JSON lines when the file (or
//! `--log-format`) says so; logs carry no colour codes when stderr is not
//! a terminal.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_portcullis");

/// Broken six ways; `extra` goes at the top.
fn broken(extra: &str) -> String {
    format!(
        "{extra}
[[listener]]
address = \"127.0.0.1:0\"
tls = {{ cert = \"certs/gw.pem\", key = \"certs/gw.key\" }}

[limits]
max_conections = 5000

[[upstream]]
id = \"rooms\"
name = \"Rooms\"
url = \"http://127.0.0.1:9/mcp\"
reponse_timeout = \"30s\"
http2 = \"yes\"

[[route]]
path = \"/mcp/rooms\"
upstream = \"room\"
"
    )
}

fn stderr_lines(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn check_lists_every_problem_with_its_place_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, broken("")).unwrap();
    let out = Command::new(BIN)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let lines = stderr_lines(&out);
    let file = path.display().to_string();
    let cert = dir.path().join("certs/gw.pem").display().to_string();
    let expected = [
        format!("error: {file}:4:16: listener[0].tls.cert: cannot read {cert}: "),
        format!("error: {file}:4:"),
        format!("error: {file}:7:1: limits.max_conections: unknown key `max_conections`; did you mean `max_connections`?"),
        format!("error: {file}:13:1: upstream[0].reponse_timeout: unknown key `reponse_timeout`; did you mean `response_timeout`?"),
        format!("error: {file}:14:9: upstream[0].http2: expected true or false, found the text \"yes\""),
        format!("error: {file}:18:12: route[0].upstream: no upstream with id \"room\" (known: rooms)"),
        format!("{file}: 6 problem(s)"),
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
    for (line, want) in lines.iter().zip(&expected) {
        assert!(line.starts_with(want.as_str()), "{line}\n  wanted {want}");
    }
    assert!(lines[1].contains("listener[0].tls.key"), "{}", lines[1]);
}

#[test]
fn toml_syntax_is_explained_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, "[[listener]]\naddress = 127.0.0.1:8080\n").unwrap();
    let out = Command::new(BIN)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":2:"), "{err}");
    assert!(err.contains("text in quotes"), "{err}");
    assert!(!err.contains("expected `"), "serde's raw words: {err}");
}

fn json_lines(out: &std::process::Output) -> Vec<Value> {
    stderr_lines(out)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn start_up_errors_are_json_when_the_log_format_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, broken("[log]\nformat = \"json\"\n")).unwrap();
    let out = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&path)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let events = json_lines(&out);
    assert_eq!(events.len(), 6, "{events:#?}");
    for e in &events {
        assert_eq!(e["level"], "ERROR");
        assert!(e["fields"]["line"].as_u64().unwrap() > 0, "{e}");
        assert!(e["fields"]["field"].is_string(), "{e}");
    }
    assert_eq!(events[2]["fields"]["field"], "limits.max_conections");

    // A file that cannot even be parsed: the flag decides.
    std::fs::write(&path, "[[listener]\n").unwrap();
    let out = Command::new(BIN)
        .args(["run", "--log-format", "json", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let events = json_lines(&out);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["fields"]["field"], "(syntax)");
}

#[test]
fn logs_carry_no_colour_codes_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(
        &path,
        "[[listener]]\naddress = \"127.0.0.1:0\"\n[[upstream]]\nid = \"a\"\nname = \"A\"\nurl = \"http://127.0.0.1:9/mcp\"\n[[route]]\npath = \"/mcp\"\nupstream = \"a\"\n",
    )
    .unwrap();
    let mut gw = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&path)
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(gw.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = String::new();
    while !seen.contains("listening") && Instant::now() < deadline {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
    }
    let _ = gw.kill();
    let _ = gw.wait();
    assert!(seen.contains("listening"), "{seen}");
    assert!(seen.contains("INFO"), "{seen}");
    assert!(!seen.contains('\u{1b}'), "ANSI escape in {seen:?}");
}
