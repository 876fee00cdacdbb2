//! The parts of a JSON-RPC 2.0 message the gateway reads, parsed without
//! copying the body, and the error responses it writes.
//!
//! Parsing goes through serde's derived visitors on purpose: JSON escapes in
//! keys are decoded (`"met\u0068od"` is `method`), a known key given twice is a
//! hard error (no parser differential with the upstream), and serde_json's
//! recursion limit bounds nesting before any deep recursion happens.

use std::borrow::Cow;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use crate::refusal::{Reason, Refusal};

/// Deserialize a member that is present, keeping `null` as a value instead of
/// folding it into `None` the way `Option` does.
fn present<'de, D>(d: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: Deserializer<'de>,
{
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// What a single JSON-RPC message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    Request,
    Notification,
    Response,
}

/// A parsed JSON-RPC message borrowing from the body it came from.
#[derive(Debug)]
pub struct Message<'a> {
    pub kind: MessageKind,
    pub id: Option<&'a RawValue>,
    pub method: Option<Cow<'a, str>>,
    pub params: Option<&'a RawValue>,
    pub result: Option<&'a RawValue>,
    pub error: Option<&'a RawValue>,
}

/// Why a body is not one well-formed JSON-RPC message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MessageError {
    #[error("the body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error(
        "batches (JSON arrays) are not supported by this transport; send one message per request"
    )]
    Batch,
    #[error("{0}")]
    Invalid(&'static str),
}

impl MessageError {
    pub fn reason(&self) -> Reason {
        match self {
            MessageError::InvalidJson(_) => Reason::InvalidJson,
            MessageError::Batch => Reason::BatchNotSupported,
            MessageError::Invalid(_) => Reason::InvalidRequest,
        }
    }
}

/// A parser error in words that never quote the input: serde's messages can
/// carry a string value from the body (`invalid type: string "..."`), and
/// refusals are logged.
pub fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let text = e.to_string();
    let what = match e.classify() {
        _ if text.starts_with("recursion limit exceeded") => {
            "nesting is deeper than 128 levels".to_owned()
        }
        Category::Data if !text.contains('"') => {
            text.split(" at line ").next().unwrap_or("").to_owned()
        }
        Category::Data => "a member has the wrong type".to_owned(),
        Category::Eof => "the JSON ends too early".to_owned(),
        Category::Syntax | Category::Io => "invalid JSON syntax".to_owned(),
    };
    format!("{what} at line {} column {}", e.line(), e.column())
}

/// Walks a JSON document without keeping anything, through serde_json's
/// `deserialize_any`, which stops at 128 levels of nesting (serde's skipping
/// paths, used for `RawValue` and `IgnoredAny`, have no such limit).
struct DepthProbe;

impl<'de> Deserialize<'de> for DepthProbe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DepthProbe)
    }
}

impl<'de> serde::de::Visitor<'de> for DepthProbe {
    type Value = DepthProbe;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(DepthProbe)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(DepthProbe)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(DepthProbe)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(DepthProbe)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(DepthProbe)
    }
    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(DepthProbe)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<DepthProbe>()?.is_some() {}
        Ok(DepthProbe)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, DepthProbe>()?
            .is_some()
        {}
        Ok(DepthProbe)
    }
}

/// A JSON value parsed so that it cannot mean two things: a member given
/// twice anywhere (which parsers resolve differently: first wins, last wins,
/// error) is an error, as is nesting deeper than 128 levels.
pub struct StrictValue(pub serde_json::Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v)
            .map_or(serde_json::Value::Null, serde_json::Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(serde_json::Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if out.contains_key(key.as_ref()) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate member `{}`",
                    printable(&key)
                )));
            }
            let StrictValue(v) = map.next_value()?;
            out.insert(key.into_owned(), v);
        }
        Ok(serde_json::Value::Object(out))
    }
}

/// A member name fit for an error message: at most 64 printable characters.
fn printable(key: &str) -> String {
    key.chars().filter(|c| !c.is_control()).take(64).collect()
}

/// Parse `bytes` strictly (see [`StrictValue`]).
pub fn parse_strict(bytes: &[u8]) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_slice::<StrictValue>(bytes).map(|StrictValue(v)| v)
}

/// Checks that `body` is one JSON value nested no deeper than 128 levels,
/// without allocating.
pub fn check_json(body: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<DepthProbe>(body).map(|_| ())
}

