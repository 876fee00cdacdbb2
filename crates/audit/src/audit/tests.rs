use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::config::{DEFAULT_MAX_FILES, DEFAULT_MAX_FILE_BYTES};
use super::line::to_line;
use super::sink::backup;
use super::*;
use crate::model::{
    Asked, ClientCaps, FieldKind, FormField, FormSchema, McpMethod, Reason, Refusal,
};
use crate::mrtr::answers::{check_answers, AnswerRules};
use crate::mrtr::seal::SealedState;
use crate::mrtr::value_scan::SecretValueScanner;
use crate::policy::config::PolicySet;
use crate::policy::inspect::{inspect_result, Action, Report, Rule, Subject, Verdict};

/// `input_required_received` as the response phase writes it: from the
/// policy's report on the raw result.
fn received_from_result(result: &str) -> AuditEvent {
    let policies = PolicySet::load(None).unwrap();
    let policy = policies.get("trusted").unwrap();
    let client = ClientCaps {
        elicitation_form: true,
        elicitation_url: true,
        sampling: true,
        sampling_context: true,
        roots: true,
        tasks: true,
    };
    let subject = Subject {
        method: McpMethod::ToolsCall,
        client,
        upstream_name: "Billing (ACME)",
        upstream_host: "billing.acme.example",
        catalogue: None,
    };
    let (_, report) = inspect_result(&policy, &subject, result.as_bytes());
    AuditEvent::received(&report)
}

/// Every string a user typed, the upstream's message text and its state in
/// the fixtures below contain this; no line may.
const SECRET: &str = "S3CR3T";

fn ctx() -> AuditContext {
    AuditContext {
        request_id: "5f0c1e2a9b7d4c31".into(),
        operation: Some("op-7Qm2".into()),
        upstream_id: "billing".into(),
        upstream_name: "Billing (ACME)".into(),
        upstream_endpoint: "https://billing.acme.example/mcp".into(),
        principal: "alice".into(),
        auth_scheme: Some("keys".into()),
        client: None,
        method: "tools/call".into(),
        target: Some("create_invoice".into()),
        round: Some(1),
        generation: "2026-07-28",
        trace: None,
    }
}

fn text_field(name: &str, required: bool) -> FormField {
    FormField {
        name: name.into(),
        required,
        kind: FieldKind::Text {
            min_len: None,
            max_len: None,
            format: None,
        },
    }
}

/// An `input_required` result whose every value (not name) carries SECRET.
fn result_json() -> String {
    json!({
        "resultType": "input_required",
        "inputRequests": {
            "customer": {
                "method": "elicitation/create",
                "params": {
                    "message": format!("Hello {SECRET}, please confirm"),
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "email": {"type": "string", "title": format!("Email {SECRET}"), "default": SECRET},
                            "card_number": {"type": "string", "description": SECRET}
                        },
                        "required": ["email"]
                    }
                }
            },
            "login": {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "message": SECRET,
                    "url": format!("https://{SECRET}:pw@Auth.Example.com:8443/start?token={SECRET}"),
                    "elicitationId": SECRET
                }
            },
            "summary": {"method": "sampling/createMessage", "params": {"messages": [{"role": "user", "content": {"type": "text", "text": SECRET}}], "maxTokens": 5}},
            "workspace": {"method": "roots/list", "params": {}},
            "odd": {"method": SECRET}
        },
        "requestState": format!("upstream-{SECRET}")
    })
    .to_string()
}

fn report() -> Report {
    Report {
        intents: Vec::new(),
        verdicts: vec![
            Verdict {
                rule: Rule::SecretField,
                action: Action::Strip,
                key: Some("customer".into()),
                field: Some("card_number".into()),
                detail: Some("payment_card in name".into()),
            },
            Verdict {
                rule: Rule::TextSafety,
                action: Action::Sanitize,
                key: Some("customer".into()),
                field: None,
                detail: Some("message: bidi,zero_width".into()),
            },
            Verdict {
                rule: Rule::UrlMode,
                action: Action::Allow,
                key: Some("login".into()),
                field: None,
                detail: Some("auth.example.com".into()),
            },
        ],
        asked: vec![
            (
                "customer".into(),
                Asked::Form(FormSchema {
                    fields: vec![text_field("email", true), text_field("vat_id", false)],
                }),
            ),
            (
                "login".into(),
                Asked::Url {
                    host: "auth.example.com".into(),
                },
            ),
            ("summary".into(), Asked::Sampling),
            ("workspace".into(), Asked::Roots),
        ],
        request_state: Some(format!("upstream-{SECRET}")),
        received: Vec::new(),
        trace: Vec::new(),
    }
}

