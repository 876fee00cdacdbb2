//! Cluster-mode rate limits against a real `redis-server`: two `Throttle`
//! instances (two gateway instances) sharing one Redis.
//!
//! Each test starts its own `redis-server` on a unix socket in its own
//! temporary directory (no TCP port: nothing to race for; killed on drop). Without the binary the tests print "skipped" and pass, unless
//! `PORTCULLIS_REQUIRE_PEERS=1` (CI), where they fail.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use portcullis::throttle::{RateLimited, RawRateLimits, Scope, Throttle, ThrottleError};
use serde::Deserialize;
use toml::Spanned;

pub(crate) struct RedisServer {
    dir: tempfile::TempDir,
    child: Option<Child>,
}

pub(crate) fn redis_installed() -> bool {
    let ok = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("PORTCULLIS_REQUIRE_PEERS").as_deref() == Ok("1") {
            panic!("redis-server not installed and PORTCULLIS_REQUIRE_PEERS=1");
        }
        println!("skipped: redis-server not installed");
    }
    ok
}

impl RedisServer {
    /// A socket path for a server that is not running yet.
    fn not_started() -> Self {
        RedisServer {
            dir: tempfile::tempdir().expect("temporary directory"),
            child: None,
        }
    }

    fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("redis.sock")
    }

    pub(crate) async fn start() -> Self {
        let mut s = Self::not_started();
        s.restart().await;
        s
    }

    pub(crate) fn url(&self) -> String {
        format!("redis+unix://{}?db=0", self.socket().display())
    }

    /// (Re)starts the server on the same socket and waits until it answers.
    async fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--unixsocket",
                &self.socket().display().to_string(),
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = self.connection().await {
                let pong: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut c).await;
                if pong.is_ok() {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    async fn connection(&self) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        redis::Client::open(self.url())?
            .get_multiplexed_async_connection()
            .await
    }

    pub(crate) async fn keys(&self, pattern: &str) -> Vec<String> {
        let mut c = self.connection().await.unwrap();
        redis::cmd("KEYS")
            .arg(pattern)
            .query_async(&mut c)
            .await
            .unwrap()
    }

    async fn pttl(&self, key: &str) -> i64 {
        let mut c = self.connection().await.unwrap();
        redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut c)
            .await
            .unwrap()
    }

    async fn exists(&self, key: &str) -> bool {
        let mut c = self.connection().await.unwrap();
        let n: i64 = redis::cmd("EXISTS")
            .arg(key)
            .query_async(&mut c)
            .await
            .unwrap();
        n == 1
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

#[derive(Deserialize)]
struct Top {
    rate_limits: Option<Spanned<RawRateLimits>>,
}

/// A started throttle (one "gateway instance") with `limits` plus the Redis
/// backend settings.
async fn instance(redis: &RedisServer, limits: &str, failure: &str, prefix: &str) -> Throttle {
    let text = format!(
        "[rate_limits]\n{limits}\nbackend = \"redis\"\nredis_url = \"{}\"\n\
         redis_failure = \"{failure}\"\nredis_timeout = \"250ms\"\nkey_prefix = \"{prefix}\"\n",
        redis.url()
    );
    let top: Top = toml::from_str(&text).unwrap();
    let t = Throttle::build(top.rate_limits.as_ref()).unwrap();
    assert_eq!(t.backend(), "redis");
    t.start().await;
    t
}

async fn check(t: &Throttle, key: &str) -> Result<(), RateLimited> {
    t.check(Scope::Principal, key)
        .await
        .expect("backend available")
}

/// Polls until both instances answer from Redis again.
async fn wait_until_shared(instances: &[&Throttle]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut i = 0u32;
    loop {
        for t in instances {
            i += 1;
            let _ = t.check(Scope::Principal, &format!("probe-{i}")).await;
        }
        if instances.iter().all(|t| t.redis_available() == Some(true)) {
            return;
        }
        assert!(Instant::now() < deadline, "Redis never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_limit() {
    if !redis_installed() {
        return;
    }
    let redis = RedisServer::start().await;
    let limits = "per_principal = { rate = \"10/s\", burst = 5 }";
    let a = instance(&redis, limits, "refuse", "pc:").await;
    let b = instance(&redis, limits, "refuse", "pc:").await;
    assert_eq!(a.redis_available(), Some(true));

    // The burst of 5 is consumed across both instances...
    for t in [&a, &b, &a, &b, &a] {
        assert_eq!(check(t, "alice").await, Ok(()));
    }
    // ...and both refuse the 6th.
    for t in [&a, &b] {
        let e = check(t, "alice").await.unwrap_err();
        assert_eq!(e.scope, Scope::Principal);
        assert!(
            e.retry_after > Duration::ZERO && e.retry_after <= Duration::from_millis(100),
            "{:?}",
            e.retry_after
        );
    }
    // Others are not affected; nothing was kept locally.
    assert_eq!(check(&b, "bob").await, Ok(()));
    assert_eq!(a.key_count(Scope::Principal), 0);
    assert_eq!(b.key_count(Scope::Principal), 0);

    // After the advertised wait, exactly one more conforms (cluster-wide).
    let e = check(&a, "alice").await.unwrap_err();
    tokio::time::sleep(e.retry_after + Duration::from_millis(5)).await;
    assert_eq!(check(&b, "alice").await, Ok(()));
    assert!(check(&a, "alice").await.is_err());

    // Another key prefix is another cluster: separate budgets.
    let c = instance(&redis, limits, "refuse", "other:").await;
    assert_eq!(check(&c, "alice").await, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_and_key_expiry() {
    if !redis_installed() {
        return;
    }
    let redis = RedisServer::start().await;
    // 1/m, burst 2: two at once, then one a minute.
    let a = instance(
        &redis,
        "per_principal = { rate = \"1/m\", burst = 2 }",
        "refuse",
        "t1:",
    )
    .await;
    let b = instance(
        &redis,
        "per_principal = { rate = \"1/m\", burst = 2 }",
        "refuse",
        "t1:",
    )
    .await;
    assert_eq!(check(&a, "alice").await, Ok(()));
    assert_eq!(check(&b, "alice").await, Ok(()));
    let e = check(&a, "alice").await.unwrap_err();
    assert!(
        e.retry_after > Duration::from_secs(59) && e.retry_after <= Duration::from_secs(60),
        "{:?}",
        e.retry_after
    );
    assert_eq!(e.retry_after_secs(), 60);

    // One key, hashed (no principal name in Redis), expiring when its state
    // would be fresh again: two units at one per minute = 120 s.
    let keys = redis.keys("t1:*").await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].starts_with("t1:principal:") && !keys[0].contains("alice"));
    let ttl = redis.pttl(&keys[0]).await;
    assert!((118_000..=120_000).contains(&ttl), "pttl {ttl}");

    // A fast limit's keys vanish within milliseconds.
    let fast = instance(
        &redis,
        "per_principal = { rate = \"20/s\", burst = 1 }",
        "refuse",
        "t2:",
    )
    .await;
    assert_eq!(check(&fast, "bob").await, Ok(()));
    let keys = redis.keys("t2:*").await;
    assert_eq!(keys.len(), 1);
    let ttl = redis.pttl(&keys[0]).await;
    assert!((1..=50).contains(&ttl), "pttl {ttl}");
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(!redis.exists(&keys[0]).await);
    // And bob is fresh again.
    assert_eq!(check(&fast, "bob").await, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_falls_back_to_local_limits_then_recovers() {
    if !redis_installed() {
        return;
    }
    let mut redis = RedisServer::start().await;
    let limits = "per_principal = { rate = \"1/m\", burst = 3 }";
    let a = instance(&redis, limits, "local", "o:").await;
    let b = instance(&redis, limits, "local", "o:").await;

    for t in [&a, &b, &a] {
        assert_eq!(check(t, "alice").await, Ok(()));
    }
    assert!(check(&b, "alice").await.is_err());

    redis.kill();

    // Each instance now answers from its own local limiter (a fresh budget
    // of 3 per instance), promptly and without errors.
    for t in [&a, &b] {
        for i in 0..3 {
            let started = Instant::now();
            assert_eq!(check(t, "alice").await, Ok(()), "local request {i}");
            assert!(started.elapsed() < Duration::from_secs(1));
        }
        let e = check(t, "alice").await.unwrap_err();
        assert!(
            e.retry_after > Duration::from_secs(59),
            "{:?}",
            e.retry_after
        );
        assert_eq!(t.redis_available(), Some(false));
        assert_eq!(t.key_count(Scope::Principal), 1);
    }
    // Many requests during the outage stay fast (Redis is probed at most
    // every 500 ms, not on every request).
    let started = Instant::now();
    for i in 0..200 {
        let _ = check(&a, &format!("user-{i}")).await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    redis.restart().await;
    wait_until_shared(&[&a, &b]).await;

    // Shared again: carol's burst of 3 is spread over both instances.
    for t in [&a, &b, &b] {
        assert_eq!(check(t, "carol").await, Ok(()));
    }
    assert!(check(&a, "carol").await.is_err());
    assert!(check(&b, "carol").await.is_err());
    assert!(!redis.keys("o:principal:*").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_with_refuse_is_unavailable_then_recovers() {
    if !redis_installed() {
        return;
    }
    // Redis not running yet when the instance starts.
    let mut redis = RedisServer::not_started();
    let limits = "per_principal = { rate = \"100/s\" }";
    let a = instance(&redis, limits, "refuse", "r:").await;
    assert_eq!(a.redis_available(), Some(false));
    assert!(matches!(
        a.check(Scope::Principal, "alice").await,
        Err(ThrottleError::Unavailable)
    ));
    // Unlimited scopes do not depend on Redis.
    assert!(matches!(
        a.check(Scope::PrincipalTool, "alice").await,
        Ok(Ok(()))
    ));

    // Redis comes up: the background task connects.
    redis.restart().await;
    let b = instance(&redis, limits, "refuse", "r:").await;
    wait_until_shared(&[&a, &b]).await;
    assert_eq!(check(&a, "alice").await, Ok(()));
    assert_eq!(check(&b, "alice").await, Ok(()));

    // Redis dies: refused, quickly.
    redis.kill();
    for t in [&a, &b] {
        for _ in 0..3 {
            let started = Instant::now();
            let r = t.check(Scope::Principal, "alice").await;
            assert!(matches!(r, Err(ThrottleError::Unavailable)), "{r:?}");
            assert!(started.elapsed() < Duration::from_secs(1));
        }
        assert_eq!(t.key_count(Scope::Principal), 0);
    }

    // The first outage was at start (not yet running), the second now.
    assert_eq!(a.redis_outages(), Some(2));
    assert_eq!(b.redis_outages(), Some(1));

    // And back.
    redis.restart().await;
    wait_until_shared(&[&a, &b]).await;
    assert_eq!(check(&a, "alice").await, Ok(()));
    assert_eq!(a.redis_outages(), Some(2));
}
