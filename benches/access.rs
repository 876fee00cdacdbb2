//! Criterion benchmarks of the access phases: authenticating an API key and
//! one local rate-limit check (what the `#[ignore]`d timing tests measured).

use std::path::Path;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use futures_util::FutureExt;
use http::HeaderMap;
use portcullis::config::GatewayConfig;
use portcullis::identify::{hash_key, PeerIdentity};
use portcullis::throttle::{Scope, Throttle};

fn config() -> GatewayConfig {
    let text = format!(
        r#"
[[listener]]
address = "127.0.0.1:0"
[[auth]]
name = "keys"
type = "api_key"
[[auth.key]]
principal = "alice"
groups = ["dev", "ops"]
hash = "{}"
[rate_limits]
per_principal = {{ rate = "1000000/s", burst = 1000000 }}
[[upstream]]
id = "b"
name = "Bench"
url = "http://127.0.0.1:9/mcp"
[[route]]
path = "/mcp"
upstream = "b"
auth = ["keys"]
"#,
        hash_key("alice-key")
    );
    GatewayConfig::parse(&text, Path::new("bench.toml")).expect("bench config")
}

fn api_key(c: &mut Criterion) {
    let config = config();
    let route = &config.routes["/mcp"];
    let mut headers = HeaderMap::new();
    headers.insert("authorization", "Bearer alice-key".parse().unwrap());
    headers.insert("content-type", "application/json".parse().unwrap());
    let peer = PeerIdentity::default();
    c.bench_function("identify/api_key", |b| {
        b.iter(|| {
            // Nothing here awaits (no opaque token to introspect).
            futures_util::FutureExt::now_or_never(config.auth.authenticate(
                &route.auth,
                false,
                black_box(&headers),
                &peer,
                None,
            ))
            .is_some_and(|r| r.is_ok())
        })
    });
}

fn local_rate_limit(c: &mut Criterion) {
    let throttle = Throttle::new(&config().throttle);
    let keys: Vec<String> = (0..1000).map(|i| format!("principal-{i}")).collect();
    let mut i = 0usize;
    c.bench_function("throttle/local_check", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            throttle
                .check(Scope::Principal, black_box(&keys[i]))
                .now_or_never()
                .is_some()
        })
    });
}

criterion_group!(benches, api_key, local_rate_limit);
criterion_main!(benches);
