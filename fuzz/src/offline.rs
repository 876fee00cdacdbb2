//! An offline gateway (no listener, no upstream connection) whose response
//! phase the targets drive directly, as `benches/hot_path.rs` does. One route
//! per shipped policy, so the inspector runs under each of them.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use portcullis::config::GatewayConfig;
use portcullis::model::Generation;
use portcullis::pipeline::ctx::RequestCtx;
use portcullis::pipeline::request::{parse, ParsedRequest};
use portcullis::pipeline::response::exchange::Exchange;
use portcullis::pipeline::Gateway;

/// Route path → policy name (the presets and the shipped example policies).
pub const ROUTES: &[(&str, &str)] = &[
    ("/mcp/untrusted", "untrusted"),
    ("/mcp/trusted", "trusted"),
    ("/mcp/strict", "third-party-strict"),
    ("/mcp/monitor", "rollout-monitor"),
    ("/mcp/internal", "internal-tools"),
];

fn config_text() -> String {
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
    let mut text = format!(
        "[[listener]]\naddress = \"127.0.0.1:0\"\n[policies]\ndir = {:?}\n[audit]\nsink = \"off\"\n",
        policies.display().to_string()
    );
    for (i, (path, policy)) in ROUTES.iter().enumerate() {
        text.push_str(&format!(
            "[[upstream]]\nid = \"u{i}\"\nname = \"Fuzzed {policy}\"\nurl = \"http://127.0.0.1:9/mcp\"\npolicy = \"{policy}\"\n[[route]]\npath = \"{path}\"\nupstream = \"u{i}\"\n"
        ));
    }
    text
}

/// The one offline gateway of this process.
pub fn gateway() -> Arc<Gateway> {
    static GATEWAY: OnceLock<Arc<Gateway>> = OnceLock::new();
    GATEWAY
        .get_or_init(|| {
            let cfg = GatewayConfig::parse(&config_text(), Path::new("fuzz.toml"))
                .expect("the fuzz gateway config is valid");
            Gateway::offline(cfg).expect("offline gateway")
        })
        .clone()
}

/// What the client asked and what it declared it can do.
pub const CAPS: &[&str] = &[
    r#"{"elicitation":{"form":{}}}"#,
    r#"{"elicitation":{"form":{},"url":{}},"sampling":{"context":{}},"roots":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#,
    r#"{}"#,
    r#"{"elicitation":{}}"#,
];

/// (method, Mcp-Name header and params member) of the client requests.
pub const METHODS: &[(&str, Option<(&str, &str)>)] = &[
    ("tools/call", Some(("name", "book_room"))),
    ("prompts/get", Some(("name", "greeting"))),
    ("resources/read", Some(("uri", "file:///rooms.txt"))),
    ("tools/list", None),
    ("prompts/list", None),
    ("resources/list", None),
    ("resources/templates/list", None),
    ("ping", None),
    ("subscriptions/listen", None),
    ("tasks/get", Some(("taskId", "786512e2-9e0d"))),
];

/// The client request the upstream's message answers, checked by the real
/// request check.
pub fn request(method: usize, caps: usize) -> ParsedRequest {
    let (name, target) = METHODS[method % METHODS.len()];
    let caps = CAPS[caps % CAPS.len()];
    let target_member = target
        .map(|(member, value)| format!(r#","{member}":"{value}""#))
        .unwrap_or_default();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"{name}","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{caps}}}{target_member}}}}}"#
    );
    let mut req = http::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", name);
    if let Some((_, value)) = target {
        req = req.header("mcp-name", value);
    }
    let parts = req.body(()).expect("request head").into_parts().0;
    parse(&parts, &Bytes::from(body), &[Generation::Stateless])
        .expect("the fuzz client requests are valid")
}

/// The response phase of `request` on route `route`.
pub fn exchange(route: usize, request: ParsedRequest) -> Exchange {
    let (path, _) = ROUTES[route % ROUTES.len()];
    let ctx = RequestCtx::offline(gateway(), path, request).expect("the fuzz routes exist");
    Exchange::new(ctx)
}
