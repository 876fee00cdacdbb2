//! A reload that weakens a security control, through the real running
//! gateway over loopback: counted in the real /metrics, written to the
//! real audit file; under `[reload] on_weakened = "refuse"` the running
//! config stays and keeps refusing what it refused. An honest reload
//! (reordered, strengthened) says nothing.

use std::path::{Path, PathBuf};

use crate::common::*;
use portcullis::config::GatewayConfig;
use portcullis::server::{ReloadError, RunningGateway};
use serde_json::json;

const KEY: &str = "pcl_reload-test-key-0123456789abcdef";

struct Files {
    dir: tempfile::TempDir,
    upstream: String,
}

impl Files {
    fn config(&self) -> PathBuf {
        self.dir.path().join("gw.toml")
    }

    fn audit(&self) -> PathBuf {
        self.dir.path().join("audit.jsonl")
    }

    /// The gateway's config: `top` first, the route's `auth`, the policy
    /// `p` with `arguments` lines.
    fn write(&self, top: &str, route_auth: &str, arguments: &str) {
        let policies = self.dir.path().join("policies");
        std::fs::create_dir_all(&policies).unwrap();
        std::fs::write(
            policies.join("p.toml"),
            format!("extends = \"untrusted\"\n[arguments]\n{arguments}"),
        )
        .unwrap();
        let text = format!(
            "{top}\n[[listener]]\naddress = \"127.0.0.1:0\"\n[admin]\naddress = \"127.0.0.1:0\"\n\
             [policies]\ndir = \"policies\"\n[audit]\nsink = \"file\"\npath = \"{audit}\"\n\
             [[auth]]\nname = \"keys\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"alice\"\nhash = \"{hash}\"\n\
             [[upstream]]\nid = \"test\"\nname = \"Test upstream\"\nurl = \"{url}\"\npolicy = \"p\"\n\
             [[route]]\npath = \"/mcp\"\nupstream = \"test\"\n{route_auth}\n",
            audit = self.audit().display(),
            hash = portcullis::identify::hash_key(KEY),
            url = self.upstream,
        );
        std::fs::write(self.config(), text).unwrap();
    }
}

const REVIEWED_ARGS: &str =
    "shell = \"enforce\"\nallowed_hosts = [\"a.internal\", \"b.internal\"]\n";
const WEAKER_ARGS: &str = "shell = \"off\"\nallowed_hosts = [\"a.internal\", \"b.internal\"]\n";
/// Reordered and strengthened: nothing weaker.
const HONEST_ARGS: &str =
    "shell = \"enforce\"\nsecrets = \"enforce\"\nallowed_hosts = [\"b.internal\", \"a.internal\"]\n";
const KEYED: &str = "auth = [\"keys\"]";

async fn start(files: &Files) -> RunningGateway {
    install_crypto();
    RunningGateway::start(GatewayConfig::load(&files.config()).unwrap())
        .await
        .unwrap()
}

