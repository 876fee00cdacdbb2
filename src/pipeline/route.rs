//! Phase: route. The request path picks one configured route: its upstream
//! (with the pooled client that reaches it), its auth schemes and its
//! permissions. The table is built once per config.

use std::collections::HashMap;
use std::sync::Arc;

use super::forward::UpstreamClient;
use crate::config::{GatewayConfig, RouteConfig};

/// An upstream and its connection pool, shared by every path routed to it.
pub struct RoutedUpstream {
    pub client: UpstreamClient,
    pub label: Arc<str>,
}

/// What a path resolves to.
pub struct Routed {
    pub upstream: Arc<RoutedUpstream>,
    pub route: Arc<RouteConfig>,
}

pub struct RouteTable {
    by_path: HashMap<String, Routed>,
}

impl RouteTable {
    pub fn new(config: &GatewayConfig) -> Result<Self, rustls::Error> {
        let mut by_id: HashMap<&str, Arc<RoutedUpstream>> = HashMap::new();
        for up in &config.upstreams {
            let routed = RoutedUpstream {
                client: UpstreamClient::new(up.clone())?,
                label: Arc::from(up.id.as_str()),
            };
            by_id.insert(up.id.as_str(), Arc::new(routed));
        }
        let by_path = config
            .routes
            .iter()
            .filter_map(|(path, route)| {
                by_id.get(route.upstream.id.as_str()).map(|u| {
                    (
                        path.clone(),
                        Routed {
                            upstream: u.clone(),
                            route: route.clone(),
                        },
                    )
                })
            })
            .collect();
        Ok(RouteTable { by_path })
    }

    /// Exact path match; a trailing slash is the same endpoint.
    pub fn select(&self, path: &str) -> Option<&Routed> {
        self.by_path
            .get(path)
            .or_else(|| path.strip_suffix('/').and_then(|p| self.by_path.get(p)))
    }
}
