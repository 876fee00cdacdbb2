//! The request pipeline, in the order data flows (see ARCHITECTURE.md):
//! route → check the head → identify → throttle → read and parse the body
//! ([`RequestCtx`] is built here) → permit → throttle the target → MRTR
//! retry check → forward → check the answer (policy, the next round's sealed
//! state) → record. Each phase is one module (or function), called once per
//! request, in this order; refusals leave through [`refuse`], every request
//! through its [`record::RequestRecord`].

pub(crate) mod access;
pub(crate) mod answer;
pub mod approve;
pub mod arguments;
pub(crate) mod body;
pub(crate) mod bridge;
pub(crate) mod carry;
pub(crate) mod credential;
pub mod ctx;
pub(crate) mod federate;
pub(crate) mod heavy;
mod metrics;
pub mod record;
pub(crate) mod refuse;
pub(crate) mod relay;
pub(crate) mod reply;
pub mod request;
pub(crate) mod resource;
pub mod response;
pub mod retry;
pub(crate) mod route;
pub(crate) mod session;
pub(crate) mod speaks;
pub mod sse;
pub(crate) mod task;

pub(crate) use portcullis_dataplane::{forward, stdio};

use std::sync::Arc;
use std::time::Instant;

use http::{header, HeaderValue, Request, Response};
use hyper::body::Incoming;

use crate::audit::AuditSink;
use crate::config::{GatewayConfig, ServerNames};
use crate::headers::{to_upstream, LAST_EVENT_ID};
use crate::listings::{ListingBackend, ListingStore};
use crate::model::{Generation, ProtocolVersion, Reason, Refusal, SharedClock};
use crate::mrtr::replay::ReplayStore;
use crate::mrtr::MrtrShared;
use crate::telemetry::{Phase, RequestTrace};
use crate::throttle::{Scope, Throttle};
use body::ProxyBody;
use ctx::RequestCtx;
pub(crate) use portcullis_dataplane::Peer;
use record::{Metrics, RequestRecord};
use refuse::Refused;
use request::head::HeadRules;
use request::{ParsedRequest, Transport};
use route::{Endpoint, Route, RouteTable};

/// A request once its head, its caller and its message are checked: what
/// the phases on the way to an upstream start from.
pub(crate) struct Inbound {
    pub(crate) parts: http::request::Parts,
    /// The `Host` the client addressed (forwarded as `X-Forwarded-Host`).
    pub(crate) authority: HeaderValue,
    pub(crate) principal: crate::identify::Principal,
    pub(crate) request: ParsedRequest,
    pub(crate) peer: Arc<Peer>,
    pub(crate) request_id: Arc<str>,
    pub(crate) started: Instant,
    pub(crate) trace: RequestTrace,
    /// The caller's access token, when an upstream exchanges it.
    pub(crate) subject: Option<crate::credential::SubjectToken>,
    /// Made by the bridge from a client's request: never carried again.
    pub(crate) carried: bool,
    /// The gateway's own request for the caller (its fetch of a list the
    /// caller never asked for): not counted against the caller's limits.
    pub(crate) own: bool,
}

/// The runtime services of one config generation, built from its settings.
/// Swapped whole on reload; a request keeps the one it started with.
pub struct Gateway {
    pub config: Arc<GatewayConfig>,
    pub routes: RouteTable,
    pub throttle: Throttle,
    pub mrtr: MrtrShared,
    pub metrics: Arc<Metrics>,
    pub audit: AuditSink,
    pub clock: SharedClock,
    /// The pinned listings (rug pulls), carried from generation to generation.
    pub listings: Arc<ListingStore>,
    /// The bridged calls waiting on this instance for a client's answers.
    pub(crate) bridge: Arc<bridge::BridgeCalls>,
    /// What each upstream's results delivered to each caller (keyed
    /// fingerprints), carried from generation to generation.
    pub(crate) flows: Arc<crate::mrtr::flows::FlowStore>,
    /// The approvals remembered (`[[approval]]` rules that let a decision hold).
    pub(crate) approvals: Arc<crate::approval::memory::DecisionMemory>,
    /// Hands answers for calls another replica holds to it (Redis only).
    pub(crate) relay: Option<Arc<relay::Relay>>,
    /// The calls waiting for an approver on the approval page.
    pub pending: Arc<approve::PendingApprovals>,
}

pub use carry::Carried;

