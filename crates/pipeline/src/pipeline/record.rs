//! Phase: record (the one exit every request leaves through). Prometheus metrics for every request, with labels drawn only
//! from bounded sets: configured upstream ids, the spec's method names and the
//! gateway's own outcome names. Nothing a client typed becomes a label.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, TextEncoder,
};

use super::metrics::backend::{unavailable_store, BackendMetrics};
use super::metrics::bridge::BridgeMetrics;
use super::metrics::credential::CredentialMetrics;
use super::metrics::federation::FederationMetrics;
use super::metrics::heavy::HeavyMetrics;
use crate::model::{Fallback, Generation, Health, HealthReport, McpMethod, Reason, StoreUser};
use crate::policy::inspect::{Action, Report, Verdict};
use crate::telemetry::{Phase, RequestTrace};
pub(crate) use portcullis_dataplane::described::{Described, Family};

const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
];

pub struct Metrics {
    registry: Described,
    requests: IntCounterVec,
    request_duration: HistogramVec,
    upstream_duration: HistogramVec,
    in_flight: IntGauge,
    input_required: IntCounterVec,
    policy_verdicts: IntCounterVec,
    listing_intents: IntCounterVec,
    pub(crate) connections: IntGauge,
    state_refusals: IntCounterVec,
    operation_rounds: HistogramVec,
    rate_limited: IntCounterVec,
    listing_changes: IntCounterVec,
    upstream_errors: IntCounterVec,
    /// Federated routes' upstreams left out (`federate/`).
    pub(crate) federation: FederationMetrics,
    config_reloads: IntCounterVec,
    last_reload_success: prometheus::Gauge,
    reload_state: ReloadMetrics,
    panics: prometheus::IntCounter,
    jwks_fetch_failures: IntCounterVec,
    backends: BackendMetrics,
    /// The lanes of large-message inspection (`heavy.rs`).
    pub(crate) heavy: HeavyMetrics,
    /// Bridged sessions and their questions (`bridge/`).
    pub(crate) bridge: BridgeMetrics,
    /// The stdio upstreams' programs (`stdio/`).
    pub(crate) stdio: Arc<super::stdio::StdioMetrics>,
    pub(crate) credentials: CredentialMetrics,
    /// The gateway's own approval questions (`approve/`).
    pub(crate) approval: crate::approval::metrics::ApprovalMetrics,
    /// Lifecycle state the admin listener and open streams share with the
    /// server across config generations: readiness, and the drain cut.
    pub ready: AtomicBool,
    pub(crate) drain: crate::model::DrainSignal,
}

