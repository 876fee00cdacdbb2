//! The JSON-RPC error responses the gateway writes.

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::model::Refusal;

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
    data: Data<'a>,
}

#[derive(Serialize)]
struct Data<'a> {
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream: Option<&'a str>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

const INTERNAL: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"internal error\"}}";

/// The JSON text `null`, as an id.
pub fn null_id() -> &'static RawValue {
    static NULL: std::sync::OnceLock<Box<RawValue>> = std::sync::OnceLock::new();
    NULL.get_or_init(|| {
        RawValue::from_string("null".to_owned()).unwrap_or_else(|_| unreachable!("null is JSON"))
    })
}

/// Render a refusal as a JSON-RPC error response. `id` is the JSON text of
/// the request's id as written (`null` when unknown); `upstream` is the
/// configured display name of the upstream the request was routed to, if any.
pub fn error_body(id: Option<&str>, refusal: &Refusal, upstream: Option<&str>) -> Bytes {
    // The request's id as it came, when a strict reader reads it back: a
    // number no reader can hold (`1e0000000010000000020`) is echoed as null.
    let id = id
        .filter(|text| super::strict::parse_value(text.as_bytes()).is_ok())
        .and_then(|text| serde_json::from_str::<&RawValue>(text).ok())
        .unwrap_or(null_id());
    error_answer(id, refusal, upstream)
}

/// [`error_body`] for an id already read as JSON (an upstream's request the
/// gateway answers in the client's place).
pub fn error_answer(id: &RawValue, refusal: &Refusal, upstream: Option<&str>) -> Bytes {
    let body = ErrorResponse {
        jsonrpc: "2.0",
        id,
        error: ErrorObject {
            code: refusal.reason.code(),
            message: &refusal.message,
            data: Data {
                reason: refusal.reason.as_str(),
                upstream,
                extra: refusal.extra.as_deref(),
            },
        },
    };
    serde_json::to_vec(&body)
        .map(Bytes::from)
        .unwrap_or_else(|_| Bytes::from_static(INTERNAL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Reason;

    #[test]
    fn error_body_carries_reason_upstream_and_id() {
        let refusal = Refusal::new(Reason::UpstreamTimeout, "slow").with_data("x", 1.into());
        let body = error_body(Some("\"req-1\""), &refusal, Some("Rooms"));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], "req-1");
        assert_eq!(v["error"]["code"], -32001);
        assert_eq!(v["error"]["data"]["reason"], "upstream_timeout");
        assert_eq!(v["error"]["data"]["upstream"], "Rooms");
        assert_eq!(v["error"]["data"]["x"], 1);
        let v: serde_json::Value =
            serde_json::from_slice(&error_body(None, &refusal, None)).unwrap();
        assert!(v["id"].is_null());
        // An id no strict reader can hold is not echoed: the body stays JSON.
        for unreadable in ["1e0000000010000000020", "-1e999", "{", "\"a"] {
            let body = error_body(Some(unreadable), &refusal, None);
            let v = super::super::strict::parse_value(&body).expect("strict JSON");
            assert!(v["id"].is_null(), "{unreadable}");
        }
        assert!(v["error"]["data"].get("upstream").is_none());
    }
}
