use super::*;
use crate::rule::{Because, Circumstances};
use crate::when::{Annotations, CallerFacts, Facts};
use serde_json::json;

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    approval: Vec<Spanned<RawApproval>>,
}

fn rules(text: &str) -> Result<ApprovalRules, (String, String)> {
    let file: File = toml::from_str(text).expect("toml");
    compile(&file.approval, "approval", text)
        .map(|r| merge(vec![r]))
        .map_err(|e| (e.field, format!("{}|{}", &text[e.span.start..], e.message)))
}

fn call<'a>(tool: &'a str, args: &'a serde_json::Value, listed: Option<Annotations>) -> Facts<'a> {
    Facts {
        caller: CallerFacts {
            principal: "alice",
            method: "api_key",
            ..Default::default()
        },
        route: "/mcp",
        upstream: "rooms",
        tool,
        upstream_tool: tool.strip_prefix("rooms_").unwrap_or(tool),
        arguments: Some(args),
        annotations: listed,
        verdicts: &[],
        listing_changed: false,
    }
}

const NONE: Circumstances<'static> = Circumstances { ask_verdicts: &[] };

#[test]
fn the_smallest_rule_names_one_tool() {
    let r = rules("[[approval]]\ntools = [\"get_room\"]\n").unwrap();
    let args = json!({});
    let (rule, because) = r
        .first_match(&call("get_room", &args, None), &NONE)
        .unwrap();
    assert_eq!((rule.name.as_str(), because), ("approval-1", Because::Tool));
    assert_eq!(rule.remembered(), None, "this call only");
    assert_eq!(rule.approver, Approver::Caller);
    assert_eq!(rule.fallback, Fallback::Refuse);
    assert_eq!(rule.timeout, DEFAULT_TIMEOUT);
    assert!(r
        .first_match(&call("get_rooms", &args, None), &NONE)
        .is_none());
}

#[test]
fn exposed_and_upstream_names_both_match() {
    let r = rules("[[approval]]\ntools = [\"cancel_*\"]\n[[approval]]\nname = \"prefixed\"\ntools = [\"rooms_delete_*\"]\n").unwrap();
    let args = json!({});
    assert!(r
        .first_match(&call("rooms_cancel_booking", &args, None), &NONE)
        .is_some());
    let (rule, _) = r
        .first_match(&call("rooms_delete_room", &args, None), &NONE)
        .unwrap();
    assert_eq!(rule.name, "prefixed");
    assert!(r
        .first_match(&call("rooms_get_room", &args, None), &NONE)
        .is_none());
}

#[test]
fn annotations_match_as_listed_and_an_unknown_listing_asks() {
    let r =
        rules("[[approval]]\nannotations = [\"destructiveHint\", \"!readOnlyHint\"]\n").unwrap();
    let args = json!({});
    let destructive = Annotations {
        destructive: Some(true),
        read_only: Some(true),
        ..Default::default()
    };
    let read_only = Annotations {
        read_only: Some(true),
        ..Default::default()
    };
    let silent = Annotations::default();
    let m = |a| r.first_match(&call("t", &args, a), &NONE).map(|(_, b)| b);
    assert!(
        matches!(m(Some(destructive)), Some(Because::Annotation(h)) if h.as_written() == "destructiveHint")
    );
    assert_eq!(m(Some(read_only)), None);
    assert!(
        matches!(m(Some(silent)), Some(Because::Annotation(h)) if h.as_written() == "!readOnlyHint")
    );
    assert!(
        m(None).is_some(),
        "no listing known: the rule about risky tools asks"
    );
}

#[test]
fn verdicts_listings_conditions_and_first_use() {
    let r = rules(concat!(
        "[[approval]]\nname = \"paths\"\nverdicts = [\"private_path\", \"new_host\"]\n",
        "[[approval]]\nname = \"rug\"\nchanged_listing = true\n",
        "[[approval]]\nname = \"big\"\ntools = [\"book_*\"]\nwhen = 'arguments.nights > 7'\nremember = \"caller\"\nremember_for = \"2h\"\n",
        "[[approval]]\nname = \"first\"\nfirst_use = true\ntools = [\"pay\"]\n",
    ))
    .unwrap();
    let args = json!({"nights": 9});
    let ask = [ArgumentCheck::NewHost];
    let found = r.first_match(
        &call("x", &args, None),
        &Circumstances { ask_verdicts: &ask },
    );
    assert!(
        matches!(found, Some((rule, Because::Verdict(ArgumentCheck::NewHost))) if rule.name == "paths")
    );
    let mut changed = call("x", &args, None);
    changed.listing_changed = true;
    assert_eq!(r.first_match(&changed, &NONE).unwrap().0.name, "rug");
    let (big, because) = r
        .first_match(&call("book_room", &args, None), &NONE)
        .unwrap();
    assert_eq!((big.name.as_str(), because), ("big", Because::Tool));
    assert_eq!(big.remembered(), Some(Remember::Caller));
    assert_eq!(big.remember_for, Duration::from_secs(7200));
    let short = json!({"nights": 2});
    assert!(r
        .first_match(&call("book_room", &short, None), &NONE)
        .is_none());
    let failing = json!({});
    assert!(
        matches!(
            r.first_match(&call("book_room", &failing, None), &NONE),
            Some((_, Because::ConditionFailed(_)))
        ),
        "a condition that cannot be evaluated asks"
    );
    let (first, _) = r.first_match(&call("pay", &short, None), &NONE).unwrap();
    assert_eq!(
        (first.remembered(), first.remember_for),
        (Some(Remember::Caller), DEFAULT_FIRST_USE_FOR)
    );
}

