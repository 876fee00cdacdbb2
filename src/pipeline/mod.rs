//! The request pipeline, in the order data flows (see DESIGN.md):
//! route → check the request → forward → check the answer → record.
//! Each phase is one module, called once per request, in this order.
//! (Identify and throttle slot in between accept and route.)

pub mod body;
pub mod forward;
pub mod record;
pub mod request_check;
pub mod response_check;
pub mod route;
pub mod sse;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::value::RawValue;

use crate::config::GatewayConfig;
use crate::headers::upstream_request_headers;
use crate::jsonrpc::error_body;
use crate::refusal::Refusal;
use body::ProxyBody;
use record::{Metrics, Outcome, RequestRecord};
use request_check::Rejected;
use response_check::ResponseContext;
use route::RouteTable;

/// Where a request came from, as the accept phase saw it.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub addr: SocketAddr,
    pub tls: bool,
}

/// Everything a request needs, built once from a validated config.
pub struct Gateway {
    config: Arc<GatewayConfig>,
    routes: RouteTable,
    metrics: Arc<Metrics>,
}

impl Gateway {
    pub fn new(config: Arc<GatewayConfig>, metrics: Arc<Metrics>) -> Result<Self, rustls::Error> {
        let routes = RouteTable::new(&config)?;
        for up in &config.upstreams {
            metrics.register_upstream(&up.id);
        }
        Ok(Gateway {
            config,
            routes,
            metrics,
        })
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Handle one HTTP request from a client.
    pub async fn handle(&self, req: Request<Incoming>, peer: Peer) -> Response<ProxyBody> {
        let mut record = RequestRecord::start(self.metrics.clone());

        // Route.
        let Some(upstream) = self.routes.select(req.uri().path()) else {
            let refusal = Refusal::new(
                crate::refusal::Reason::RouteNotFound,
                "no MCP endpoint is configured at this path",
            );
            return refuse(record, None, &refusal, None);
        };
        record.set_upstream(upstream.label.clone());
        let name = Some(upstream.client.route.name.as_str());

        // Check the request.
        let (parts, body) = req.into_parts();
        if let Err(refusal) =
            request_check::check_head(&parts, self.config.allowed_origins.as_deref())
        {
            return refuse(record, None, &refusal, name);
        }
        let bytes = match request_check::read_body(&parts, body, &self.config.limits).await {
            Ok(b) => b,
            Err(refusal) => return refuse(record, None, &refusal, name),
        };
        let checked = match request_check::check_message(parts, bytes) {
            Ok(c) => c,
            Err(Rejected {
                id,
                method,
                refusal,
            }) => {
                if let Some(m) = method {
                    record.set_method(&m);
                }
                return refuse(record, id.as_deref(), &refusal, name);
            }
        };
        record.set_method(&checked.method);

        // Forward.
        let route = &upstream.client.route;
        let headers = upstream_request_headers(
            &checked.parts.headers,
            peer.addr,
            peer.tls,
            route.forward_authorization,
        );
        let sent = Instant::now();
        let resp = match upstream.client.send(headers, checked.body).await {
            Ok(r) => r,
            Err(refusal) => return refuse(record, checked.id.as_deref(), &refusal, name),
        };
        self.metrics.observe_upstream(&upstream.label, sent);

        // Check the answer.
        let ctx = ResponseContext {
            request_id: checked.id,
            request_kind: checked.kind,
            method: checked.method,
            client: checked.client,
            upstream: route.clone(),
            max_message_bytes: self.config.limits.max_response_body_bytes,
            metrics: Some(self.metrics.clone()),
        };
        let id_for_errors = ctx.request_id.clone();
        match response_check::check(ctx, resp).await {
            Ok(resp) => resp.map(|b| b.recorded(record)),
            Err(refusal) => refuse(record, id_for_errors.as_deref(), &refusal, name),
        }
    }
}

/// Answer with a JSON-RPC error, counted under its reason.
fn refuse(
    mut record: RequestRecord,
    id: Option<&RawValue>,
    refusal: &Refusal,
    upstream: Option<&str>,
) -> Response<ProxyBody> {
    record.set_outcome(Outcome::Refused(refusal.reason));
    tracing::info!(
        reason = refusal.reason.as_str(),
        upstream = upstream.unwrap_or("-"),
        "refused: {}",
        refusal.message
    );
    error_response(id, refusal, upstream).map(|b| b.recorded(record))
}

/// A JSON-RPC error response with the reason's HTTP status.
pub fn error_response(
    id: Option<&RawValue>,
    refusal: &Refusal,
    upstream: Option<&str>,
) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::full(error_body(id, refusal, upstream)));
    *resp.status_mut() = refusal.reason.status();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    resp
}