impl Gateway {
    pub fn new(config: Arc<GatewayConfig>, carried: Carried) -> Result<Self, rustls::Error> {
        let routes = RouteTable::new(&config, &carried.metrics, &carried.pools)?;
        let throttle = carried.throttle;
        // The backends report their failures to the metrics (once: a backend
        // carried across reloads keeps its first report).
        let health = carried.metrics.health();
        throttle.report_to(&health);
        carried.replay.report_to(&health);
        carried.listings.report_to(&health);
        carried.audit.report_to(&health);
        let mrtr = MrtrShared::new(config.state.clone(), carried.replay, carried.clock.clone());
        // The shipped tables and each policy's one-pass byte tests are
        // compiled here, off the request path, not on the first message
        // that needs them.
        crate::policy::warm();
        for upstream in &config.upstreams {
            crate::policy::inspect::prepare_raw_scan(&upstream.policy, &mrtr.scanner);
        }
        if let Some(relay) = &carried.relay {
            relay.seal_with(&config.state);
        }
        Ok(Gateway {
            config,
            routes,
            throttle,
            mrtr,
            metrics: carried.metrics,
            audit: carried.audit,
            clock: carried.clock,
            listings: carried.listings,
            bridge: carried.bridge,
            flows: carried.flows,
            approvals: carried.approvals,
            relay: carried.relay,
            pending: carried.pending,
        })
    }

    /// Listen for answers other replicas receive for this instance's
    /// calls (no-op without a relay); a failure is logged by the relay, and
    /// the call goes on (an answer reaching this replica still finds it).
    pub(crate) async fn relay_listen(&self) {
        if let Some(relay) = &self.relay {
            let _ = relay.listen().await;
        }
    }

