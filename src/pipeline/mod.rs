//! The request pipeline, in the order data flows (see DESIGN.md):
//! route → check the request (transport rules, then the MRTR retry check) →
//! forward → check the answer (policy, then the next round's sealed state) →
//! record. Each phase is one module, called once per request, in this order.

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
use crate::mrtr::retry::{check_retry, Binding, MrtrShared, RetryCheck};
use crate::refusal::{Reason, Refusal};
use body::ProxyBody;
use record::{Metrics, Outcome, RequestRecord};
use request_check::{CheckedRequest, Rejected};
use response_check::{MrtrExchange, ResponseContext};
use route::{RouteTable, RoutedUpstream};

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
    mrtr: Arc<MrtrShared>,
}

/// A refusal on its way to the client: the request id when known.
struct Refused {
    id: Option<Box<RawValue>>,
    refusal: Refusal,
}

impl From<Refusal> for Refused {
    fn from(refusal: Refusal) -> Self {
        Refused { id: None, refusal }
    }
}

impl Gateway {
    pub fn new(config: Arc<GatewayConfig>, metrics: Arc<Metrics>) -> Result<Self, rustls::Error> {
        let routes = RouteTable::new(&config)?;
        for up in &config.upstreams {
            metrics.register_upstream(&up.id);
        }
        let mrtr = Arc::new(MrtrShared::new(config.state.clone()));
        Ok(Gateway {
            config,
            routes,
            metrics,
            mrtr,
        })
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Handle one HTTP request from a client.
    pub async fn handle(&self, req: Request<Incoming>, peer: Peer) -> Response<ProxyBody> {
        let mut record = RequestRecord::start(self.metrics.clone());
        let Some(upstream) = self.routes.select(req.uri().path()) else {
            let refusal = Refusal::new(
                Reason::RouteNotFound,
                "no MCP endpoint is configured at this path",
            );
            return refuse(record, None, &refusal, None);
        };
        record.set_upstream(upstream.label.clone());
        let name = upstream.client.route.name.clone();
        match self.exchange(upstream, req, peer, &mut record).await {
            Ok(resp) => resp.map(|b| b.recorded(record)),
            Err(Refused { id, refusal }) => {
                if matches!(
                    refusal.reason.status(),
                    StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT
                ) {
                    self.metrics.upstream_error(&upstream.label, refusal.reason);
                }
                refuse(record, id.as_deref(), &refusal, Some(&name))
            }
        }
    }

    /// The phases after routing, in order.
    async fn exchange(
        &self,
        upstream: &RoutedUpstream,
        req: Request<Incoming>,
        peer: Peer,
        record: &mut RequestRecord,
    ) -> Result<Response<ProxyBody>, Refused> {
        let checked = self.check_request(req, record).await?;
        let route = &upstream.client.route;
        let binding = Binding {
            principal: "anonymous".to_owned(),
            upstream: route.id.clone(),
            method: checked.method.clone(),
            target: checked.target.clone(),
        };
        let retry = match check_retry(&self.mrtr, route, &binding, &checked.body).await {
            Ok(r) => r,
            Err(refusal) => {
                self.metrics.state_refused(refusal.reason);
                return Err(Refused {
                    id: checked.id,
                    refusal,
                });
            }
        };
        let (body, prior, answer_bytes) = match retry {
            RetryCheck::Fresh => (checked.body.clone(), None, 0),
            RetryCheck::Retry(r) => (r.body, Some(r.prior), r.answers.answer_bytes as u64),
        };

        let headers = upstream_request_headers(
            &checked.parts.headers,
            peer.addr,
            peer.tls,
            route.forward_authorization,
        );
        let sent = Instant::now();
        let resp = upstream
            .client
            .send(headers, body.clone())
            .await
            .map_err(|refusal| Refused {
                id: checked.id.clone(),
                refusal,
            })?;
        self.metrics.observe_upstream(&upstream.label, sent);

        let ctx = ResponseContext {
            request_id: checked.id,
            request_kind: checked.kind,
            method: checked.method,
            client: checked.client,
            upstream: route.clone(),
            max_message_bytes: self.config.limits.max_response_body_bytes,
            metrics: Some(self.metrics.clone()),
            mrtr: Some(MrtrExchange {
                shared: self.mrtr.clone(),
                binding,
                request_body: body,
                prior,
                answer_bytes,
            }),
        };
        let id = ctx.request_id.clone();
        response_check::check(ctx, resp)
            .await
            .map_err(|refusal| Refused { id, refusal })
    }

    /// Head checks, body, then the message against its headers.
    async fn check_request(
        &self,
        req: Request<Incoming>,
        record: &mut RequestRecord,
    ) -> Result<CheckedRequest, Refused> {
        let (parts, body) = req.into_parts();
        request_check::check_head(&parts, self.config.allowed_origins.as_deref())?;
        let bytes = request_check::read_body(&parts, body, &self.config.limits).await?;
        match request_check::check_message(parts, bytes) {
            Ok(c) => {
                record.set_method(&c.method);
                Ok(c)
            }
            Err(Rejected {
                id,
                method,
                refusal,
            }) => {
                if let Some(m) = method {
                    record.set_method(&m);
                }
                Err(Refused { id, refusal })
            }
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
