use std::time::{Duration, Instant};

use futures_util::FutureExt;
use serde::Deserialize;

use super::*;

#[derive(Deserialize)]
struct Top {
    rate_limits: Option<Spanned<RawRateLimits>>,
}

fn throttle(toml_text: &str) -> Throttle {
    let top: Top = toml::from_str(toml_text).expect("toml");
    Throttle::build(top.rate_limits.as_ref()).expect("valid config")
}

/// Local checks never suspend: resolve them without a runtime.
fn check(t: &Throttle, scope: Scope, key: &str) -> Result<(), RateLimited> {
    t.check(scope, key)
        .now_or_never()
        .expect("local check completes immediately")
        .expect("local backend is always available")
}

#[test]
fn no_section_means_unlimited() {
    let t = Throttle::build(None).unwrap();
    assert_eq!(t.backend(), "local");
    assert_eq!(t.redis_available(), None);
    for scope in Scope::ALL {
        assert!(!t.is_limited(scope));
        for _ in 0..1000 {
            assert_eq!(check(&t, scope, "alice"), Ok(()));
        }
        assert_eq!(t.key_count(scope), 0);
    }
}

#[test]
fn scope_names() {
    let names: Vec<_> = Scope::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        names,
        [
            "principal",
            "principal_upstream",
            "principal_tool",
            "input_required_rounds"
        ]
    );
    for (i, s) in Scope::ALL.iter().enumerate() {
        assert_eq!(s.index(), i);
    }
}

#[test]
fn burst_then_refusal_with_plausible_retry_after() {
    let t = throttle(
        r#"
[rate_limits]
per_principal = { rate = "10/s", burst = 5 }
"#,
    );
    assert!(t.is_limited(Scope::Principal));
    assert!(!t.is_limited(Scope::PrincipalTool));
    let started = Instant::now();
    for i in 0..5 {
        assert_eq!(check(&t, Scope::Principal, "alice"), Ok(()), "request {i}");
    }
    let refused = check(&t, Scope::Principal, "alice").unwrap_err();
    assert_eq!(refused.scope, Scope::Principal);
    // One unit replenishes every 100 ms; some of that may already have passed.
    let elapsed = started.elapsed();
    assert!(
        refused.retry_after <= Duration::from_millis(100)
            && refused.retry_after + elapsed >= Duration::from_millis(99),
        "retry_after {:?} after {elapsed:?}",
        refused.retry_after
    );
    assert_eq!(refused.retry_after_secs(), 1);
    // Waiting that long is enough for exactly one more.
    std::thread::sleep(refused.retry_after);
    assert_eq!(check(&t, Scope::Principal, "alice"), Ok(()));
    assert!(check(&t, Scope::Principal, "alice").is_err());
}

#[test]
fn scopes_and_keys_are_independent() {
    let t = throttle(
        r#"
[rate_limits]
per_principal = { rate = "2/h" }
per_principal_upstream = { rate = "2/h" }
per_principal_tool = { rate = "2/h" }
input_required_rounds = { rate = "2/h" }
"#,
    );
    for scope in Scope::ALL {
        assert_eq!(check(&t, scope, "alice"), Ok(()));
        assert_eq!(check(&t, scope, "alice"), Ok(()));
        let e = check(&t, scope, "alice").unwrap_err();
        assert_eq!(e.scope, scope);
        // 2/h: the next unit is due in about 30 minutes.
        assert!(
            e.retry_after > Duration::from_secs(1799) && e.retry_after <= Duration::from_secs(1800),
            "{:?}",
            e.retry_after
        );
        assert_eq!(e.retry_after_secs(), 1800);
        assert_eq!(check(&t, scope, "bob"), Ok(()));
    }
    for scope in Scope::ALL {
        assert_eq!(t.key_count(scope), 2);
    }
}

#[test]
fn key_parts_are_delimited() {
    let t = throttle("[rate_limits]\nper_principal_tool = { rate = \"1/h\" }\n");
    let s = Scope::PrincipalTool;
    let parts = |p: &[&str]| t.check_parts(s, p).now_or_never().unwrap().unwrap();
    assert_eq!(parts(&["a", "bc"]), Ok(()));
    assert_eq!(parts(&["ab", "c"]), Ok(()));
    assert_eq!(parts(&["abc"]), Ok(()));
    assert!(parts(&["a", "bc"]).is_err());
    // check(k) is check_parts(&[k]).
    assert!(check(&t, s, "abc").is_err());
    // Any characters are fine.
    assert_eq!(check(&t, s, "ü\u{0}:*\n"), Ok(()));
    assert_eq!(check(&t, s, ""), Ok(()));
}

