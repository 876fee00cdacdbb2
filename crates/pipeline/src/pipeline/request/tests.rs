use bytes::Bytes;
use http::request::Parts;

use super::*;
use crate::model::Generation;
use crate::pipeline::refuse::Refused;

fn parts(headers: &[(&str, &str)]) -> Parts {
    let mut b = http::Request::builder().method("POST").uri("/mcp");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"book_room","arguments":{}}}"#;
const GOOD: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("mcp-protocol-version", "2026-07-28"),
    ("mcp-method", "tools/call"),
    ("mcp-name", "book_room"),
];

fn with(over: &[(&str, Option<&str>)]) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = GOOD
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in over {
        h.retain(|(n, _)| n != k);
        if let Some(v) = v {
            h.push((k.to_string(), v.to_string()));
        }
    }
    h
}

fn check(headers: &[(String, String)], body: &str) -> Result<ParsedRequest, Refused> {
    let h: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    parse(&parts(&h), &Bytes::from(body.to_owned()), Generation::ALL)
}

fn reason(r: Result<ParsedRequest, Refused>) -> Reason {
    r.map(|_| ()).unwrap_err().refusal.reason
}

#[test]
fn a_consistent_request_passes() {
    let c = check(&with(&[]), CALL).unwrap();
    assert_eq!(c.method, McpMethod::ToolsCall);
    assert_eq!(c.id(), Some("1"));
    assert_eq!(c.target.as_deref(), Some("book_room"));
    assert!(!c.is_retry());
}

#[test]
fn each_header_is_checked_against_the_body() {
    let no_meta = CALL.replace(
        "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",",
        "",
    );
    let other_body = CALL.replace("\"2026-07-28\"", "\"2025-06-18\"");
    type Case<'a> = (&'a [(&'a str, Option<&'a str>)], &'a str, Reason);
    let cases: &[Case] = &[
        (&[("mcp-method", None)], CALL, Reason::HeaderMissing),
        (
            &[("mcp-method", Some("tools/list"))],
            CALL,
            Reason::HeaderMismatch,
        ),
        (&[("mcp-name", None)], CALL, Reason::HeaderMissing),
        (
            &[("mcp-name", Some("delete_all"))],
            CALL,
            Reason::HeaderMismatch,
        ),
        (
            &[("mcp-protocol-version", None)],
            CALL,
            Reason::HeaderMissing,
        ),
        (
            &[("mcp-protocol-version", Some("1999-01-01"))],
            CALL,
            Reason::UnsupportedProtocolVersion,
        ),
        (&[], &other_body, Reason::HeaderMismatch),
        (&[], &no_meta, Reason::HeaderMismatch),
    ];
    for (over, body, want) in cases {
        assert_eq!(reason(check(&with(over), body)), *want, "{over:?}");
    }
}

#[test]
fn escaped_body_names_and_base64_headers_compare_as_values() {
    let escaped = CALL.replace("\"book_room\"", "\"book\\u005froom\"");
    assert!(check(&with(&[]), &escaped).is_ok());
    let cafe = CALL.replace("\"book_room\"", "\"caf\u{e9}\"");
    assert!(check(&with(&[("mcp-name", Some("=?base64?Y2Fmw6k=?="))]), &cafe).is_ok());
}

#[test]
fn mcp_name_follows_the_method_target() {
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let h = with(&[("mcp-method", Some("tools/list")), ("mcp-name", None)]);
    assert!(check(&h, list).is_ok());
    let task = r#"{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"taskId":"t-1"}}"#;
    let h = with(&[("mcp-method", Some("tasks/get")), ("mcp-name", Some("t-1"))]);
    assert!(check(&h, task).is_ok());
    let h = with(&[("mcp-method", Some("tasks/get")), ("mcp-name", Some("t-2"))]);
    assert_eq!(reason(check(&h, task)), Reason::HeaderMismatch);
    let read = r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"uri":"file:///a"}}"#;
    let h = with(&[
        ("mcp-method", Some("resources/read")),
        ("mcp-name", Some("file:///a")),
    ]);
    assert!(check(&h, read).is_ok());
    let h = with(&[("mcp-method", Some("resources/read")), ("mcp-name", None)]);
    assert_eq!(reason(check(&h, read)), Reason::HeaderMissing);
    let no_name = CALL.replace(",\"name\":\"book_room\"", "");
    assert_eq!(
        reason(check(&with(&[("mcp-name", None)]), &no_name)),
        Reason::InvalidRequest
    );
    assert_eq!(reason(check(&with(&[]), &no_name)), Reason::HeaderMismatch);
}

#[test]
fn unsupported_version_carries_the_supported_list() {
    let r = check(&with(&[("mcp-protocol-version", Some("1999-01-01"))]), CALL).unwrap_err();
    let extra = r.refusal.extra.unwrap();
    assert_eq!(extra["requested"], "1999-01-01");
    assert_eq!(extra["supported"][0], "2026-07-28");
    assert_eq!(r.id.as_deref(), Some("1"));
}