/// The status of an unauthenticated call on /mcp.
async fn anonymous_status(gw: &RunningGateway) -> u16 {
    call(&client(), &url(gw), "1", "anything", json!({}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn series(metrics: &str, name_and_labels: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn weakened_series(metrics: &str, control: &str, upstream: &str) -> f64 {
    series(
        metrics,
        &format!(
            "portcullis_config_weakened_total{{control=\"{control}\",upstream=\"{upstream}\"}}"
        ),
    )
}

async fn audit_lines(path: &Path) -> Vec<serde_json::Value> {
    // The writer thread writes in batches; give it the moment it needs.
    for _ in 0..50 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|l: &serde_json::Value| l["event"] == "config_weakened")
            .collect();
        if !lines.is_empty() {
            return lines;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Vec::new()
}

async fn files() -> (Files, ScriptedUpstream) {
    let up = answering_ok().await;
    let files = Files {
        dir: tempfile::tempdir().unwrap(),
        upstream: up.url(),
    };
    (files, up)
}

#[tokio::test]
async fn a_weakening_reload_is_applied_and_said_everywhere() {
    let (files, _up) = files().await;
    files.write("", KEYED, REVIEWED_ARGS);
    let gw = start(&files).await;
    assert_eq!(anonymous_status(&gw).await, 401);

    files.write("", "", WEAKER_ARGS);
    gw.reload().await.expect("applied by default");
    assert_ne!(
        anonymous_status(&gw).await,
        401,
        "the new config is in force"
    );
    let m = metrics(&gw).await;
    assert_eq!(weakened_series(&m, "route.auth", "test"), 1.0, "{m}");
    assert_eq!(weakened_series(&m, "arguments.shell", "test"), 1.0, "{m}");
    assert_eq!(
        series(&m, "portcullis_config_reloads_total{result=\"refused\"}"),
        0.0
    );
    let lines = audit_lines(&files.audit()).await;
    let shell = lines
        .iter()
        .find(|l| l["control"] == "arguments.shell")
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(shell["upstream"]["id"], "test");
    assert_eq!(
        (&shell["from"], &shell["to"]),
        (&json!("enforce"), &json!("off"))
    );
    assert_eq!(shell["outcome"], "applied");
    let auth = lines.iter().find(|l| l["control"] == "route.auth").unwrap();
    assert_eq!(auth["route"], "/mcp");
    assert!(auth["upstream"].is_null(), "{auth}");
    assert_eq!(auth["to"], "[*]");
    assert!(
        auth.get("request_id").is_none(),
        "tied to no request: {auth}"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn under_refuse_the_running_config_stays_and_says_why() {
    let (files, _up) = files().await;
    let refuse = "[reload]\non_weakened = \"refuse\"";
    files.write(refuse, KEYED, REVIEWED_ARGS);
    let gw = start(&files).await;

    // The edit that weakens also tries to switch the refusal off: the
    // running config's setting decides.
    files.write("", "", WEAKER_ARGS);
    let Err(ReloadError::Weakened(list)) = gw.reload().await else {
        panic!("refused");
    };
    let named: Vec<&str> = list.0.iter().map(|w| w.control).collect();
    assert_eq!(
        named,
        ["reload.on_weakened", "arguments.shell", "route.auth"],
        "{list}"
    );
    assert!(
        list.to_string().contains("arguments.shell: enforce -> off"),
        "{list}"
    );
    assert_eq!(
        anonymous_status(&gw).await,
        401,
        "the reviewed config is in force"
    );
    let m = metrics(&gw).await;
    assert_eq!(
        series(&m, "portcullis_config_reloads_total{result=\"refused\"}"),
        1.0,
        "{m}"
    );
    assert_eq!(series(&m, "portcullis_config_stale"), 1.0);
    assert_eq!(weakened_series(&m, "route.auth", "test"), 1.0, "{m}");
    let lines = audit_lines(&files.audit()).await;
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines.iter().all(|l| l["outcome"] == "refused"), "{lines:?}");

    // An honest edit (reordered, strengthened) goes through, silently.
    files.write(refuse, KEYED, HONEST_ARGS);
    gw.reload().await.expect("nothing weaker");
    let m = metrics(&gw).await;
    assert_eq!(series(&m, "portcullis_config_stale"), 0.0);
    assert_eq!(weakened_series(&m, "arguments.allowed_hosts", "test"), 0.0);
    assert_eq!(
        weakened_series(&m, "arguments.shell", "test"),
        1.0,
        "unchanged"
    );
    assert_eq!(anonymous_status(&gw).await, 401);
    gw.shutdown().await;
}

#[tokio::test]
async fn an_honest_reload_says_nothing() {
    let (files, _up) = files().await;
    files.write("", KEYED, REVIEWED_ARGS);
    let gw = start(&files).await;
    files.write("", KEYED, HONEST_ARGS);
    gw.reload().await.unwrap();
    let m = metrics(&gw).await;
    assert!(
        !m.lines()
            .any(|l| l.starts_with("portcullis_config_weakened_total{")),
        "{m}"
    );
    gw.shutdown().await;
    let text = std::fs::read_to_string(files.audit()).unwrap_or_default();
    assert!(!text.contains("config_weakened"), "{text}");
}
