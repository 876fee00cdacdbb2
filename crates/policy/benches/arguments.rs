//! Criterion benchmark of the request-side argument checks (issue 36's
//! cost target: a small `tools/call` checked in at most 5 µs): a call of
//! two plain arguments under the `untrusted` preset (every string read for
//! secrets, private paths, addresses and shell syntax), and the same call
//! also held to its listed definition (`schema = "enforce"`, the contract
//! compiled once beforehand, as the gateway does per listing digest).

use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use portcullis_model::model::McpMethod;
use portcullis_policy::policy::arguments::{ArgumentCheck, Call, Contract, Listed};
use portcullis_policy::policy::config::{Policy, PolicySet};
use portcullis_policy::policy::secret_values::SecretValueScanner;
use serde_json::{json, Value};

fn call() -> Call<'static> {
    Call {
        method: McpMethod::ToolsCall,
        upstream_name: "Weather",
    }
}

fn small_call() -> Value {
    json!({"city": "Oslo", "days": 3})
}

fn with_schema() -> Arc<Policy> {
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::write(
        dir.path().join("listed.toml"),
        "extends = \"untrusted\"\n[arguments]\nschema = \"enforce\"\n",
    )
    .expect("the policy file is written");
    let set = PolicySet::load(Some(dir.path())).expect("the policy loads");
    set.get("listed").expect("the policy is there")
}

fn bench(c: &mut Criterion) {
    let scanner = SecretValueScanner::builtin();
    let untrusted = PolicySet::load(None)
        .expect("the presets load")
        .get("untrusted")
        .expect("untrusted is a preset");
    let listed = with_schema();
    let tool = Contract::tool(&json!({"name": "weather", "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
        "required": ["city"]
    }}));
    tool.compile();

    let mut group = c.benchmark_group("arguments");
    group.bench_function("small tools/call, untrusted", |b| {
        b.iter_batched(
            small_call,
            |mut args| {
                let mut check = ArgumentCheck::new(&untrusted, call(), &scanner);
                let outcome = check.check(Listed::Unchecked, &mut args);
                black_box((outcome, check.finish()))
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("small tools/call, untrusted + listed schema", |b| {
        b.iter_batched(
            small_call,
            |mut args| {
                let mut check = ArgumentCheck::new(&listed, call(), &scanner);
                let outcome = check.check(Listed::Item(&tool), &mut args);
                black_box((outcome, check.finish()))
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
