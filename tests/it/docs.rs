//! The README says what the code does: its table of refusal reasons is the
//! one the gateway answers with.

#[test]
fn the_readme_lists_every_reason_as_the_gateway_answers_it() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("<!-- reasons:start -->")
        .expect("README marks its reason table");
    let end = readme
        .find("<!-- reasons:end -->")
        .expect("README marks its reason table's end");
    let table = readme[start + "<!-- reasons:start -->".len()..end].trim();
    let expected = portcullis::model::reason_table();
    assert_eq!(
        table,
        expected.trim(),
        "README.md's reason table differs from src/model/reason.rs; paste this between the markers:\n{expected}"
    );
}
