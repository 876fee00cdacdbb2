//! What the gateway answers a client itself, on a route where no single
//! upstream's answer is passed on as it came (a federated route's merged
//! answer, a bridged session's): a JSON-RPC message to the client's id as
//! a JSON body, or an empty acknowledgement.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::Value;

use super::body::ProxyBody;
use crate::headers::MCP_SESSION_ID;

pub(crate) fn json_response(body: Vec<u8>, session: Option<HeaderValue>) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::full(Bytes::from(body)));
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(session) = session {
        headers.insert(MCP_SESSION_ID.clone(), session);
    }
    resp
}

/// A JSON-RPC message to the client's `id` (its JSON text, as written).
pub(crate) fn message(id: Option<&str>, member: &str, value: &Value) -> Vec<u8> {
    let value = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
    let id = id.unwrap_or("null");
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"{member}\":{value}}}").into_bytes()
}

pub(crate) fn result_response(
    id: Option<&str>,
    result: Value,
    session: Option<HeaderValue>,
) -> Response<ProxyBody> {
    json_response(message(id, "result", &result), session)
}

pub(crate) fn error_response(id: Option<&str>, error: &Value) -> Response<ProxyBody> {
    json_response(message(id, "error", error), None)
}

pub(crate) fn accepted() -> Response<ProxyBody> {
    accepted_with(StatusCode::ACCEPTED)
}

pub(crate) fn accepted_with(status: StatusCode) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::empty());
    *resp.status_mut() = status;
    resp
}
