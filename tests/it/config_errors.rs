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

/// One `http://` upstream on `host` under `policy`, with `extra` keys.
fn plaintext_config(host: &str, policy: &str, extra: &str) -> String {
    format!(
        "[[listener]]\naddress = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"rooms\"\nname = \"Rooms\"\nurl = \"http://{host}/mcp\"\npolicy = \"{policy}\"\n{extra}\n[[route]]\npath = \"/mcp\"\nupstream = \"rooms\"\n"
    )
}

fn check(text: &str, strict: bool) -> (Option<i32>, Vec<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, text).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["check", "--config"]).arg(&path);
    if strict {
        cmd.arg("--strict");
    }
    let out = cmd.output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code(),
        stderr_lines(&out),
        all.replace(&path.display().to_string(), "FILE"),
    )
}

/// Plain http:// to a host that is not this machine, under the untrusted
/// preset, is refused at validation (file:line, the field, what to do),
/// in every spelling of a remote host, private and link-local ones too;
/// `allow_plaintext = true` on the upstream accepts it (the operator said
/// so); the trusted preset keeps the warning; loopback in every spelling
/// is this machine.
#[test]
fn plaintext_to_another_host_is_refused_under_untrusted_unless_the_upstream_allows_it() {
    let remote = [
        "mcp.example.com",
        "mcp.example.com:8080",
        "10.0.0.5:8080",
        "192.168.1.20",
        "172.16.0.1",
        "169.254.169.254",
        "[fd00::1]:8080",
        "[2001:db8::1]",
        "8.8.8.8",
        "mcp",
        "mcp.internal",
    ];
    for host in remote {
        let (code, lines, all) = check(&plaintext_config(host, "untrusted", ""), false);
        assert_eq!(code, Some(2), "{host}: {all}");
        assert!(
            lines[0].starts_with("error: FILE:7:7: upstream[0].url: plain http:// to ")
                || all.contains("FILE:7:7: upstream[0].url: plain http:// to "),
            "{host}: {all}"
        );
        assert!(all.contains("allow_plaintext = true"), "{host}: {all}");
        assert!(all.contains("policy \"untrusted\""), "{host}: {all}");
        // Said so, for this upstream: accepted, and no longer warned of.
        let (code, _, all) = check(
            &plaintext_config(host, "untrusted", "allow_plaintext = true"),
            true,
        );
        assert_eq!(code, Some(0), "{host}: {all}");
        // Trusted: today's warning, refused by --strict only.
        let (code, _, all) = check(&plaintext_config(host, "trusted", ""), false);
        assert_eq!(code, Some(0), "{host}: {all}");
        assert!(all.contains("plain http:// to"), "{host}: {all}");
        let (code, _, all) = check(&plaintext_config(host, "trusted", ""), true);
        assert_ne!(code, Some(0), "{host}: {all}");
    }
    for here in [
        "127.0.0.1:9000",
        "127.1.2.3",
        "localhost:9000",
        "api.localhost",
        "[::1]:9000",
    ] {
        let (code, _, all) = check(&plaintext_config(here, "untrusted", ""), true);
        assert_eq!(code, Some(0), "{here}: {all}");
    }
    // https is never plaintext; allow_plaintext is an HTTP upstream's key.
    let https = plaintext_config("mcp.example.com", "untrusted", "").replace("http://", "https://");
    let (code, _, all) = check(&https, true);
    assert_eq!(code, Some(0), "{all}");
    let stdio = "[[listener]]\naddress = \"127.0.0.1:0\"\n\n[[upstream]]\nid = \"p\"\nname = \"P\"\ncommand = [\"true\"]\nallow_plaintext = true\n\n[[route]]\npath = \"/mcp\"\nupstream = \"p\"\n";
    let (code, _, all) = check(stdio, false);
    assert_eq!(code, Some(2), "{all}");
    assert!(
        all.contains("upstream[0].allow_plaintext: only an upstream with a url has this"),
        "{all}"
    );
}
