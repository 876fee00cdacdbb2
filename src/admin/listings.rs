//! `GET /listings?upstream=ID` and `POST /listings/accept` (see the
//! module above for who may accept).

use std::net::SocketAddr;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::{json, Value};

use super::text;
use crate::audit::{AuditContext, AuditEvent};
use crate::listings::{split_field, ItemKind, Selector};
use crate::listings_command::ACCEPT_HEADER;
use crate::pipeline::Gateway;

/// The largest acceptance body read.
const MAX_BODY: usize = 4096;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcceptBody {
    upstream: String,
    item: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    all: bool,
}

fn json_answer(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    text(status, "application/json", format!("{body}\n"))
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json_answer(status, &json!({ "error": message }))
}

pub(super) async fn answer(
    req: Request<Incoming>,
    peer: SocketAddr,
    gateway: &Gateway,
) -> Response<Full<Bytes>> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/listings") => list(&req, gateway).await,
        (&Method::POST, "/listings/accept") => accept(req, peer, gateway).await,
        _ => {
            let mut r = error(
                StatusCode::METHOD_NOT_ALLOWED,
                "GET /listings, POST /listings/accept",
            );
            let allow = if req.uri().path() == "/listings" {
                "GET"
            } else {
                "POST"
            };
            r.headers_mut()
                .insert(header::ALLOW, http::HeaderValue::from_static(allow));
            r
        }
    }
}

/// The upstream a request names, when it is configured.
fn configured(gateway: &Gateway, upstream: &str) -> bool {
    gateway.config.upstreams.iter().any(|u| u.id == upstream)
}

async fn list(req: &Request<Incoming>, gateway: &Gateway) -> Response<Full<Bytes>> {
    let upstream = req.uri().query().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "upstream")
            .map(|(_, v)| v.into_owned())
    });
    let Some(upstream) = upstream.filter(|u| configured(gateway, u)) else {
        return error(
            StatusCode::NOT_FOUND,
            "name a configured upstream: ?upstream=ID",
        );
    };
    match gateway.listings.entries(&upstream).await {
        Ok(entries) => json_answer(
            StatusCode::OK,
            &json!({ "upstream": upstream, "entries": entries }),
        ),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

async fn accept(
    req: Request<Incoming>,
    peer: SocketAddr,
    gateway: &Gateway,
) -> Response<Full<Bytes>> {
    let headers = req.headers();
    if !peer.ip().is_loopback() {
        return error(
            StatusCode::FORBIDDEN,
            "an acceptance is taken only from loopback",
        );
    }
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if headers.contains_key(header::ORIGIN) || !headers.contains_key(ACCEPT_HEADER) || !json_body {
        return error(
            StatusCode::FORBIDDEN,
            "an acceptance needs the X-Portcullis-Admin header, a JSON body and no Origin: use portcullis listings accept",
        );
    }
    let bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large"),
    };
    let Ok(body) = serde_json::from_slice::<AcceptBody>(&bytes) else {
        return error(
            StatusCode::BAD_REQUEST,
            "the body is {\"upstream\": ID, \"item\": NAME, \"kind\": KIND} or {\"upstream\": ID, \"all\": true}",
        );
    };
    if !configured(gateway, &body.upstream) {
        return error(
            StatusCode::NOT_FOUND,
            "no upstream with that id is configured",
        );
    }
    let kind = match body.kind.as_deref().map(ItemKind::of_kind) {
        Some(None) => {
            return error(
                StatusCode::BAD_REQUEST,
                "kind is one of tool, prompt, resource, resource_template",
            )
        }
        Some(k) => k,
        None => None,
    };
    let which = match (body.item, body.all) {
        (Some(name), false) => Selector::Item { name, kind },
        (None, true) => Selector::All,
        _ => return error(StatusCode::BAD_REQUEST, "give an item or all, not both"),
    };
    let accepted = match gateway.listings.accept(&body.upstream, &which).await {
        Ok(a) => a,
        Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let mut named = Vec::new();
    for field in &accepted {
        let Some((kind, name)) = split_field(field) else {
            continue;
        };
        tracing::info!(upstream = %body.upstream, kind = kind.kind, item = %crate::audit::Name::new(name), "listing change accepted");
        gateway
            .metrics
            .listing_changed(&body.upstream, kind.kind, "accepted");
        if gateway.audit.enabled() {
            let at = accept_context(gateway, &body.upstream, name);
            gateway.audit.emit(
                &at,
                AuditEvent::listing_changed(kind.kind, name, "accepted", None),
            );
        }
        named.push(json!({"kind": kind.kind, "name": name}));
    }
    json_answer(
        StatusCode::OK,
        &json!({ "upstream": body.upstream, "accepted": named }),
    )
}

/// The audit envelope of an acceptance: the operator on loopback.
fn accept_context(gateway: &Gateway, upstream: &str, name: &str) -> AuditContext {
    let configured = gateway.config.upstreams.iter().find(|u| u.id == upstream);
    AuditContext {
        request_id: crate::audit::new_request_id(),
        upstream_id: upstream.to_owned(),
        upstream_name: configured.map(|u| u.name.clone()).unwrap_or_default(),
        upstream_endpoint: configured.map(|u| u.url.to_string()).unwrap_or_default(),
        principal: "admin".into(),
        method: "listings/accept".into(),
        target: Some(name.to_owned()),
        ..AuditContext::default()
    }
}
