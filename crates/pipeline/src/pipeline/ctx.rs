//! The one request context, built by the request check and carried through
//! every later phase (permit, throttle, retry check, forward, response
//! check, record), like pingora's per-request `CTX`.

use std::sync::Arc;
use std::time::Instant;

use super::request::ParsedRequest;
use super::route::Route;
use super::{Gateway, Peer};
use crate::identify::Principal;
use crate::mrtr::retry::AcceptedRetry;
use crate::mrtr::task::AcceptedTask;
use crate::mrtr::Binding;
use crate::sessions::SessionState;
use crate::telemetry::RequestTrace;

/// An opened gateway session (the session phase fills it in).
#[derive(Debug, Clone)]
pub(crate) struct OpenSession {
    pub(crate) state: SessionState,
}

pub struct RequestCtx {
    /// The services of the config generation the request started under.
    pub gateway: Arc<Gateway>,
    pub route: Arc<Route>,
    pub(crate) peer: Arc<Peer>,
    /// The request's `X-Request-Id`.
    pub(crate) request_id: Arc<str>,
    pub(crate) started: Instant,
    pub principal: Principal,
    pub request: ParsedRequest,
    /// Set by the retry check when the request answers questions.
    /// (Boxed, like `task` and `session`: most requests have none, and the
    /// context is moved through every phase's future; inline they would
    /// make each of those futures about 1 KiB larger.)
    pub retry: Option<Box<AcceptedRetry>>,
    /// Set by the task check when a request about a task brought the
    /// gateway's state back.
    pub(crate) task: Option<Box<AcceptedTask>>,
    /// The 2025-11-25 session the request belongs to.
    pub(crate) session: Option<Box<OpenSession>>,
    /// The request's span (empty when tracing is off).
    pub(crate) trace: RequestTrace,
    /// The caller's access token, kept only when the upstream's credential
    /// is a token exchange of it.
    pub(crate) subject: Option<crate::credential::SubjectToken>,
    /// What an `[arguments]` rule set to `ask` found (the check, and where
    /// in the arguments): the approve phase asks the person about it.
    pub(crate) argument_asks: Vec<(crate::approval::ArgumentCheck, String)>,
    /// The tool called is held for a changed definition, and only a
    /// person's approval under a `changed_listing` rule lets the call on.
    pub(crate) listing_held: bool,
    /// The questions the gateway itself pushed before the call went on (a
    /// 2025-11-25 approval): the upstream's own pushes continue that
    /// operation and count against the same round budget.
    pub(crate) asked_before: Option<Box<AskedBefore>>,
}

/// Rounds of questions already asked in a call's operation.
#[derive(Debug, Clone)]
pub(crate) struct AskedBefore {
    pub(crate) operation: String,
    pub(crate) rounds: u32,
}

impl RequestCtx {
    /// A context for `request` on `path` of an offline gateway, from an
    /// anonymous loopback peer (benchmarks, fuzzing, `portcullis explain`);
    /// on a federated route, toward its first upstream.
    pub fn offline(
        gateway: Arc<Gateway>,
        path: &str,
        request: ParsedRequest,
    ) -> Option<RequestCtx> {
        let route = gateway.routes.select(path)?.front().clone();
        Self::offline_on(gateway, route, request)
    }

    /// As [`RequestCtx::offline`], toward the upstream `id` of the route at `path`.
    pub fn offline_to(
        gateway: Arc<Gateway>,
        path: &str,
        id: &str,
        request: ParsedRequest,
    ) -> Option<RequestCtx> {
        let route = gateway.routes.select(path)?.member(id)?.clone();
        Self::offline_on(gateway, route, request)
    }

    fn offline_on(
        gateway: Arc<Gateway>,
        route: Arc<Route>,
        request: ParsedRequest,
    ) -> Option<RequestCtx> {
        let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let peer = Arc::new(Peer::new(loopback, loopback, 0, false, Default::default()));
        Some(RequestCtx {
            gateway,
            route,
            peer,
            request_id: Arc::from("offline"),
            started: Instant::now(),
            principal: Principal::anonymous(),
            request,
            retry: None,
            task: None,
            session: None,
            subject: None,
            argument_asks: Vec::new(),
            listing_held: false,
            asked_before: None,
            trace: RequestTrace::off(),
        })
    }

    /// Who is asking about what, for sealed states.
    pub fn binding(&self) -> Binding<'_> {
        let p = &self.principal;
        Binding {
            principal: (!p.is_anonymous()).then(|| (p.scheme.as_ref(), p.name.as_ref())),
            upstream: &self.route.upstream.settings.id,
            method: self.request.method,
            target: self.request.target.as_deref(),
        }
    }

    /// The configured display name of the upstream.
    pub fn upstream_name(&self) -> &str {
        self.route.name()
    }
}

impl RequestCtx {
    /// What every audit event of this request says about it, built only
    /// when an MRTR step has something to record.
    pub(crate) fn audit_context(&self) -> crate::audit::AuditContext {
        crate::audit::AuditContext {
            trace: self.trace.ids(),
            ..audit_context(
                &self.route,
                &self.request_id,
                &self.principal,
                &self.request,
            )
        }
    }

    /// Count and audit what a request-side rule decided (the arguments,
    /// an upstream's authorization challenge) as the answer side's
    /// verdicts are.
    pub(crate) fn record_verdicts(&self, report: &crate::policy::inspect::Report) {
        if report.verdicts.is_empty() {
            return;
        }
        let upstream = &self.route.upstream.settings.id;
        let metrics = &self.gateway.metrics;
        metrics.record_text_verdicts(upstream, self.request.generation(), report);
        let sink = &self.gateway.audit;
        if sink.enabled() {
            let at = self.audit_context();
            for event in crate::audit::AuditEvent::verdicts(report) {
                sink.emit(&at, event);
            }
        }
    }

    /// The JSON-RPC id's text, `null` when there is none.
    pub fn id(&self) -> Option<&str> {
        self.request.id()
    }

    /// Whether the request belongs to a 2025-11-25 session.
    pub fn in_session(&self) -> bool {
        self.session.is_some()
    }
}

/// What every audit event of `request` on `route` says about it.
pub(crate) fn audit_context(
    route: &Route,
    request_id: &str,
    principal: &Principal,
    request: &ParsedRequest,
) -> crate::audit::AuditContext {
    let up = &route.upstream.settings;
    crate::audit::AuditContext {
        request_id: request_id.to_owned(),
        operation: None,
        upstream_id: up.id.clone(),
        upstream_name: up.name.clone(),
        upstream_endpoint: up.url.to_string(),
        principal: principal.name.to_string(),
        auth_scheme: (!principal.is_anonymous()).then(|| principal.scheme.to_string()),
        client: principal.grant.as_ref().and_then(|g| g.client_id.clone()),
        method: request.method.as_str().to_owned(),
        target: request.target.clone(),
        round: None,
        generation: request.generation().as_str(),
        trace: None,
    }
}
