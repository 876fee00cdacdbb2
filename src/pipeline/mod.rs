//! The request pipeline, in the order data flows (see DESIGN.md):
//! route → identify → throttle → check the request (transport rules, tool
//! permissions, the MRTR retry check) → forward → check the answer (policy,
//! the next round's sealed state) → record. Each phase is one module,
//! called once per request, in this order.

pub mod body;
pub mod forward;
pub mod permit;
pub mod record;
pub mod request_check;
pub mod response_check;
pub mod route;
pub mod sse;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::{header, HeaderName, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::value::RawValue;

use crate::audit::{AuditContext, AuditEvent, AuditSink, OperationOutcome};
use crate::config::{GatewayConfig, RouteConfig, UpstreamRoute};
use crate::headers::upstream_request_headers;
use crate::identify::{PeerIdentity, Principal};
use crate::jsonrpc::error_body;
use crate::mrtr::replay::ReplayStore;
use crate::mrtr::retry::{check_retry, Binding, MrtrShared, RetryCheck};
use crate::refusal::{Reason, Refusal};
use crate::throttle::Scope;
use body::ProxyBody;
use permit::TargetKind;
use record::{Metrics, Outcome, RequestRecord};
use request_check::{CheckedRequest, Rejected};
use response_check::{MrtrExchange, ResponseContext, RoundGate};
use route::{RouteTable, Routed};

/// Where a request came from, as the accept phase saw it.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub tls: bool,
    pub identity: PeerIdentity,
}

/// Everything a request needs, built once from a validated config.
pub struct Gateway {
    config: Arc<GatewayConfig>,
    routes: RouteTable,
    metrics: Arc<Metrics>,
    mrtr: Arc<MrtrShared>,
    audit: AuditSink,
}

/// A refusal on its way to the client: the request id when known, and any
/// headers the refusal needs (`WWW-Authenticate`, `Retry-After`).
struct Refused {
    id: Option<Box<RawValue>>,
    refusal: Refusal,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl From<Refusal> for Refused {
    fn from(refusal: Refusal) -> Self {
        Refused {
            id: None,
            refusal,
            headers: Vec::new(),
        }
    }
}

impl Refused {
    fn with_id(id: &Option<Box<RawValue>>, refusal: Refusal) -> Refused {
        Refused {
            id: id.clone(),
            refusal,
            headers: Vec::new(),
        }
    }
}

static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The client's `X-Request-Id` when it is a sane token, else a new one:
/// a per-process random prefix and a counter (unique, cheap, not secret).
fn request_id(headers: &http::HeaderMap) -> HeaderValue {
    if let Some(v) = headers.get(&X_REQUEST_ID) {
        let ok = (1..=64).contains(&v.len())
            && v.as_bytes()
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(b));
        if ok {
            return v.clone();
        }
    }
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| crate::mrtr::seal::new_operation_id()[..8].to_owned());
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    HeaderValue::from_str(&format!("{prefix}-{n:x}")).unwrap_or(HeaderValue::from_static("unknown"))
}

/// What every audit event of a request says about it.
pub fn audit_context(
    request_id: &str,
    upstream: &UpstreamRoute,
    principal: &Principal,
    method: &str,
    target: Option<&str>,
) -> AuditContext {
    AuditContext {
        request_id: request_id.to_owned(),
        operation: None,
        upstream_id: upstream.id.clone(),
        upstream_name: upstream.name.clone(),
        upstream_endpoint: upstream.url.to_string(),
        principal: principal.name.to_string(),
        method: method.to_owned(),
        target: target.map(str::to_owned),
        round: None,
    }
}

/// How a principal is bound into a sealed state.
fn principal_key(p: &Principal) -> String {
    if p.is_anonymous() {
        "anonymous".to_owned()
    } else {
        format!("{}:{}", p.method.as_str(), p.name)
    }
}

