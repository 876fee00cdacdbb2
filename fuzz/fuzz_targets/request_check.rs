//! The request check: a whole body plus MCP headers (`Name: value` lines, a
//! blank line, the body). Properties: whatever is accepted is one strict
//! JSON-RPC request or notification whose headers agree with its body, and
//! whose id and params the later phases read back unchanged; whatever is
//! refused becomes a JSON-RPC error body that parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::json::{error_body, parse_value};
use portcullis::model::Generation;
use portcullis::pipeline::request::parse;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let (parts, body) = portcullis_fuzz::split_head(data);
    // A route's default: both generations, each request read by its own rules.
    match parse(
        &parts,
        &body,
        &[Generation::Stateless, Generation::Sessions],
    ) {
        Ok(req) => accepted(&parts, &body, &req),
        Err(refused) => {
            let r = &refused.refusal;
            let bytes = error_body(refused.id.as_deref(), r, Some("fuzz"));
            let v = parse_value(&bytes).expect("a refusal body is strict JSON");
            assert_eq!(v["error"]["data"]["reason"], r.reason.as_str());
            assert_eq!(v["error"]["code"], r.reason.code());
            // The request's id is echoed when a strict reader reads it back;
            // one no reader can hold (a number out of range) is echoed as null.
            match refused.id.as_deref().map(|id| parse_value(id.as_bytes())) {
                Some(Ok(id)) => assert_eq!(v["id"], id, "the refusal echoes the request's id"),
                Some(Err(_)) | None => assert!(v["id"].is_null(), "{v}"),
            }
        }
    }
});

fn accepted(
    parts: &http::request::Parts,
    body: &[u8],
    req: &portcullis::pipeline::request::ParsedRequest,
) {
    let v = parse_value(body).expect("an accepted body is strict JSON");
    let lenient: Value = serde_json::from_slice(body).expect("and any JSON parser reads it");
    assert_eq!(
        v, lenient,
        "strict and lenient parsers agree on an accepted body"
    );
    let obj = v.as_object().expect("an accepted message is an object");
    assert_eq!(obj.get("jsonrpc"), Some(&Value::from("2.0")));
    let method = obj
        .get("method")
        .and_then(Value::as_str)
        .expect("an accepted message has a method");
    if req.method != portcullis::model::McpMethod::Other {
        assert_eq!(req.method.as_str(), method, "the method read is the body's");
    }
    assert!(obj.get("result").is_none() && obj.get("error").is_none());
    match (obj.get("id"), req.id()) {
        (Some(id), Some(text)) => {
            assert_eq!(&parse_value(text.as_bytes()).expect("id text"), id)
        }
        (None, None) => {}
        (a, b) => panic!("id in body {a:?} but id() {b:?}"),
    }
    match (obj.get("params"), req.params_text()) {
        (Some(p), Some(text)) => {
            assert_eq!(&parse_value(text.as_bytes()).expect("params text"), p)
        }
        (None, None) => {}
        (a, b) => panic!("params in body {a:?} but params_text() {b:?}"),
    }
    if req.generation() == Generation::Sessions {
        // 2025-11-25 has no per-request MCP headers to agree with the body.
        return;
    }
    // The headers agree with the body (a header is only decoded, never trusted).
    let raw = |name: &str| {
        let mut all = parts.headers.get_all(name).iter();
        let first = all.next().map(|h| h.as_bytes().to_vec());
        assert!(all.next().is_none(), "{name} given twice was accepted");
        first
    };
    let header = |name: &str| raw(name).map(|h| decode(&h));
    assert_eq!(
        raw("mcp-method").as_deref(),
        Some(method.as_bytes()),
        "Mcp-Method is required and equal to the body's method"
    );
    let body_version = obj
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str);
    if obj.contains_key("id") {
        let h = raw("mcp-protocol-version").expect("a request carries MCP-Protocol-Version");
        assert_eq!(
            Some(&h[..]),
            body_version.map(str::as_bytes),
            "versions agree"
        );
    }
    if let Some(member) = req.method.target() {
        let in_body = obj
            .get("params")
            .and_then(|p| p.get(member.member))
            .and_then(Value::as_str);
        assert_eq!(req.target.as_deref(), in_body, "target is the body's");
        if let Some(name) = header("mcp-name") {
            assert_eq!(name.as_deref(), in_body, "Mcp-Name differs from the body");
        }
    }
}

/// An MCP header value: plain visible ASCII, or `=?base64?…?=`.
fn decode(raw: &[u8]) -> Option<String> {
    use base64_decode as b64;
    let text = std::str::from_utf8(raw).ok()?;
    match text
        .strip_prefix("=?base64?")
        .and_then(|t| t.strip_suffix("?="))
    {
        Some(inner) => String::from_utf8(b64(inner)?).ok(),
        None => Some(text.to_owned()),
    }
}

/// Standard base64 with or without padding, written here so the check does
/// not share the gateway's decoder.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}
