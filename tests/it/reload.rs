//! Hot reload: the new config is validated in full and swapped atomically;
//! a bad file keeps the old config running; in-flight requests finish under
//! the config they started with; no request is lost during reloads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use portcullis::config::GatewayConfig;
use portcullis::server::RunningGateway;
use serde_json::json;

fn ok_result(req: &Received) -> Vec<Step> {
    vec![http_response(
        "200 OK",
        "application/json",
        &result_json(
            &id_of(req),
            json!({"resultType": "complete", "content": []}),
        ),
    )]
}

fn write_config(path: &std::path::Path, upstream: &str, name: &str) {
    let text = config_text(upstream, "", "")
        .replace("name = \"Test upstream\"", &format!("name = \"{name}\""));
    std::fs::write(path, text).unwrap();
}

async fn upstream_name_seen(c: &reqwest::Client, url: &str) -> String {
    // A refused request names the configured upstream.
    let resp = call_with(
        c,
        url,
        "n",
        "get_room",
        json!({}),
        &[("mcp-name", Some("other"))],
    )
    .send()
    .await
    .unwrap();
    json_of(resp).await["error"]["data"]["upstream"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn start_from(path: &std::path::Path) -> Arc<RunningGateway> {
    install_crypto();
    let config = GatewayConfig::load(path).unwrap();
    Arc::new(RunningGateway::start(config).await.unwrap())
}

#[tokio::test]
async fn twenty_reloads_under_load_lose_no_request() {
    let up = ScriptedUpstream::start(ok_result).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    write_config(&path, &up.url(), "Upstream v0");
    let gw = start_from(&path).await;
    let url = url(&gw);
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut load = Vec::new();
    for w in 0..4 {
        let (url, stop, ok, failed) = (url.clone(), stop.clone(), ok.clone(), failed.clone());
        load.push(tokio::spawn(async move {
            let c = client();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let good = match call(&c, &url, &format!("w{w}-{i}"), "get_room", json!({}))
                    .send()
                    .await
                {
                    Ok(resp) => resp.status() == 200 && resp.bytes().await.is_ok(),
                    Err(_) => false,
                };
                let counter = if good { &ok } else { &failed };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for i in 1..=20 {
        tokio::time::sleep(Duration::from_millis(40)).await;
        write_config(&path, &up.url(), &format!("Upstream v{i}"));
        gw.reload().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.unwrap();
    }
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests lost during reloads"
    );
    assert!(
        ok.load(Ordering::Relaxed) > 100,
        "load was light: {}",
        ok.load(Ordering::Relaxed)
    );
    assert_eq!(upstream_name_seen(&client(), &url).await, "Upstream v20");
    let m = metrics(&gw).await;
    assert!(
        m.contains("portcullis_config_reloads_total{result=\"success\"} 21"),
        "{m}"
    );
    gw.shutdown_shared().await;
}

#[tokio::test]
async fn a_bad_file_keeps_the_old_config_and_says_why() {
    let up = ScriptedUpstream::start(ok_result).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    write_config(&path, &up.url(), "Good");
    let gw = start_from(&path).await;
    std::fs::write(&path, "[[listener]]\naddress = \"127.0.0.1:0\"\n[[upstream]]\nid = \"test\"\nname = \"Broken\"\nurl = \"ftp://x\"\n").unwrap();
    let err = gw.reload().await.unwrap_err().to_string();
    assert!(
        err.contains("gateway.toml:6") && err.contains("upstream[0].url"),
        "{err}"
    );
    assert_eq!(upstream_name_seen(&client(), &url(&gw)).await, "Good");
    let m = metrics(&gw).await;
    assert!(
        m.contains("portcullis_config_reloads_total{result=\"failure\"} 1"),
        "{m}"
    );
    gw.shutdown_shared().await;
}

#[tokio::test]
async fn a_changed_file_is_picked_up_and_in_flight_requests_finish_under_their_config() {
    let slow = ScriptedUpstream::start(|req| {
        let mut s = vec![Step::Sleep(Duration::from_millis(600))];
        s.extend(ok_result(req));
        s
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    write_config(&path, &slow.url(), "Before");
    let gw = start_from(&path).await;
    gw.watch_files(Duration::from_millis(100));
    let url = url(&gw);
    let in_flight = tokio::spawn({
        let url = url.clone();
        async move {
            call(&client(), &url, "slow", "get_room", json!({}))
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    tokio::time::sleep(Duration::from_millis(250)).await;
    // A new upstream URL: the in-flight request still completes against the old one.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    std::fs::write(
        &path,
        config_text(&format!("http://{dead}/mcp"), "", "").replace("Test upstream", "After"),
    )
    .unwrap();
    let mut seen = String::new();
    for _ in 0..40 {
        seen = upstream_name_seen(&client(), &url).await;
        if seen == "After" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen, "After", "the file watcher reloaded");
    assert_eq!(
        in_flight.await.unwrap(),
        200,
        "the in-flight request finished under its config"
    );
    gw.shutdown_shared().await;
}