fn prior() -> SealedState {
    SealedState {
        v: 1,
        upstream_state: Some(format!("upstream-{SECRET}")),
        principal: "api_key:alice".into(),
        upstream: "billing".into(),
        method: "tools/call".into(),
        target: Some("create_invoice".into()),
        digest: SECRET.into(),
        operation: "op-7Qm2".into(),
        round: 1,
        started: 0,
        started_ms: 0,
        expires: 0,
        asked: report().asked,
        answer_bytes: 0,
        approval: None,
    }
}

/// The client's answers, every value carrying SECRET; one unasked key.
fn answers() -> Map<String, Value> {
    let v = json!({
        "customer": {"action": "accept", "content": {"email": format!("{}@example.com", SECRET.to_lowercase()), "vat_id": SECRET}},
        "login": {"action": "decline", "content": {"x": SECRET}},
        "smuggled": {"action": "accept", "content": {"y": SECRET}}
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// One of each event, built with the real constructors from the fixtures.
fn sample_events() -> Vec<AuditEvent> {
    let rules = AnswerRules {
        allow_secret_values: true,
        scanner: Arc::new(SecretValueScanner::builtin()),
    };
    let mut map = answers();
    let answer_report = check_answers(&mut map, &report().asked, &rules).expect("answers pass");

    let mut events = vec![received_from_result(&result_json())];
    events.extend(AuditEvent::verdicts(&report()));
    events.push(AuditEvent::delivered(&report()));
    events.push(AuditEvent::refused(
        &Refusal::new(Reason::SecretFieldRequested, format!("asks for {SECRET}"))
            .with_data("rule", "secret_field".into())
            .with_data("key", "customer".into())
            .with_data("field", "card_number".into()),
    ));
    events.push(AuditEvent::retry_ok(&answer_report));
    events.push(AuditEvent::retry_refused(
        &Refusal::new(
            Reason::SecretInAnswer,
            format!("looks like a key: {SECRET}"),
        )
        .with_data("key", "customer".into())
        .with_data("field", "vat_id".into()),
    ));
    events.push(AuditEvent::forwarded(&answer_report, &prior()));
    events.push(AuditEvent::operation_end(
        OperationOutcome::Complete,
        1,
        Duration::from_millis(8412),
        None,
    ));
    events.push(AuditEvent::listing_changed(
        "tool",
        "create_invoice",
        "removed",
        Some("op-7Qm2"),
    ));
    events.push(AuditEvent::approval(
        crate::approval::Step::Approved,
        "cancel",
        "create_invoice",
        &crate::approval::Because::Tool.label(),
        "op-7Qm2",
        Some("customer"),
        Some(crate::approval::Remember::Caller),
    ));
    events.push(AuditEvent::approval_decision_refused(
        "cancel",
        "create_invoice",
        "op-7Qm2",
        Some("customer"),
        crate::approval::RefusedDecision::TokenMismatch,
    ));
    events.push(AuditEvent::ConfigWeakened {
        control: Name::new("url_mode"),
        route: Some(Name::new("billing")),
        listener: None,
        from: Name::new("strip"),
        to: Name::new("allow"),
        outcome: ReloadOutcome::Refused,
    });
    events
}

/// An event tied to no request has its own envelope: no request id,
/// principal or method; the upstream as configured, its endpoint without
/// credentials; nothing that could forge a member.
#[test]
fn an_event_tied_to_no_request_has_its_own_envelope() {
    let event = AuditEvent::ConfigWeakened {
        control: Name::new("arguments.secrets"),
        route: None,
        listener: None,
        from: Name::new("enforce"),
        to: Name::new("off\n{\"event\":\"x\"}"),
        outcome: ReloadOutcome::Applied,
    };
    let about = GatewayAbout {
        upstream_id: Some("billing".into()),
        upstream_name: "Billing".into(),
        upstream_endpoint: "https://user:pa55@billing.example/mcp?key=abc".into(),
    };
    let ts = "2026-07-28T09:14:03.120Z";
    let line = super::line::to_unbound_line(ts, &about, &event).unwrap();
    let text = String::from_utf8(line).unwrap();
    assert_eq!(text.matches('\n').count(), 1, "{text}");
    assert!(
        !text.contains("pa55") && !text.contains("key=abc"),
        "{text}"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["event"], "config_weakened");
    assert_eq!(v["upstream"]["endpoint"], "https://billing.example/mcp");
    assert_eq!(v["control"], "arguments.secrets");
    assert_eq!(v["outcome"], "applied");
    assert!(
        v.get("request_id").is_none() && v.get("principal").is_none(),
        "{v}"
    );
    let gateway = super::line::to_unbound_line(ts, &GatewayAbout::default(), &event).unwrap();
    let v: Value = serde_json::from_slice(&gateway).unwrap();
    assert!(v["upstream"].is_null(), "{v}");
}

fn file_sink(dir: &Path, max_file_bytes: u64, max_files: u32) -> (AuditSink, PathBuf) {
    let path = dir.join("audit.jsonl");
    let settings = AuditSettings {
        otlp: None,
        target: AuditTarget::File(FileSettings {
            path: path.clone(),
            max_file_bytes,
            max_files,
        }),
    };
    (AuditSink::from_settings(settings), path)
}

fn read_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

const ENVELOPE: [&str; 11] = [
    "ts",
    "event",
    "operation",
    "request_id",
    "upstream",
    "principal",
    "auth_scheme",
    "method",
    "target",
    "round",
    "generation",
];

/// The members of a line after the envelope.
fn body(line: &Value) -> Value {
    let mut m = line.as_object().expect("object").clone();
    for k in ENVELOPE {
        m.remove(k);
    }
    Value::Object(m)
}

fn is_rfc3339_millis_utc(ts: &str) -> bool {
    let b = ts.as_bytes();
    b.len() == 24
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b[23] == b'Z'
        && b.iter()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16, 19, 23].contains(&i) || c.is_ascii_digit())
}

#[tokio::test]
async fn every_event_is_one_json_line_with_the_envelope_and_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, path) = file_sink(dir.path(), DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_FILES);
    let events = sample_events();
    let first_round = AuditContext {
        operation: None,
        ..ctx()
    };
    sink.emit(&first_round, events[0].clone());
    for e in &events[1..] {
        sink.emit(&ctx(), e.clone());
    }
    sink.flush().await;
    let lines = read_lines(&path);
    assert_eq!(lines.len(), events.len());
    assert_eq!(sink.dropped(), 0);

    for (line, event) in lines.iter().zip(&events) {
        let obj = line.as_object().unwrap();
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        assert_eq!(&keys[..11], &ENVELOPE, "envelope first, in order");
        assert!(
            is_rfc3339_millis_utc(line["ts"].as_str().unwrap()),
            "{}",
            line["ts"]
        );
        assert_eq!(line["event"], event.name());
        assert_eq!(line["request_id"], "5f0c1e2a9b7d4c31");
        assert_eq!(
            line["upstream"],
            json!({"id": "billing", "name": "Billing (ACME)", "endpoint": "https://billing.acme.example/mcp"})
        );
        assert_eq!(line["principal"], "alice");
        assert_eq!(line["auth_scheme"], "keys");
        assert_eq!(line["method"], "tools/call");
        assert_eq!(line["target"], "create_invoice");
        assert_eq!(line["round"], 1);
    }
    assert_eq!(lines[0]["operation"], Value::Null);
    assert_eq!(lines[1]["operation"], "op-7Qm2");

    let bodies: Vec<Value> = lines.iter().map(body).collect();
    assert_eq!(
        bodies[0],
        json!({
            "requests": [
                {"key": "customer", "kind": "form", "fields": ["email", "card_number"]},
                {"key": "login", "kind": "url", "url_host": "auth.example.com"},
                {"key": "summary", "kind": "sampling"},
                {"key": "workspace", "kind": "roots"},
                {"key": "odd", "kind": "unknown"}
            ],
            "upstream_state": true
        })
    );
    assert_eq!(
        bodies[1],
        json!({"rule": "secret_field", "action": "strip", "key": "customer", "field": "card_number", "detail": "payment_card in name"})
    );
    assert_eq!(
        bodies[2],
        json!({"rule": "text_safety", "action": "sanitize", "key": "customer", "field": null, "detail": "message: bidi,zero_width"})
    );
    assert_eq!(
        bodies[3],
        json!({"rule": "url_mode", "action": "allow", "key": "login", "field": null, "detail": "auth.example.com"})
    );
    assert_eq!(
        bodies[4],
        json!({
            "requests": [
                {"key": "customer", "kind": "form", "fields": ["email", "vat_id"]},
                {"key": "login", "kind": "url", "url_host": "auth.example.com"},
                {"key": "summary", "kind": "sampling"},
                {"key": "workspace", "kind": "roots"}
            ],
            "stripped": [{"key": "customer", "field": "card_number"}],
            "sanitised": true
        })
    );
    assert_eq!(
        bodies[5],
        json!({"reason": "secret_field_requested", "rule": "secret_field", "key": "customer", "field": "card_number"})
    );
    assert_eq!(
        bodies[6],
        json!({
            "outcome": "ok",
            "answers": [
                {"key": "customer", "action": "accept", "fields": ["email", "vat_id"], "outcome": "ok"},
                {"key": "login", "action": "decline", "fields": [], "outcome": "ok"}
            ],
            "dropped_keys": ["smuggled"],
            "dropped_content_keys": ["login"]
        })
    );
    assert_eq!(
        bodies[7],
        json!({
            "outcome": "secret_refused",
            "answers": [{"key": "customer", "action": null, "fields": [], "outcome": "secret_refused", "problem_field": "vat_id"}],
            "dropped_keys": [],
            "dropped_content_keys": []
        })
    );
    assert_eq!(
        bodies[8],
        json!({"keys": ["customer", "login"], "upstream_state": true})
    );
    assert_eq!(
        bodies[9],
        json!({"outcome": "complete", "rounds": 1, "duration_ms": 8412, "reason": null})
    );
}

