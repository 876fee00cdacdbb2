//! Cases judged by meaning (`tests/attacks/meaning.toml`, issue 35), one by
//! one: every hostile case held, whatever its wording (no trigger phrase),
//! and no benign case — the classes of honest text real servers write —
//! affected. A split attack (its parts share a `list`) is held when any
//! part is.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::tool_like;
use super::walk::listed_strings;
use super::{Finding, IntentDetector, Listed};

#[derive(Debug, Deserialize)]
struct Case {
    id: String,
    benign: bool,
    list: String,
    #[serde(default)]
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
        "/../../tests/attacks/meaning.toml"
    );
    let text = std::fs::read_to_string(path).expect("tests/attacks/meaning.toml is ours");
    let cases: Cases = toml::from_str(&text).expect("meaning.toml parses");
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
        let mut names: Vec<&str> = idx
            .iter()
            .filter_map(|&i| cases[i].1.get("name").and_then(Value::as_str))
            .collect();
        // As the gateway reads a list that is not of tools (`judge_listed`).
        if idx.iter().all(|&i| cases[i].1.get("inputSchema").is_none()) {
            names.extend(listed.iter().flatten().flat_map(|l| tool_like(l.text)));
        }
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
fn each_case_is_judged_by_meaning() {
    let cases = load();
    let found = judge(&cases);
    let mut group_held: BTreeMap<&str, bool> = BTreeMap::new();
    for ((c, _), f) in cases.iter().zip(&found) {
        if !c.benign {
            *group_held.entry(c.list.as_str()).or_default() |= against_user(f);
        }
    }
    let mut wrong = Vec::new();
    for ((c, _), f) in cases.iter().zip(&found) {
        let held = match c.encoding.as_str() {
            "split" => group_held.get(c.list.as_str()).copied().unwrap_or(false),
            _ => against_user(f),
        };
        if c.benign && against_user(f) {
            wrong.push(format!("benign {} affected: {f:?}", c.id));
        } else if !c.benign && !held {
            wrong.push(format!("hostile {} missed: {f:?}", c.id));
        }
    }
    for w in &wrong {
        println!("{w}");
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases judged wrong",
        wrong.len(),
        cases.len()
    );
}
