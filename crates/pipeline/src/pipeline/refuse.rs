//! The one exit for refusals: every phase's refusal becomes a JSON-RPC error
//! with the request's id, the upstream's configured name, a stable
//! `data.reason`, and the HTTP status of its reason; it is logged (reason and
//! request id, never a value) and counted by the request's record.

use bytes::Bytes;
use http::{header, HeaderName, HeaderValue, Response, StatusCode};

use super::body::ProxyBody;
use super::record::{Outcome, RequestRecord};
use crate::json::error_body;
use crate::model::{McpMethod, Reason, Refusal};

/// A refusal on its way to the client: the request id when known, the
/// upstream's name once routed, and any headers the refusal needs
/// (`WWW-Authenticate`, `Retry-After`, `Allow`).
#[derive(Debug)]
pub struct Refused {
    /// The JSON-RPC id's text.
    pub id: Option<String>,
    pub refusal: Refusal,
    /// (A boxed `str`: every `Result<_, Refused>` carries its size.)
    pub(crate) upstream: Option<Box<str>>,
    /// The body's method, when the body could be read that far.
    pub(crate) method: Option<McpMethod>,
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
}

impl From<Refusal> for Refused {
    fn from(refusal: Refusal) -> Self {
        Refused {
            id: None,
            refusal,
            upstream: None,
            method: None,
            headers: Vec::new(),
        }
    }
}

impl Refused {
    pub(crate) fn new(refusal: Refusal, id: Option<&str>, upstream: &str) -> Refused {
        Refused {
            id: id.map(str::to_owned),
            refusal,
            upstream: Some(upstream.into()),
            method: None,
            headers: Vec::new(),
        }
    }

    pub(crate) fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Refused {
        self.headers.push((name, value));
        self
    }

    /// Fill in what the phase that refused did not know.
    /// The refusal as the answer to the client's request `id`, whatever
    /// request of the gateway's own it first answered.
    /// Tell the client the connection closes after this answer.
    pub(crate) fn closing(self) -> Refused {
        self.with_header(http::header::CONNECTION, HeaderValue::from_static("close"))
    }

    pub(crate) fn addressed_to(mut self, id: Option<&str>) -> Refused {
        self.id = id.map(str::to_owned);
        self
    }

    pub(crate) fn within(mut self, id: Option<&str>, upstream: &str) -> Refused {
        if self.id.is_none() {
            self.id = id.map(str::to_owned);
        }
        if self.upstream.is_none() {
            self.upstream = Some(upstream.into());
        }
        self
    }
}

/// Answer with a JSON-RPC error, counted under its reason.
pub(crate) fn respond(
    mut record: RequestRecord,
    refused: Refused,
    request_id: &str,
) -> Response<ProxyBody> {
    let Refused {
        id,
        refusal,
        upstream,
        method,
        headers,
    } = refused;
    if let Some(m) = method {
        record.set_method(m);
    }
    record.set_outcome(Outcome::Refused(refusal.reason));
    record.set_status(refusal.status());
    tracing::info!(
        request_id,
        reason = refusal.reason.as_str(),
        upstream = upstream.as_deref().unwrap_or("-"),
        "refused: {}",
        refusal.message
    );
    let mut resp = error_response(id.as_deref(), &refusal, upstream.as_deref());
    for (name, value) in headers {
        resp.headers_mut().insert(name, value);
    }
    resp.map(|b| b.recorded(record))
}

/// The JSON-RPC error body for `id` (JSON text; `null` when unknown).
pub(crate) fn error_bytes(id: Option<&str>, refusal: &Refusal, upstream: Option<&str>) -> Bytes {
    error_body(id, refusal, upstream)
}

/// A JSON-RPC error response with the refusal's HTTP status.
pub(crate) fn error_response(
    id: Option<&str>,
    refusal: &Refusal,
    upstream: Option<&str>,
) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::full(error_bytes(id, refusal, upstream)));
    *resp.status_mut() = refusal.status();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for challenge in refusal.challenges() {
        resp.headers_mut()
            .append(header::WWW_AUTHENTICATE, challenge.clone());
    }
    if resp.status() == StatusCode::METHOD_NOT_ALLOWED && refusal.reason == Reason::MethodNotAllowed
    {
        resp.headers_mut()
            .entry(header::ALLOW)
            .or_insert(HeaderValue::from_static("POST"));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_spliced_in_as_written() {
        let r =
            Refusal::new(Reason::RateLimited, "slow down").with_data("scope", "principal".into());
        for id in ["7", "\"a\\u0062\"", "-1.5e3"] {
            let v: serde_json::Value =
                serde_json::from_slice(&error_bytes(Some(id), &r, Some("Rooms"))).unwrap();
            assert_eq!(
                v["id"],
                serde_json::from_str::<serde_json::Value>(id).unwrap()
            );
            assert_eq!(v["error"]["data"]["reason"], "rate_limited");
            assert_eq!(v["error"]["data"]["upstream"], "Rooms");
        }
        let v: serde_json::Value = serde_json::from_slice(&error_bytes(None, &r, None)).unwrap();
        assert!(v["id"].is_null());
    }
}
