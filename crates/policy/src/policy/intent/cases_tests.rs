//! Our own tool-poisoning cases (`tests/attacks/cases.toml`, written here,
//! in our own words) through [`IntentDetector::judge_list`], each list group
//! judged together, with the targets asserted: ≥ 90% of the
//! malicious cases held, each class ≥ 80%, no benign case affected. A split
//! attack (its parts share a `list`) is held when any part is removed.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::walk::listed_strings;
use super::{Finding, IntentDetector, Listed};

#[derive(Debug, Deserialize)]
struct Case {
    id: String,
    class: String,
    benign: bool,
    list: String,
    encoding: String,
    item: String,
}

#[derive(Debug, Deserialize)]
struct Cases {
    case: Vec<Case>,
}

fn load() -> Vec<(Case, Value)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/attacks/cases.toml"
    );
    let text = std::fs::read_to_string(path).expect("tests/attacks/cases.toml is ours");
    let cases: Cases = toml::from_str(&text).expect("cases.toml parses");
    cases
        .case
        .into_iter()
        .map(|c| {
            let item: Value = serde_json::from_str(&c.item)
                .unwrap_or_else(|e| panic!("case {}: item is not JSON: {e}", c.id));
            (c, item)
        })
        .collect()
}

/// Findings per case, each list group judged as one list.
fn judge(cases: &[(Case, Value)]) -> Vec<Vec<Finding>> {
    let d = IntentDetector::builtin().expect("shipped intent vocabulary");
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (c, _)) in cases.iter().enumerate() {
        groups.entry(c.list.as_str()).or_default().push(i);
    }
    let mut out = vec![Vec::new(); cases.len()];
    for idx in groups.values() {
        let listed: Vec<Vec<Listed<'_>>> =
            idx.iter().map(|&i| listed_strings(&cases[i].1)).collect();
        let names: Vec<&str> = idx
            .iter()
            .filter_map(|&i| cases[i].1.get("name").and_then(Value::as_str))
            .collect();
        for (k, f) in d.judge_list(&listed, &names).into_iter().enumerate() {
            out[idx[k]] = f;
        }
    }
    out
}

fn against_user(f: &[Finding]) -> bool {
    f.iter().any(|x| x.intent.works_against_user())
}

#[test]
fn our_cases_meet_the_targets() {
    let cases = load();
    assert!(cases.len() >= 90, "cases.toml shrank: {}", cases.len());
    let found = judge(&cases);

    // A list group is held when any of its malicious items is removed.
    let mut group_held: BTreeMap<&str, bool> = BTreeMap::new();
    for ((c, _), f) in cases.iter().zip(&found) {
        if !c.benign {
            *group_held.entry(c.list.as_str()).or_default() |= against_user(f);
        }
    }

    let mut per_class: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let (mut benign, mut benign_hit) = (0usize, Vec::new());
    let mut missed = Vec::new();
    for ((c, _), f) in cases.iter().zip(&found) {
        if c.benign {
            benign += 1;
            if against_user(f) {
                benign_hit.push(format!("{} {f:?}", c.id));
            }
            continue;
        }
        let held = match c.encoding.as_str() {
            "split" => group_held.get(c.list.as_str()).copied().unwrap_or(false),
            _ => against_user(f),
        };
        let e = per_class.entry(c.class.as_str()).or_default();
        e.0 += usize::from(held);
        e.1 += 1;
        if !held {
            missed.push(format!("{} ({})", c.id, c.class));
        }
    }

    let (held, total) = per_class
        .values()
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    for (class, (h, t)) in &per_class {
        println!("{class:<24} {h:>3} / {t:<3}");
    }
    println!(
        "held {held} / {total}; benign affected {} / {benign}",
        benign_hit.len()
    );
    println!("missed: {missed:?}");
    println!("benign affected: {benign_hit:?}");

    assert_eq!(per_class.len(), 6, "every text-injection class has cases");
    assert!(
        held * 10 >= total * 9,
        "held {held} / {total}, below 90%: {missed:?}"
    );
    for (class, (h, t)) in &per_class {
        assert!(h * 5 >= t * 4, "{class}: {h} / {t}, below 80%: {missed:?}");
    }
    // ≤ 1% of 44 benign cases is none.
    assert!(
        benign_hit.len() * 100 <= benign,
        "benign affected: {benign_hit:?}"
    );
}
