//! One JSON-RPC 2.0 message, read strictly and without copying: the
//! envelope's members are borrowed from the body (`params`, `result` and
//! `error` as raw slices for the phase that reads them), members outside
//! JSON-RPC are checked strictly, and a member given twice (in any spelling)
//! is an error, so the gateway never judges a message the upstream or client
//! would read differently.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::error::{JsonError, JsonErrorKind};
use super::strict::{Check, Failure, Key, SeenKeys};
use crate::model::Reason;

/// What a single JSON-RPC message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    Request,
    Notification,
    Response,
}

impl MessageKind {
    pub const fn is_response(self) -> bool {
        matches!(self, MessageKind::Response)
    }
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
    Json(#[from] JsonError),
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
            MessageError::Json(_) => Reason::InvalidJson,
            MessageError::Batch => Reason::BatchNotSupported,
            MessageError::Invalid(_) => Reason::InvalidRequest,
        }
    }

    pub fn is_duplicate(&self) -> bool {
        matches!(self, MessageError::Json(e) if e.is_duplicate())
    }
}

#[derive(Default)]
struct Envelope<'a> {
    jsonrpc: Option<Cow<'a, str>>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
}

struct EnvelopeSeed<'f>(&'f Failure);

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Envelope<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
        let mut env = Envelope::default();
        let mut seen = SeenKeys::default();
        while let Some(Key(key)) = map.next_key()? {
            seen.note(&key, self.0)?;
            let slot = match key.as_ref() {
                "jsonrpc" => {
                    env.jsonrpc = Some(map.next_value::<Key<'de>>()?.0);
                    continue;
                }
                "id" => &mut env.id,
                "method" => &mut env.method,
                "params" => &mut env.params,
                "result" => &mut env.result,
                "error" => &mut env.error,
                _ => {
                    map.next_value_seed(Check(self.0))?;
                    continue;
                }
            };
            *slot = Some(map.next_value()?);
        }
        Ok(env)
    }
}

fn first_significant_byte(body: &[u8]) -> Option<u8> {
    body.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// A JSON-RPC id is a string or a number in MCP (never null, object or array).
fn valid_id(raw: &RawValue) -> bool {
    match raw.get().as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => true,
        // Strings are decoded strictly: no lone surrogate in an id.
        Some(b'"') => serde_json::from_str::<Key<'_>>(raw.get()).is_ok(),
        _ => false,
    }
}

impl<'a> Message<'a> {
    /// Parse the envelope. `params`, `result` and `error` are borrowed raw;
    /// the phase that reads one checks it strictly ([`super::strict`]).
    pub fn parse(body: &'a [u8]) -> Result<Message<'a>, MessageError> {
        match first_significant_byte(body) {
            Some(b'[') => return Err(MessageError::Batch),
            Some(b'{') => {}
            Some(_) => {
                // Non-JSON gets the parser's own words; valid JSON that is
                // not an object gets "not an object".
                return Err(match super::strict::validate(body) {
                    Err(e) => MessageError::Json(e),
                    Ok(()) => MessageError::Invalid("a JSON-RPC message must be a JSON object"),
                });
            }
            None => {
                return Err(MessageError::Json(JsonError::at(
                    JsonErrorKind::Empty,
                    1,
                    1,
                )))
            }
        }
        let failure = Failure::default();
        let env = super::strict::run_envelope(body, &failure, EnvelopeSeed(&failure))?;
        Self::classify(env)
    }

    fn classify(env: Envelope<'a>) -> Result<Message<'a>, MessageError> {
        if env.jsonrpc.as_deref() != Some("2.0") {
            return Err(MessageError::Invalid("\"jsonrpc\" must be \"2.0\""));
        }
        let method = match env.method {
            Some(raw) => Some(
                serde_json::from_str::<Key<'a>>(raw.get())
                    .map(|k| k.0)
                    .map_err(|_| MessageError::Invalid("\"method\" must be a string"))?,
            ),
            None => None,
        };
        if let Some(p) = env.params {
            if !matches!(p.get().as_bytes().first(), Some(b'{')) {
                return Err(MessageError::Invalid("\"params\" must be an object"));
            }
        }
        let shape = Shape {
            method: method.is_some(),
            id: env.id,
            result: env.result.is_some(),
            error: env.error.is_some(),
        };
        let (kind, id) = shape.kind()?;
        Ok(Message {
            kind,
            id,
            method,
            params: env.params,
            result: env.result,
            error: env.error,
        })
    }

    /// The id as written in the body, `null` when there is none.
    #[cfg(test)]
    pub(crate) fn id_json(&self) -> &str {
        self.id.map(RawValue::get).unwrap_or("null")
    }
}

/// Which envelope members a message has: what its kind is decided by.
pub(super) struct Shape<'a> {
    pub(super) method: bool,
    pub(super) id: Option<&'a RawValue>,
    pub(super) result: bool,
    pub(super) error: bool,
}

impl<'a> Shape<'a> {
    /// The message's kind and its id (`None` for a response's `null`).
    pub(super) fn kind(&self) -> Result<(MessageKind, Option<&'a RawValue>), MessageError> {
        // A response may carry `"id": null` when it answers a request that
        // could not be read (JSON-RPC 2.0 §5); nothing else may.
        let null_id = self.id.is_some_and(|id| id.get() == "null");
        if let Some(id) = self.id {
            let error_with_null = null_id && self.error && !self.method;
            if !error_with_null && !valid_id(id) {
                return Err(MessageError::Invalid("\"id\" must be a string or a number"));
            }
        }
        let kind = match (self.method, self.id, self.result, self.error) {
            (true, Some(_), false, false) => MessageKind::Request,
            (true, None, false, false) => MessageKind::Notification,
            (false, Some(_), true, false) | (false, _, false, true) => MessageKind::Response,
            _ => {
                return Err(MessageError::Invalid(
                    "not a JSON-RPC request, notification or response",
                ))
            }
        };
        Ok((kind, self.id.filter(|_| !null_id)))
    }
}

/// Two ids are the same id: compares values, so `"a"` equals `"\u0061"`.
pub fn same_id(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Where `inner` (borrowed from `outer` by the parser) sits in `outer`.
pub fn span_in(outer: &[u8], inner: &str) -> Option<std::ops::Range<usize>> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    let end = start.checked_add(inner.len())?;
    (end <= outer.len()).then_some(start..end)
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
        let e =
            Message::parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#)
                .unwrap();
        assert_eq!((e.kind, e.id_json()), (MessageKind::Response, "null"));
    }

