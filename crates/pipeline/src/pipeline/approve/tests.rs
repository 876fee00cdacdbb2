use super::*;
use crate::approval::{raw, Annotations};
use serde_json::json;

fn rules(text: &str) -> ApprovalRules {
    #[derive(serde::Deserialize)]
    struct F {
        #[serde(default)]
        approval: Vec<toml::Spanned<crate::approval::RawApproval>>,
    }
    let f: F = toml::from_str(text).unwrap();
    raw::merge(vec![raw::compile(&f.approval, "approval", text).unwrap()])
}

fn facts<'a>(tool: &'a str, args: &'a serde_json::Value) -> Facts<'a> {
    Facts {
        tool,
        upstream_tool: tool,
        arguments: Some(args),
        annotations: Some(Annotations::default()),
        ..Default::default()
    }
}

#[test]
fn the_routes_rules_come_first_then_the_policys() {
    let route = rules("[[approval]]\nname = \"route-cancel\"\ntools = [\"cancel_*\"]\n");
    let policy = rules("[[approval]]\nname = \"all-writes\"\nannotations = [\"!readOnlyHint\"]\n[[approval]]\nname = \"cancel\"\ntools = [\"cancel_*\"]\n");
    let r = Rules {
        route: &route,
        policy: &policy,
        policy_name: "rooms",
    };
    let args = json!({});
    let c = Circumstances::default();
    let a = r.asking(&facts("cancel_booking", &args), &c).unwrap();
    assert_eq!(
        (a.rule.name.as_str(), a.written),
        ("route-cancel", Written::Route)
    );
    let a = r.asking(&facts("book_room", &args), &c).unwrap();
    assert_eq!(
        (a.rule.name.as_str(), a.written),
        ("all-writes", Written::Policy("rooms"))
    );
    assert!(!r.read_arguments());
    assert!(!r.ask_about_changed_listings());
}

#[test]
fn no_rules_no_question() {
    let none = ApprovalRules::default();
    let r = Rules {
        route: &none,
        policy: &none,
        policy_name: "untrusted",
    };
    assert!(r.are_empty());
    let args = json!({});
    assert!(r
        .asking(&facts("anything", &args), &Circumstances::default())
        .is_none());
}