/// Walk a line; every leaf string must be one we put in as a name or
/// identifier, or a fixed enum/rule string, and nothing nests deeper than
/// line → list → summary → list → name.
fn walk(v: &Value, depth: usize, leaves: &mut Vec<String>) {
    assert!(depth <= 5, "nested too deep: {v}");
    match v {
        Value::String(s) => leaves.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| walk(x, depth + 1, leaves)),
        Value::Object(m) => m.values().for_each(|x| walk(x, depth + 1, leaves)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[test]
fn no_event_can_carry_anything_but_names() {
    let events = sample_events();
    // A new variant must be added to the samples (and so to this check).
    let mut seen = BTreeSet::new();
    for e in &events {
        match e {
            AuditEvent::InputRequiredReceived { .. }
            | AuditEvent::PolicyVerdict { .. }
            | AuditEvent::Delivered { .. }
            | AuditEvent::Refused { .. }
            | AuditEvent::RetryReceived { .. }
            | AuditEvent::Forwarded { .. }
            | AuditEvent::ListingChanged { .. }
            | AuditEvent::Approval { .. }
            | AuditEvent::ApprovalDecisionRefused { .. }
            | AuditEvent::ConfigWeakened { .. }
            | AuditEvent::OperationEnd { .. } => seen.insert(e.name()),
        };
    }
    assert_eq!(seen.len(), 11, "every variant is sampled: {seen:?}");

    let names_given = [
        // keys, field names, hosts, rule and finding names
        "customer",
        "login",
        "summary",
        "workspace",
        "odd",
        "smuggled",
        "email",
        "card_number",
        "vat_id",
        "auth.example.com",
        "secret_field",
        "text_safety",
        "url_mode",
        "payment_card in name",
        "message: bidi,zero_width",
        // context
        "5f0c1e2a9b7d4c31",
        "op-7Qm2",
        "billing",
        "Billing (ACME)",
        "https://billing.acme.example/mcp",
        "alice",
        "keys",
        "tools/call",
        "create_invoice",
    ];
    let fixed = [
        "form",
        "url",
        "sampling",
        "roots",
        "unknown",
        "strip",
        "sanitize",
        "allow",
        "accept",
        "decline",
        "cancel",
        "ok",
        "invalid",
        "secret_refused",
        "complete",
        "secret_field_requested",
        "2026-07-28",
        "tool",
        "removed",
        // an approval's step and how long it is kept (names from their tables)
        "approved",
        "caller",
        "token_mismatch",
        // a reload's outcome
        "refused",
    ];
    let allowed: BTreeSet<&str> = names_given.iter().chain(&fixed).copied().collect();
    let ts = "2026-07-28T09:14:03.120Z";
    for e in &events {
        let line = to_line(ts, &ctx(), e).unwrap();
        let text = String::from_utf8(line).unwrap();
        assert!(!text.contains(SECRET), "{text}");
        assert!(!text.contains(&SECRET.to_lowercase()), "{text}");
        assert!(text.ends_with('\n') && text.matches('\n').count() == 1);
        let value: Value = serde_json::from_str(&text).unwrap();
        let mut leaves = Vec::new();
        walk(&value, 0, &mut leaves);
        for leaf in leaves {
            assert!(
                leaf == ts || leaf == e.name() || allowed.contains(leaf.as_str()),
                "unexpected string {leaf:?} in {text}"
            );
        }
    }
}

/// Every character of the one invisible table (both ends and the middle of
/// each range) is dropped from a name written to the audit trail.
#[test]
fn names_lose_every_character_of_the_invisible_table() {
    for (lo, hi, _) in crate::model::Invisible::ranges() {
        let mid = char::from_u32((lo as u32 + hi as u32) / 2).unwrap_or(lo);
        for c in [lo, mid, hi] {
            let name = format!("a{c}b");
            assert_eq!(Name::new(&name).as_str(), "ab", "{:?}", c.escape_unicode());
        }
    }
}

#[test]
fn names_lose_control_and_invisible_characters_and_are_clipped() {
    assert_eq!(
        Name::new("a\nb\r\u{1b}[31mc\u{202e}d\u{200b}e").as_str(),
        "ab[31mcde"
    );
    let long: String = "é".repeat(300);
    assert_eq!(Name::new(&long).as_str().chars().count(), MAX_NAME_CHARS);
    assert_eq!(Name::from(String::from("plain")).as_str(), "plain");
    // A name cannot forge another line or member.
    let ctx = AuditContext {
        principal: "eve\n{\"event\":\"operation_end\"}".into(),
        target: Some("t\u{0}".into()),
        upstream_endpoint: "https://user:pa55@host.example:8443/mcp?key=abc#frag".into(),
        ..ctx()
    };
    let line = to_line("t", &ctx, &AuditEvent::verdict(&report().verdicts[0])).unwrap();
    let text = String::from_utf8(line).unwrap();
    assert_eq!(text.matches('\n').count(), 1);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["principal"], "eve{\"event\":\"operation_end\"}");
    assert_eq!(v["target"], "t");
    assert_eq!(v["upstream"]["endpoint"], "https://host.example:8443/mcp");
}

#[test]
fn long_lists_are_cut_and_marked() {
    let mut requests = Map::new();
    for i in 0..100 {
        let props: Map<String, Value> = (0..100)
            .map(|j| (format!("f{j}"), json!({"type": "string"})))
            .collect();
        requests.insert(
            format!("k{i}"),
            json!({"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {"type": "object", "properties": props}}}),
        );
    }
    let result = json!({"resultType": "input_required", "inputRequests": requests}).to_string();
    let event = received_from_result(&result);
    let v: Value = serde_json::from_slice(&to_line("t", &ctx(), &event).unwrap()).unwrap();
    assert_eq!(v["truncated"], true);
    let reqs = v["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), MAX_LIST_ITEMS);
    assert_eq!(reqs[0]["fields"].as_array().unwrap().len(), MAX_LIST_ITEMS);
    assert_eq!(v["upstream_state"], false);
    // Short lists are not marked.
    let v: Value =
        serde_json::from_slice(&to_line("t", &ctx(), &sample_events()[0]).unwrap()).unwrap();
    assert!(v.get("truncated").is_none());
}

#[test]
fn unreadable_results_and_bodies_give_empty_lists() {
    assert_eq!(
        received_from_result("{not json"),
        AuditEvent::InputRequiredReceived {
            requests: vec![],
            upstream_state: false
        }
    );
    let mut prior = prior();
    prior.upstream_state = None;
    assert_eq!(
        AuditEvent::forwarded(&Default::default(), &prior),
        AuditEvent::Forwarded {
            keys: vec![],
            upstream_state: false
        }
    );
}

#[test]
fn operation_outcomes() {
    use OperationOutcome as O;
    assert_eq!(O::from_reason(Reason::RoundLimitExceeded), O::RoundLimit);
    assert_eq!(O::from_reason(Reason::OperationExpired), O::Expired);
    assert_eq!(O::from_reason(Reason::StateExpired), O::Expired);
    assert_eq!(O::from_reason(Reason::UpstreamTimeout), O::Error);
    assert_eq!(O::from_reason(Reason::PromptInjection), O::Refused);
    assert_eq!(O::from_reason(Reason::SecretInAnswer), O::Refused);
    // The upstream's own 4xx is its failure (counted) but ends the
    // operation as refused, as before the sets were a column.
    assert_eq!(O::from_reason(Reason::UpstreamRefused), O::Refused);
    assert_eq!(O::from_reason(Reason::StateStoreUnavailable), O::Error);
    let with = |actions: &[&str]| crate::mrtr::answers::AnswerReport {
        actions: actions
            .iter()
            .map(|a| ("k".to_owned(), (*a).to_owned()))
            .collect(),
        ..Default::default()
    };
    assert_eq!(O::after_answers(&with(&[])), O::Complete);
    assert_eq!(O::after_answers(&with(&["decline", "accept"])), O::Complete);
    assert_eq!(
        O::after_answers(&with(&["decline", "cancel"])),
        O::Cancelled
    );
    assert_eq!(O::after_answers(&with(&["decline"])), O::Declined);
}

#[tokio::test]
async fn file_rotates_by_size_and_keeps_max_files() {
    let dir = tempfile::tempdir().unwrap();
    let max_bytes = 700;
    let (sink, path) = file_sink(dir.path(), max_bytes, 2);
    let event = AuditEvent::operation_end(OperationOutcome::Complete, 1, Duration::ZERO, None);
    for i in 0..30 {
        let ctx = AuditContext {
            request_id: format!("r{i:03}"),
            ..ctx()
        };
        sink.emit(&ctx, event.clone());
    }
    sink.flush().await;
    assert_eq!(sink.dropped(), 0);
    assert!(backup(&path, 1).exists() && backup(&path, 2).exists());
    assert!(!backup(&path, 3).exists());
    let mut ids = Vec::new();
    for p in [backup(&path, 2), backup(&path, 1), path.clone()] {
        let len = std::fs::metadata(&p).unwrap().len();
        let lines = read_lines(&p);
        assert!(!lines.is_empty());
        assert!(
            len <= max_bytes || lines.len() == 1,
            "{} is {len} bytes",
            p.display()
        );
        ids.extend(
            lines
                .iter()
                .map(|l| l["request_id"].as_str().unwrap().to_owned()),
        );
    }
    // The newest events, in order, with no gap.
    let expected: Vec<String> = (30 - ids.len()..30).map(|i| format!("r{i:03}")).collect();
    assert_eq!(ids, expected);
    assert!(ids.len() < 30, "older files were deleted");

    // A sink started on an existing file continues it and rotates it.
    drop(sink);
    let before = read_lines(&path).len();
    let (sink, _) = file_sink(dir.path(), max_bytes, 2);
    sink.emit(&ctx(), event.clone());
    sink.flush().await;
    let now = read_lines(&path).len();
    assert!(now == before + 1 || now == 1, "before {before}, now {now}");
}

#[tokio::test]
async fn a_single_line_larger_than_the_limit_is_written_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, path) = file_sink(dir.path(), 10, 3);
    for _ in 0..3 {
        sink.emit(&ctx(), sample_events()[0].clone());
    }
    sink.flush().await;
    for p in [path.clone(), backup(&path, 1), backup(&path, 2)] {
        assert_eq!(read_lines(&p).len(), 1, "{}", p.display());
    }
    assert!(!backup(&path, 3).exists());
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let settings = AuditSettings {
        otlp: None,
        target: AuditTarget::File(FileSettings {
            path: path.clone(),
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_files: 1,
        }),
    };
    // A writer that has not started: nothing drains the queue of 4.
    let sink = AuditSink::build(settings, 4, false);
    let event = AuditEvent::operation_end(OperationOutcome::Error, 2, Duration::ZERO, None);
    for _ in 0..10 {
        sink.emit(&ctx(), event.clone());
    }
    assert_eq!(sink.dropped(), 6);
    assert!(!path.exists(), "nothing written before the writer starts");
    sink.flush().await;
    assert_eq!(read_lines(&path).len(), 4);
    assert_eq!(sink.dropped(), 6);
}

#[tokio::test]
async fn flush_waits_for_everything_emitted_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, path) = file_sink(dir.path(), DEFAULT_MAX_FILE_BYTES, 1);
    sink.start().unwrap();
    let clone = sink.clone();
    let event = AuditEvent::verdict(&report().verdicts[0]);
    for _ in 0..500 {
        clone.emit(&ctx(), event.clone());
    }
    sink.flush().await;
    assert_eq!(read_lines(&path).len(), 500);
    sink.emit(&ctx(), event);
    clone.flush().await;
    assert_eq!(read_lines(&path).len(), 501);
    assert_eq!(sink.dropped(), 0);

    // Off: nothing to wait for, nothing counted.
    let off = AuditSink::off();
    assert!(!off.enabled());
    off.emit(&ctx(), sample_events().remove(0));
    off.flush().await;
    assert_eq!(off.dropped(), 0);
}

