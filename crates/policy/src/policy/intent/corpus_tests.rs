//! Tallies on text nobody here wrote, when it is on this machine: the
//! published attack sets (`/work/attacks/items.jsonl`, written by
//! `scripts/attacks`) and the real servers' lists (`/work/realworld/`,
//! written by `scripts/realworld`). Neither is committed; each test prints a
//! note and passes when its data is absent. `PORTCULLIS_INTENT_STRICT=1`
//! makes the targets fail the test.
//!
//! `cargo test --lib intent::corpus_tests -- --nocapture` prints the tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

use super::walk::listed_strings;
use super::{Finding, IntentDetector, Listed};
use crate::policy::corpus_tally::Tally;

const TEXT_CLASSES: &[&str] = &[
    "read_private_data",
    "send_elsewhere",
    "redirect_tools",
    "hide_from_user",
    "run_commands",
    "override_instructions",
];

fn attacks_path() -> PathBuf {
    std::env::var_os("PORTCULLIS_ATTACKS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/attacks/items.jsonl"))
}

fn realworld_path() -> PathBuf {
    std::env::var_os("PORTCULLIS_REALWORLD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/realworld"))
}

fn strict() -> bool {
    std::env::var("PORTCULLIS_INTENT_STRICT").is_ok_and(|v| v == "1")
}

fn detector() -> &'static IntentDetector {
    IntentDetector::builtin().expect("shipped intent vocabulary")
}

/// Judges lists of items: (group, item) pairs → findings per item.
fn judge_groups(items: &[(String, Value)]) -> Vec<Vec<Finding>> {
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (g, _)) in items.iter().enumerate() {
        groups.entry(g).or_default().push(i);
    }
    let mut out = vec![Vec::new(); items.len()];
    for idx in groups.values() {
        let listed: Vec<Vec<Listed<'_>>> =
            idx.iter().map(|&i| listed_strings(&items[i].1)).collect();
        let names: Vec<&str> = idx
            .iter()
            .filter_map(|&i| items[i].1.get("name").and_then(Value::as_str))
            .collect();
        for (k, f) in detector()
            .judge_list(&listed, &names)
            .into_iter()
            .enumerate()
        {
            out[idx[k]] = f;
        }
    }
    out
}

fn against_user(f: &[Finding]) -> bool {
    f.iter().any(|x| x.intent.works_against_user())
}

