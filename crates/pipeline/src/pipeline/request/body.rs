//! Reading the request body under its limits.

use bytes::Bytes;
use http::{header, request::Parts};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use crate::config::Limits;
use crate::model::{Reason, Refusal};

/// Read the whole body, refusing early on a declared length over the limit and
/// giving a slow client no more than `request_body_timeout`.
pub(super) async fn read(parts: &Parts, body: Incoming, limits: &Limits) -> Result<Bytes, Refusal> {
    let max = limits.max_request_body_bytes;
    let too_large = || {
        Refusal::new(
            Reason::BodyTooLarge,
            format!("the request body is larger than the gateway's limit of {max} bytes"),
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let collected = tokio::time::timeout(
        limits.request_body_timeout,
        Limited::new(body, max).collect(),
    )
    .await;
    match collected {
        Err(_) => Err(Refusal::new(
            Reason::RequestTimeout,
            "the request body did not arrive in time",
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(Refusal::new(
            Reason::InvalidRequest,
            "the request body could not be read to its end",
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}
