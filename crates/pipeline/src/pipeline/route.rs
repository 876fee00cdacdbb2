//! Phase: route. The request path picks one configured endpoint: a route to
//! one upstream (with the pooled client that reaches it), or a federated
//! route over several, each of them a route of its own that carries the
//! federated route's auth schemes and permissions. The table is built once
//! per config; it keeps the previous table's connection pools whose
//! settings did not change.

use std::collections::HashMap;
use std::sync::Arc;

use super::forward::{ConnectionSettings, Pools, UpstreamClient};
use super::heavy::HeavyLane;
use super::record::{Metrics, UpstreamMetrics};
use super::speaks::Speaks;
use crate::config::{FederationSettings, GatewayConfig, RouteConfig, UpstreamRoute};
use crate::model::{split, TargetKind};

/// An upstream and its connection pool, shared by every path routed to it.
pub struct RoutedUpstream {
    pub settings: Arc<UpstreamRoute>,
    pub(crate) client: UpstreamClient,
    /// The `upstream` label of metrics (the configured id).
    pub(crate) label: Arc<str>,
    /// Its metric handles, resolved once.
    pub(crate) metrics: Arc<UpstreamMetrics>,
    /// Its share of the inspection of large messages.
    pub(crate) heavy: Arc<HeavyLane>,
    /// Which protocol generations it speaks (configured, or discovered).
    pub(crate) speaks: Speaks,
}

/// A path to one upstream; in a federated route, one of its upstreams.
pub struct Route {
    pub upstream: Arc<RoutedUpstream>,
    pub config: Arc<RouteConfig>,
    /// Set when this is an upstream of a federated route.
    pub(crate) member: Option<Member>,
}

/// An upstream's place in a federated route.
pub(crate) struct Member {
    /// What its tool and prompt names and resource URIs start with.
    pub(crate) prefix: Arc<str>,
    /// The federated route's path (what its sessions are bound to).
    pub(crate) path: Arc<str>,
}

impl Route {
    /// The upstream's configured display name.
    pub(crate) fn name(&self) -> &str {
        &self.upstream.settings.name
    }

    /// The prefix its names are exposed under (federated routes only).
    pub fn prefix(&self) -> Option<&str> {
        self.member.as_ref().map(|m| &*m.prefix)
    }
}

/// One path answering as one server over several upstreams.
pub(crate) struct Federated {
    pub(crate) path: Arc<str>,
    pub(crate) config: Arc<RouteConfig>,
    pub(crate) settings: FederationSettings,
    /// Each upstream's route, in the configured order.
    pub(crate) members: Vec<Arc<Route>>,
    /// The metrics of the requests answered from every upstream (labelled
    /// with the route's name).
    pub(crate) metrics: Arc<UpstreamMetrics>,
}

impl Federated {
    /// The upstream whose names start with `prefix`.
    pub(crate) fn by_prefix(&self, prefix: &str) -> Option<&Arc<Route>> {
        self.members.iter().find(|m| m.prefix() == Some(prefix))
    }

    /// The upstream an exposed name of `kind` belongs to, and the name as
    /// that upstream wrote it: the one whose prefix starts it, else the one
    /// with an empty prefix (which exposes its names as they are).
    pub(crate) fn owner<'a>(
        &self,
        kind: TargetKind,
        exposed: &'a str,
    ) -> Option<(&Arc<Route>, &'a str)> {
        let prefixed = split(kind, exposed)
            .filter(|(prefix, _)| !prefix.is_empty())
            .and_then(|(prefix, own)| Some((self.by_prefix(prefix)?, own)));
        prefixed.or_else(|| Some((self.by_prefix("")?, exposed)))
    }

    /// The upstream with the configured `id`.
    pub(crate) fn by_id(&self, id: &str) -> Option<&Arc<Route>> {
        self.members.iter().find(|m| m.upstream.settings.id == id)
    }

    /// The prefixes, quoted, for messages that list them.
    pub(crate) fn prefixes(&self) -> String {
        let quoted: Vec<String> = self
            .members
            .iter()
            .filter_map(|m| m.prefix().filter(|p| !p.is_empty()))
            .map(|p| format!("\"{p}\""))
            .collect();
        quoted.join(", ")
    }
}

/// What a path leads to.
pub(crate) enum Endpoint {
    One(Arc<Route>),
    Federated(Arc<Federated>),
}

impl Endpoint {
    /// The route whose settings the request's head and credentials are
    /// checked against (a federated route's upstreams share them).
    pub(crate) fn front(&self) -> &Arc<Route> {
        match self {
            Endpoint::One(route) => route,
            // A federated route has at least one upstream (config check).
            Endpoint::Federated(f) => &f.members[0],
        }
    }

    /// The route a request for the upstream `id` takes on this endpoint.
    pub(crate) fn member(&self, id: &str) -> Option<&Arc<Route>> {
        match self {
            Endpoint::One(route) => (route.upstream.settings.id == id).then_some(route),
            Endpoint::Federated(f) => f.by_id(id),
        }
    }
}