#[test]
fn a_rule_of_the_same_name_down_the_chain_replaces_it() {
    let parent = rules("[[approval]]\nname = \"a\"\ntools = [\"x\"]\n[[approval]]\nname = \"b\"\ntools = [\"y\"]\n").unwrap();
    let parent: Vec<ApprovalRule> = parent.rules_for_test();
    let file: File = toml::from_str("[[approval]]\nname = \"a\"\ntools = [\"z\"]\n").unwrap();
    let child = compile(&file.approval, "approval", "").unwrap();
    let merged = merge(vec![parent, child]);
    let names: Vec<&str> = merged.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    let args = json!({});
    assert!(merged.first_match(&call("x", &args, None), &NONE).is_none());
    assert!(merged.first_match(&call("z", &args, None), &NONE).is_some());
}

#[test]
fn mistakes_are_pinned_to_where_they_are_written() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "[[approval]]\nname = \"x\"\n",
            "approval[0]",
            "names what it asks about",
        ),
        (
            "[[approval]]\ntools = [\"[\"]\n",
            "approval[0].tools",
            "not a glob",
        ),
        (
            "[[approval]]\nannotations = [\"destructive\"]\n",
            "approval[0].annotations",
            "not a tool annotation",
        ),
        (
            "[[approval]]\nverdicts = [\"secrets\"]\n",
            "approval[0].verdicts",
            "is not one of",
        ),
        (
            "[[approval]]\ntools = [\"*\"]\nremember = \"forever\"\n",
            "approval[0].remember",
            "is not one of",
        ),
        (
            "[[approval]]\ntools = [\"*\"]\nremember_for = \"1h\"\n",
            "approval[0].remember_for",
            "only a decision remembered",
        ),
        (
            "[[approval]]\ntools = [\"*\"]\ntimeout = \"2d\"\n",
            "approval[0].timeout",
            "at most",
        ),
        (
            "[[approval]]\ntools = [\"*\"]\napprover = \"approvers\"\n",
            "approval[0]",
            "approvers = [",
        ),
        (
            "[[approval]]\ntools = [\"*\"]\napprovers = [\"bob\"]\n",
            "approval[0].approvers",
            "decide only where",
        ),
        (
            "[[approval]]\ntools = [\"*\"]\n[[approval]]\ntools = [\"y\"]\nname = \"approval-1\"\n",
            "approval[1].name",
            "second approval rule",
        ),
        (
            "[[approval]]\nname = \"Bad Name\"\ntools = [\"*\"]\n",
            "approval[0].name",
            "a-z",
        ),
    ];
    for (text, field, words) in cases {
        let (f, m) = rules(text).map(|_| ()).unwrap_err();
        assert_eq!(&f, field, "{text}");
        assert!(m.contains(words), "{text}: {m}");
    }
}

#[test]
fn a_bad_condition_points_at_its_character_in_the_file() {
    for (text, at) in [
        (
            "[[approval]]\nwhen = 'tool == \"x\" && calller.name == \"y\"'\n",
            "calller.name",
        ),
        (
            "[[approval]]\nwhen = \"tool == 'x' && calller.name == 'y'\"\n",
            "calller.name",
        ),
        (
            "[[approval]]\nwhen = '''\ntool == \"x\" &&\n  calller.name == \"y\"'''\n",
            "calller.name",
        ),
    ] {
        let (f, m) = rules(text).map(|_| ()).unwrap_err();
        assert_eq!(f, "approval[0].when");
        assert!(m.starts_with(at), "{text}: {m}");
        assert!(m.contains("unknown variable `calller`"), "{m}");
    }
    // With escapes the value is not the token: its start is named.
    let (_, m) = rules("[[approval]]\nwhen = \"tool == \\\"x\\\" && calller\"\n")
        .map(|_| ())
        .unwrap_err();
    assert!(m.starts_with("\"tool"), "{m}");
}

#[test]
fn approvers_as_written_build_the_same_sets_on_another_replica() {
    let r = rules("[[approval]]\ntools = [\"x\"]\napprover = \"approvers\"\napprovers = [\"ops-*\", \"alice\"]\napprover_groups = [\"security\"]\n").unwrap();
    let rule = r.iter().next().unwrap();
    let written = &rule.approvers_written;
    assert_eq!(written.names, ["ops-*", "alice"]);
    assert_eq!(written.groups, ["security"]);
    // Sent to another replica as JSON and built there again.
    let there: ApproversWritten =
        serde_json::from_value(serde_json::to_value(written).unwrap()).unwrap();
    assert_eq!(&there, written);
    let groups = there.groups().unwrap();
    assert!(groups.is_match("security") && !groups.is_match("sec"));
    // No list, no set: nobody decides by it.
    assert!(ApproversWritten::default().groups().is_none());
    let broken = ApproversWritten {
        names: Vec::new(),
        groups: vec!["[".into()],
    };
    assert!(
        broken.groups().is_none(),
        "a glob that no longer builds admits nobody"
    );
}
