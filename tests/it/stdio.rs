//! Stdio upstreams as an operator meets them: the config's checks, a
//! program kept running across a reload that leaves it alone and replaced
//! by one that changes it, stopped on drain, the ids it answers under, and
//! its metrics. The program is a few lines of Python of the 2026-07-28
//! generation (the response-side tests run over stdio through
//! `over_both_kinds!`; real servers and hostile programs are in
//! tests/python and tests/interop).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use portcullis::config::GatewayConfig;
use portcullis::server::RunningGateway;

use crate::common::*;

/// A stdio MCP program: `server/discover` names 2026-07-28; `tools/call`
/// answers with its pid and the value of `$GREETING`.
const PROGRAM: &str = r#"
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    if m["method"] == "server/discover":
        r = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    else:
        r = {"resultType": "complete", "content": [{"type": "text", "text": json.dumps(
            {"pid": os.getpid(), "greeting": os.environ.get("GREETING")})}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"#;

fn config(dir: &Path, upstream_extra: &str, extra: &str) -> String {
    let program = dir.join("program.py");
    std::fs::write(&program, PROGRAM).unwrap();
    format!(
        r#"
[[listener]]
address = "127.0.0.1:0"
[admin]
address = "127.0.0.1:0"
[[upstream]]
id = "local"
name = "Local program"
command = ["python3", "{}"]
stop_timeout = "1s"
{upstream_extra}
[[route]]
path = "/mcp"
upstream = "local"
[audit]
sink = "off"
{extra}
"#,
        program.display()
    )
}

async fn start_in(dir: &Path, text: &str) -> RunningGateway {
    install_crypto();
    let path = dir.join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    let config = GatewayConfig::parse(text, &path).expect("valid config");
    RunningGateway::start(config).await.expect("gateway starts")
}

/// The metric `name` of the upstream `local` reads 1.
fn one(metrics: &str, name: &str) -> bool {
    metrics.contains(&format!("{name}{{upstream=\"local\"}} 1"))
}

/// What the program says of itself.
async fn ask(gw: &RunningGateway) -> Value {
    let resp = call(&client(), &url(gw), "c1", "who", json!({}))
        .send()
        .await
        .unwrap();
    let v: Value = json_of(resp).await;
    assert_eq!(v["id"], "c1", "the client's own id comes back: {v}");
    let text = v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"));
    serde_json::from_str(text).unwrap()
}

fn pid_of(v: &Value) -> i32 {
    v["pid"].as_i64().unwrap() as i32
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

async fn gone_within(pid: i32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn problems(text: &str, dir: &Path) -> String {
    match GatewayConfig::parse(text, &dir.join("gateway.toml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_config_says_what_is_wrong_with_a_program() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = config(d, "", "");
    let cases: Vec<(String, &str)> = vec![
        (
            base.replace(
                "command = [",
                "url = \"http://127.0.0.1:9/mcp\"\ncommand = [",
            ),
            "give url or command, not both",
        ),
        (
            base.replace(
                "command = [\"python3\"",
                "command = [\"no-such-program-here\"",
            ),
            "is not an executable file on the program's PATH",
        ),
        (
            config(d, "env_from = [\"PORTCULLIS_NOT_SET_ANYWHERE\"]", ""),
            "PORTCULLIS_NOT_SET_ANYWHERE is not set in the gateway's environment",
        ),
        (
            config(d, "env = { \"BAD-NAME\" = \"x\" }", ""),
            "a variable name of A-Z",
        ),
        (
            config(d, "ca_file = \"ca.pem\"", ""),
            "only an upstream with a url has this",
        ),
        (
            config(
                d,
                "[upstream.sandbox]\nread_only = [\"/no/such/folder\"]",
                "",
            ),
            "/no/such/folder does not exist",
        ),
        (
            config(d, "cwd = \"/no/such/folder\"", ""),
            "/no/such/folder is not a folder",
        ),
        (
            config(d, "max_processes = 0", ""),
            "must be a positive whole number",
        ),
        (
            base.replace(
                "upstream = \"local\"",
                "upstream = \"local\"\nroots = [\"relative/path\"]",
            ),
            "a file:// URI or an absolute path",
        ),
    ];
    for (text, want) in cases {
        let got = problems(&text, d);
        assert!(got.contains(want), "want {want:?} in:\n{got}");
    }
    // A key only a program has, on an upstream with a url.
    let http = config_text("http://127.0.0.1:9/mcp", "max_processes = 2", "");
    assert!(problems(&http, d).contains("only an upstream with a command has this"));
    // A route's roots are for programs only.
    let roots = config_text("http://127.0.0.1:9/mcp", "", "").replace(
        "upstream = \"test\"",
        "upstream = \"test\"\nroots = [\"/srv\"]",
    );
    assert!(problems(&roots, d).contains("only a stdio upstream"));
}

/// `check` finds what `run` would fail on, and nothing more: a working folder
/// the sandbox does not show is a problem of its own; an unset `env_from` name
/// is one problem, not also "python3 is not on PATH".
#[test]
fn the_config_names_the_one_problem_a_program_has() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (inside, outside) = (d.join("data"), d.join("elsewhere"));
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    // A program the sandbox shows (python3 may be a pyenv shim in a home folder).
    let sandboxed = |cwd: &Path| {
        config(
            d,
            &format!(
                "cwd = \"{}\"\n[upstream.sandbox]\nwritable = [\"{}\"]",
                cwd.display(),
                inside.display()
            ),
            "",
        )
        .replace("command = [\"python3\"", "command = [\"/bin/sh\"")
    };
    let got = problems(&sandboxed(&outside), d);
    assert!(got.contains("is outside the sandbox"), "{got}");
    assert!(got.contains(&outside.display().to_string()), "{got}");
    assert!(GatewayConfig::parse(&sandboxed(&inside.join(".")), &d.join("gateway.toml")).is_ok());
    // A folder under a system folder is shown read-only: not a problem.
    assert!(GatewayConfig::parse(&sandboxed(Path::new("/usr")), &d.join("gateway.toml")).is_ok());

    program_outside_the_sandbox(d, &inside, &outside);

    let unset = problems(
        &config(d, "env_from = [\"PORTCULLIS_NOT_SET_ANYWHERE\"]", ""),
        d,
    );
    assert!(
        unset.contains("PORTCULLIS_NOT_SET_ANYWHERE is not set"),
        "{unset}"
    );
    assert!(!unset.contains("not an executable file"), "{unset}");
    assert_eq!(unset.lines().count(), 1, "{unset}");
}

/// A program installed where the sandbox does not look (a global npm prefix
/// of one's own: `bin/` linking into `lib/`), or a script whose `#!`
/// interpreter is there (Node.js from nvm), is found on PATH but could not
/// start: `check` says which file and what to add.
fn program_outside_the_sandbox(d: &Path, inside: &Path, outside: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let prefix = outside.join("prefix");
    let script = prefix.join("lib/node_modules/tool/index.js");
    executable(&script, "#!/usr/bin/env fake-node\n");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::os::unix::fs::symlink(&script, prefix.join("bin/tool")).unwrap();
    let runtime = outside.join("nvm/bin/fake-node");
    executable(&runtime, "");
    let search = format!(
        "{}:{}:/usr/bin:/bin",
        prefix.join("bin").display(),
        runtime.parent().unwrap().display()
    );
    let with = |read_only: &[&Path]| {
        let listed: Vec<String> = read_only
            .iter()
            .map(|p| format!("\"{}\"", p.display()))
            .collect();
        config(
            d,
            &format!(
                "env = {{ PATH = \"{search}\" }}\n[upstream.sandbox]\nwritable = [\"{}\"]\nread_only = [{}]",
                inside.display(),
                listed.join(", ")
            ),
            "",
        )
        .replace("command = [\"python3\"", "command = [\"tool\"")
    };
    let got = problems(&with(&[]), d);
    assert!(got.contains("is outside the sandbox"), "{got}");
    assert!(
        got.contains(&prefix.join("bin/tool").display().to_string()),
        "{got}"
    );
    assert!(got.contains("sandbox.read_only"), "{got}");
    // The prefix listed: the interpreter, still outside, is named instead.
    let got = problems(&with(&[&prefix]), d);
    assert!(got.contains(&runtime.display().to_string()), "{got}");
    assert_eq!(got.lines().count(), 1, "{got}");
    assert!(GatewayConfig::parse(
        &with(&[&prefix, runtime.parent().unwrap()]),
        &d.join("gateway.toml")
    )
    .is_ok());
}

#[test]
fn the_state_keys_never_reach_a_program() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The variable need not even be set: naming it is enough to refuse. (Not
    // PATH: the gateway takes what it reads as keys out of the environment,
    // and the tests share this process's.)
    let named = config(
        d,
        "env_from = [\"PORTCULLIS_TEST_KEYS\"]",
        "[state]\nkeys_env = \"PORTCULLIS_TEST_KEYS\"",
    );
    let got = problems(&named, d);
    assert!(
        got.contains("holds the gateway's state keys; a program never gets them"),
        "{got}"
    );
    let set = config(d, "env = { KEYS = \"x\" }", "[state]\nkeys_env = \"KEYS\"");
    assert!(problems(&set, d).contains("holds the gateway's state keys"));
}

#[tokio::test]
async fn a_program_is_started_on_first_use_and_answers_under_the_clients_ids() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start_in(
        dir.path(),
        &config(dir.path(), "env = { GREETING = \"hi\" }", ""),
    )
    .await;
    let m = metrics(&gw).await;
    assert!(
        !m.contains("portcullis_stdio_starts_total{upstream=\"local\"}"),
        "nothing started before the first request:\n{m}"
    );
    let first = ask(&gw).await;
    assert_eq!(first["greeting"], "hi");
    let again = ask(&gw).await;
    assert_eq!(
        pid_of(&again),
        pid_of(&first),
        "one pooled process serves both"
    );
    let m = metrics(&gw).await;
    assert!(one(&m, "portcullis_stdio_starts_total"), "{m}");
    assert!(one(&m, "portcullis_stdio_processes"), "{m}");
    gw.shutdown().await;
    assert!(
        gone_within(pid_of(&first), Duration::from_secs(3)).await,
        "the drain stops the program"
    );
}

#[tokio::test]
async fn a_reload_keeps_an_unchanged_program_and_replaces_a_changed_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gw = start_in(d, &config(d, "env = { GREETING = \"one\" }", "")).await;
    let first = ask(&gw).await;
    // Only the name changed: the same process answers.
    let renamed =
        config(d, "env = { GREETING = \"one\" }", "").replace("Local program", "Renamed program");
    std::fs::write(d.join("gateway.toml"), renamed).unwrap();
    gw.reload().await.unwrap();
    let kept = ask(&gw).await;
    assert_eq!(pid_of(&kept), pid_of(&first), "kept across the reload");
    // Its environment changed: a new process, and the old one stopped.
    std::fs::write(
        d.join("gateway.toml"),
        config(d, "env = { GREETING = \"two\" }", ""),
    )
    .unwrap();
    gw.reload().await.unwrap();
    let changed = ask(&gw).await;
    assert_eq!(changed["greeting"], "two");
    assert_ne!(pid_of(&changed), pid_of(&first));
    assert!(
        gone_within(pid_of(&first), Duration::from_secs(3)).await,
        "the program of the old settings is stopped"
    );
    gw.shutdown().await;
}

/// `/readyz` once it answers 200 (the gateway answers 503 until warm).
async fn ready(gw: &RunningGateway) {
    let at = format!(
        "http://{}/readyz",
        gw.admin_addr.expect("an admin listener")
    );
    let answered = async {
        while client().get(&at).send().await.ok().map(|r| r.status())
            != Some(reqwest::StatusCode::OK)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), answered)
        .await
        .expect("ready within 10 s");
}

#[tokio::test]
async fn an_eager_program_starts_with_the_gateway_and_an_idle_one_stops() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gw = start_in(d, &config(d, "eager = true\nidle_timeout = \"1s\"", "")).await;
    // Ready only once the eager start is over: its process is there.
    ready(&gw).await;
    let m = metrics(&gw).await;
    assert!(one(&m, "portcullis_stdio_processes"), "{m}");
    let pid = pid_of(&ask(&gw).await);
    // Eager keeps one: idle past its timeout, it is still there.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(alive(pid), "the one eager process is kept");
    gw.shutdown().await;

    let gw = start_in(d, &config(d, "idle_timeout = \"1s\"", "")).await;
    let pid = pid_of(&ask(&gw).await);
    assert!(
        gone_within(pid, Duration::from_secs(5)).await,
        "an idle process stops after idle_timeout"
    );
    assert_eq!(
        ask(&gw).await["greeting"],
        Value::Null,
        "and one starts again on use"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn an_eager_program_starts_when_its_generation_is_configured() {
    // No probe to start it: the eager start starts one of its own.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let extra = "eager = true\ngenerations = [\"2026-07-28\"]";
    let gw = start_in(d, &config(d, extra, "")).await;
    ready(&gw).await;
    let m = metrics(&gw).await;
    assert!(one(&m, "portcullis_stdio_processes"), "{m}");
    assert!(one(&m, "portcullis_stdio_starts_total"), "{m}");
    // The first caller gets that process, not a second one.
    let pid = pid_of(&ask(&gw).await);
    let m = metrics(&gw).await;
    assert!(one(&m, "portcullis_stdio_starts_total"), "{m}");
    assert!(alive(pid));
    gw.shutdown().await;
}

/// A 2026-07-28 program that logs a little after its answer to `talk`
/// (as an asynchronous logger would), and logs during `listen`.
const LOGGER: &str = r#"
import json, sys, time
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    if m["method"] == "server/discover":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"resultType": "complete",
              "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}, "logging": {}}}})
        continue
    if m["method"] == "ping":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {}})
        continue
    if m["method"] == "tools/list":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"resultType": "complete",
              "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("talk", "listen")]}})
        continue
    name = m["params"]["name"]
    log = lambda text: send({"jsonrpc": "2.0", "method": "notifications/message",
                             "params": {"level": "info", "data": text}})
    if name == "listen":
        log("said during listen")
    send({"jsonrpc": "2.0", "id": m["id"], "result": {"resultType": "complete",
          "content": [{"type": "text", "text": name}]}})
    if name == "talk":
        time.sleep(0.05)
        log("left over from talk")
"#;

/// What a pooled program writes after its answer is its previous caller's:
/// the next caller of the same process never gets it.
#[tokio::test]
async fn a_pooled_programs_late_lines_never_reach_the_next_caller() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("logger.py");
    std::fs::write(&program, LOGGER).unwrap();
    let text = config(dir.path(), "max_processes = 1", "").replace(
        &format!("\"{}\"", dir.path().join("program.py").display()),
        &format!("\"{}\"", program.display()),
    );
    let gw = start_in(dir.path(), &text).await;
    let c = client();
    for round in 0..3 {
        let talk = call(&c, &url(&gw), "a", "talk", json!({}))
            .send()
            .await
            .unwrap();
        assert!(talk.text().await.unwrap().contains("talk"));
        let listen = call(&c, &url(&gw), "b", "listen", json!({}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            listen.contains("said during listen"),
            "round {round}: {listen}"
        );
        assert!(
            !listen.contains("left over"),
            "round {round}: the previous caller's line reached the next: {listen}"
        );
    }
    gw.shutdown().await;
}

/// A program that takes its time to start (an interpreter loading, a
/// package fetched: after its start report, before it reads a line); once
/// up, `hang` is never answered.
const SLOW_TO_START: &str = r#"
import json, sys, time
time.sleep(1.5)
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or m.get("method") in (None, "notifications/cancelled"):
        continue
    if m.get("params", {}).get("name") == "hang":
        continue
    r = {"resultType": "complete", "content": [{"type": "text", "text": "up"}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"#;

/// The response timeout counts from when a process has the request; a
/// process's own start is the connect timeout's (its first request may
/// take both). Once it has answered, a silent request ends at the
/// response timeout alone.
#[tokio::test]
async fn a_program_slow_to_start_is_not_timed_out_as_a_slow_answer() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("slow.py");
    std::fs::write(&program, SLOW_TO_START).unwrap();
    let extra = "generations = [\"2026-07-28\"]\nresponse_timeout = \"1s\"\nconnect_timeout = \"10s\"\nmax_processes = 1";
    let text = config(dir.path(), extra, "").replace(
        &format!("\"{}\"", dir.path().join("program.py").display()),
        &format!("\"{}\"", program.display()),
    );
    let gw = start_in(dir.path(), &text).await;
    let c = client();
    let first: Value = json_of(
        call(&c, &url(&gw), "a", "who", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(first["result"]["content"][0]["text"], "up", "{first}");
    let started = Instant::now();
    let hung: Value = json_of(
        call(&c, &url(&gw), "b", "hang", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(
        hung["error"]["data"]["reason"], "upstream_timeout",
        "{hung}"
    );
    assert!(
        took < Duration::from_secs(5),
        "a process that has answered gets the response timeout only: {took:?}"
    );
    gw.shutdown().await;
}
