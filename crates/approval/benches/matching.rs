//! What the approval rules cost a call: none configured; five rules that
//! do not name the tool; a rule that names it and whose condition (CEL)
//! then decides. `cargo bench -p portcullis-approval`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use portcullis_approval::raw::{compile, merge};
use portcullis_approval::{
    Annotations, ApprovalRules, CallerFacts, Circumstances, Facts, RawApproval,
};
use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    approval: Vec<Spanned<RawApproval>>,
}

fn rules(text: &str) -> ApprovalRules {
    let f: File = toml::from_str(text).expect("toml");
    merge(vec![compile(&f.approval, "approval", text).expect("rules")])
}

fn bench(c: &mut Criterion) {
    let args = serde_json::json!({"room": "B-12", "nights": 3});
    let facts = Facts {
        caller: CallerFacts {
            principal: "alice",
            method: "jwt",
            ..Default::default()
        },
        route: "/mcp/rooms",
        upstream: "rooms",
        tool: "get_room",
        upstream_tool: "get_room",
        arguments: Some(&args),
        annotations: Some(Annotations {
            read_only: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let none = ApprovalRules::default();
    let others = rules(concat!(
        "[[approval]]\ntools = [\"cancel_*\"]\n",
        "[[approval]]\ntools = [\"delete_*\", \"drop_*\"]\n",
        "[[approval]]\nannotations = [\"destructiveHint\"]\n",
        "[[approval]]\ntools = [\"pay\"]\nwhen = 'arguments.amount > 100'\n",
        "[[approval]]\nverdicts = [\"private_path\"]\n",
    ));
    let conditional = rules("[[approval]]\ntools = [\"get_room\"]\nwhen = 'arguments.nights > 7 && caller.principal != \"bob\"'\n");
    let c0 = Circumstances::default();
    c.bench_function("approval: no rules", |b| {
        b.iter(|| {
            black_box(&none)
                .first_match(black_box(&facts), &c0)
                .is_some()
        })
    });
    c.bench_function("approval: five rules, none matches", |b| {
        b.iter(|| {
            black_box(&others)
                .first_match(black_box(&facts), &c0)
                .is_some()
        })
    });
    c.bench_function("approval: tool matches, condition decides (CEL)", |b| {
        b.iter(|| {
            black_box(&conditional)
                .first_match(black_box(&facts), &c0)
                .is_some()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