#[test]
fn the_writer_drains_when_the_last_sink_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, path) = file_sink(dir.path(), DEFAULT_MAX_FILE_BYTES, 1);
    // No runtime here: emitting works without one.
    for _ in 0..50 {
        sink.emit(&ctx(), sample_events().remove(0));
    }
    drop(sink);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while read_lines(&path).len() < 50 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(read_lines(&path).len(), 50);
}

#[tokio::test]
async fn an_unopenable_file_is_reported_by_start_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let settings = AuditSettings {
        otlp: None,
        target: AuditTarget::File(FileSettings {
            path: dir.path().join("missing-dir").join("audit.jsonl"),
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_files: 1,
        }),
    };
    let sink = AuditSink::from_settings(settings);
    assert!(sink.start().is_err());
    sink.emit(&ctx(), sample_events().remove(0));
    sink.flush().await;
    assert_eq!(sink.dropped(), 1);
}

#[cfg(unix)]
#[tokio::test]
async fn the_file_is_created_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (sink, path) = file_sink(dir.path(), 600, 2);
    for _ in 0..5 {
        sink.emit(&ctx(), sample_events().remove(0));
    }
    sink.flush().await;
    for p in [path.clone(), backup(&path, 1)] {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", p.display());
    }
}

#[test]
fn request_ids_are_short_hex_and_distinct() {
    let ids: BTreeSet<String> = (0..10_000).map(|_| new_request_id()).collect();
    assert_eq!(ids.len(), 10_000);
    for id in ids.iter().take(100) {
        assert_eq!(id.len(), 16);
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }
}

