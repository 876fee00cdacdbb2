//! The README says what the code does: its table of refusal reasons is the
//! one the gateway answers with, its list of verdict rules and actions the
//! one the audit trail, the metrics and `explain` write.

/// The text of README.md between `<!-- {name}:start -->` and `<!-- {name}:end -->`.
fn readme_between(name: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let (open, close) = (
        format!("<!-- {name}:start -->"),
        format!("<!-- {name}:end -->"),
    );
    let start = readme
        .find(&open)
        .unwrap_or_else(|| panic!("README marks {open}"));
    let end = readme
        .find(&close)
        .unwrap_or_else(|| panic!("README marks {close}"));
    readme[start + open.len()..end].trim().to_owned()
}

#[test]
fn the_readme_lists_every_verdict_rule_and_action_as_the_gateway_writes_them() {
    let expected = portcullis::policy::inspect::verdict_table();
    assert_eq!(
        readme_between("verdicts"),
        expected.trim(),
        "README.md's verdict tables differ from src/policy/inspect/verdict.rs; paste this between the markers:\n{expected}"
    );
}

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

/// policies/README.md says what each preset does with sampling and roots as
/// the preset's own file (compiled in) sets it.
#[test]
fn the_policies_readme_says_what_the_presets_do_with_sampling_and_roots() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("policies/README.md")).unwrap();
    for preset in ["untrusted", "trusted"] {
        let text = std::fs::read_to_string(root.join(format!("policies/presets/{preset}.toml"))).unwrap();
        let table: toml::Table = text.parse().unwrap();
        let deprecated = &table["deprecated"];
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{preset}`")))
            .unwrap_or_else(|| panic!("no row for {preset}"));
        for kind in ["sampling", "roots"] {
            let allowed = deprecated[kind].as_str() == Some("allow");
            let says = if allowed { "sampling/roots allowed" } else { "sampling/roots refused" };
            assert!(
                row.contains(says),
                "{preset} sets {kind} = {}, its row says otherwise: {row}",
                deprecated[kind]
            );
        }
    }
}