    /// What resolves once every upstream is warm (each `eager` stdio
    /// program's first start is over), what `/readyz` waits for at start;
    /// `None` when none is still warming.
    pub fn warming(&self) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        let pools: Vec<_> = (self.routes.pools().values())
            .filter(|p| p.warming())
            .cloned()
            .collect();
        (!pools.is_empty()).then_some(async move {
            futures_util::future::join_all(pools.iter().map(|p| p.warmed())).await;
        })
    }

    /// A gateway for `config` that serves no listener: its phases run on
    /// messages handed to them (benchmarks, fuzzing, `portcullis explain`).
    pub fn offline(config: GatewayConfig) -> Result<Arc<Gateway>, rustls::Error> {
        let metrics = Metrics::new().map_err(|e| rustls::Error::General(e.to_string()))?;
        let replay = Arc::new(ReplayStore::new(&config.state.replay));
        // Offline phases answer at once: the pins are this run's, in memory.
        let listings = Arc::new(ListingStore::new(&ListingBackend::Memory));
        let flows = Arc::new(crate::mrtr::flows::FlowStore::new(
            replay.clone(),
            crate::mrtr::flows::DEFAULT_TTL,
        ));
        let clock = crate::model::system_clock();
        let carried = Carried {
            approvals: carry::approvals(&config, &replay, &clock),
            metrics,
            flows,
            replay,
            listings,
            audit: AuditSink::off(),
            clock,
            throttle: Throttle::new(&config.throttle),
            pools: forward::Pools::new(),
            bridge: Default::default(),
            relay: None,
            pending: Default::default(),
        };
        Gateway::new(Arc::new(config), carried).map(Arc::new)
    }

    /// The single-use store, handed on to the next config's gateway.
    pub(crate) fn replay_store(&self) -> &Arc<ReplayStore> {
        &self.mrtr.replay
    }

    /// Handle one HTTP request from a client. `request_id` is its
    /// `X-Request-Id` (the request-id layer set it). Never fails: a refusal
    /// is an answer; the `Result` is the service's, so this future is the
    /// one the connection boxes.
    pub(crate) async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        peer: Arc<Peer>,
        request_id: Arc<str>,
    ) -> Result<Response<ProxyBody>, std::convert::Infallible> {
        let started = Instant::now();
        let mut record = RequestRecord::start(self.metrics.clone(), started);
        let deadline = req.extensions().get::<crate::model::Deadline>();
        record.set_deadline(deadline.map(|d| d.0));
        if self.config.log.access {
            record.log_access(request_id.clone());
        }
        let trace = req.extensions().get::<RequestTrace>().cloned();
        let trace = trace.unwrap_or_default();
        record.set_trace(trace.clone());
        let outcome = self
            .exchange(req, peer, request_id.clone(), started, &mut record, &trace)
            .await;
        Ok(match outcome {
            Ok(resp) => {
                // The head is out: the deadline no longer applies.
                record.set_deadline(None);
                record.set_status(resp.status());
                resp.map(|b| b.recorded(record))
            }
            Err(refused) => {
                trace.refused(refused.refusal.reason.as_str());
                if refused.refusal.reason.is_upstream_failure() {
                    if let Some(label) = record.upstream_label() {
                        self.metrics.upstream_error(&label, refused.refusal.reason);
                    }
                }
                refuse::respond(record, refused, &request_id)
            }
        })
    }

    /// The phases, in order: those every request takes, then the ones on
    /// the way to one upstream ([`Gateway::through`]), or a federated
    /// route's, which takes them to each upstream the request concerns.
    async fn exchange(
        self: &Arc<Self>,
        req: Request<Incoming>,
        peer: Arc<Peer>,
        request_id: Arc<str>,
        started: Instant,
        record: &mut RequestRecord,
        trace: &RequestTrace,
    ) -> Result<Response<ProxyBody>, Refused> {
        if resource::is_metadata_path(req.uri().path()) {
            return self.resource_metadata(req, &peer);
        }
        // A refusal sent before the body is read leaves the body on the
        // connection: like nginx, the gateway then says it closes the
        // connection, so the client does not send its next request behind
        // bytes nobody read (a keep-alive client would see it cut off).
        // HTTP/2 ends a stream, not the connection, and has no such header.
        let unread = req.version() < http::Version::HTTP_2 && request::declares_body(req.headers());
        let closing = |r: Refused| if unread { r.closing() } else { r };
        let endpoint = self.endpoint(req.uri().path()).map_err(closing)?;
        let front = endpoint.front().clone();
        let name = match endpoint {
            Endpoint::One(route) => {
                record.set_upstream(route.upstream.metrics.clone());
                route.name()
            }
            Endpoint::Federated(f) => {
                record.set_upstream(f.metrics.clone());
                f.settings.name.as_str()
            }
        };
        let at = |r: Refusal| Refused::new(r, None, name);
        let (parts, body) = req.into_parts();
        let generations = &front.config.generations;
        let head =
            request::head::check(&parts, &self.head_rules(&peer, generations)).map_err(|r| {
                let allow = HeaderValue::from_static(request::head::allowed_methods(generations));
                closing(at(r).with_header(header::ALLOW, allow))
            })?;
        let transport = head.transport;
        let principal = access::identify(self, &front, &parts, &head.authority, &peer)
            .await
            .map_err(closing)?;
        let subject = credential::subject_token(&front, &principal, &parts.headers);
        // Before the body is read: one request, one of the caller's tokens
        // (a federated route's limits per upstream are taken by each
        // upstream's phases, `access::throttle_target`).
        access::throttle(
            self,
            record_label(endpoint),
            Scope::Principal,
            &[&principal.scheme, &principal.name],
        )
        .await
        .map_err(|r| closing(with_retry_after(at(r))))?;
        let parsed = match transport {
            Transport::Post => {
                let limits = &self.config.limits;
                // A read that failed left the rest of the body unread.
                let bytes = request::read(&parts, body, limits)
                    .await
                    .map_err(|r| at(r).closing())?;
                request::parse(&parts, &bytes, generations).map_err(|r| r.within(None, name))?
            }
            other => {
                let mut r = ParsedRequest::without_message(other, ProtocolVersion::V2025_11_25);
                r.resuming = parts.headers.contains_key(&LAST_EVENT_ID);
                r
            }
        };
        record.set_method(parsed.method);
        record.set_target(parsed.target.as_deref());
        trace.request_checked(parsed.method.as_str());
        let inbound = Inbound {
            parts,
            authority: head.authority,
            principal,
            request: parsed,
            peer,
            request_id,
            started,
            trace: trace.clone(),
            subject,
            carried: false,
            own: false,
        };
        match endpoint {
            Endpoint::One(route) => self.through(route.clone(), Box::new(inbound)).await,
            Endpoint::Federated(f) => Box::pin(federate::serve(self, f, inbound, record)).await,
        }
    }

    /// The phases from the parsed request to the upstream's checked answer,
    /// on the route to one upstream. The request comes boxed: an async
    /// function keeps its arguments beside its locals, and inline it would
    /// add its size twice to every caller's future.
    pub(crate) async fn through(
        self: &Arc<Self>,
        route: Arc<Route>,
        inbound: Box<Inbound>,
    ) -> Result<Response<ProxyBody>, Refused> {
        let Inbound {
            parts,
            authority,
            principal,
            request,
            peer,
            request_id,
            started,
            trace,
            subject,
            carried,
            own,
        } = *inbound;
        let name = route.name();
        // Boxed: the context is moved into every later phase's future; inline,
        // each async phase would copy it and hold it twice (argument and local).
        let mut ctx = Box::new(RequestCtx {
            gateway: self.clone(),
            route: route.clone(),
            peer: peer.clone(),
            request_id,
            started,
            principal,
            request,
            retry: None,
            task: None,
            session: None,
            trace: trace.clone(),
            subject,
            argument_asks: Vec::new(),
            listing_held: false,
            asked_before: None,
        });
        let within =
            |r: Refusal, ctx: &RequestCtx| with_retry_after(Refused::new(r, ctx.id(), name));
        session::open(&mut ctx, &parts.headers, carried)
            .await
            .map_err(|r| within(r, &ctx))?;
        // A stdio program speaks one generation, found when it first starts:
        // known before the bridge decides.
        if let Some(program) = route.upstream.client.pool().stdio() {
            program
                .generation()
                .await
                .map_err(|e| within(stdio::unavailable(&e), &ctx))?;
        }
        // A 2025-11-25 client of a 2026-07-28-only upstream: carried across.
        if !carried && bridge::may_carry(&ctx) {
            return Box::pin(bridge::carry(ctx, parts, authority)).await;
        }
        access::permit(&ctx, &authority, parts.uri.path())?;
        ctx.listing_held =
            access::unchanged(&ctx).await.map_err(|r| within(r, &ctx))? == access::Held::Askable;
        if !own {
            access::throttle_target(&ctx)
                .await
                .map_err(|r| within(r, &ctx))?;
        }
        trace.phase(Phase::Access);
        let body = match answer::check(&mut ctx).await.map_err(|r| within(r, &ctx))? {
            Some(answer::Answered::Forward(answer)) => answer,
            // The gateway's own question's answer: handed to the call that waits.
            Some(answer::Answered::Taken) => return Ok(reply::accepted()),
            None => match task::check(&mut ctx).await.map_err(|r| within(r, &ctx))? {
                Some(body) => body,
                None => retry::check(&mut ctx).await.map_err(|r| within(r, &ctx))?,
            },
        };
        if let Some(prior) = ctx.retry.as_ref().map(|r| &r.prior) {
            trace.operation(&prior.operation, prior.round + 1);
        }
        approve::held_listing_approved(&ctx).map_err(|r| within(r, &ctx))?;
        let body = arguments::check(&mut ctx, &parts, &authority, body)
            .await
            .map_err(|r| within(r, &ctx))?;
        // The list the argument check fetched was this caller's first
        // request to reach the upstream, and found it speaks only
        // 2025-11-25: the call is carried as the bridge would have.
        if !carried && bridge::learned_older(&ctx) {
            return Box::pin(bridge::carry(ctx, parts, authority)).await;
        }
        if approve::applies(&ctx) {
            // Boxed: only calls some approval rule could ask about wait here.
            let approve = Box::pin(approve::check(&mut ctx, &parts, &authority)).await;
            match approve.map_err(|r| within(r, &ctx))? {
                approve::Approve::Forward => {}
                approve::Approve::Ask(question) => return Ok(question),
                approve::Approve::Push(question) => {
                    let waiting = approve::Waiting {
                        ctx,
                        parts,
                        authority,
                        body,
                    };
                    return approve::push::start(waiting, question)
                        .map_err(|r| with_retry_after(Refused::new(r, None, name)));
                }
            }
        }
        // Boxed: the forward and the response check are the largest phases;
        // inline, their future would be copied again at every phase above.
        Box::pin(self.forward(ctx, parts, authority, body, carried)).await
    }

    /// The phases from a checked request to the upstream's checked answer:
    /// the forward, then the response check.
    pub(crate) async fn forward(
        self: &Arc<Self>,
        ctx: Box<RequestCtx>,
        mut parts: http::request::Parts,
        authority: HeaderValue,
        body: bytes::Bytes,
        carried: bool,
    ) -> Result<Response<ProxyBody>, Refused> {
        let route = ctx.route.clone();
        let peer = ctx.peer.clone();
        let trace = ctx.trace.clone();
        let transport = ctx.request.transport;
        let name = route.name();
        let within =
            |r: Refusal, ctx: &RequestCtx| with_retry_after(Refused::new(r, ctx.id(), name));
        trace.phase(Phase::StateCheck);
        let upstream = &route.upstream;
        to_upstream(
            &mut parts.headers,
            &peer.forwarding,
            &authority,
            upstream.settings.forward_authorization,
        );
        session::to_upstream(&ctx, &mut parts.headers);
        if let Some((name, value)) = credential::attach_to(&ctx)
            .await
            .map_err(|r| within(r, &ctx))?
        {
            parts.headers.insert(name, value);
        }
        if upstream.settings.stdio.is_some() {
            stdio::stamp(&mut parts.headers, &ctx.principal, &route.config.roots);
        }
        let id = ctx.id().map(str::to_owned);
        let sent = Instant::now();
        let resp = upstream
            .client
            .send(transport.http_method(), parts.headers, body)
            .await
            .map_err(|r| Refused::new(r, id.as_deref(), name))?;
        upstream.metrics.observe_upstream(sent);
        trace.forwarded(&upstream.settings.id);
        // A 2026-07-28 request refused by an upstream not known to speak it
        // may be an older server's refusal: the bridge finds out.
        if !carried && bridge::may_be_older(&ctx, resp.status()) {
            let head = bridge::head_for(&parts.uri);
            if Box::pin(bridge::older(&ctx, &head, &authority)).await {
                return Box::pin(bridge::carry(ctx, head, authority)).await;
            }
        }
        if resp.status() == http::StatusCode::UNAUTHORIZED {
            credential::refused_by_upstream(&ctx);
        }
        let own_credential = credential::upstream_auth_is_ours(&route);
        let checked = response::check(ctx, resp).await.map_err(|r| {
            let r = if own_credential {
                credential::not_the_clients(r)
            } else {
                r
            };
            with_retry_after(Refused::new(r, id.as_deref(), name))
        })?;
        trace.phase(Phase::ResponseCheck);
        Ok(checked)
    }

    /// An OAuth protected resource's metadata document (RFC 9728).
    fn resource_metadata(
        &self,
        req: Request<Incoming>,
        peer: &Peer,
    ) -> Result<Response<ProxyBody>, Refused> {
        let (parts, _) = req.into_parts();
        let Some((path, endpoint)) = self.routes.protected_at(parts.uri.path()) else {
            return Err(Refused::from(Refusal::new(
                Reason::RouteNotFound,
                "no OAuth protected resource is configured at this path",
            )));
        };
        let front = endpoint.front();
        let rules = self.head_rules(peer, &front.config.generations);
        resource::metadata(&parts, &rules, path, front, peer)
    }

    fn endpoint(&self, path: &str) -> Result<&Endpoint, Refused> {
        self.routes.select(path).ok_or_else(|| {
            Refused::from(Refusal::new(
                Reason::RouteNotFound,
                "no MCP endpoint is configured at this path",
            ))
        })
    }

    fn head_rules<'a>(&'a self, peer: &Peer, generations: &'a [Generation]) -> HeadRules<'a> {
        static LOOPBACK: ServerNames = ServerNames::Loopback;
        let names = self
            .config
            .listeners
            .get(peer.listener)
            .map_or(&LOOPBACK, |l| &l.server_names);
        HeadRules {
            server_names: names,
            generations,
            allowed_origins: &self.config.allowed_origins,
            local_port: peer.local.port(),
            loopback: peer.local.ip().is_loopback(),
            tls: peer.tls,
        }
    }
}

/// The `upstream` label of what an endpoint answers itself.
fn record_label(endpoint: &Endpoint) -> &str {
    match endpoint {
        Endpoint::One(route) => &route.upstream.label,
        Endpoint::Federated(f) => &f.metrics.label,
    }
}

/// A refusal that asks the client to wait carries `Retry-After`.
fn with_retry_after(refused: Refused) -> Refused {
    match access::retry_after(&refused.refusal) {
        Some(v) => refused.with_header(header::RETRY_AFTER, v),
        None => refused,
    }
}
