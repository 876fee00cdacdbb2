use super::*;
use serde_json::json;

fn facts<'a>(arguments: &'a Json, verdicts: &'a [&'a str]) -> Facts<'a> {
    Facts {
        caller: CallerFacts {
            principal: "alice",
            method: "jwt",
            ..Default::default()
        },
        route: "/mcp/rooms",
        upstream: "rooms",
        tool: "rooms_cancel_booking",
        upstream_tool: "cancel_booking",
        arguments: Some(arguments),
        annotations: Some(Annotations {
            destructive: Some(true),
            ..Default::default()
        }),
        verdicts,
        listing_changed: false,
    }
}

#[test]
fn conditions_read_every_variable() {
    let args = json!({"booking": "B-12", "nights": 4, "guests": ["a", "b"], "price": 12.5});
    let f = facts(&args, &["private_path"]);
    for (src, want) in [
        (
            "tool == 'rooms_cancel_booking' && upstream_tool == 'cancel_booking'",
            true,
        ),
        (
            "caller.principal == 'alice' && caller.method == 'jwt'",
            true,
        ),
        (
            "caller.scopes.size() == 0 && caller.client == '' && caller.claims.size() == 0",
            true,
        ),
        ("route.startsWith('/mcp/') && upstream == 'rooms'", true),
        ("arguments.nights > 3", true),
        ("arguments.price < 10.0", false),
        (
            "size(arguments.guests) == 2 && 'a' in arguments.guests",
            true,
        ),
        ("has(arguments.refund) && arguments.refund", false),
        (
            "annotations.destructiveHint && !has(annotations.readOnlyHint)",
            true,
        ),
        ("'private_path' in verdicts", true),
        ("verdicts.exists(v, v == 'secret')", false),
        ("!listing_changed", true),
        ("arguments.booking.matches('^B-[0-9]+$')", true),
    ] {
        let when = When::compile(src, Variable::ALL).unwrap_or_else(|e| panic!("{src}: {e}"));
        assert_eq!(when.holds(&f), Ok(want), "{src}");
    }
}

#[test]
fn a_condition_that_cannot_be_evaluated_says_why_without_values() {
    let args = json!({"nights": "four hundred secret nights"});
    let f = facts(&args, &[]);
    let e = When::compile("arguments.missing > 3", Variable::ALL)
        .unwrap()
        .holds(&f)
        .unwrap_err();
    assert!(e.0.contains("missing"), "{e}");
    for src in [
        "arguments.nights > 3",
        "int(arguments.nights) > 3",
        "arguments.nights",
    ] {
        let e = When::compile(src, Variable::ALL)
            .unwrap()
            .holds(&f)
            .unwrap_err();
        assert!(!e.0.contains("four hundred"), "{src}: {e}");
    }
}

#[test]
fn unknown_or_unavailable_variables_are_refused_where_they_are_written() {
    let e = When::compile(
        "tool == 'x' &&\n  calller.principal == 'bob'",
        Variable::ALL,
    )
    .unwrap_err();
    assert_eq!((e.line, e.column), (2, 3), "{e}");
    assert!(e.message.contains("unknown variable `calller`"), "{e}");
    let e = When::compile("'secret' in verdicts", PERMIT_VARIABLES).unwrap_err();
    assert!(e.message.contains("judged before"), "{e}");
    // Bound by a macro, not free.
    assert!(When::compile("arguments.all(k, k != 'x')", PERMIT_VARIABLES).is_ok());
    assert!(When::compile("[1, 2].map(n, n * 2).exists(m, m == 4)", PERMIT_VARIABLES).is_ok());
}

#[test]
fn syntax_errors_have_a_position() {
    let e = When::compile("tool == 'x' &&", Variable::ALL).unwrap_err();
    assert_eq!(e.line, 1, "{e}");
    assert!(e.column > 1, "{e}");
    assert!(e.message.starts_with("not a valid CEL expression"), "{e}");
    assert!(When::compile("  ", Variable::ALL).is_err());
    assert!(When::compile(&"a".repeat(MAX_SOURCE_BYTES + 1), Variable::ALL).is_err());
}

#[test]
fn listed_hints_are_read_as_listed() {
    let a = Annotations::of_listed(Some(
        &json!({"destructiveHint": true, "readOnlyHint": "yes", "title": "x"}),
    ));
    assert_eq!(a.destructive, Some(true));
    assert_eq!(a.read_only, None, "not a boolean: not a hint");
    assert_eq!(Annotations::of_listed(None), Annotations::default());
}
