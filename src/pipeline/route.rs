//! Phase: route. The request path picks one configured route: its upstream
//! (with the pooled client that reaches it), its auth schemes and its
//! permissions. The table is built once per config; it keeps the previous
//! table's connection pools whose settings did not change.

use std::collections::HashMap;
use std::sync::Arc;

use super::forward::{ConnectionSettings, Pools, UpstreamClient};
use super::heavy::HeavyLane;
use super::record::{Metrics, UpstreamMetrics};
use crate::config::{GatewayConfig, RouteConfig, UpstreamRoute};

/// An upstream and its connection pool, shared by every path routed to it.
pub struct RoutedUpstream {
    pub settings: Arc<UpstreamRoute>,
    pub client: UpstreamClient,
    /// The `upstream` label of metrics (the configured id).
    pub label: Arc<str>,
    /// Its metric handles, resolved once.
    pub metrics: Arc<UpstreamMetrics>,
    /// Its share of the inspection of large messages.
    pub heavy: Arc<HeavyLane>,
}

/// What a path resolves to.
pub struct Route {
    pub upstream: Arc<RoutedUpstream>,
    pub config: Arc<RouteConfig>,
}

impl Route {
    /// The upstream's configured display name.
    pub fn name(&self) -> &str {
        &self.upstream.settings.name
    }
}

pub struct RouteTable {
    by_path: HashMap<String, Arc<Route>>,
    /// Every upstream's pool, by the settings it was built from.
    pools: Pools,
}

impl RouteTable {
    /// The table for `config`; an upstream whose connection settings match
    /// one of `previous` keeps that pool (and its open connections).
    pub fn new(
        config: &GatewayConfig,
        metrics: &Metrics,
        previous: &Pools,
    ) -> Result<Self, rustls::Error> {
        let mut pools = Pools::new();
        let mut by_id: HashMap<&str, Arc<RoutedUpstream>> = HashMap::new();
        for up in &config.upstreams {
            let heavy = HeavyLane::new(config.limits.inspection, &metrics.heavy, &up.id);
            let metrics = metrics.upstream(&up.id);
            // Two upstreams built alike share one pool, as across a reload.
            let kept = if pools.contains_key(&ConnectionSettings::of(up)) {
                &pools
            } else {
                previous
            };
            let client = UpstreamClient::keeping(up.clone(), kept)?;
            let pool = client.pool();
            pools.insert(pool.settings().clone(), pool.clone());
            let routed = RoutedUpstream {
                settings: up.clone(),
                client,
                label: metrics.label.clone(),
                metrics,
                heavy: Arc::new(heavy),
            };
            by_id.insert(up.id.as_str(), Arc::new(routed));
        }
        let by_path = config
            .routes
            .iter()
            .filter_map(|(path, route)| {
                by_id.get(route.upstream.id.as_str()).map(|u| {
                    let route = Route {
                        upstream: u.clone(),
                        config: route.clone(),
                    };
                    (path.clone(), Arc::new(route))
                })
            })
            .collect();
        Ok(RouteTable { by_path, pools })
    }

    /// The pools this table's upstreams use (what the next one may keep).
    pub fn pools(&self) -> &Pools {
        &self.pools
    }

    /// Exact path match; a trailing slash is the same endpoint.
    pub fn select(&self, path: &str) -> Option<&Arc<Route>> {
        self.by_path
            .get(path)
            .or_else(|| path.strip_suffix('/').and_then(|p| self.by_path.get(p)))
    }
}
