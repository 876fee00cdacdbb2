//! A second gateway, scraped beside the first, whose own backends fail: its
//! Redis is not there (rate limiter, pinned listings, single-use store), its
//! audit file cannot be opened, and a reload changes a setting that needs a
//! restart. Its traffic is a list and questions answered (each retry
//! refused: the single-use store cannot be asked).

use std::path::Path;

use crate::common::*;
use crate::failure_metrics::{ask_and_answer, asking_server, dead_address};
use portcullis::config::GatewayConfig;
use portcullis::server::RunningGateway;
use serde_json::json;

pub(super) struct Failing {
    pub gw: RunningGateway,
    _upstream: ScriptedUpstream,
    _redis: tokio::net::TcpSocket,
    dir: tempfile::TempDir,
    config: String,
}

impl Failing {
    pub async fn start() -> Failing {
        let upstream = asking_server().await;
        let (dead, redis) = dead_address();
        let dir = tempfile::tempdir().unwrap();
        let policies = dir.path().join("policies");
        std::fs::create_dir(&policies).unwrap();
        std::fs::write(
            policies.join("allow.toml"),
            "extends = \"untrusted\"\n[listing]\non_change = \"allow\"\n",
        )
        .unwrap();
        // A link into a directory that is not there: the file cannot be opened.
        let audit = dir.path().join("audit.jsonl");
        std::os::unix::fs::symlink(dir.path().join("gone").join("audit.jsonl"), &audit).unwrap();
        let extra = format!(
            "[policies]\ndir = \"{policies}\"\n\
             [rate_limits]\nbackend = \"redis\"\nredis_url = \"redis://{dead}\"\nredis_failure = \"local\"\n\
             per_principal = {{ rate = \"1000/s\", burst = 1000 }}\n\
             [state]\nsingle_use_backend = \"redis\"\nredis_url = \"redis://{dead}\"\n",
            policies = policies.display()
        );
        let config = config_text(&upstream.url(), "policy = \"allow\"", &extra).replace(
            "[audit]\nsink = \"off\"",
            &format!("[audit]\nsink = \"file\"\npath = \"{}\"", audit.display()),
        );
        let path = dir.path().join("failing.toml");
        std::fs::write(&path, &config).unwrap();
        let gw = RunningGateway::start(GatewayConfig::load(&path).expect("config"))
            .await
            .expect("the failing gateway starts");
        Failing {
            gw,
            _upstream: upstream,
            _redis: redis,
            dir,
            config,
        }
    }

    /// A list and `questions` questions answered.
    pub async fn traffic(&self, questions: usize) {
        let c = client();
        let url = url(&self.gw);
        let list = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": VERSION}}});
        let listed = c
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", VERSION)
            .header("mcp-method", "tools/list")
            .body(list.to_string())
            .send()
            .await
            .unwrap();
        let listed = json_of(listed).await;
        assert!(
            listed["result"]["tools"].is_array(),
            "delivered unchecked: {listed}"
        );
        for n in 0..questions {
            let answered = ask_and_answer(&c, &url, n).await;
            assert_eq!(
                answered["error"]["data"]["reason"], "state_store_unavailable",
                "{answered}"
            );
        }
    }

    /// A reload that changes a setting only a restart applies.
    pub async fn reload_needing_a_restart(&self) {
        let path: &Path = &self.dir.path().join("failing.toml");
        std::fs::write(
            path,
            format!("{}\n[limits]\nmax_connections = 77\n", self.config),
        )
        .unwrap();
        self.gw.reload().await.expect("the changed config reloads");
    }
}