#[test]
fn flood_of_distinct_principals_stays_bounded() {
    let t = throttle(
        r#"
[rate_limits]
per_principal = { rate = "1/h", burst = 1 }
per_principal_tool = { rate = "1000/s", burst = 1 }
max_keys = 10000
"#,
    );
    // A principal seen before the flood.
    assert_eq!(check(&t, Scope::Principal, "alice"), Ok(()));
    let mut allowed = 0usize;
    let mut name = String::new();
    for i in 0..200_000u32 {
        name.clear();
        use std::fmt::Write;
        write!(name, "flood-{i}").unwrap();
        if check(&t, Scope::Principal, &name).is_ok() {
            allowed += 1;
        }
        let _ = check(&t, Scope::PrincipalTool, &name);
        if i % 10_000 == 0 {
            assert!(t.key_count(Scope::Principal) <= 10_000);
            assert!(t.key_count(Scope::PrincipalTool) <= 10_000);
        }
    }
    assert_eq!(t.key_count(Scope::Principal), 10_000);
    assert!(t.key_count(Scope::PrincipalTool) <= 10_000);
    // The first 9,999 new principals got their own key; everyone past the
    // cap shared one overflow bucket (1/h, burst 1: one request).
    assert_eq!(allowed, 9_999 + 1);
    assert_eq!(t.overflow_hits(Scope::Principal), 200_000 - 9_999);
    // The flood neither evicted nor reset a tracked principal.
    assert!(check(&t, Scope::Principal, "alice").is_err());
    // Nothing is idle at 1/h, so eviction keeps the keys...
    t.evict_idle();
    assert_eq!(t.key_count(Scope::Principal), 10_000);
    // ...but the 1000/s scope is idle within milliseconds.
    std::thread::sleep(Duration::from_millis(20));
    t.evict_idle();
    assert_eq!(t.key_count(Scope::PrincipalTool), 0);
}

#[tokio::test]
async fn full_map_triggers_an_early_sweep() {
    let t = throttle("[rate_limits]\nper_principal = { rate = \"1000/s\" }\nmax_keys = 100\n");
    t.start().await;
    for i in 0..100 {
        check(&t, Scope::Principal, &format!("p{i}")).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    // One more new key hits the cap and wakes the sweeper, long before
    // EVICT_INTERVAL.
    let _ = check(&t, Scope::Principal, "late");
    let deadline = Instant::now() + Duration::from_secs(2);
    while t.key_count(Scope::Principal) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(t.key_count(Scope::Principal), 0);
}

#[test]
fn check_future_is_send() {
    fn send<T: Send>(_: &T) {}
    let t = Throttle::build(None).unwrap();
    let f = t.check(Scope::Principal, "x");
    send(&f);
    fn send_sync<T: Send + Sync + Clone + std::fmt::Debug>() {}
    send_sync::<Throttle>();
}

#[test]
fn redis_backend_builds_without_io() {
    let t = throttle(
        r#"
[rate_limits]
per_principal = { rate = "5/s" }
backend = "redis"
redis_url = "redis://127.0.0.1:1/0"
redis_failure = "refuse"
"#,
    );
    assert_eq!(t.backend(), "redis");
    // Not started: not connected; "refuse" refuses.
    assert_eq!(t.redis_available(), Some(false));
    let r = t.check(Scope::Principal, "alice").now_or_never().unwrap();
    assert!(matches!(r, Err(ThrottleError::Unavailable)));
    // Unlimited scopes never touch Redis.
    let r = t
        .check(Scope::PrincipalTool, "alice")
        .now_or_never()
        .unwrap();
    assert!(matches!(r, Ok(Ok(()))));
    let dbg = format!("{t:?}");
    assert!(dbg.contains("redis") && dbg.contains("5/s"), "{dbg}");
}

#[test]
fn redis_keys_are_stable_hashed_and_delimited() {
    let settings = config::RedisSettings {
        url: "redis://127.0.0.1:1".into(),
        failure: RedisFailure::Local,
        timeout: Duration::from_millis(50),
        key_prefix: "pc:".into(),
    };
    let a = RedisBackend::new(&settings);
    let b = RedisBackend::new(&settings);
    let k = a.key(Scope::PrincipalTool, &["alice", "tool"]);
    assert_eq!(k, b.key(Scope::PrincipalTool, &["alice", "tool"]));
    assert!(k.starts_with("pc:principal_tool:"));
    assert_eq!(k.len(), "pc:principal_tool:".len() + 32);
    assert!(!k.contains("alice"));
    assert_ne!(k, a.key(Scope::PrincipalTool, &["alicet", "ool"]));
    assert_ne!(k, a.key(Scope::Principal, &["alice", "tool"]));
    assert_eq!(
        a.key(Scope::Principal, &["x"]),
        a.key(Scope::Principal, &["x"])
    );
}
