//! The Prometheus the dashboard test runs (Debian's `prometheus`): started
//! on a port it picks, scraping the given gateways every second with
//! `deploy/prometheus/alerts.yml` loaded, and asked through its HTTP API.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::ROOT;
use crate::common::client;

pub(super) fn prometheus_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PORTCULLIS_PROMETHEUS") {
        return Some(PathBuf::from(p));
    }
    let debian = Path::new("/usr/bin/prometheus");
    if debian.is_file() {
        return Some(debian.to_owned());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("prometheus"))
            .find(|p| p.is_file())
    })
}

/// A Prometheus process, killed when dropped.
pub(super) struct Prometheus {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The port Prometheus logs it listens on (it binds port 0 itself, so no
/// other process can take the port between choosing and binding it).
fn listening_port(log: &str) -> Option<u16> {
    log.lines()
        .filter(|l| l.contains("msg=\"Listening on\""))
        .find_map(|l| l.rsplit("address=127.0.0.1:").next()?.trim().parse().ok())
}

impl Prometheus {
    pub(super) async fn start(binary: &Path, targets: &[std::net::SocketAddr]) -> Prometheus {
        let target = targets
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let dir = tempfile::tempdir().expect("tempdir");
        let rules = Path::new(ROOT).join("deploy/prometheus/alerts.yml");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: portcullis\n    static_configs:\n      - targets: [{target}]\n",
            rules.display()
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let log_path = dir.path().join("prometheus.log");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(&log_path).expect("log file"),
            ))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            if let Some(port) = listening_port(&log) {
                break port;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus did not start in 30 s; its log:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let p = Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while p.vector(r#"up{job="portcullis"} == 1"#).await.len() != targets.len() {
            assert!(
                Instant::now() < deadline,
                "prometheus did not get ready or scrape the gateway in 30 s; its log:\n{}",
                std::fs::read_to_string(p._dir.path().join("prometheus.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        p
    }

    async fn api(&self, path: &str, params: &[(&str, &str)]) -> Result<Value, String> {
        let url = url::Url::parse_with_params(&format!("{}{path}", self.base), params)
            .map_err(|e| e.to_string())?;
        let resp = client().get(url).send().await.map_err(|e| e.to_string())?;
        let v: Value = resp.json().await.map_err(|e| e.to_string())?;
        match v["status"].as_str() {
            Some("success") => Ok(v["data"].clone()),
            _ => Err(format!("{}: {}", v["errorType"], v["error"])),
        }
    }

    /// An instant query's vector (empty when prometheus is not up yet).
    async fn vector(&self, expr: &str) -> Vec<Value> {
        self.query(expr).await.unwrap_or_default()
    }

    pub(super) async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let data = self.api("/api/v1/query", &[("query", expr)]).await?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// Every rule as Prometheus loaded it: name, kind, expression.
    pub(super) async fn rules(&self) -> Vec<(String, String, String)> {
        let data = self.api("/api/v1/rules", &[]).await.expect("rules api");
        let mut out = Vec::new();
        for group in data["groups"].as_array().into_iter().flatten() {
            for rule in group["rules"].as_array().into_iter().flatten() {
                assert_eq!(
                    rule["health"].as_str().unwrap_or("unknown"),
                    "ok",
                    "rule {} does not evaluate: {}",
                    rule["name"],
                    rule["lastError"]
                );
                out.push((
                    rule["name"].as_str().unwrap_or("?").to_owned(),
                    rule["type"].as_str().unwrap_or("?").to_owned(),
                    rule["query"].as_str().unwrap_or("").to_owned(),
                ));
            }
        }
        out
    }
}

/// Samples with a number (histogram_quantile over an idle series is NaN).
pub(super) fn finite(samples: &[Value]) -> usize {
    samples
        .iter()
        .filter(|s| {
            s["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(f64::is_finite)
        })
        .count()
}

pub(super) fn label_values(samples: &[Value], label: &str) -> BTreeSet<String> {
    samples
        .iter()
        .filter_map(|s| s["metric"][label].as_str().map(str::to_owned))
        .collect()
}
