//! What a reload tells the operator: a failed reload makes the config
//! stale (a 0/1 gauge and a failure timestamp) until a good one; a change
//! that needs a restart is counted and shown by a gauge; the log names the
//! files that changed and the settings that wait for a restart.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use portcullis::config::GatewayConfig;
use portcullis::server::RunningGateway;

const BIN: &str = env!("CARGO_BIN_EXE_portcullis");

/// The value of an unlabelled metric.
fn value(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from\n{metrics}"))
}

fn good(extra: &str) -> String {
    config_text("http://127.0.0.1:9/mcp", "", extra)
}

#[tokio::test]
async fn a_failed_reload_leaves_the_config_stale_until_a_good_one() {
    install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, good("")).unwrap();
    let gw = RunningGateway::start(GatewayConfig::load(&path).unwrap())
        .await
        .unwrap();
    let m = metrics(&gw).await;
    assert_eq!(value(&m, "portcullis_config_stale"), 0.0);
    assert_eq!(
        value(
            &m,
            "portcullis_config_last_reload_failure_timestamp_seconds"
        ),
        0.0
    );

    std::fs::write(&path, good("[limits]\nmax_conections = 5\n")).unwrap();
    assert!(gw.reload().await.is_err());
    // A good reload later in the same minute would hide the failure from a
    // counter's increase(); the gauge and the timestamp do not.
    let m = metrics(&gw).await;
    assert_eq!(value(&m, "portcullis_config_stale"), 1.0);
    let failed_at = value(
        &m,
        "portcullis_config_last_reload_failure_timestamp_seconds",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - failed_at).abs() < 60.0, "{failed_at} vs {now}");

    std::fs::write(&path, good("")).unwrap();
    gw.reload().await.unwrap();
    let m = metrics(&gw).await;
    assert_eq!(value(&m, "portcullis_config_stale"), 0.0);
    assert_eq!(
        value(
            &m,
            "portcullis_config_last_reload_failure_timestamp_seconds"
        ),
        failed_at,
        "the last failure stays on record"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn a_change_that_needs_a_restart_is_counted_and_shown() {
    install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, good("")).unwrap();
    let gw = RunningGateway::start(GatewayConfig::load(&path).unwrap())
        .await
        .unwrap();
    let m = metrics(&gw).await;
    assert_eq!(value(&m, "portcullis_config_restart_required"), 0.0);
    assert_eq!(value(&m, "portcullis_config_restart_required_total"), 0.0);

    // A request limit is read per request: no restart needed.
    std::fs::write(&path, good("[limits]\nmax_request_body_bytes = 4096\n")).unwrap();
    gw.reload().await.unwrap();
    assert_eq!(
        value(&metrics(&gw).await, "portcullis_config_restart_required"),
        0.0
    );
    assert_eq!(gw.config().limits.max_request_body_bytes, 4096);

    // Connection limits are fixed when the listeners start.
    std::fs::write(&path, good("[limits]\nmax_connections = 7\n")).unwrap();
    gw.reload().await.unwrap();
    let m = metrics(&gw).await;
    assert_eq!(value(&m, "portcullis_config_restart_required"), 1.0);
    assert_eq!(value(&m, "portcullis_config_restart_required_total"), 1.0);

    // Back to what the process runs with: nothing waits for a restart.
    std::fs::write(&path, good("")).unwrap();
    gw.reload().await.unwrap();
    let m = metrics(&gw).await;
    assert_eq!(value(&m, "portcullis_config_restart_required"), 0.0);
    assert_eq!(value(&m, "portcullis_config_restart_required_total"), 1.0);
    gw.shutdown().await;
}

/// Lines of a running gateway's log until one contains every `needle`.
fn wait_for_log(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    needles: &[&str],
) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    while Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        let hit = needles.iter().all(|n| line.contains(n));
        seen.push_str(&line);
        seen.push('\n');
        if hit {
            return line;
        }
    }
    panic!("no log line with {needles:?} in:\n{seen}");
}

#[test]
fn the_log_names_the_files_that_changed_and_what_waits_for_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    let policy = policies.join("house.toml");
    std::fs::write(&policy, "mode = \"enforce\"\n").unwrap();
    let path = dir.path().join("gw.toml");
    let config = |extra: &str| {
        format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\n[policies]\ndir = \"policies\"\n{extra}\
             [[upstream]]\nid = \"a\"\nname = \"A\"\nurl = \"http://127.0.0.1:9/mcp\"\npolicy = \"house\"\n[[route]]\npath = \"/mcp\"\nupstream = \"a\"\n"
        )
    };
    std::fs::write(&path, config("")).unwrap();
    let mut gw = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&path)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(gw.stderr.take().unwrap()).lines();
    wait_for_log(&mut lines, &["listening"]);

    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(&policy, "mode = \"monitor\"\n").unwrap();
    let changed = wait_for_log(&mut lines, &["config files changed"]);
    let event: serde_json::Value = serde_json::from_str(&changed).unwrap();
    assert_eq!(
        event["fields"]["files"],
        policy.display().to_string(),
        "{event}"
    );
    wait_for_log(&mut lines, &["config reloaded"]);

    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(&path, config("[limits]\nmax_connections = 9\n")).unwrap();
    let restart = wait_for_log(&mut lines, &["next restart"]);
    let event: serde_json::Value = serde_json::from_str(&restart).unwrap();
    assert_eq!(event["fields"]["settings"], "limits.max_connections");
    let _ = gw.kill();
    let _ = gw.wait();
}
