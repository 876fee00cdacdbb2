//! Phase: check the answer. The upstream's response head decides the path:
//! a JSON body is held whole (up to the inspection limit) and judged once; an
//! event stream is judged and forwarded event by event ([`stream`]). An
//! upstream's own refusal (4xx) keeps its status and meaning.

mod challenge;
mod contracts;
pub mod disposition;
pub mod exchange;
mod gate;
mod in_session;
pub(crate) mod pins;
mod push;
mod question;
mod replay;
mod stream;
mod task;

use crate::pipeline::forward::UpstreamBody;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Limited};

use super::body::ProxyBody;
use super::ctx::RequestCtx;
use super::request::Transport;
use super::session;
use crate::headers::{to_client, MCP_SESSION_ID, X_ACCEL_BUFFERING};
use crate::json::MessageKind;
use crate::model::{printable_name, McpMethod, Reason, Refusal};
use disposition::Disposition;
use exchange::{Carrier, Exchange};
use stream::SseBody;

/// The media type of a response, compared without allocating.
fn media_type(headers: &HeaderMap) -> &str {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim)
        .unwrap_or("")
}

fn upstream_status_refusal(status: StatusCode, what: &str) -> Refusal {
    let refusal = if status.is_client_error() {
        Refusal::new(
            Reason::UpstreamRefused,
            format!(
                "the upstream refused the request (HTTP {}){what}",
                status.as_u16()
            ),
        )
        .with_status(status)
    } else {
        Refusal::new(
            Reason::UpstreamBadResponse,
            format!("the upstream answered HTTP {}{what}", status.as_u16()),
        )
    };
    refusal.with_data("upstreamStatus", status.as_u16().into())
}

/// Check the upstream's response and build the one the client gets.
pub(crate) async fn check(
    ctx: Box<RequestCtx>,
    resp: Response<UpstreamBody>,
) -> Result<Response<ProxyBody>, Refusal> {
    let (mut head, body) = resp.into_parts();
    let status = head.status;
    if let Some(enc) = head.headers.get(header::CONTENT_ENCODING) {
        if !enc.as_bytes().eq_ignore_ascii_case(b"identity") {
            return Err(upstream_status_refusal(
                StatusCode::BAD_GATEWAY,
                " with a compressed body, which cannot be inspected",
            )
            .with_data("upstreamStatus", status.as_u16().into()));
        }
    }
    let media = media_type(&head.headers);
    let is_stream = media.eq_ignore_ascii_case("text/event-stream");
    let is_json = media.eq_ignore_ascii_case("application/json");
    let what = if media.is_empty() {
        Some(" without a content type".to_owned())
    } else {
        (!is_stream && !is_json).then(|| {
            format!(
                " with content type {}, not a JSON-RPC message",
                printable_name(media)
            )
        })
    };
    // Notifications and a client's answers get no message back (202).
    let notification = ctx.request.kind != MessageKind::Request;
    let forward_auth = ctx.route.upstream.settings.forward_authorization;
    let upstream_session = head.headers.remove(&MCP_SESSION_ID);
    to_client(&mut head.headers, status, forward_auth);
    if let Some(refused) = challenge::asks_too_much(&ctx, status, &head.headers) {
        return Err(refused);
    }
    if ctx.request.method == McpMethod::Initialize && status.is_success() {
        let minted = session::mint(&ctx, upstream_session.as_ref()).ok_or_else(|| {
            Refusal::new(
                Reason::UpstreamBadResponse,
                "the upstream's session id cannot be carried",
            )
        })?;
        head.headers.insert(MCP_SESSION_ID.clone(), minted);
    }
    if ctx.request.transport == Transport::End {
        let answer = ended(status, head.headers, body).await?;
        if answer.status().is_success() {
            Box::pin(session::end(&ctx)).await?;
        }
        return Ok(answer);
    }
    let exchange = Exchange::new(ctx);
    if is_stream && status.is_success() {
        head.headers
            .insert(X_ACCEL_BUFFERING.clone(), HeaderValue::from_static("no"));
        head.headers
            .entry(header::CACHE_CONTROL)
            .or_insert(HeaderValue::from_static("no-cache"));
        let body = SseBody::new(exchange, body);
        return Ok(build(
            status,
            head.headers,
            ProxyBody::stream(Box::new(body)),
        ));
    }
    if is_json {
        return json(exchange, status, head.headers, body).await;
    }
    if notification && status.is_success() {
        // 202 Accepted with no body is the normal answer to a notification.
        return Ok(build(status, head.headers, ProxyBody::empty()));
    }
    let what = what.unwrap_or_else(|| " with an event stream".to_owned());
    Err(upstream_refused(
        &exchange.ctx,
        status,
        &head.headers,
        &what,
    ))
}

