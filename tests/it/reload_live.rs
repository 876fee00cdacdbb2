//! A reload swaps settings, not live things: upstream connection pools and
//! JWKS key sets outlive a reload that leaves their settings alone, a
//! changed upstream gets a pool of its own, a JWKS that is slow or down
//! after a reload costs no JWT caller a 401, and `/readyz` waits for the
//! first key sets.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::common::*;
use portcullis::config::GatewayConfig;
use portcullis::server::RunningGateway;

const BIN: &str = env!("CARGO_BIN_EXE_portcullis");
const ISSUER: &str = "https://idp.example";

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

/// A gateway config file whose upstream reads the policy file `p.toml`
/// of the folder `policies` (what the reloads below edit).
struct Files {
    _dir: tempfile::TempDir,
    config: PathBuf,
    policy: PathBuf,
    policies: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let policies = dir.path().join("policies");
        std::fs::create_dir(&policies).unwrap();
        let files = Files {
            config: dir.path().join("gateway.toml"),
            policy: policies.join("p.toml"),
            policies,
            _dir: dir,
        };
        files.edit_policy(0);
        files
    }

    /// The n-th edit of the policy file (two valid policies, alternately).
    fn edit_policy(&self, n: usize) {
        let action = if n.is_multiple_of(2) {
            "block"
        } else {
            "strip"
        };
        let text = format!("# edit {n}\n[secret_fields]\naction = \"{action}\"\n");
        std::fs::write(&self.policy, text).unwrap();
    }

    /// The config: one upstream at `upstream` (with `upstream_extra`),
    /// routed at /mcp (behind the auth scheme `corp` when `extra` defines
    /// one), and `extra`.
    fn write(&self, upstream: &str, upstream_extra: &str, extra: &str) {
        let extra = format!("[policies]\ndir = \"{}\"\n{extra}", self.policies.display());
        let mut text = config_text(
            upstream,
            &format!("policy = \"p\"\n{upstream_extra}"),
            &extra,
        );
        if extra.contains("[[auth]]") {
            text = text.replace(
                "upstream = \"test\"\n",
                "upstream = \"test\"\nauth = [\"corp\"]\n",
            );
        }
        std::fs::write(&self.config, text).unwrap();
    }
}

async fn start_from(path: &Path) -> Arc<RunningGateway> {
    install_crypto();
    let config = GatewayConfig::load(path).unwrap();
    Arc::new(RunningGateway::start(config).await.unwrap())
}

