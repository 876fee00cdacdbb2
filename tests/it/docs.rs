//! The book says what the code does: its table of refusal reasons is the
//! one the gateway answers with, its list of verdict rules and actions the
//! one the audit trail, the metrics and `explain` write.

/// The text of a book page (`docs/src/<page>`) between `<!-- {name}:start -->`
/// and `<!-- {name}:end -->`.
fn book_between(page: &str, name: &str) -> String {
    let path = format!("{}/docs/src/{page}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (open, close) = (
        format!("<!-- {name}:start -->"),
        format!("<!-- {name}:end -->"),
    );
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("{path} marks {open}"));
    let end = text
        .find(&close)
        .unwrap_or_else(|| panic!("{path} marks {close}"));
    text[start + open.len()..end].trim().to_owned()
}

#[test]
fn the_book_lists_every_verdict_rule_and_action_as_the_gateway_writes_them() {
    let expected = portcullis::policy::inspect::verdict_table();
    assert_eq!(
        book_between("reference/audit.md", "verdicts"),
        expected.trim(),
        "docs/src/reference/audit.md's verdict tables differ from crates/policy/src/policy/inspect/verdict.rs; paste this between the markers:\n{expected}"
    );
}

#[test]
fn the_book_lists_every_reason_as_the_gateway_answers_it() {
    let expected = portcullis::model::reason_table();
    assert_eq!(
        book_between("reference/errors.md", "reasons"),
        expected.trim(),
        "docs/src/reference/errors.md's reason table differs from crates/model/src/model/reason.rs; paste this between the markers:\n{expected}"
    );
}