    #[test]
    fn escaped_keys_are_decoded_and_duplicates_refused() {
        let r = Message::parse(br#"{"jsonrpc":"2.0","id":1,"met\u0068od":"tools/call"}"#).unwrap();
        assert_eq!(r.method.as_deref(), Some("tools/call"));
        for body in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"a","met\u0068od":"b"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"a","x":1,"x":2}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"a","x":{"y":1,"y":2}}"#,
        ] {
            let e = Message::parse(body).unwrap_err();
            assert!(e.is_duplicate(), "{e}");
            assert_eq!(e.reason(), Reason::InvalidJson);
        }
    }

    #[test]
    fn bad_shapes_get_their_own_reason() {
        assert_eq!(Message::parse(b"[{}]").unwrap_err(), MessageError::Batch);
        for (body, reason) in [
            (&b"  "[..], Reason::InvalidJson),
            (b"{\"jsonrpc\":", Reason::InvalidJson),
            (b"42", Reason::InvalidRequest),
            (b"nope", Reason::InvalidJson),
            (
                br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
                Reason::InvalidRequest,
            ),
            (
                br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
                Reason::InvalidRequest,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
                Reason::InvalidRequest,
            ),
            (
                br#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
                Reason::InvalidRequest,
            ),
            (
                br#"{"jsonrpc":"2.0","id":"\ud800","method":"x"}"#,
                Reason::InvalidRequest,
            ),
        ] {
            assert_eq!(
                Message::parse(body).unwrap_err().reason(),
                reason,
                "{body:?}"
            );
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"#.to_vec();
        body.extend(std::iter::repeat_n(b'[', 100_000));
        assert_eq!(
            Message::parse(&body).unwrap_err().reason(),
            Reason::InvalidJson
        );
        // A closed bomb in a member outside JSON-RPC stops at serde's limit.
        let mut closed = br#"{"jsonrpc":"2.0","id":1,"method":"x","extra":"#.to_vec();
        closed.extend(std::iter::repeat_n(b'[', 100_000));
        closed.extend(std::iter::repeat_n(b']', 100_000));
        closed.push(b'}');
        assert_eq!(
            Message::parse(&closed).unwrap_err().reason(),
            Reason::InvalidJson
        );
        // One in params is kept raw for the phase that reads params.
        let mut in_params = br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"#.to_vec();
        in_params.extend(std::iter::repeat_n(b'[', 100_000));
        in_params.extend(std::iter::repeat_n(b']', 100_000));
        in_params.extend(b"}}");
        assert!(Message::parse(&in_params).is_ok());
    }

    #[test]
    fn parse_errors_never_quote_the_body() {
        for body in [
            &br#"{"jsonrpc":"2.0","id":1,"method":{"secret":"hunter2"}}"#[..],
            br#"{"jsonrpc":"hunter2-not-a-version","id":1,"method":"x"}"#,
            br#"{"jsonrpc":["hunter2"],"id":1}"#,
        ] {
            let e = Message::parse(body).unwrap_err();
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn ids_compare_by_value_and_spans_locate_slices() {
        assert!(same_id("\"a\"", "\"\\u0061\""));
        assert!(!same_id("\"a\"", "1"));
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1}}"#;
        let m = Message::parse(body).unwrap();
        let span = span_in(body, m.params.unwrap().get()).unwrap();
        assert_eq!(&body[span], br#"{"a":1}"#);
    }
}
