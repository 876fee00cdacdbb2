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
use crate::signed;

/// The largest acceptance body read.
const MAX_BODY: usize = 4096;

/// An acceptance names what the operator read: one item and the digest
/// of its held definition, or several held fields (`kind:name`) each with
/// its digest.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcceptBody {
    upstream: String,
    item: Option<String>,
    kind: Option<String>,
    digest: Option<String>,
    digests: Option<std::collections::BTreeMap<String, String>>,
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
    if !host_is_address(req.headers()) {
        return error(
            StatusCode::FORBIDDEN,
            "the Host of a request to /listings is the admin listener's address (an IP address or localhost)",
        );
    }
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large"),
    };
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    if let Err(why) = signed::verify(
        &gateway.config.state.keys,
        parts.headers.get(header::AUTHORIZATION),
        parts.method.as_str(),
        target,
        &bytes,
    ) {
        let mut r = error(StatusCode::UNAUTHORIZED, &why.to_string());
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static(signed::SCHEME),
        );
        return r;
    }
    match (&parts.method, parts.uri.path()) {
        (&Method::GET, "/listings") => list(&parts.uri, gateway).await,
        (&Method::GET, "/listings/held") => held(&parts.uri, gateway).await,
        (&Method::POST, "/listings/accept") => accept(&parts.headers, &bytes, peer, gateway).await,
        _ => {
            let mut r = error(
                StatusCode::METHOD_NOT_ALLOWED,
                "GET /listings, GET /listings/held, POST /listings/accept",
            );
            let allow = if parts.uri.path() == "/listings/accept" {
                "POST"
            } else {
                "GET"
            };
            r.headers_mut()
                .insert(header::ALLOW, http::HeaderValue::from_static(allow));
            r
        }
    }
}

/// A Host that names an address, never a name: a page that rebinds its
/// own name to loopback sends its name.
fn host_is_address(headers: &http::HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => {
            return v6
                .split_once(']')
                .is_some_and(|(ip, _)| ip.parse::<std::net::Ipv6Addr>().is_ok())
        }
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok()
}

/// The upstream a request names, when it is configured.
fn configured(gateway: &Gateway, upstream: &str) -> bool {
    gateway.config.upstreams.iter().any(|u| u.id == upstream)
}

/// `?upstream=ID` of a configured upstream.
fn upstream_asked(uri: &http::Uri, gateway: &Gateway) -> Option<String> {
    let upstream = uri.query().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "upstream")
            .map(|(_, v)| v.into_owned())
    });
    upstream.filter(|u| configured(gateway, u))
}

async fn list(uri: &http::Uri, gateway: &Gateway) -> Response<Full<Bytes>> {
    let Some(upstream) = upstream_asked(uri, gateway) else {
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

/// `GET /listings/held?upstream=ID&item=NAME[&kind=KIND]`: the held
/// definitions of that item, with their texts, for review.
async fn held(uri: &http::Uri, gateway: &Gateway) -> Response<Full<Bytes>> {
    let Some(upstream) = upstream_asked(uri, gateway) else {
        return error(
            StatusCode::NOT_FOUND,
            "name a configured upstream: ?upstream=ID&item=NAME",
        );
    };
    let query = |key: &str| {
        uri.query().and_then(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.into_owned())
        })
    };
    let Some(item) = query("item") else {
        return error(StatusCode::BAD_REQUEST, "name the item: &item=NAME");
    };
    let kind = match query("kind").map(|k| ItemKind::of_kind(&k)) {
        Some(None) => {
            return error(
                StatusCode::BAD_REQUEST,
                "kind is one of tool, prompt, resource, resource_template",
            )
        }
        Some(k) => k,
        None => None,
    };
    match gateway.listings.held(&upstream, &item, kind).await {
        Ok(held) => json_answer(
            StatusCode::OK,
            &json!({ "upstream": upstream, "held": held }),
        ),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

async fn accept(
    headers: &http::HeaderMap,
    bytes: &Bytes,
    peer: SocketAddr,
    gateway: &Gateway,
) -> Response<Full<Bytes>> {
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
    let Ok(body) = serde_json::from_slice::<AcceptBody>(bytes) else {
        return error(
            StatusCode::BAD_REQUEST,
            "the body is {\"upstream\": ID, \"item\": NAME, \"kind\": KIND, \"digest\": HELD} or {\"upstream\": ID, \"digests\": {\"KIND:NAME\": HELD}}",
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
    let which = match (body.item, body.digest, body.digests) {
        (Some(name), Some(digest), None) => Selector::Item { name, kind, digest },
        (None, None, Some(digests)) if kind.is_none() => Selector::Digests(digests),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "give an item with the digest of its held definition (portcullis listings show), or digests",
            )
        }
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
