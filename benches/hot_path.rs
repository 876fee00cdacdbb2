//! Criterion benchmarks of the per-message work on the request path: checking
//! a request against its headers, and inspecting an upstream answer (JSON or
//! SSE), each next to the cost of plainly parsing the same bytes.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use portcullis::config::GatewayConfig;
use portcullis::model::Generation;
use portcullis::pipeline::ctx::RequestCtx;
use portcullis::pipeline::request::parse;
use portcullis::pipeline::response::disposition::Disposition;
use portcullis::pipeline::response::exchange::{Carrier, Exchange};
use portcullis::pipeline::sse::SseFramer;
use portcullis::pipeline::Gateway;
use serde_json::json;

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}},"name":"get_room","arguments":{"room_id":"atrium"}}}"#;

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

fn parts() -> http::request::Parts {
    parts_for("tools/call", Some("get_room"))
}

fn parts_for(method: &str, name: Option<&str>) -> http::request::Parts {
    let mut b = http::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        b = b.header("mcp-name", name);
    }
    b.body(()).unwrap().into_parts().0
}

/// The response phase of a tools/call on an offline gateway.
fn exchange() -> Exchange {
    exchange_for(&parts(), CALL)
}

fn exchange_for(parts: &http::request::Parts, body: &'static str) -> Exchange {
    let text = "[[listener]]\naddress=\"127.0.0.1:0\"\n[[upstream]]\nid=\"b\"\nname=\"Bench\"\nurl=\"http://127.0.0.1:9/mcp\"\n[[route]]\npath=\"/mcp\"\nupstream=\"b\"\n";
    let cfg = GatewayConfig::parse(text, Path::new("bench.toml")).unwrap();
    let gateway = Gateway::offline(cfg).unwrap();
    let request = parse(parts, &Bytes::from_static(body.as_bytes()), Generation::ALL).unwrap();
    Exchange::new(RequestCtx::offline(Arc::clone(&gateway), "/mcp", request).unwrap())
}

/// A tools/list result of `n` tools, each with a two-sentence description
/// and four described parameters (every string gets the text rules).
fn tools_list(n: usize) -> Vec<u8> {
    let tools: Vec<_> = (0..n)
        .map(|i| json!({"name": format!("tool_{i}"), "title": format!("Tool {i}"),
            "description": format!("Look up the bookings of room {i} for a day. Returns the hours that are taken and by whom, newest first."),
            "inputSchema": {"type": "object", "properties": {
                "day": {"type": "string", "description": "ISO 8601 date, for example 2026-09-17"},
                "hour": {"type": "integer", "description": "Hour of the day, 0 to 23"},
                "room": {"type": "string", "description": "Room id as listed by list_rooms"},
                "limit": {"type": "integer", "description": "The maximum number of bookings to return"}},
                "required": ["day"]}}))
        .collect();
    serde_json::to_vec(
        &json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":tools}}),
    )
    .unwrap()
}

/// A `complete` tools/call result of about `size` bytes.
fn complete_result(size: usize) -> Vec<u8> {
    let rows: Vec<_> = (0..size / 64)
        .map(|i| json!({"room": format!("room-{i}"), "seats": i, "free": i % 2 == 0}))
        .collect();
    let v = json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text","text":"rooms"}],"structuredContent":{"rooms":rows}}});
    serde_json::to_vec(&v).unwrap()
}

fn input_required_5_fields() -> Vec<u8> {
    let v = json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"contact":{"method":"elicitation/create","params":{"mode":"form","message":"Who should we send the booking to?","requestedSchema":{"type":"object","properties":{
        "name":{"type":"string","title":"Name","maxLength":80},
        "email":{"type":"string","format":"email","title":"Email"},
        "seats":{"type":"integer","minimum":1,"maximum":40,"title":"Seats"},
        "room":{"type":"string","title":"Room","oneOf":[{"const":"atrium","title":"Atrium"},{"const":"nook","title":"Nook"}]},
        "catering":{"type":"boolean","title":"Catering","default":false}},"required":["name","email"]}}}},"requestState":"eyJ2IjoxLCJoaW50IjoidGhlIGJpZyByb29tIn0"}});
    serde_json::to_vec(&v).unwrap()
}