pub struct RouteTable {
    by_path: HashMap<String, Endpoint>,
    /// Where each OAuth protected resource's metadata is served: its
    /// well-known path, to the route's path.
    metadata: HashMap<String, String>,
    /// Every upstream's pool, by the settings it was built from.
    pools: Pools,
}

impl RouteTable {
    /// The table for `config`; an upstream whose connection settings match
    /// one of `previous` keeps that pool (and its open connections).
    pub(crate) fn new(
        config: &GatewayConfig,
        metrics: &Metrics,
        previous: &Pools,
    ) -> Result<Self, rustls::Error> {
        let mut pools = Pools::new();
        let mut by_id: HashMap<&str, Arc<RoutedUpstream>> = HashMap::new();
        let metrics_all = metrics;
        for up in &config.upstreams {
            let heavy = HeavyLane::new(config.limits.inspection, &metrics.heavy, &up.id);
            let metrics = metrics.upstream(&up.id);
            // Two upstreams built alike share one pool, as across a reload.
            let kept = if pools.contains_key(&ConnectionSettings::of(up)) {
                &pools
            } else {
                previous
            };
            let client = UpstreamClient::keeping(
                up.clone(),
                kept,
                &metrics_all.stdio,
                config.limits.max_response_body_bytes,
                config.runtime.pool_slots(),
            )?;
            let pool = client.pool().clone();
            pools.insert(pool.settings().clone(), pool.clone());
            let routed = RoutedUpstream {
                settings: up.clone(),
                client,
                label: metrics.label.clone(),
                metrics,
                heavy: Arc::new(heavy),
                speaks: Speaks::new(
                    up.generations.clone(),
                    pool.stdio().map(|s| s.face_generation()),
                ),
            };
            by_id.insert(up.id.as_str(), Arc::new(routed));
        }
        let by_path = config
            .routes
            .iter()
            .filter_map(|(path, route)| {
                endpoint(path, route, &by_id, metrics).map(|e| (path.clone(), e))
            })
            .collect();
        let mut metadata = HashMap::new();
        for (path, route) in &config.routes {
            let Some(protected) = &route.protected else {
                continue;
            };
            for at in protected.metadata_paths(path) {
                metadata.entry(at).or_insert_with(|| path.clone());
            }
        }
        // One protected route: its metadata also at the bare well-known
        // path, where clients that do not insert the path look first.
        if let [only] = config
            .routes
            .iter()
            .filter(|(_, r)| r.protected.is_some())
            .collect::<Vec<_>>()[..]
        {
            metadata
                .entry(crate::config::METADATA_PATH.to_owned())
                .or_insert_with(|| only.0.clone());
        }
        Ok(RouteTable {
            by_path,
            metadata,
            pools,
        })
    }

    /// The pools this table's upstreams use (what the next one may keep).
    pub(crate) fn pools(&self) -> &Pools {
        &self.pools
    }

    /// Stop every stdio program (SIGTERM, SIGKILL after its stop
    /// timeout) and wait until they have exited.
    pub async fn stop_programs(&self) {
        let programs: Vec<_> = self
            .pools
            .values()
            .filter_map(|p| p.stdio().cloned())
            .collect();
        for p in &programs {
            p.stop_all();
        }
        for p in &programs {
            p.stopped().await;
        }
    }

    /// The protected route whose metadata is served at `path` (a trailing
    /// slash is the same), with the route's path.
    pub(crate) fn protected_at(&self, path: &str) -> Option<(&str, &Endpoint)> {
        let route = self
            .metadata
            .get(path)
            .or_else(|| path.strip_suffix('/').and_then(|p| self.metadata.get(p)))?;
        Some((route.as_str(), self.by_path.get(route)?))
    }

    /// Exact path match; a trailing slash is the same endpoint.
    pub(crate) fn select(&self, path: &str) -> Option<&Endpoint> {
        self.by_path
            .get(path)
            .or_else(|| path.strip_suffix('/').and_then(|p| self.by_path.get(p)))
    }
}

fn endpoint(
    path: &str,
    config: &Arc<RouteConfig>,
    by_id: &HashMap<&str, Arc<RoutedUpstream>>,
    metrics: &Metrics,
) -> Option<Endpoint> {
    let Some(settings) = &config.federation else {
        let upstream = by_id.get(config.upstreams.first()?.id.as_str())?.clone();
        return Some(Endpoint::One(Arc::new(Route {
            upstream,
            config: config.clone(),
            member: None,
        })));
    };
    let path: Arc<str> = Arc::from(path);
    let members = config
        .upstreams
        .iter()
        .map(|up| {
            let upstream = by_id.get(up.id.as_str())?.clone();
            Some(Arc::new(Route {
                upstream,
                config: config.clone(),
                member: Some(Member {
                    prefix: Arc::from(up.prefix.as_str()),
                    path: path.clone(),
                }),
            }))
        })
        .collect::<Option<Vec<_>>>()?;
    if members.is_empty() {
        return None;
    }
    Some(Endpoint::Federated(Arc::new(Federated {
        path,
        config: config.clone(),
        settings: settings.clone(),
        members,
        metrics: metrics.upstream(&settings.name),
    })))
}