#[test]
fn published_attack_sets() {
    let path = attacks_path();
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!(
            "note: {} absent; published-set tally skipped",
            path.display()
        );
        return;
    };
    let mut rows: Vec<Value> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            rows.push(v);
        }
    }
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let items: Vec<(String, Value)> = rows
        .iter()
        .map(|r| {
            (
                field(r, "list"),
                r.get("item").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    let found = judge_groups(&items);

    let (mut by_class, mut by_source, mut benign) =
        (Tally::default(), Tally::default(), Tally::default());
    let mut text_held = (0usize, 0usize);
    let mut cues: BTreeMap<String, usize> = BTreeMap::new();
    let verbose = std::env::var("PORTCULLIS_INTENT_VERBOSE").is_ok();
    for (r, f) in rows.iter().zip(&found) {
        let class = field(r, "class");
        let source = field(r, "source");
        for x in f {
            *cues
                .entry(format!("{}/{}", x.intent.as_str(), x.cue))
                .or_default() += 1;
        }
        if r.get("benign").and_then(Value::as_bool).unwrap_or(false) {
            benign.add(&source, against_user(f));
            if verbose && against_user(f) {
                println!("FP {} {:?}", field(r, "id"), f);
            }
            continue;
        }
        let held = match class.as_str() {
            "self_promotion" => !f.is_empty(),
            _ => against_user(f),
        };
        by_class.add(&class, held);
        if TEXT_CLASSES.contains(&class.as_str()) {
            by_source.add(&source, held);
            text_held.0 += usize::from(held);
            text_held.1 += 1;
            if verbose && !held {
                println!("MISS {} {class}", field(r, "id"));
            }
        }
    }
    println!(
        "{}",
        by_class.report("published sets, held per class (self_promotion: flagged)")
    );
    println!(
        "{}",
        by_source.report("text-injection classes, held per source")
    );
    println!("{}", benign.report("benign items affected, per source"));
    println!("text-injection held: {} / {}", text_held.0, text_held.1);
    println!("cues: {cues:?}");
    if strict() {
        assert!(text_held.0 * 10 >= text_held.1 * 9, "below 90% held");
        for (class, (h, t)) in &by_class.0 {
            if TEXT_CLASSES.contains(&class.as_str()) {
                assert!(h * 5 >= t * 4, "{class}: {h} / {t} held, below 80%");
            }
        }
        let (fp, total) = benign
            .0
            .values()
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        assert!(fp * 100 <= total, "benign affected: {fp} / {total}");
    }
}

/// The items of one recorded server: (list kind, items) per file.
fn server_lists(dir: &Path) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    for (file, key) in [
        ("tools.json", "tools"),
        ("prompts.json", "prompts"),
        ("resources.json", "resources"),
        ("templates.json", "resourceTemplates"),
    ] {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        if let Some(a) = v.get(key).and_then(Value::as_array) {
            out.push((key.to_owned(), a.clone()));
        }
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("initialize.json")) {
        if let Ok(mut v) = serde_json::from_str::<Value>(&text) {
            // What the server says about itself: its identity and instructions.
            let mut keep = serde_json::Map::new();
            for k in ["serverInfo", "instructions"] {
                if let Some(x) = v.get_mut(k).map(Value::take) {
                    keep.insert(k.to_owned(), x);
                }
            }
            out.push(("initialize".to_owned(), vec![Value::Object(keep)]));
        }
    }
    out
}

#[test]
fn real_servers() {
    let root = realworld_path();
    let Ok(dirs) = std::fs::read_dir(&root) else {
        println!("note: {} absent; real-server tally skipped", root.display());
        return;
    };
    let mut dirs: Vec<PathBuf> = dirs
        .flatten()
        .map(|d| d.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let (mut servers, mut affected_servers, mut items_total, mut items_affected, mut promo) =
        (0, 0, 0, 0, 0);
    let mut largest: Option<(usize, PathBuf)> = None;
    let verbose = std::env::var("PORTCULLIS_INTENT_VERBOSE").is_ok();
    for dir in &dirs {
        let lists = server_lists(dir);
        if lists.is_empty() {
            continue;
        }
        servers += 1;
        let mut hit = 0;
        // Everything the server lists is its own (instructions name tools).
        let names: Vec<&str> = lists
            .iter()
            .flat_map(|l| &l.1)
            .filter_map(|i| i.get("name").and_then(Value::as_str))
            .collect();
        for (kind, items) in &lists {
            let listed: Vec<Vec<Listed<'_>>> = items.iter().map(listed_strings).collect();
            let bytes: usize = listed.iter().flatten().map(|l| l.text.len()).sum();
            if largest.as_ref().is_none_or(|l| bytes > l.0) && kind == "tools" {
                largest = Some((bytes, dir.clone()));
            }
            let found = detector().judge_list(&listed, &names);
            for (item, f) in items.iter().zip(&found) {
                items_total += 1;
                promo += usize::from(!f.is_empty() && !against_user(f));
                if against_user(f) {
                    hit += 1;
                    if verbose {
                        let name = item.get("name").and_then(Value::as_str).unwrap_or("?");
                        println!("FP {} {kind}/{name} {f:?}", dir.display());
                    }
                }
            }
        }
        items_affected += hit;
        affected_servers += usize::from(hit > 0);
        if hit > 0 {
            println!("  affected: {} ({hit} items)", dir.display());
        }
    }
    println!(
        "real servers: {servers}, affected {affected_servers}; items {items_total}, affected \
         {items_affected}, self-promotion flagged {promo}"
    );
    if let Some((bytes, dir)) = largest {
        time_largest(&dir, bytes);
    }
    if strict() {
        assert_eq!(affected_servers, 0, "real servers affected");
    }
}

/// The cost of judging the largest real tools list, first time and cached.
fn time_largest(dir: &Path, bytes: usize) {
    let lists = server_lists(dir);
    let Some((_, items)) = lists.iter().find(|(k, _)| k == "tools") else {
        return;
    };
    let listed: Vec<Vec<Listed<'_>>> = items.iter().map(listed_strings).collect();
    let names: Vec<&str> = items
        .iter()
        .filter_map(|i| i.get("name").and_then(Value::as_str))
        .collect();
    // A fresh detector: nothing cached.
    let fresh = IntentDetector::new().expect("shipped intent vocabulary");
    let t = Instant::now();
    let _ = fresh.judge_list(&listed, &names);
    let first = t.elapsed();
    let t = Instant::now();
    let _ = fresh.judge_list(&listed, &names);
    let cached = t.elapsed();
    println!(
        "largest tools list: {} ({} items, {bytes} bytes of text): first {} µs, cached {} µs",
        dir.display(),
        items.len(),
        first.as_micros(),
        cached.as_micros()
    );
}

/// `PORTCULLIS_INTENT_EXPLAIN='<server dir>|<list key>|<item name>'` or
/// `'<attack id>'`: prints the item's concepts, hit by hit.
#[test]
fn explain_one() {
    let Ok(what) = std::env::var("PORTCULLIS_INTENT_EXPLAIN") else {
        return;
    };
    let d = detector();
    let mut lists: Vec<Vec<Value>> = Vec::new();
    let mut pick: Option<(usize, usize)> = None;
    let parts: Vec<&str> = what.split('|').collect();
    if let [dir, key, name] = parts[..] {
        let all = server_lists(&realworld_path().join(dir));
        for (k, items) in all {
            if k == key {
                let i = items
                    .iter()
                    .position(|x| x.get("name").and_then(Value::as_str).unwrap_or("?") == name);
                pick = i.map(|i| (lists.len(), i));
            }
            lists.push(items);
        }
    } else if let Ok(text) = std::fs::read_to_string(attacks_path()) {
        let rows: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if let Some(r) = rows
            .iter()
            .find(|r| r.get("id").and_then(Value::as_str) == Some(&what))
        {
            let list = r.get("list").cloned();
            let items: Vec<Value> = rows
                .iter()
                .filter(|x| x.get("list").cloned() == list)
                .filter_map(|x| x.get("item").cloned())
                .collect();
            let me = r.get("item").cloned().unwrap_or(Value::Null);
            pick = items.iter().position(|x| *x == me).map(|i| (0, i));
            lists.push(items);
        }
    }
    let Some((l, i)) = pick else {
        println!("not found: {what}");
        return;
    };
    let names: Vec<&str> = lists
        .iter()
        .flatten()
        .filter_map(|x| x.get("name").and_then(Value::as_str))
        .collect();
    let listed: Vec<Vec<Listed<'_>>> = lists[l].iter().map(listed_strings).collect();
    let ctx = super::evidence::ListContext::new(&names, &listed);
    let ev = super::evidence::Evidence::gather(&d.vocab, &listed[i], &ctx, i);
    for h in &ev.hits {
        let concepts: Vec<&str> = (0..super::vocab::Concepts::BITS as usize)
            .filter(|b| h.concepts & (1 << b) != 0)
            .filter_map(|b| d.vocab.names.get(b).map(String::as_str))
            .collect();
        println!("unit {} clause {}: {concepts:?}", h.unit, h.clause);
    }
    println!("{:?}", d.judge(&ev));
    println!(
        "{}",
        serde_json::to_string_pretty(&lists[l][i]).unwrap_or_default()
    );
}