fn request_check(c: &mut Criterion) {
    let parts = parts();
    let body = Bytes::from_static(CALL.as_bytes());
    let mut g = c.benchmark_group("request_check");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("tools_call", |b| {
        b.iter(|| parse(black_box(&parts), black_box(&body), Generation::ALL).is_ok())
    });
    g.bench_function("baseline_serde_value", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(CALL.as_bytes())).is_ok())
    });
    g.finish();
}

fn response_check(c: &mut Criterion) {
    let mut exchange = exchange();
    let mut g = c.benchmark_group("response_check");
    for (name, bytes) in [
        ("complete_16k", complete_result(16 << 10)),
        ("input_required_5_fields", input_required_5_fields()),
    ] {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(format!("{name}/inspect"), |b| {
            b.iter(|| exchange.inspect(black_box(&bytes), Carrier::Body))
        });
        g.bench_function(format!("{name}/baseline_serde_value"), |b| {
            b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(&bytes)).is_ok())
        });
    }
    // A list's text rules run over every title and description.
    let mut listing = exchange_for(&parts_for("tools/list", None), LIST);
    let bytes = tools_list(100);
    let delivered = listing.inspect(&bytes, Carrier::Body);
    assert!(matches!(delivered, Disposition::Final), "{delivered:?}");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("tools_list_100/inspect", |b| {
        b.iter(|| listing.inspect(black_box(&bytes), Carrier::Body))
    });
    g.finish();
}

fn sse_framing(c: &mut Criterion) {
    let event = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1,\"total\":3}}\n\n";
    let stream: Vec<u8> = event
        .iter()
        .copied()
        .cycle()
        .take(event.len() * 64)
        .collect();
    let mut g = c.benchmark_group("sse");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("split_64_events_in_1k_chunks", |b| {
        b.iter(|| {
            let mut f = SseFramer::new(1 << 20);
            let mut n = 0;
            for chunk in stream.chunks(1024) {
                f.push(chunk);
                while let Ok(Some(_)) = f.next_event() {
                    n += 1;
                }
            }
            n
        })
    });
    g.finish();
}

fn sealed_state(c: &mut Criterion) {
    use portcullis::model::Asked;
    use portcullis::mrtr::seal::{new_key_line, SealedState, StateKeys};
    use portcullis::policy::form::{FieldKind, FormField, FormSchema};
    let keys = StateKeys::parse(&format!("{},{}", new_key_line("k2"), new_key_line("k1"))).unwrap();
    let field = |name: &str, kind: FieldKind| FormField {
        name: name.into(),
        required: true,
        kind,
    };
    let state = SealedState {
        v: 1,
        upstream_state: Some("eyJob3RlbCI6ImF0cml1bSIsInN0ZXAiOjEsIm5vbmNlIjoiYWJjZGVmIn0".into()),
        principal: "jwt:alice@example.com".into(),
        upstream: "rooms".into(),
        method: "tools/call".into(),
        target: Some("book_room".into()),
        digest: "n4bQgYhMfWWaL-qgxVrQFaO_TxsrC4Is0V1sFbDwCgg".into(),
        operation: "pQqo46u8D9WRRJSzujNW8g".into(),
        round: 1,
        started: 1_764_000_000,
        started_ms: 1_764_000_000_000,
        expires: 1_764_000_600,
        asked: vec![(
            "contact".into(),
            Asked::Form(FormSchema {
                fields: vec![
                    field(
                        "name",
                        FieldKind::Text {
                            min_len: None,
                            max_len: Some(80),
                            format: None,
                        },
                    ),
                    field(
                        "email",
                        FieldKind::Text {
                            min_len: None,
                            max_len: None,
                            format: Some(portcullis::policy::form::TextFormat::Email),
                        },
                    ),
                    field(
                        "seats",
                        FieldKind::Number {
                            integer: true,
                            min: Some(1.0),
                            max: Some(40.0),
                        },
                    ),
                    field(
                        "room",
                        FieldKind::Choice {
                            options: vec!["atrium".into(), "nook".into(), "studio-b".into()],
                        },
                    ),
                    field("catering", FieldKind::Boolean),
                ],
            }),
        )],
        answer_bytes: 0,
        approval: None,
    };
    let token = keys.seal(&state).unwrap();
    let mut g = c.benchmark_group("state");
    g.bench_function("seal", |b| b.iter(|| keys.seal(black_box(&state))));
    g.bench_function("open", |b| b.iter(|| keys.open(black_box(&token)).is_ok()));
    g.finish();
}