fn first_significant_byte(body: &[u8]) -> Option<u8> {
    body.iter()
        .copied()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// A JSON-RPC id is a string or a number in MCP (never null, object or array).
fn valid_id(raw: &RawValue) -> bool {
    matches!(
        raw.get().as_bytes().first(),
        Some(b'"' | b'-' | b'0'..=b'9')
    )
}

impl<'a> Message<'a> {
    pub fn parse(body: &'a [u8]) -> Result<Message<'a>, MessageError> {
        match first_significant_byte(body) {
            Some(b'[') => return Err(MessageError::Batch),
            Some(b'{') => {}
            Some(_) => {
                // Non-JSON gets the parser's own message; valid JSON that is
                // not an object gets "not an object".
                return Err(
                    match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                        Err(e) => MessageError::InvalidJson(describe_json_error(&e)),
                        Ok(_) => MessageError::Invalid("a JSON-RPC message must be a JSON object"),
                    },
                );
            }
            None => return Err(MessageError::InvalidJson("the body is empty".into())),
        }
        // Syntax errors, wrong member types and duplicated members all land
        // here; each is a body the gateway will not reinterpret.
        let env: Envelope<'a> = serde_json::from_slice(body)
            .map_err(|e| MessageError::InvalidJson(describe_json_error(&e)))?;
        if env.jsonrpc.as_deref() != Some("2.0") {
            return Err(MessageError::Invalid("\"jsonrpc\" must be \"2.0\""));
        }
        if let Some(id) = env.id {
            if !valid_id(id) {
                return Err(MessageError::Invalid("\"id\" must be a string or a number"));
            }
        }
        let method = match env.method {
            Some(raw) => Some(
                serde_json::from_str::<Cow<'a, str>>(raw.get())
                    .map_err(|_| MessageError::Invalid("\"method\" must be a string"))?,
            ),
            None => None,
        };
        if let Some(p) = env.params {
            if !matches!(p.get().as_bytes().first(), Some(b'{')) {
                return Err(MessageError::Invalid("\"params\" must be an object"));
            }
        }
        let kind = match (&method, env.id, env.result.is_some(), env.error.is_some()) {
            (Some(_), Some(_), false, false) => MessageKind::Request,
            (Some(_), None, false, false) => MessageKind::Notification,
            (None, Some(_), true, false) | (None, Some(_), false, true) => MessageKind::Response,
            (None, None, false, true) => MessageKind::Response,
            _ => {
                return Err(MessageError::Invalid(
                    "not a JSON-RPC request, notification or response",
                ))
            }
        };
        Ok(Message {
            kind,
            id: env.id,
            method,
            params: env.params,
            result: env.result,
            error: env.error,
        })
    }

    /// The id as written in the body, `null` when there is none.
    pub fn id_json(&self) -> &str {
        self.id.map(RawValue::get).unwrap_or("null")
    }
}

/// Two ids are the same id: compares values, so `"a"` equals `"\u0061"`.
pub fn same_id(a: &RawValue, b: &RawValue) -> bool {
    if a.get() == b.get() {
        return true;
    }
    match (
        serde_json::from_str::<serde_json::Value>(a.get()),
        serde_json::from_str::<serde_json::Value>(b.get()),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[derive(Serialize)]
struct ErrorResponse<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    error: ErrorObject<'a>,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    code: i64,
    message: &'a str,
    data: serde_json::Map<String, serde_json::Value>,
}

/// Render a refusal as a JSON-RPC error response. `upstream` is the configured
/// display name of the upstream the request was routed to, if any.
pub fn error_body(id: Option<&RawValue>, refusal: &Refusal, upstream: Option<&str>) -> Bytes {
    let null = RawValue::from_string("null".to_owned()).ok();
    let id = match (id, null.as_deref()) {
        (Some(id), _) => id,
        (None, Some(null)) => null,
        (None, None) => return Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"internal error\"}}"),
    };
    let mut data = serde_json::Map::new();
    data.insert("reason".into(), refusal.reason.as_str().into());
    if let Some(name) = upstream {
        data.insert("upstream".into(), name.into());
    }
    if let Some(extra) = &refusal.extra {
        for (k, v) in extra.iter() {
            data.insert(k.clone(), v.clone());
        }
    }
    let body = ErrorResponse {
        jsonrpc: "2.0",
        id,
        error: ErrorObject {
            code: refusal.reason.code(),
            message: &refusal.message,
            data,
        },
    };
    match serde_json::to_vec(&body) {
        Ok(v) => Bytes::from(v),
        Err(_) => Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"internal error\"}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_requests_notifications_and_responses() {
        let r = Message::parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#)
            .unwrap();
        assert_eq!(r.kind, MessageKind::Request);
        assert_eq!(r.id_json(), "7");
        let n = Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#).unwrap();
        assert_eq!(n.kind, MessageKind::Notification);
        let s = Message::parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!(s.kind, MessageKind::Response);
    }

    #[test]
    fn escaped_keys_are_decoded() {
        let r = Message::parse(br#"{"jsonrpc":"2.0","id":1,"met\u0068od":"tools/call"}"#).unwrap();
        assert_eq!(r.method.as_deref(), Some("tools/call"));
    }

    #[test]
    fn duplicate_known_keys_are_refused() {
        let e =
            Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#).unwrap_err();
        assert_eq!(e.reason(), Reason::InvalidJson);
        let e = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"a","met\u0068od":"b"}"#)
            .unwrap_err();
        assert_eq!(e.reason(), Reason::InvalidJson);
    }

    #[test]
    fn bad_shapes_get_their_own_reason() {
        assert_eq!(Message::parse(b"[{}]").unwrap_err(), MessageError::Batch);
        assert_eq!(
            Message::parse(b"  ").unwrap_err().reason(),
            Reason::InvalidJson
        );
        assert_eq!(
            Message::parse(b"{\"jsonrpc\":").unwrap_err().reason(),
            Reason::InvalidJson
        );
        assert_eq!(
            Message::parse(b"42").unwrap_err().reason(),
            Reason::InvalidRequest
        );
        assert_eq!(
            Message::parse(b"nope").unwrap_err().reason(),
            Reason::InvalidJson
        );
        let null_id = Message::parse(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).unwrap_err();
        assert_eq!(null_id.reason(), Reason::InvalidRequest);
        let old = Message::parse(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#).unwrap_err();
        assert_eq!(old.reason(), Reason::InvalidRequest);
        let both =
            Message::parse(br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#).unwrap_err();
        assert_eq!(both.reason(), Reason::InvalidRequest);
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"#.to_vec();
        body.extend(std::iter::repeat_n(b'[', 100_000));
        assert_eq!(
            Message::parse(&body).unwrap_err().reason(),
            Reason::InvalidJson
        );
    }

    #[test]
    fn parse_errors_never_quote_the_body() {
        let e = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":{"secret":"hunter2"}}"#);
        assert!(e.is_err());
        let e = Message::parse(br#"{"jsonrpc":"hunter2-not-a-version","id":1,"method":"x"}"#)
            .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        let e = Message::parse(br#"{"jsonrpc":["hunter2"],"id":1}"#).unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        let e =
            Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#).unwrap_err();
        assert!(e.to_string().contains("duplicate field `method`"), "{e}");
    }

    #[test]
    fn strict_parsing_refuses_duplicates_anywhere() {
        assert!(parse_strict(br#"{"a":{"b":1,"c":[{"d":1}]}}"#).is_ok());
        let e = parse_strict(br#"{"a":{"b":1,"c":[{"d":1,"d":2}]}}"#).unwrap_err();
        assert!(e.to_string().contains("duplicate member `d`"), "{e}");
        // An escaped spelling of the same name is the same name.
        assert!(
            parse_strict(br#"{"resultType":"complete","result\u0054ype":"input_required"}"#)
                .is_err()
        );
        let mut deep = Vec::new();
        deep.extend(std::iter::repeat_n(b'[', 100_000));
        deep.extend(std::iter::repeat_n(b']', 100_000));
        assert!(parse_strict(&deep).is_err());
        assert!(
            parse_strict(b"\"\xff\"").is_err(),
            "invalid UTF-8 is refused"
        );
    }

    #[test]
    fn ids_compare_by_value() {
        let a = RawValue::from_string("\"a\"".into()).unwrap();
        let b = RawValue::from_string("\"\\u0061\"".into()).unwrap();
        let c = RawValue::from_string("1".into()).unwrap();
        assert!(same_id(&a, &b));
        assert!(!same_id(&a, &c));
    }

    #[test]
    fn error_body_carries_reason_upstream_and_id() {
        let id = RawValue::from_string("\"req-1\"".into()).unwrap();
        let refusal = Refusal::new(Reason::UpstreamTimeout, "slow").with_data("x", 1.into());
        let body = error_body(Some(&id), &refusal, Some("Rooms"));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], "req-1");
        assert_eq!(v["error"]["code"], -32001);
        assert_eq!(v["error"]["data"]["reason"], "upstream_timeout");
        assert_eq!(v["error"]["data"]["upstream"], "Rooms");
        assert_eq!(v["error"]["data"]["x"], 1);
        let v: serde_json::Value =
            serde_json::from_slice(&error_body(None, &refusal, None)).unwrap();
        assert!(v["id"].is_null());
    }
}