impl Metrics {
    pub fn new() -> Result<Arc<Metrics>, prometheus::Error> {
        let registry = Described::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "portcullis_requests_total",
                "MCP requests handled, by upstream, method and outcome (ok or a refusal reason)",
            ),
            &["upstream", "method", "outcome"],
        )?;
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "portcullis_request_duration_seconds",
                "Time from request head to the end of the response, as the client sees it; stream=\"true\" for event streams (their lifetime), \"false\" for whole answers",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["upstream", "stream"],
        )?;
        let upstream_duration = HistogramVec::new(
            HistogramOpts::new(
                "portcullis_upstream_duration_seconds",
                "Time from sending a request upstream to its response head",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["upstream"],
        )?;
        let in_flight = IntGauge::new(
            "portcullis_in_flight_requests",
            "Requests being handled now",
        )?;
        let input_required = IntCounterVec::new(
            Opts::new(
                "portcullis_input_required_total",
                "Questions from upstreams (input_required results, 2025-11-25 pushed requests), by outcome (delivered or refused) and protocol generation",
            ),
            &["upstream", "outcome", "generation"],
        )?;
        let policy_verdicts = IntCounterVec::new(
            Opts::new(
                "portcullis_policy_verdicts_total",
                "Elicitation policy verdicts, by rule, action and protocol generation",
            ),
            &["upstream", "rule", "action", "generation"],
        )?;
        let listing_intents = IntCounterVec::new(
            Opts::new(
                "portcullis_listing_intents_total",
                "What the intent detector found in listed items and server descriptions, by intent and what was done (remove, flag, block, monitor)",
            ),
            &["upstream", "intent", "action"],
        )?;
        registry.register(Box::new(listing_intents.clone()))?;
        let jwks_fetch_failures = IntCounterVec::new(
            Opts::new(
                "portcullis_jwks_fetch_failures_total",
                "Failed fetches of a jwks_url key set (the scheme keeps its previous keys), by the scheme's configured issuer",
            ),
            &["issuer"],
        )?;
        registry.register(Box::new(jwks_fetch_failures.clone()))?;
        let connections =
            IntGauge::new("portcullis_open_connections", "Client connections open now")?;
        let build_info = IntGaugeVec::new(
            Opts::new("portcullis_build_info", "Build information; always 1"),
            &["version"],
        )?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(request_duration.clone()))?;
        registry.register(Box::new(upstream_duration.clone()))?;
        registry.register(Box::new(in_flight.clone()))?;
        registry.register(Box::new(input_required.clone()))?;
        registry.register(Box::new(policy_verdicts.clone()))?;
        registry.register(Box::new(connections.clone()))?;
        let state_refusals = IntCounterVec::new(
            Opts::new(
                "portcullis_request_state_refusals_total",
                "Retries refused for their requestState or answers, by upstream and reason",
            ),
            &["upstream", "reason"],
        )?;
        let operation_rounds = HistogramVec::new(
            HistogramOpts::new(
                "portcullis_operation_rounds",
                "Rounds of questions per completed MRTR operation",
            )
            .buckets(vec![1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 15.0, 20.0]),
            &["upstream"],
        )?;
        let rate_limited = IntCounterVec::new(
            Opts::new(
                "portcullis_rate_limited_total",
                "Requests refused by a rate limit, by upstream and scope",
            ),
            &["upstream", "scope"],
        )?;
        let listing_changes = IntCounterVec::new(
            Opts::new(
                "portcullis_listing_changes_total",
                "Listed definitions that differ from the one pinned for the item (rug pulls), once per new definition, by upstream, kind (tool, prompt, resource, resource_template) and action (removed, flagged, allowed, monitor, unpinned: the upstream's pins were full, unavailable: the store could not be asked)",
            ),
            &["upstream", "kind", "action"],
        )?;
        let upstream_errors = IntCounterVec::new(
            Opts::new(
                "portcullis_upstream_errors_total",
                "Failures talking to an upstream, by reason",
            ),
            &["upstream", "reason"],
        )?;
        let config_reloads = IntCounterVec::new(
            Opts::new(
                "portcullis_config_reloads_total",
                "Config reloads, by result",
            ),
            &["result"],
        )?;
        let last_reload_success = prometheus::Gauge::new(
            "portcullis_config_last_reload_success_timestamp_seconds",
            "Unix time of the last successful config load",
        )?;
        for r in ["success", "failure", "refused"] {
            let _ = config_reloads.with_label_values(&[r]);
        }
        registry.register(Box::new(state_refusals.clone()))?;
        registry.register(Box::new(operation_rounds.clone()))?;
        registry.register(Box::new(rate_limited.clone()))?;
        registry.register(Box::new(listing_changes.clone()))?;
        registry.register(Box::new(upstream_errors.clone()))?;
        registry.register(Box::new(config_reloads.clone()))?;
        registry.register(Box::new(last_reload_success.clone()))?;
        registry.register(Box::new(build_info))?;
        let panics = prometheus::IntCounter::new(
            "portcullis_panics_total",
            "Requests whose handling panicked (answered 500 internal_error; the gateway kept serving)",
        )?;
        registry.register(Box::new(panics.clone()))?;
        let reload_state = ReloadMetrics::new(&registry)?;
        let backends = BackendMetrics::new(&registry)?;
        let heavy = HeavyMetrics::new(&registry)?;
        let bridge = BridgeMetrics::new(&registry)?;
        let federation = FederationMetrics::new(&registry)?;
        let stdio = Arc::new(super::stdio::StdioMetrics::new(&registry)?);
        let credentials = CredentialMetrics::new(&registry)?;
        let approval = crate::approval::metrics::ApprovalMetrics::new()?;
        for collector in approval.collectors() {
            registry.register(collector)?;
        }
        // process_* (memory, CPU, open file descriptors), read from /proc.
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        Ok(Arc::new(Metrics {
            registry,
            requests,
            request_duration,
            upstream_duration,
            in_flight,
            input_required,
            policy_verdicts,
            listing_intents,
            connections,
            state_refusals,
            operation_rounds,
            rate_limited,
            listing_changes,
            upstream_errors,
            federation,
            config_reloads,
            last_reload_success,
            reload_state,
            panics,
            jwks_fetch_failures,
            backends,
            heavy,
            bridge,
            stdio,
            credentials,
            approval,
            ready: AtomicBool::new(false),
            drain: crate::model::DrainSignal::default(),
        }))
    }

    /// The metric handles of `upstream`, resolved now (which also makes its
    /// label set known at start, so dashboards show zeros, not gaps).
    pub(crate) fn upstream(&self, upstream: &str) -> Arc<UpstreamMetrics> {
        let duration = |stream: &str| self.request_duration.with_label_values(&[upstream, stream]);
        Arc::new(UpstreamMetrics {
            label: Arc::from(upstream),
            request_duration: [duration("false"), duration("true")],
            upstream_duration: self.upstream_duration.with_label_values(&[upstream]),
            ok_by_method: (0..=McpMethod::KNOWN.len())
                .map(|_| OnceLock::new())
                .collect(),
        })
    }

    pub(crate) fn state_refused(&self, upstream: &str, reason: Reason) {
        self.state_refusals
            .with_label_values(&[upstream, reason.as_str()])
            .inc();
    }

    pub(crate) fn operation_completed(&self, upstream: &str, rounds: u32) {
        self.operation_rounds
            .with_label_values(&[upstream])
            .observe(f64::from(rounds));
    }

    pub(crate) fn rate_limited(&self, upstream: &str, scope: &'static str) {
        self.rate_limited
            .with_label_values(&[upstream, scope])
            .inc();
    }

    /// A listed item's definition differs from its pin (`kind`: the
    /// item's kind, never its name; `action`: what the gateway did).
    pub fn listing_changed(&self, upstream: &str, kind: &'static str, action: &'static str) {
        self.listing_changes
            .with_label_values(&[upstream, kind, action])
            .inc();
    }

    pub(crate) fn upstream_error(&self, upstream: &str, reason: Reason) {
        self.upstream_errors
            .with_label_values(&[upstream, reason.as_str()])
            .inc();
    }

    /// One upstream's part of a federated route's merged answer, counted in
    /// `portcullis_requests_total` under that upstream (`outcome`: `ok` or
    /// the refusal reason that left it out).
    pub(crate) fn federated_part(&self, upstream: &str, method: McpMethod, outcome: &str) {
        self.requests
            .with_label_values(&[upstream, method.as_str(), outcome])
            .inc();
    }

    /// Count a config load; `success` also stamps the time. A failure
    /// leaves the running config stale until the next good load.
    pub fn config_loaded(&self, success: bool) {
        let result = if success { "success" } else { "failure" };
        self.config_reloads.with_label_values(&[result]).inc();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        if success {
            self.last_reload_success.set(now);
        } else {
            self.reload_state.last_failure.set(now);
        }
        self.reload_state.stale.set(i64::from(!success));
    }

    /// A security control a reload found weakened (`upstream`: the
    /// configured id, empty for the gateway's own; `control`: a config path).
    pub fn config_weakened(&self, upstream: &str, control: &str) {
        self.reload_state
            .weakened
            .with_label_values(&[upstream, control])
            .inc();
    }

    /// A reload refused for weakening controls (`[reload] on_weakened =
    /// "refuse"`): the running config stays, and is not the file's.
    pub fn config_refused(&self) {
        self.config_reloads.with_label_values(&["refused"]).inc();
        self.reload_state.stale.set(1);
    }

    /// A reload whose config differs from the running process in settings
    /// that need a restart (`changed` empty: it no longer does).
    pub fn config_restart_required(&self, changed: bool) {
        if changed {
            self.reload_state.restart_required_total.inc();
        }
        self.reload_state.restart_required.set(i64::from(changed));
    }

    /// Count one inspected `input_required` result and its verdicts. Rule and
    /// action names come from the gateway's fixed sets.
    pub(crate) fn record_input_required(
        &self,
        upstream: &str,
        generation: Generation,
        delivered: bool,
        verdicts: &[Verdict],
    ) {
        let outcome = if delivered { "delivered" } else { "refused" };
        let generation = generation.as_str();
        self.input_required
            .with_label_values(&[upstream, outcome, generation])
            .inc();
        for v in verdicts {
            self.policy_verdicts
                .with_label_values(&[upstream, v.rule.as_str(), v.action.as_str(), generation])
                .inc();
        }
    }

    /// The text rules' findings on what is not a question (a notification's
    /// text, a server's instructions, a list's items) and the intents found
    /// in what a server lists.
    pub(crate) fn record_text_verdicts(
        &self,
        upstream: &str,
        generation: Generation,
        report: &Report,
    ) {
        let generation = generation.as_str();
        for v in report.verdicts.iter().filter(|v| v.action != Action::Pass) {
            self.policy_verdicts
                .with_label_values(&[upstream, v.rule.as_str(), v.action.as_str(), generation])
                .inc();
        }
        for (intent, action) in &report.intents {
            self.listing_intents
                .with_label_values(&[upstream, intent.as_str(), action.as_str()])
                .inc();
        }
    }

    pub(crate) fn panicked(&self) {
        self.panics.inc();
    }

    /// Where the backends (the Redis users, the audit sink) report their
    /// failures: counted here.
    pub(crate) fn health(self: &Arc<Self>) -> HealthReport {
        let me = Arc::downgrade(self);
        HealthReport::new(move |h| {
            if let Some(m) = me.upgrade() {
                m.backends.count(h);
            }
        })
    }

    /// A decision taken without the shared store.
    pub(crate) fn store_fell_back(&self, user: StoreUser, fallback: Fallback) {
        self.backends.count(Health::StoreFellBack(user, fallback));
    }

    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8192);
        let _ = TextEncoder::new().encode(&self.registry.registry().gather(), &mut out);
        out
    }

    /// What counts the failed JWKS fetches of a configured issuer.
    pub fn jwks_fetch_failed(&self, issuer: &str) -> crate::identify::FetchFailed {
        let counter = self.jwks_fetch_failures.with_label_values(&[issuer]);
        std::sync::Arc::new(move || counter.inc())
    }

    /// Every family this registry exports, sorted by name.
    pub fn families(&self) -> Vec<Family> {
        let mut all = self.registry.families();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

/// Whether the running config is the file's: a failed reload leaves it
/// stale; a change to a listener or connection setting waits for a restart.
struct ReloadMetrics {
    stale: IntGauge,
    last_failure: prometheus::Gauge,
    restart_required: IntGauge,
    restart_required_total: prometheus::IntCounter,
    weakened: IntCounterVec,
}

impl ReloadMetrics {
    fn new(registry: &Described) -> Result<ReloadMetrics, prometheus::Error> {
        let m = ReloadMetrics {
            stale: IntGauge::new(
                "portcullis_config_stale",
                "1 after a failed config reload until the next successful one (the running config is not the file's)",
            )?,
            last_failure: prometheus::Gauge::new(
                "portcullis_config_last_reload_failure_timestamp_seconds",
                "Unix time of the last failed config reload (0: none since start)",
            )?,
            restart_required: IntGauge::new(
                "portcullis_config_restart_required",
                "1 when the loaded config changes listener, TLS, connection-limit, drain or log settings, which take effect only at the next restart",
            )?,
            restart_required_total: prometheus::IntCounter::new(
                "portcullis_config_restart_required_total",
                "Reloads that changed settings which need a restart",
            )?,
            weakened: IntCounterVec::new(
                Opts::new(
                    "portcullis_config_weakened_total",
                    "Security controls a reload found weakened, by upstream and config path (applied or refused)",
                ),
                &["upstream", "control"],
            )?,
        };
        registry.register(Box::new(m.stale.clone()))?;
        registry.register(Box::new(m.last_failure.clone()))?;
        registry.register(Box::new(m.restart_required.clone()))?;
        registry.register(Box::new(m.restart_required_total.clone()))?;
        registry.register(Box::new(m.weakened.clone()))?;
        Ok(m)
    }
}

/// The metric handles of one upstream, resolved once per config load: a
/// `with_label_values` look-up hashes every label value and takes a lock,
/// three times per request otherwise. `requests_total` with outcome `ok` is
/// resolved per method on first use; other outcomes are rare and looked up.
pub(crate) struct UpstreamMetrics {
    /// The `upstream` label (the configured id).
    pub(crate) label: Arc<str>,
    /// Indexed by "is an event stream" (the `stream` label).
    request_duration: [Histogram; 2],
    upstream_duration: Histogram,
    /// Indexed by `McpMethod as usize` (`Other` last).
    ok_by_method: Vec<OnceLock<IntCounter>>,
}

impl UpstreamMetrics {
    pub(crate) fn observe_upstream(&self, started: Instant) {
        self.upstream_duration
            .observe(started.elapsed().as_secs_f64());
    }
}

/// How a request ended, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Refused(Reason),
    /// The client went away before the response was complete.
    ClientCancelled,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused(r) => r.as_str(),
            Outcome::ClientCancelled => "client_cancelled",
        }
    }
}