/// The approve phase for a tools/call that no `[[approval]]` rule asks
/// about: on a route with no rules (`applies` is all it costs), and on one
/// whose rule names another tool (the rules are read, nothing is asked).
fn approve_phase(c: &mut Criterion) {
    use futures_util::FutureExt;
    use portcullis::pipeline::approve;
    let base = "[[listener]]\naddress=\"127.0.0.1:0\"\n[[upstream]]\nid=\"b\"\nname=\"Bench\"\nurl=\"http://127.0.0.1:9/mcp\"\n[[route]]\npath=\"/mcp\"\nupstream=\"b\"\n";
    let ctx_for = |text: &str| {
        let cfg = GatewayConfig::parse(text, Path::new("bench.toml")).unwrap();
        let gateway = Gateway::offline(cfg).unwrap();
        let request = parse(
            &parts(),
            &Bytes::from_static(CALL.as_bytes()),
            Generation::ALL,
        )
        .unwrap();
        RequestCtx::offline(gateway, "/mcp", request).unwrap()
    };
    let mut g = c.benchmark_group("approve");
    let none = ctx_for(base);
    g.bench_function("no_rules", |b| {
        b.iter(|| approve::applies(black_box(&none)))
    });
    let mut other = ctx_for(&format!(
        "{base}[[route.approval]]\nname=\"cancel\"\ntools=[\"cancel_booking\", \"delete_*\"]\n"
    ));
    let parts = parts();
    let authority = http::HeaderValue::from_static("127.0.0.1");
    assert!(matches!(
        approve::check(&mut other, &parts, &authority).now_or_never(),
        Some(Ok(approve::Approve::Forward))
    ));
    g.bench_function("a_rule_for_another_tool", |b| {
        b.iter(|| {
            approve::applies(&other)
                && matches!(
                    approve::check(black_box(&mut other), &parts, &authority).now_or_never(),
                    Some(Ok(approve::Approve::Forward))
                )
        })
    });
    g.finish();
}

/// The request-side argument checks of `untrusted` on a small `tools/call`
/// (the listed schema compiled once, as the gateway keeps it per listing),
/// and on one whose arguments carry a URL and a paragraph of text.
fn argument_checks(c: &mut Criterion) {
    use portcullis::model::McpMethod;
    use portcullis::policy::arguments::{ArgumentCheck, Call, Contract, Listed};
    use portcullis::policy::config::PolicySet;
    use portcullis::policy::secret_values::SecretValueScanner;
    let policy = PolicySet::load(None).unwrap().get("untrusted").unwrap();
    let scanner = SecretValueScanner::builtin();
    let call = || Call {
        method: McpMethod::ToolsCall,
        upstream_name: "Bench",
    };
    let mut g = c.benchmark_group("arguments");
    let cases = [
        (
            "small_tools_call",
            json!({"name": "get_room", "inputSchema": {"type": "object",
                "properties": {"room_id": {"type": "string"}}, "required": ["room_id"]}}),
            json!({"room_id": "atrium"}),
        ),
        (
            "url_and_paragraph",
            json!({"name": "post_note", "inputSchema": {"type": "object", "properties": {
                "url": {"type": "string", "format": "uri"}, "title": {"type": "string"},
                "body": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}}}),
            json!({"url": "https://notes.example.com/api/v1/notes?team=platform", "title": "Weekly sync",
                "body": "We agreed to move the release to Thursday, to review the migration plan with the data team, and to keep the old endpoint for two more weeks while clients upgrade.",
                "tags": ["release", "migration", "platform"]}),
        ),
    ];
    for (name, listed, args) in cases {
        let tool = Contract::tool(&listed);
        tool.compile();
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut sent = args.clone();
                let mut check = ArgumentCheck::new(&policy, call(), &scanner);
                let ok = check
                    .check(Listed::Item(&tool), black_box(&mut sent))
                    .is_ok();
                (ok, check.finish())
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    argument_checks,
    request_check,
    response_check,
    sse_framing,
    sealed_state,
    approve_phase
);
criterion_main!(benches);
