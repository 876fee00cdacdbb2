//! The hostile-upstream suite (`tests/python/test_hostile.py`) has a case for
//! every reason an upstream can provoke; which reasons those are is written
//! down in `tests/python/hostile_reasons.toml`. This keeps that list honest:
//! every reason the gateway has is classified there exactly once, and
//! nothing else is.

use std::collections::BTreeMap;

use portcullis::model::Reason;

const CLASSIFIED: &str = include_str!("../python/hostile_reasons.toml");

#[test]
fn every_reason_is_classified_once_for_the_hostile_upstream_suite() {
    let table: BTreeMap<String, BTreeMap<String, String>> =
        toml::from_str(CLASSIFIED).expect("hostile_reasons.toml parses");
    assert_eq!(
        table.keys().map(String::as_str).collect::<Vec<_>>(),
        ["client", "gateway", "upstream"]
    );
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for (who, reasons) in &table {
        for (reason, why) in reasons {
            assert!(
                Reason::parse(reason).is_some(),
                "{reason} ({who}) is not a reason of the gateway"
            );
            assert!(
                !why.trim().is_empty(),
                "{reason}: say why it is under [{who}]"
            );
            if let Some(before) = seen.insert(reason, who) {
                panic!("{reason} is under both [{before}] and [{who}]");
            }
        }
    }
    let missing: Vec<&str> = Reason::ALL
        .iter()
        .map(|r| r.as_str())
        .filter(|r| !seen.contains_key(r))
        .collect();
    assert!(
        missing.is_empty(),
        "classify these in tests/python/hostile_reasons.toml (and give an upstream one a case in hostile_cases.py): {missing:?}"
    );
}

/// `test_hostile.py` checks the upstream-error counter for the reasons it
/// lists as the upstream's failures; Python cannot ask the reason table,
/// so this keeps its list equal to the table's `Upstream` column (the
/// reasons an upstream can provoke in the suite).
#[test]
fn the_hostile_suites_upstream_failures_are_the_reason_tables() {
    const SUITE: &str = include_str!("../python/test_hostile.py");
    let start = SUITE
        .find("UPSTREAM_FAILURES = {")
        .expect("test_hostile.py defines UPSTREAM_FAILURES");
    let set = &SUITE[start..];
    let set = &set[set.find('{').unwrap_or(0) + 1..set.find('}').unwrap_or(0)];
    let listed: std::collections::BTreeSet<&str> = set
        .split(',')
        .map(|s| s.trim().trim_matches('"'))
        .filter(|s| !s.is_empty())
        .collect();
    let table: BTreeMap<String, BTreeMap<String, String>> =
        toml::from_str(CLASSIFIED).expect("hostile_reasons.toml parses");
    let expected: std::collections::BTreeSet<&str> = table["upstream"]
        .keys()
        .filter_map(|r| Reason::parse(r))
        .filter(|r| r.is_upstream_failure())
        .map(Reason::as_str)
        .collect();
    assert_eq!(listed, expected, "UPSTREAM_FAILURES in test_hostile.py");
}