#[test]
fn notifications_need_method_but_no_body_version() {
    let n = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"1"}}"#;
    let h = with(&[
        ("mcp-method", Some("notifications/cancelled")),
        ("mcp-name", None),
    ]);
    assert_eq!(check(&h, n).unwrap().kind, MessageKind::Notification);
}

#[test]
fn a_closed_depth_bomb_in_params_is_refused() {
    let head = &CALL[..CALL.find("\"arguments\":").unwrap()];
    let mut deep = format!("{head}\"arguments\":{{\"a\":").into_bytes();
    deep.extend(std::iter::repeat_n(b'[', 100_000));
    deep.extend(std::iter::repeat_n(b']', 100_000));
    deep.extend(b"}}}");
    let h: Vec<(String, String)> = with(&[]);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let r = parse(&parts(&h), &Bytes::from(deep), Generation::ALL)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(r.refusal.reason, Reason::InvalidJson);
    assert!(
        r.refusal.message.contains("nesting"),
        "{}",
        r.refusal.message
    );
}

#[test]
fn duplicates_and_lone_surrogates_in_arguments_are_refused() {
    for args in [
        r#"{"amount":1,"amount":1000}"#,
        r#"{"amount":1,"am\u006funt":1000}"#,
        r#"{"to":"a","nested":{"x":1,"x":2}}"#,
        r#"{"note":"\ud800"}"#,
    ] {
        let body = CALL.replace("\"arguments\":{}", &format!("\"arguments\":{args}"));
        assert_eq!(
            reason(check(&with(&[]), &body)),
            Reason::InvalidJson,
            "{args}"
        );
    }
}

#[test]
fn a_retry_is_recognised_and_its_params_read_once() {
    let retry = CALL.replace(
        "\"arguments\":{}",
        "\"arguments\":{},\"inputResponses\":{\"room\":{\"action\":\"accept\",\"content\":{}}},\"requestState\":\"pcs1.x\"",
    );
    let c = check(&with(&[]), &retry).unwrap();
    assert!(c.is_retry() && c.input_responses);
    assert_eq!(c.request_state.as_deref(), Some("pcs1.x"));
    let map = c.params_map();
    assert!(map.contains_key("inputResponses"));
    let plain = check(&with(&[]), CALL).unwrap();
    // The digest leaves out what changes between rounds.
    assert_eq!(c.digest(), plain.digest());
}

fn legacy(
    headers: &[(&str, &str)],
    body: &str,
    generations: &[Generation],
) -> Result<ParsedRequest, Refused> {
    parse(&parts(headers), &Bytes::from(body.to_owned()), generations)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{},"sampling":{}},"clientInfo":{"name":"c","version":"1"}}}"#;

#[test]
fn the_generation_is_detected_per_request() {
    let json = ("content-type", "application/json");
    let init = legacy(&[json], INIT, Generation::ALL).unwrap();
    assert_eq!(init.generation(), Generation::Sessions);
    assert_eq!(init.requested_version.as_deref(), Some("2025-11-25"));
    assert!(init.client.elicitation_form && init.client.sampling && !init.client.elicitation_url);
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book_room","arguments":{}}}"#;
    let with_session = [
        json,
        ("mcp-session-id", "pss1.x"),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let c = legacy(&with_session, call, Generation::ALL).unwrap();
    assert_eq!(
        (c.generation(), c.version),
        (Generation::Sessions, ProtocolVersion::V2025_11_25)
    );
    assert_eq!(
        c.target.as_deref(),
        Some("book_room"),
        "no Mcp-Name needed in 2025-11-25"
    );
    let no_header = legacy(&[json, ("mcp-session-id", "pss1.x")], call, Generation::ALL).unwrap();
    assert_eq!(no_header.version, ProtocolVersion::V2025_03_26);
    let answer = r#"{"jsonrpc":"2.0","id":"psr1.x","result":{"action":"decline"}}"#;
    assert_eq!(
        legacy(&with_session, answer, Generation::ALL).unwrap().kind,
        MessageKind::Response
    );
    // A stateless route refuses 2025-11-25 with the versions it serves.
    let r = legacy(&[json], INIT, &[Generation::Stateless])
        .unwrap_err()
        .refusal;
    assert_eq!(r.reason, Reason::UnsupportedProtocolVersion);
    assert_eq!(
        r.data("supported").unwrap(),
        &serde_json::json!(["2026-07-28"])
    );
    let r = legacy(&with_session, answer, &[Generation::Stateless])
        .unwrap_err()
        .refusal;
    assert_eq!(r.reason, Reason::UnsupportedProtocolVersion);
    // A header that is present must still match the body.
    let bad = [
        json,
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-method", "tools/list"),
    ];
    assert_eq!(
        legacy(&bad, call, Generation::ALL)
            .unwrap_err()
            .refusal
            .reason,
        Reason::HeaderMismatch
    );
}