// ---------------------------------------------------------------- config

#[derive(Debug, Deserialize)]
struct Top {
    audit: Option<toml::Spanned<RawAudit>>,
}

fn settings(text: &str, base: &Path) -> Result<AuditSettings, AuditConfigError> {
    let top: Top = toml::from_str(text).expect("toml");
    AuditSettings::from_raw(top.audit.as_ref(), base, None)
}

fn config_err(text: &str, base: &Path) -> (String, String, String) {
    let e = settings(text, base).expect_err("should be refused");
    (e.field, text[e.span.clone()].to_owned(), e.message)
}

#[test]
fn config_defaults_and_sinks() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    assert_eq!(settings("", base).unwrap().target, AuditTarget::Stdout);
    assert_eq!(
        settings("[audit]\n", base).unwrap().target,
        AuditTarget::Stdout
    );
    assert_eq!(
        settings("[audit]\nsink = \"off\"\n", base).unwrap().target,
        AuditTarget::Off
    );
    assert_eq!(
        settings("[audit]\nsink = \"file\"\npath = \"audit.jsonl\"\n", base)
            .unwrap()
            .target,
        AuditTarget::File(FileSettings {
            path: base.join("audit.jsonl"),
            max_file_bytes: 104_857_600,
            max_files: 5,
        })
    );
    let abs = base.join("a.jsonl");
    let text = format!(
        "[audit]\nsink = \"file\"\npath = \"{}\"\nmax_file_bytes = 2048\nmax_files = 9\n",
        abs.display()
    );
    assert_eq!(
        settings(&text, Path::new("/elsewhere")).unwrap().target,
        AuditTarget::File(FileSettings {
            path: abs,
            max_file_bytes: 2048,
            max_files: 9,
        })
    );
    // Validation opens nothing.
    assert!(!base.join("audit.jsonl").exists());
    let sink = AuditSink::from_config(None, base).unwrap();
    assert_eq!(sink.settings().target, AuditTarget::Stdout);
    assert!(sink.enabled());
}

