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
