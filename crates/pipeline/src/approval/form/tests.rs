use super::*;
use crate::approval::raw;
use serde_json::json;

fn rule(toml_text: &str) -> ApprovalRule {
    #[derive(serde::Deserialize)]
    struct F {
        approval: Vec<toml::Spanned<crate::approval::RawApproval>>,
    }
    let f: F = toml::from_str(toml_text).unwrap();
    raw::compile(&f.approval, "approval", toml_text)
        .unwrap()
        .remove(0)
}

fn secret(name: &str, value: &str) -> Option<&'static str> {
    if name.contains("password") {
        return Some("password");
    }
    value.starts_with("ghp_").then_some("a GitHub token")
}

fn subject<'a>(
    rule: &'a ApprovalRule,
    args: &'a Value,
    listed: Option<Annotations>,
) -> Subject<'a> {
    Subject {
        server: "Rooms",
        tool: "cancel_booking",
        annotations: listed,
        arguments: args,
        rule,
        policy: "rooms",
        found: &[],
        secret: &secret,
    }
}

#[test]
fn the_form_is_the_gateways_own() {
    let r = rule("[[approval]]\nname = \"cancel\"\ntools = [\"cancel_*\"]\nremember = \"caller\"\nremember_for = \"8h\"\nreason = \"Cancelling cannot be undone.\"\n");
    let args = json!({
        "booking": "B-12\u{202e}<script>",
        "note": "x".repeat(500),
        "password": "hunter2",
        "token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "rooms": ["a", "b"],
        "refund": {"amount": 12, "to": "card"},
        "nights": 3,
    });
    let listed = Annotations {
        destructive: Some(true),
        ..Default::default()
    };
    let f = form(&subject(&r, &args, Some(listed)));
    let m = f["message"].as_str().unwrap();
    assert!(m.contains("tool \"cancel_booking\" of Rooms"), "{m}");
    assert!(m.contains("delete or overwrite"), "{m}");
    assert!(m.contains("Why: Cancelling cannot be undone."), "{m}");
    assert!(
        m.contains("- booking: \"B-12<script>\""),
        "invisible characters dropped: {m}"
    );
    assert!(
        !m.contains("hunter2") && !m.contains("ghp_"),
        "secrets masked: {m}"
    );
    assert!(m.contains("- password: (hidden: password)"), "{m}");
    assert!(m.contains("- token: (hidden: a GitHub token)"), "{m}");
    assert!(m.contains("- rooms: a list of 2"), "{m}");
    assert!(m.contains("- refund: an object of 2 fields"), "{m}");
    assert!(m.contains("- nights: 3"), "{m}");
    assert!(!m.contains(&"x".repeat(100)), "values shortened: {m}");
    assert_eq!(f["mode"], "form");
    let schema = &f["requestedSchema"];
    assert_eq!(schema["required"], json!([APPROVE_FIELD]));
    assert_eq!(schema["properties"][APPROVE_FIELD]["default"], false);
    assert!(schema["properties"][REMEMBER_FIELD]["title"]
        .as_str()
        .unwrap()
        .contains("8h"));
    let p = &f["_meta"][PROVENANCE_KEY];
    assert_eq!(
        (p["asker"].as_str(), p["approval"]["rule"].as_str()),
        (Some("gateway"), Some("cancel"))
    );
    assert_eq!(p["upstream"]["name"], "Rooms");
}

#[test]
fn what_the_call_does_comes_from_the_listed_hints() {
    let r = rule("[[approval]]\ntools = [\"*\"]\n");
    let args = json!({});
    let read_only = Annotations {
        read_only: Some(true),
        open_world: Some(false),
        ..Default::default()
    };
    let m = message(&subject(&r, &args, Some(read_only)));
    assert!(m.contains("read-only") && !m.contains("beyond"), "{m}");
    assert!(m.contains("No arguments."), "{m}");
    let m = message(&subject(&r, &args, None));
    assert!(m.contains("no listing of this tool"), "{m}");
    let f = form(&subject(&r, &args, None));
    assert!(
        f["requestedSchema"]["properties"]
            .get(REMEMBER_FIELD)
            .is_none(),
        "this call only: nothing to remember"
    );
}

#[test]
fn names_are_shown_as_names() {
    assert_eq!(shown_name("del\u{200b}ete room\n", 64), "del?ete?room?");
    assert_eq!(shown_name(&"a".repeat(100), 10).chars().count(), 10);
    assert_eq!(shown_text("a\"b\nc\u{7}", 20), "a\\\"b\\nc");
}

#[test]
fn what_the_argument_checks_found_is_named_by_kind_and_place_never_by_value() {
    let rule = ApprovalRule::for_arguments();
    let args = json!({"password": "hunter2-do-not-show", "url": "http://10.0.0.7/x"});
    let found = [
        (super::super::ArgumentCheck::Secret, "/password".to_owned()),
        (
            super::super::ArgumentCheck::ForbiddenHost,
            "/url".to_owned(),
        ),
    ];
    let mut s = subject(rule, &args, None);
    s.found = &found;
    let f = form(&s);
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("Found: a secret or credential in an argument (/password)."),
        "{m}"
    );
    assert!(m.contains("(/url)"), "{m}");
    assert!(!m.contains("hunter2"), "the secret is masked: {m}");
    assert_eq!(
        f["_meta"]["dev.portcullis/provenance"]["approval"]["rule"],
        "arguments"
    );
    assert!(
        f["requestedSchema"]["properties"].get("remember").is_none(),
        "this call only: {f}"
    );
}
