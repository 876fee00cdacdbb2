//! What outlives a config generation. A reload swaps settings, not live
//! things: every connection, store and background task whose settings did
//! not change is handed from the running generation to the next one, and
//! only what changed is built anew. This module is the one place that
//! decides which is which.
//!
//! | live thing | kept while unchanged |
//! |---|---|
//! | upstream connection pools | each upstream's [`ConnectionSettings`](super::forward::ConnectionSettings) |
//! | JWKS key sets and their refresh | the scheme's name, `jwks_url`, `jwks_refresh`, algorithms |
//! | rate limiter (its counters) | `[rate_limits]` |
//! | rate limiter's Redis connection | `redis_url`, `redis_timeout`, `redis_failure`, `key_prefix` |
//! | single-use store (memory or Redis) | `state.single_use_backend`, `state.redis_url` |
//! | pinned listings (memory or Redis), the definitions delivered | their backend |
//! | what upstreams delivered to each caller (fingerprints) | the single-use store |
//! | remembered approvals | the single-use store |
//! | the bridged calls held here | always |
//! | the relay between replicas (its subscription) | `state.redis_url` |
//! | calls waiting for an approver on the approval page | always (this process's) |
//! | audit sink | `[audit]` |
//! | metrics registry, clock | always (the process's own) |
//!
//! The trace exporter is fixed at start (`tracing` is a restart-only
//! setting) and is not part of a generation.

use std::sync::Arc;

use super::bridge::{relayed, BridgeCalls};
use super::forward::Pools;
use super::record::Metrics;
use super::relay::Relay;
use super::Gateway;
use crate::approval::memory::{DecisionMemory, LOCAL_CAPACITY};
use crate::audit::AuditSink;
use crate::config::GatewayConfig;
use crate::listings::{ListingBackend, ListingStore};
use crate::model::SharedClock;
use crate::mrtr::flows::{FlowStore, DEFAULT_TTL};
use crate::mrtr::replay::ReplayStore;
use crate::mrtr::settings::ReplayBackend;
use crate::throttle::Throttle;

/// The live things a generation is built with.
pub struct Carried {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) replay: Arc<ReplayStore>,
    pub(crate) listings: Arc<ListingStore>,
    pub(crate) audit: AuditSink,
    pub(crate) clock: SharedClock,
    pub(crate) throttle: Throttle,
    /// The previous generation's upstream pools, by their settings.
    pub(crate) pools: Pools,
    /// The bridged calls waiting for a client's answers.
    pub(crate) bridge: Arc<BridgeCalls>,
    /// What upstreams delivered to each caller (kept with its single-use store).
    pub(crate) flows: Arc<FlowStore>,
    /// The approvals remembered (kept with its single-use store).
    pub(crate) approvals: Arc<DecisionMemory>,
    /// The relay between replicas (kept while its Redis is the same).
    pub(crate) relay: Option<Arc<Relay>>,
    /// The calls waiting for an approver on the approval page.
    pub(crate) pending: Arc<super::approve::PendingApprovals>,
}

impl Carried {
    /// The first generation's: everything built from `config`. Opens the
    /// audit file (blocking): call it off the runtime's workers or at start.
    pub fn first(config: &GatewayConfig, metrics: Arc<Metrics>, clock: SharedClock) -> Carried {
        let audit = open_audit(config);
        let replay = Arc::new(ReplayStore::new(&config.state.replay));
        let bridge: Arc<BridgeCalls> = Default::default();
        let pending: Arc<super::approve::PendingApprovals> = Default::default();
        pending.name_ids_with(&bridge.instance);
        let relay = relay(config, &bridge, &pending, None);
        pending.share_through(relay.as_ref());
        Carried {
            relay,
            metrics,
            approvals: approvals(config, &replay, &clock),
            flows: Arc::new(FlowStore::new(replay.clone(), DEFAULT_TTL)),
            replay,
            listings: Arc::new(ListingStore::new(&ListingBackend::of(config))),
            audit,
            clock,
            throttle: Throttle::new(&config.throttle),
            pools: Pools::new(),
            bridge,
            pending,
        }
    }

