//! `[runtime] model = "per_core"`: worker threads with single-threaded
//! runtimes, each on its own SO_REUSEPORT socket, serve every request, keep
//! their upstream connections, and stop when the gateway drains.

use std::collections::HashSet;

use crate::common::*;

/// The names of this process's threads that are per-core workers.
fn worker_threads() -> HashSet<String> {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|c| c.trim().to_owned())
                .filter(|c| c.starts_with("portcullis-work"))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_core_workers_serve_every_connection_and_stop_with_the_gateway() {
    let up = answering_ok().await;
    let text = config_text(
        &up.url(),
        "",
        "[runtime]\nmodel = \"per_core\"\nworkers = 3\n",
    );
    let gw = std::sync::Arc::new(start_gateway(&text).await);
    assert_eq!(gw.workers_running(), 3);
    // A thread names itself once it first runs (the standard library sets
    // its name from inside): on a loaded machine that may be a moment after
    // the gateway started it. Other tests' gateways have workers too.
    let mut names = worker_threads();
    for _ in 0..100 {
        if names.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        names = worker_threads();
    }
    for i in 1..=3 {
        // comm is cut to 15 bytes.
        let name: String = format!("portcullis-worker-{i}").chars().take(15).collect();
        assert!(names.iter().any(|n| *n == name), "{name} in {names:?}");
    }
    let url = url(&gw);
    // 24 clients, each on a connection of its own, 5 calls each.
    let calls: Vec<_> = (0..24)
        .map(|c| {
            let url = url.clone();
            tokio::spawn(async move {
                let client = client();
                for n in 0..5 {
                    let id = format!("c{c}-{n}");
                    let resp = call(&client, &url, &id, "echo", serde_json::json!({}))
                        .send()
                        .await
                        .expect("answer");
                    assert_eq!(resp.status(), 200, "{id}");
                    let body = json_of(resp).await;
                    assert_eq!(body["id"], id.as_str(), "{body}");
                    assert_eq!(body["result"]["content"][0]["text"], "ok", "{body}");
                }
            })
        })
        .collect();
    for c in calls {
        c.await.expect("client");
    }
    assert_eq!(up.requests().len(), 120);
    // Each worker keeps its own upstream connections, used again: far
    // fewer than one per request.
    assert!(
        up.connections() <= 3 * 24,
        "{} connections",
        up.connections()
    );
    assert!(up.connections() >= 1);
    gw.clone().shutdown_shared().await;
    for _ in 0..50 {
        if gw.workers_running() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!(
        "{} workers still running after the drain",
        gw.workers_running()
    );
}

/// A stdio program started from a per-core worker lives on the shared
/// runtime: the worker's runtime stops in the drain, before the programs
/// are stopped, and the drain still ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_program_started_from_a_worker_stops_with_the_gateway() {
    let up = answering_ok().await;
    let text = UPSTREAM_KIND
        .scope(UpstreamKind::Stdio, async {
            config_text(
                &up.url(),
                "",
                "[runtime]\nmodel = \"per_core\"\nworkers = 2\n",
            )
        })
        .await;
    let gw = std::sync::Arc::new(start_gateway(&text).await);
    let resp = call(&client(), &url(&gw), "w1", "echo", serde_json::json!({}))
        .send()
        .await
        .expect("answer");
    assert_eq!(resp.status(), 200);
    let drained = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        gw.clone().shutdown_shared(),
    )
    .await;
    assert!(drained.is_ok(), "the drain did not end");
    assert_eq!(up.requests().len(), 1);
}

#[tokio::test]
async fn a_listener_handed_over_is_shared_by_the_workers() {
    let up = answering_ok().await;
    let text = config_text(
        &up.url(),
        "",
        "[runtime]\nmodel = \"per_core\"\nworkers = 2\n",
    );
    install_crypto();
    let config = portcullis::config::GatewayConfig::parse(&text, std::path::Path::new("t.toml"))
        .expect("valid");
    let handed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = handed.local_addr().expect("addr");
    let gw = portcullis::server::RunningGateway::start_with(
        config,
        vec![handed],
        portcullis::model::system_clock(),
    )
    .await
    .expect("starts");
    assert_eq!(gw.addrs[0], addr);
    let url = format!("http://{addr}/mcp");
    for n in 0..10 {
        let resp = call(
            &client(),
            &url,
            &format!("h{n}"),
            "echo",
            serde_json::json!({}),
        )
        .send()
        .await
        .expect("answer");
        assert_eq!(resp.status(), 200);
    }
    gw.shutdown().await;
}