/// Counts one request from its start until its response body is finished or
/// dropped; lives inside the response body so a stream is timed to its end.
pub(crate) struct RequestRecord {
    metrics: Arc<Metrics>,
    started: Instant,
    upstream: Option<Arc<UpstreamMetrics>>,
    method: Option<McpMethod>,
    outcome: Outcome,
    finished: bool,
    /// The response is an event stream: its duration is the stream's life.
    streamed: bool,
    /// When the deadline layer gives up on the response head: a record
    /// dropped unanswered after it was cut by the deadline, not by the client.
    deadline: Option<Instant>,
    /// The access log line's own fields, when `[log] access` is on.
    access: Option<Box<AccessLine>>,
    /// The request's span, held until the response ends (empty when off).
    trace: RequestTrace,
}

/// What the access log line says beyond the metric labels: names and
/// numbers only (the tool, prompt or resource name, never an argument or a
/// form value).
struct AccessLine {
    request_id: Arc<str>,
    status: u16,
    target: Option<String>,
}

/// The longest target name the access log writes (names, not payloads).
const MAX_LOGGED_TARGET_CHARS: usize = 128;

impl RequestRecord {
    pub(crate) fn start(metrics: Arc<Metrics>, started: Instant) -> Self {
        metrics.in_flight.inc();
        RequestRecord {
            metrics,
            started,
            upstream: None,
            method: None,
            outcome: Outcome::Ok,
            finished: false,
            streamed: false,
            deadline: None,
            access: None,
            trace: RequestTrace::off(),
        }
    }