async fn call_ok(url: &str, id: &str) -> u16 {
    call(&client(), url, id, "get_room", json!({}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn readyz(gw: &RunningGateway) -> u16 {
    let admin = gw.admin_addr.expect("an admin listener");
    client()
        .get(format!("http://{admin}/readyz"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Requests sent continuously by `workers` tasks until `stop`, counted by
/// status (0: no answer).
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    statuses: Arc<Mutex<std::collections::BTreeMap<u16, u64>>>,
}

impl Load {
    fn start(url: &str, workers: usize, bearer: Option<String>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let statuses = Arc::new(Mutex::new(std::collections::BTreeMap::new()));
        let tasks = (0..workers)
            .map(|w| {
                let (url, stop, statuses) = (url.to_owned(), stop.clone(), statuses.clone());
                let bearer = bearer.clone();
                tokio::spawn(async move {
                    let c = client();
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let mut req = call(&c, &url, &format!("w{w}-{i}"), "get_room", json!({}));
                        if let Some(t) = &bearer {
                            req = req.bearer_auth(t);
                        }
                        let status = match req.send().await {
                            Ok(resp) => {
                                let s = resp.status().as_u16();
                                if resp.bytes().await.is_ok() {
                                    s
                                } else {
                                    0
                                }
                            }
                            Err(_) => 0,
                        };
                        *statuses.lock().unwrap().entry(status).or_default() += 1;
                    }
                })
            })
            .collect();
        Load {
            stop,
            tasks,
            statuses,
        }
    }

    async fn finish(self) -> std::collections::BTreeMap<u16, u64> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
        self.statuses.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_policy_reloads_under_load_dial_no_new_upstream_connection() {
    let up = ScriptedUpstream::start(ok_result).await;
    let files = Files::new();
    files.write(&up.url(), "", "");
    let gw = start_from(&files.config).await;
    let url = url(&gw);
    let load = Load::start(&url, 4, None);
    // Warm up: the pool holds as many connections as the load keeps busy.
    let deadline = Instant::now() + Duration::from_secs(30);
    while up.requests().len() < 100 {
        assert!(Instant::now() < deadline, "the load reached the upstream");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let warm = up.connections();
    let requests_before = up.requests().len();
    for n in 1..=20 {
        tokio::time::sleep(Duration::from_millis(40)).await;
        files.edit_policy(n);
        gw.reload().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let statuses = load.finish().await;
    let requests_during = up.requests().len() - requests_before;
    assert_eq!(
        statuses.keys().copied().collect::<Vec<_>>(),
        vec![200],
        "every request answered 200: {statuses:?}"
    );
    assert!(
        requests_during > 100,
        "load was light: {requests_during} requests"
    );
    assert_eq!(
        up.connections(),
        warm,
        "new upstream connections across 20 reloads ({requests_during} requests)"
    );
    let m = metrics(&gw).await;
    assert!(
        m.contains("portcullis_config_reloads_total{result=\"success\"} 21"),
        "{m}"
    );
    gw.shutdown_shared().await;
}

/// Both runtime models, each counting the connections of one pool: under
/// `per_core` every worker keeps its own idle connections (a client
/// connection another worker accepts dials anew), so that run has one.
#[tokio::test]
async fn a_changed_upstream_or_pool_setting_gets_a_new_pool() {
    for runtime in [
        "[runtime]\nmodel = \"shared\"\n",
        "[runtime]\nmodel = \"per_core\"\nworkers = 1\n",
    ] {
        a_new_pool_for_new_settings(runtime).await;
    }
}

async fn a_new_pool_for_new_settings(runtime: &str) {
    let (a, b) = (
        ScriptedUpstream::start(ok_result).await,
        ScriptedUpstream::start(ok_result).await,
    );
    let files = Files::new();
    files.write(&a.url(), "", runtime);
    let gw = start_from(&files.config).await;
    let url = url(&gw);
    assert_eq!(call_ok(&url, "1").await, 200);
    assert_eq!(a.connections(), 1, "{runtime}");
    // Unchanged connection settings (a policy edit): the same connection.
    files.edit_policy(1);
    gw.reload().await.unwrap();
    assert_eq!(call_ok(&url, "2").await, 200);
    assert_eq!((a.connections(), a.requests().len()), (1, 2), "{runtime}");
    // A pool setting changed: a new pool, so a new connection.
    files.write(&a.url(), "pool_max_idle_per_host = 8", runtime);
    gw.reload().await.unwrap();
    assert_eq!(call_ok(&url, "3").await, 200);
    assert_eq!((a.connections(), a.requests().len()), (2, 3), "{runtime}");
    // Another URL: the new upstream is dialled, the old one sees nothing more.
    files.write(&b.url(), "pool_max_idle_per_host = 8", runtime);
    gw.reload().await.unwrap();
    assert_eq!(call_ok(&url, "4").await, 200);
    assert_eq!((b.connections(), b.requests().len()), (1, 1), "{runtime}");
    assert_eq!(a.requests().len(), 3, "{runtime}");
    gw.shutdown_shared().await;
}

/// How the test identity provider answers.
#[derive(Clone, Copy, Debug)]
enum Idp {
    Up,
    /// Answers after this long.
    Slow(Duration),
    /// Closes every connection without an answer.
    Down,
}

/// A JWKS endpoint over loopback whose behaviour the test switches.
struct Jwks {
    addr: std::net::SocketAddr,
    mode: Arc<Mutex<Idp>>,
    served: Arc<AtomicU64>,
}

impl Jwks {
    async fn start(doc: String, mode: Idp) -> Jwks {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mode = Arc::new(Mutex::new(mode));
        let served = Arc::new(AtomicU64::new(0));
        let (m, s) = (mode.clone(), served.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (doc, m, s) = (doc.clone(), m.clone(), s.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let mode = *m.lock().unwrap();
                    match mode {
                        Idp::Down => return,
                        Idp::Slow(d) => tokio::time::sleep(d).await,
                        Idp::Up => {}
                    }
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{doc}",
                        doc.len()
                    );
                    if stream.write_all(resp.as_bytes()).await.is_ok() {
                        s.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        Jwks { addr, mode, served }
    }

    fn set(&self, mode: Idp) {
        *self.mode.lock().unwrap() = mode;
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// An ES256 key: its JWKS document and a token for `alice` it signed.
fn signed() -> (String, String) {
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let raw = kp.public_key_raw();
    let doc = json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig",
        "x": b64(&raw[1..33]), "y": b64(&raw[33..])}]});
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"sub": "alice", "iss": ISSUER, "aud": "portcullis", "exp": now + 600});
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("k1".into());
    let key = jsonwebtoken::EncodingKey::from_ec_der(&kp.serialize_der());
    let token = jsonwebtoken::encode(&header, &claims, &key).unwrap();
    (doc.to_string(), token)
}

fn jwt_scheme(jwks_url: &str, extra: &str) -> String {
    format!(
        "[[auth]]\nname = \"corp\"\ntype = \"jwt\"\nissuer = \"{ISSUER}\"\naudience = \"portcullis\"\nalgorithms = [\"ES256\"]\njwks_url = \"{jwks_url}\"\n{extra}\n"
    )
}

async fn eventually_ready(gw: &RunningGateway, within: Duration) {
    let deadline = Instant::now() + within;
    while readyz(gw).await != 200 {
        assert!(Instant::now() < deadline, "not ready within {within:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_callers_see_no_401_across_reloads_while_the_jwks_is_slow_then_down() {
    let up = ScriptedUpstream::start(ok_result).await;
    let (doc, token) = signed();
    let idp = Jwks::start(doc, Idp::Up).await;
    let files = Files::new();
    let scheme = |path: &str| jwt_scheme(&idp.url(path), "jwks_refresh = \"200ms\"");
    files.write(&up.url(), "", &scheme("/jwks.json"));
    let gw = start_from(&files.config).await;
    eventually_ready(&gw, Duration::from_secs(5)).await;
    let load = Load::start(&url(&gw), 2, Some(token));
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Slow (2 s per answer), then down: five reloads each, one of them to
    // another URL of the same provider (its first fetch is slow or fails:
    // the keys are kept) and, while down, one back to the first URL.
    for (state, rounds, other_url_at) in [
        (Idp::Slow(Duration::from_secs(2)), 1..=5, 3),
        (Idp::Down, 6..=10, 8),
    ] {
        idp.set(state);
        for n in rounds {
            files.edit_policy(n);
            let path = if n == other_url_at {
                "/keys/v2.json"
            } else {
                "/jwks.json"
            };
            files.write(&up.url(), "", &scheme(path));
            gw.reload().await.unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let statuses = load.finish().await;
    assert_eq!(
        statuses.keys().copied().collect::<Vec<_>>(),
        vec![200],
        "every JWT call answered 200 across the reloads: {statuses:?}"
    );
    assert!(statuses[&200] > 50, "load was light: {statuses:?}");
    let m = metrics(&gw).await;
    let failures = m
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!(
                "portcullis_jwks_fetch_failures_total{{issuer=\"{ISSUER}\"}} "
            ))
        })
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no JWKS failure count: {m}"));
    assert!(failures >= 1, "failed fetches counted: {failures}");
    gw.shutdown_shared().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_first_key_set() {
    let up = ScriptedUpstream::start(ok_result).await;
    let (doc, token) = signed();
    let idp = Jwks::start(doc, Idp::Slow(Duration::from_millis(1500))).await;
    let files = Files::new();
    files.write(&up.url(), "", &jwt_scheme(&idp.url("/jwks.json"), ""));
    let started = Instant::now();
    let gw = start_from(&files.config).await;
    assert_eq!(
        readyz(&gw).await,
        503,
        "not ready while the fetch is pending"
    );
    eventually_ready(&gw, Duration::from_secs(8)).await;
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "ready only once the slow fetch landed ({:?})",
        started.elapsed()
    );
    assert_eq!(idp.served.load(Ordering::SeqCst), 1);
    let status = call(&client(), &url(&gw), "1", "get_room", json!({}))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200, "the first JWT caller is let in");
    gw.shutdown_shared().await;
}

#[tokio::test]
async fn a_jwks_that_cannot_be_fetched_is_named_in_the_log_and_readiness_waits_boundedly() {
    let up = ScriptedUpstream::start(ok_result).await;
    let (doc, _) = signed();
    let idp = Jwks::start(doc, Idp::Down).await;
    let files = Files::new();
    // The query stands for what a careless setup might put in a URL: never logged.
    let jwks_url = idp.url("/jwks.json?client_secret=never-logged");
    files.write(
        &up.url(),
        "",
        &jwt_scheme(&jwks_url, "jwks_ready_timeout = \"2s\""),
    );
    let dir = tempfile::tempdir().unwrap();
    let (stderr, log) = log_file(dir.path(), "gateway.log");
    let mut child = std::process::Command::new(BIN)
        .args(["run", "--config"])
        .arg(&files.config)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let bound = bound_from_log(&log, 1, true).await;
    let admin = bound.admin.unwrap();
    let ready = || async move {
        client()
            .get(format!("http://{admin}/readyz"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let first = ready().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while ready().await != 200 {
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(first, 503, "not ready while the JWKS wait lasts");
    let named = idp.url("/jwks.json");
    assert!(
        text.lines()
            .any(|l| l.contains(&named) && l.contains("jwks_ready_timeout")),
        "a line names {named}:\n{text}"
    );
    assert!(!text.contains("never-logged"), "{text}");
}

/// Connections the Redis server has accepted so far, asked on `conn`.
async fn redis_connections(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no connection count in {info}"))
}

#[tokio::test]
async fn reloads_that_change_the_rate_limits_keep_the_redis_connection() {
    if !crate::throttle_redis::redis_installed() {
        return;
    }
    let redis = crate::throttle_redis::RedisServer::start().await;
    let mut probe = ::redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let up = ScriptedUpstream::start(ok_result).await;
    let files = Files::new();
    let limits = |rate: u32| {
        format!(
            "[rate_limits]\nbackend = \"redis\"\nredis_url = \"{}\"\nper_principal = {{ rate = \"{rate}/s\" }}\n",
            redis.url()
        )
    };
    files.write(&up.url(), "", &limits(1000));
    let gw = start_from(&files.config).await;
    let url = url(&gw);
    assert_eq!(call_ok(&url, "0").await, 200);
    let before = redis_connections(&mut probe).await;
    for n in 1..=10 {
        files.write(&up.url(), "", &limits(1000 + n));
        gw.reload().await.unwrap();
        assert_eq!(call_ok(&url, &n.to_string()).await, 200);
    }
    assert_eq!(
        redis_connections(&mut probe).await,
        before,
        "Redis connections opened across 10 reloads of the limits"
    );
    // Another Redis setting: a connection of its own.
    let other = limits(1000).replace("per_principal", "redis_timeout = \"80ms\"\nper_principal");
    files.write(&up.url(), "", &other);
    gw.reload().await.unwrap();
    assert_eq!(call_ok(&url, "x").await, 200);
    assert!(redis_connections(&mut probe).await > before);
    gw.shutdown_shared().await;
}