/// A JSON body: held whole, judged once.
async fn json(
    exchange: Exchange,
    status: StatusCode,
    headers: HeaderMap,
    body: UpstreamBody,
) -> Result<Response<ProxyBody>, Refusal> {
    let bytes = read_whole(&exchange, body).await?;
    let notification = exchange.ctx.request.kind != MessageKind::Request;
    if bytes.is_empty() && notification && status.is_success() {
        return Ok(build(status, headers, ProxyBody::empty()));
    }
    let (exchange, bytes, mut verdict) = inspect_body(exchange, bytes).await?;
    // A list waiting for the pins' store (`pins.rs`) is decided here.
    if let Disposition::Held(held) = verdict {
        verdict = held.await;
    }
    let (message, asking) =
        match verdict {
            Disposition::Final => (bytes, false),
            // An upstream's refusal in JSON-RPC (its own error for this
            // request, or for one it could not read) passes with its status.
            _ if !status.is_success() => {
                return Err(upstream_refused(&exchange.ctx, status, &headers, ""))
            }
            Disposition::FinalRewritten(new) => (new, false),
            Disposition::Ask(new) => (new, true),
            // The inspector refuses a notification or a push in a JSON body.
            Disposition::Notify
            | Disposition::NotifyRewritten(_)
            | Disposition::AskNotify(_)
            | Disposition::Pushed(_)
            | Disposition::PushPending(_)
            | Disposition::Withheld
            | Disposition::Held(_) => return Err(Refusal::new(
                Reason::UpstreamProtocolViolation,
                "the upstream answered with a notification instead of the response to the request",
            )),
            Disposition::Refuse(r) => return Err(r),
            Disposition::ReplayRefused { refusal, .. } => return Err(refusal),
        };
    if let Some(gate) = exchange.gate(asking) {
        gate.await?;
    }
    Ok(build(status, headers, ProxyBody::full(message)))
}

/// A whole body through [`Exchange::inspect`]: on this worker when it is
/// small, in the upstream's lane on a blocking thread when it is large
/// (`pipeline::heavy`).
async fn inspect_body(
    mut exchange: Exchange,
    bytes: Bytes,
) -> Result<(Exchange, Bytes, Disposition), Refusal> {
    let lane = exchange.ctx.route.upstream.heavy.clone();
    if !lane.is_heavy(bytes.len()) {
        let verdict = exchange.inspect(&bytes, Carrier::Body);
        return Ok((exchange, bytes, verdict));
    }
    let turn = lane.admit().await?;
    turn.run(move || {
        let verdict = exchange.inspect(&bytes, Carrier::Body);
        (exchange, bytes, verdict)
    })
    .await
}

/// The answer to a DELETE that ends a session: its status, no body.
async fn ended(
    status: StatusCode,
    headers: HeaderMap,
    body: UpstreamBody,
) -> Result<Response<ProxyBody>, Refusal> {
    // The upstream's body (if any) is not a message for the client.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), body.collect()).await;
    if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
        let mut headers = headers;
        headers.remove(header::CONTENT_TYPE);
        headers.remove(header::CONTENT_LENGTH);
        return Ok(build(status, headers, ProxyBody::empty()));
    }
    Err(upstream_status_refusal(
        status,
        " to the end of the session",
    ))
}

/// Headers of an upstream refusal that keep their meaning for the client.
/// The upstream's own refusal, with what its head says the client may do
/// next: when to retry, where to sign in (`challenge.rs`).
fn upstream_refused(
    ctx: &RequestCtx,
    status: StatusCode,
    headers: &HeaderMap,
    what: &str,
) -> Refusal {
    let refusal = with_retry_after(upstream_status_refusal(status, what), headers);
    challenge::passed_on(ctx, status, headers, refusal)
}

fn with_retry_after(refusal: Refusal, headers: &HeaderMap) -> Refusal {
    let retry_after = headers
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match retry_after {
        Some(secs) if refusal.reason == Reason::UpstreamRefused => {
            refusal.with_data("retryAfterSeconds", secs.into())
        }
        _ => refusal,
    }
}

fn build(status: StatusCode, headers: HeaderMap, body: ProxyBody) -> Response<ProxyBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    resp
}

async fn read_whole(exchange: &Exchange, body: UpstreamBody) -> Result<Bytes, Refusal> {
    let max = exchange.max_message_bytes;
    let timeout = exchange.ctx.route.upstream.settings.response_timeout;
    match tokio::time::timeout(timeout, Limited::new(body, max).collect()).await {
        Err(_) => Err(Refusal::new(
            Reason::UpstreamTimeout,
            "the upstream's response body did not arrive in time",
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(Refusal::new(
            Reason::UpstreamResponseTooLarge,
            format!("the upstream's response is larger than the inspection limit of {max} bytes"),
        )),
        Ok(Err(_)) => Err(Refusal::new(
            Reason::UpstreamConnectionClosed,
            "the upstream closed the connection in the middle of its response",
        )),
    }
}