    /// Keep the request's span open until the response ends.
    pub(crate) fn set_trace(&mut self, trace: RequestTrace) {
        self.trace = trace;
    }

    /// Write one access log line (target `portcullis::access`) when the
    /// request ends.
    pub(crate) fn log_access(&mut self, request_id: Arc<str>) {
        self.access = Some(Box::new(AccessLine {
            request_id,
            status: 0,
            target: None,
        }));
    }

    /// The HTTP status of the response head.
    pub(crate) fn set_status(&mut self, status: http::StatusCode) {
        if let Some(a) = self.access.as_mut() {
            a.status = status.as_u16();
        }
    }

    /// The tool, prompt or resource the request names (access log only).
    pub(crate) fn set_target(&mut self, target: Option<&str>) {
        if let Some(a) = self.access.as_mut() {
            a.target = target.map(|t| t.chars().take(MAX_LOGGED_TARGET_CHARS).collect());
        }
    }

    /// The deadline for the response head (see [`crate::model::Deadline`]).
    pub(crate) fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    pub(crate) fn set_upstream(&mut self, upstream: Arc<UpstreamMetrics>) {
        self.upstream = Some(upstream);
    }

    pub(crate) fn upstream_label(&self) -> Option<Arc<str>> {
        self.upstream.as_ref().map(|u| u.label.clone())
    }