    /// What the generation for `config` keeps from `old`: each live thing
    /// whose settings are unchanged; a new one for the rest. The JWKS key
    /// sets move into `config`'s auth schemes (see
    /// [`AuthSchemes::keep_keys`](crate::identify::AuthSchemes::keep_keys)).
    /// May open an audit file (blocking): call it off the runtime's workers.
    pub fn from_previous(old: &Gateway, config: &mut GatewayConfig) -> Carried {
        match Arc::get_mut(&mut config.auth) {
            Some(auth) => auth.keep_keys(&old.config.auth),
            // Only a config nobody else has seen yet can take the keys.
            None => tracing::warn!("JWKS key sets not carried over: the new config is shared"),
        }
        let (replay, approvals) = if old.replay_store().serves(&config.state.replay) {
            (old.replay_store().clone(), old.approvals.clone())
        } else {
            let replay = Arc::new(ReplayStore::new(&config.state.replay));
            let approvals = approvals(config, &replay, &old.clock);
            (replay, approvals)
        };
        let flows = if old.flows.serves(&replay) {
            old.flows.clone()
        } else {
            Arc::new(FlowStore::new(replay.clone(), DEFAULT_TTL))
        };
        // The pins outlive a reload (in memory too) unless the Redis changed.
        let backend = ListingBackend::of(config);
        let listings = if old.listings.serves(&backend) {
            old.listings.clone()
        } else {
            Arc::new(ListingStore::new(&backend))
        };
        let audit = if old.audit.settings() == &config.audit {
            old.audit.clone()
        } else {
            open_audit(config)
        };
        // New limits start new counters, on the same Redis connection.
        let throttle = if old.config.throttle == config.throttle {
            old.throttle.clone()
        } else {
            Throttle::keeping(&config.throttle, &old.throttle, &old.config.throttle)
        };
        let relay = relay(config, &old.bridge, &old.pending, old.relay.as_ref());
        old.pending.share_through(relay.as_ref());
        Carried {
            metrics: old.metrics.clone(),
            flows,
            replay,
            listings,
            audit,
            clock: old.clock.clone(),
            throttle,
            pools: old.routes.pools().clone(),
            bridge: old.bridge.clone(),
            relay,
            pending: old.pending.clone(),
            approvals,
        }
    }
}

/// The memory of approvals: shared through the single-use store when that
/// is Redis (replicas remember together), else this instance's, bounded.
pub(super) fn approvals(
    config: &GatewayConfig,
    replay: &Arc<ReplayStore>,
    clock: &SharedClock,
) -> Arc<DecisionMemory> {
    Arc::new(match config.state.replay {
        ReplayBackend::Local => DecisionMemory::local(LOCAL_CAPACITY, clock.clone()),
        _ => DecisionMemory::shared(replay.clone()),
    })
}

/// The relay of `config`'s shared store (none when it is this instance's
/// memory): `old` when it serves the same Redis.
fn relay(
    config: &GatewayConfig,
    bridge: &Arc<BridgeCalls>,
    pending: &Arc<super::approve::PendingApprovals>,
    old: Option<&Arc<Relay>>,
) -> Option<Arc<Relay>> {
    let ReplayBackend::Redis(url) = &config.state.replay else {
        return None;
    };
    match old {
        Some(old) if old.serves(url) => Some(old.clone()),
        _ => {
            let holder = super::approve::holder(relayed::holder(bridge), pending);
            Some(Relay::new(url, &bridge.instance, holder))
        }
    }
}

/// The audit sink of `config`, started (opens its file: blocking; starts
/// `[audit.otlp]`'s export). One that cannot open says so and counts its
/// events as dropped until it does.
fn open_audit(config: &GatewayConfig) -> AuditSink {
    let sink = AuditSink::from_settings(config.audit.clone());
    if let Err(e) = sink.start() {
        tracing::error!("audit trail: {e}; events are counted as dropped until it opens");
    }
    crate::telemetry::Telemetry::export_audit(&sink);
    sink
}