#[test]
fn config_errors_name_the_field_and_its_span() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let (field, at, msg) = config_err("[audit]\nsink = \"syslog\"\n", base);
    assert_eq!((field.as_str(), at.as_str()), ("audit.sink", "\"syslog\""));
    assert!(msg.contains("stdout"), "{msg}");

    let (field, at, _) = config_err("[audit]\nsink = \"stdout\"\npath = \"x.jsonl\"\n", base);
    assert_eq!((field.as_str(), at.as_str()), ("audit.path", "\"x.jsonl\""));
    let (field, at, _) = config_err("[audit]\nmax_files = 3\n", base);
    assert_eq!((field.as_str(), at.as_str()), ("audit.max_files", "3"));

    let (field, at, _) = config_err("[audit]\nsink = \"file\"\n", base);
    assert_eq!((field.as_str(), at.as_str()), ("audit.path", "\"file\""));

    let (field, _, msg) = config_err(
        "[audit]\nsink = \"file\"\npath = \"no/such/dir/audit.jsonl\"\n",
        base,
    );
    assert_eq!(field, "audit.path");
    assert!(msg.contains("does not exist"), "{msg}");
    let (field, _, _) = config_err("[audit]\nsink = \"file\"\npath = \".\"\n", base);
    assert_eq!(field, "audit.path");
    let (field, _, _) = config_err("[audit]\nsink = \"file\"\npath = \"\"\n", base);
    assert_eq!(field, "audit.path");

    for bad in ["0", "-1", "1023"] {
        let text = format!("[audit]\nsink = \"file\"\npath = \"a\"\nmax_file_bytes = {bad}\n");
        let (field, at, _) = config_err(&text, base);
        assert_eq!((field.as_str(), at.as_str()), ("audit.max_file_bytes", bad));
    }
    for bad in ["0", "-3", "1001"] {
        let text = format!("[audit]\nsink = \"file\"\npath = \"a\"\nmax_files = {bad}\n");
        let (field, at, _) = config_err(&text, base);
        assert_eq!((field.as_str(), at.as_str()), ("audit.max_files", bad));
    }

    // Unknown keys are refused by serde, with their own span.
    let e = toml::from_str::<Top>("[audit]\nsink = \"file\"\nrotate = true\n").unwrap_err();
    assert!(e.to_string().contains("rotate"), "{e}");
}

#[test]
fn url_hosts_are_read_as_a_browser_reads_them() {
    let host = |url: &str| {
        let result = json!({"inputRequests": {"k": {"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": url}}}}).to_string();
        match received_from_result(&result) {
            AuditEvent::InputRequiredReceived { requests, .. } => {
                requests[0].url_host.as_ref().map(|h| h.as_str().to_owned())
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        host("https://good.example\\@evil.example/").as_deref(),
        Some("good.example")
    );
    assert_eq!(
        host("https://u:p@B\u{fc}cher.Example:8443/x").as_deref(),
        Some("xn--bcher-kva.example")
    );
    assert_eq!(host("https://[::1]:8080/").as_deref(), Some("[::1]"));
    assert_eq!(host("not a url"), None);
}