    pub(crate) fn set_method(&mut self, method: McpMethod) {
        self.method = Some(method);
    }

    pub(crate) fn set_outcome(&mut self, outcome: Outcome) {
        self.outcome = outcome;
    }

    /// The response is an event stream (timed apart from whole answers).
    pub(crate) fn set_streamed(&mut self) {
        self.streamed = true;
    }

    /// The response went out whole.
    pub(crate) fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for RequestRecord {
    fn drop(&mut self) {
        self.trace.phase(Phase::Record);
        self.metrics.in_flight.dec();
        let cut_by_deadline = self.deadline.is_some_and(|d| Instant::now() >= d);
        let outcome = if self.finished || self.outcome != Outcome::Ok {
            self.outcome
        } else if cut_by_deadline {
            Outcome::Refused(Reason::GatewayTimeout)
        } else {
            Outcome::ClientCancelled
        };
        self.count(outcome);
        let elapsed = self.started.elapsed();
        let streamed = usize::from(self.streamed);
        match &self.upstream {
            Some(up) => up.request_duration[streamed].observe(elapsed.as_secs_f64()),
            None => self
                .metrics
                .request_duration
                .with_label_values(&["none", ["false", "true"][streamed]])
                .observe(elapsed.as_secs_f64()),
        }
        if let Some(a) = &self.access {
            tracing::info!(
                target: "portcullis::access",
                request_id = %a.request_id,
                method = self.method.map_or("none", McpMethod::as_str),
                target = a.target.as_deref().unwrap_or(""),
                upstream = self.upstream.as_ref().map_or("none", |u| &*u.label),
                status = a.status,
                reason = outcome.label(),
                stream = self.streamed,
                duration_ms = elapsed.as_secs_f64() * 1000.0,
                "request"
            );
        }
    }
}

impl RequestRecord {
    /// `requests_total`, through the upstream's resolved handle when there is one.
    fn count(&self, outcome: Outcome) {
        if let Outcome::Refused(reason) = outcome {
            if let Some(store) = unavailable_store(reason) {
                self.metrics.store_fell_back(store, Fallback::Refused);
            }
        }
        let method = self.method.map_or("none", McpMethod::as_str);
        let Some(up) = &self.upstream else {
            let labels = ["none", method, outcome.label()];
            return self.metrics.requests.with_label_values(&labels).inc();
        };
        match (outcome, self.method) {
            (Outcome::Ok, Some(m)) => up.ok_by_method[m as usize]
                .get_or_init(|| {
                    let labels = [&*up.label, method, "ok"];
                    self.metrics.requests.with_label_values(&labels)
                })
                .inc(),
            _ => {
                let labels = [&*up.label, method, outcome.label()];
                self.metrics.requests.with_label_values(&labels).inc()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn count(m: &Metrics, outcome: &str) -> u64 {
        m.requests
            .with_label_values(&["up", "tools/call", outcome])
            .get()
    }

    /// Found by the hostile-upstream suite: a request the deadline layer cut
    /// was counted as `client_cancelled`.
    #[test]
    fn a_record_cut_after_its_deadline_counts_gateway_timeout() {
        let m = Metrics::new().unwrap();
        let start = |deadline: Option<Instant>| {
            let mut r = RequestRecord::start(m.clone(), Instant::now());
            r.set_upstream(m.upstream("up"));
            r.set_method(McpMethod::ToolsCall);
            r.set_deadline(deadline);
            r
        };
        drop(start(Some(Instant::now() - Duration::from_millis(1))));
        assert_eq!(count(&m, "gateway_timeout"), 1);
        drop(start(Some(Instant::now() + Duration::from_secs(60))));
        drop(start(None));
        assert_eq!(count(&m, "client_cancelled"), 2);
        assert_eq!(count(&m, "gateway_timeout"), 1);
    }
}