impl Gateway {
    pub fn new(
        config: Arc<GatewayConfig>,
        metrics: Arc<Metrics>,
        replay: Arc<ReplayStore>,
        audit: AuditSink,
    ) -> Result<Self, rustls::Error> {
        let routes = RouteTable::new(&config)?;
        for up in &config.upstreams {
            metrics.register_upstream(&up.id);
        }
        let mrtr = Arc::new(MrtrShared::new(config.state.clone(), replay));
        Ok(Gateway {
            config,
            routes,
            metrics,
            mrtr,
            audit,
        })
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn config(&self) -> &Arc<GatewayConfig> {
        &self.config
    }

    pub fn audit(&self) -> &AuditSink {
        &self.audit
    }

    /// The single-use store, handed on to the next config's gateway.
    pub fn replay_store(&self) -> &Arc<ReplayStore> {
        &self.mrtr.replay
    }

    /// Handle one HTTP request from a client, in a tracing span named by its
    /// request id (also returned to the client and passed upstream).
    pub async fn handle(&self, mut req: Request<Incoming>, peer: &Peer) -> Response<ProxyBody> {
        let request_id = request_id(req.headers());
        req.headers_mut()
            .insert(X_REQUEST_ID.clone(), request_id.clone());
        let span = tracing::debug_span!("request", id = %request_id.to_str().unwrap_or("-"), path = %req.uri().path());
        let id_text = request_id.to_str().unwrap_or("-").to_owned();
        let mut resp =
            tracing::Instrument::instrument(self.handle_inner(req, peer, id_text), span).await;
        resp.headers_mut().insert(X_REQUEST_ID.clone(), request_id);
        resp
    }

    async fn handle_inner(
        &self,
        req: Request<Incoming>,
        peer: &Peer,
        request_id: String,
    ) -> Response<ProxyBody> {
        let mut record = RequestRecord::start(self.metrics.clone());
        let Some(routed) = self.routes.select(req.uri().path()) else {
            let refusal = Refusal::new(
                Reason::RouteNotFound,
                "no MCP endpoint is configured at this path",
            );
            return refuse(record, Refused::from(refusal), None, &request_id);
        };
        record.set_upstream(routed.upstream.label.clone());
        match self
            .exchange(routed, req, peer, &mut record, request_id.clone())
            .await
        {
            Ok(resp) => resp.map(|b| b.recorded(record)),
            Err(refused) => {
                if matches!(
                    refused.refusal.reason.status(),
                    StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT
                ) {
                    self.metrics
                        .upstream_error(&routed.upstream.label, refused.refusal.reason);
                }
                refuse(
                    record,
                    refused,
                    Some(&routed.route.upstream.name),
                    &request_id,
                )
            }
        }
    }

    /// The phases after routing, in order.
    async fn exchange(
        &self,
        routed: &Routed,
        req: Request<Incoming>,
        peer: &Peer,
        record: &mut RequestRecord,
        request_id: String,
    ) -> Result<Response<ProxyBody>, Refused> {
        let route = &routed.route;
        let principal = self.identify(route, req.headers(), peer)?;
        self.throttle(Scope::Principal, &[&principal.name], &None)
            .await?;
        let checked = self.check_request(req, record).await?;
        self.permit(route, &principal, &checked)?;
        let upstream = &route.upstream;
        self.throttle(
            Scope::PrincipalUpstream,
            &[&principal.name, &upstream.id],
            &checked.id,
        )
        .await?;
        if let (Some(TargetKind::Tool), Some(tool)) =
            (TargetKind::of_method(&checked.method), &checked.target)
        {
            self.throttle(
                Scope::PrincipalTool,
                &[&principal.name, &upstream.id, tool],
                &checked.id,
            )
            .await?;
        }

        let binding = Binding {
            principal: principal_key(&principal),
            upstream: upstream.id.clone(),
            method: checked.method.clone(),
            target: checked.target.clone(),
        };
        // Built only when an MRTR step has something to record.
        let audit_ctx = || {
            audit_context(
                &request_id,
                upstream,
                &principal,
                &checked.method,
                checked.target.as_deref(),
            )
        };
        let retry = check_retry(&self.mrtr, upstream, &binding, &checked.body)
            .await
            .map_err(|refusal| {
                self.metrics.state_refused(refusal.reason);
                self.audit
                    .emit(&audit_ctx(), AuditEvent::retry_refused(&refusal));
                Refused::with_id(&checked.id, refusal)
            })?;
        let (body, prior, answer_bytes) = match retry {
            RetryCheck::Fresh => (checked.body.clone(), None, 0),
            RetryCheck::Retry(r) => {
                let r = *r;
                let ctx = audit_ctx().with_operation(&r.prior.operation, r.prior.round);
                self.audit.emit(&ctx, AuditEvent::retry_ok(&r.answers));
                self.audit
                    .emit(&ctx, AuditEvent::forwarded(&r.body, &r.prior));
                let outcome = OperationOutcome::after_answers(&r.answers);
                (
                    r.body,
                    Some((r.prior, outcome)),
                    r.answers.answer_bytes as u64,
                )
            }
        };

        let headers = upstream_request_headers(
            &checked.parts.headers,
            peer.addr,
            peer.tls,
            upstream.forward_authorization,
        );
        let sent = Instant::now();
        let resp = routed
            .upstream
            .client
            .send(headers, body.clone())
            .await
            .map_err(|r| Refused::with_id(&checked.id, r))?;
        self.metrics.observe_upstream(&routed.upstream.label, sent);

        let throttle = &self.config.throttle;
        let rounds = throttle
            .is_limited(Scope::InputRequiredRounds)
            .then(|| RoundGate {
                throttle: throttle.clone(),
                principal: principal.name.to_string(),
            });
        let ctx = ResponseContext {
            request_id: checked.id,
            request_kind: checked.kind,
            method: checked.method,
            client: checked.client,
            upstream: upstream.clone(),
            max_message_bytes: self.config.limits.max_response_body_bytes,
            metrics: Some(self.metrics.clone()),
            mrtr: Some(MrtrExchange {
                shared: self.mrtr.clone(),
                binding,
                request_body: body,
                prior,
                answer_bytes,
            }),
            route: Some(route.clone()),
            principal: principal.clone(),
            rounds,
            audit: Some(self.audit.clone()),
            trace_id: request_id,
        };
        let id = ctx.request_id.clone();
        response_check::check(ctx, resp)
            .await
            .map_err(|r| Refused::with_id(&id, r))
    }

    /// Identify: who is calling, by the route's schemes.
    fn identify(
        &self,
        route: &RouteConfig,
        headers: &http::HeaderMap,
        peer: &Peer,
    ) -> Result<Principal, Refused> {
        self.config
            .auth
            .authenticate(&route.auth, route.allow_anonymous, headers, &peer.identity)
            .map_err(|failure| {
                let reason = if failure.reason() == "authentication_required" {
                    Reason::AuthenticationRequired
                } else {
                    Reason::InvalidCredentials
                };
                let message = match failure.why() {
                    Some(why) => format!("the credential was refused: {why}"),
                    None => "this endpoint needs a credential (see WWW-Authenticate)".to_owned(),
                };
                Refused {
                    id: None,
                    refusal: Refusal::new(reason, message),
                    headers: vec![(header::WWW_AUTHENTICATE, failure.www_authenticate())],
                }
            })
    }

    /// Throttle: one unit of the limit of `scope` for `key`.
    async fn throttle(
        &self,
        scope: Scope,
        key: &[&str],
        id: &Option<Box<RawValue>>,
    ) -> Result<(), Refused> {
        match self.config.throttle.check_parts(scope, key).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(limited)) => {
                self.metrics.rate_limited(scope.as_str());
                let secs = limited.retry_after_secs();
                let refusal = Refusal::new(
                    Reason::RateLimited,
                    format!(
                        "too many requests ({}); retry after {secs} s",
                        scope.as_str()
                    ),
                )
                .with_data("scope", scope.as_str().into())
                .with_data("retryAfterSeconds", secs.into());
                let retry_after = HeaderValue::from_str(&secs.to_string())
                    .unwrap_or(HeaderValue::from_static("1"));
                Err(Refused {
                    id: id.clone(),
                    refusal,
                    headers: vec![(header::RETRY_AFTER, retry_after)],
                })
            }
            Err(_) => Err(Refused::with_id(
                id,
                Refusal::new(
                    Reason::RateLimiterUnavailable,
                    "the rate limiter is unavailable; try again",
                ),
            )),
        }
    }

    /// Tool permissions, judged from the checked body.
    fn permit(
        &self,
        route: &RouteConfig,
        principal: &Principal,
        checked: &CheckedRequest,
    ) -> Result<(), Refused> {
        let (Some(kind), Some(target)) = (TargetKind::of_method(&checked.method), &checked.target)
        else {
            return Ok(());
        };
        if route.permissions.permits(principal, kind, target) {
            return Ok(());
        }
        let what = match kind {
            TargetKind::Tool => "tool",
            TargetKind::Prompt => "prompt",
            TargetKind::Resource => "resource",
        };
        let refusal = Refusal::new(
            Reason::ToolNotPermitted,
            format!("this caller may not use that {what} on this route"),
        );
        Err(Refused::with_id(&checked.id, refusal))
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
                Err(Refused {
                    id,
                    refusal,
                    headers: Vec::new(),
                })
            }
        }
    }
}

/// Answer with a JSON-RPC error, counted under its reason.
fn refuse(
    mut record: RequestRecord,
    refused: Refused,
    upstream: Option<&str>,
    request_id: &str,
) -> Response<ProxyBody> {
    let Refused {
        id,
        refusal,
        headers,
    } = refused;
    record.set_outcome(Outcome::Refused(refusal.reason));
    tracing::info!(
        request_id,
        reason = refusal.reason.as_str(),
        upstream = upstream.unwrap_or("-"),
        "refused: {}",
        refusal.message
    );
    let mut resp = error_response(id.as_deref(), &refusal, upstream);
    for (name, value) in headers {
        resp.headers_mut().insert(name, value);
    }
    resp.map(|b| b.recorded(record))
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
