//! Phase: route. The request path picks one configured upstream; the table is
//! built once per config with the pooled client of each upstream.

use std::collections::HashMap;
use std::sync::Arc;

use super::forward::UpstreamClient;
use crate::config::GatewayConfig;

/// A routed upstream: its client and its metric label.
pub struct RoutedUpstream {
    pub client: UpstreamClient,
    pub label: Arc<str>,
}

pub struct RouteTable {
    by_path: HashMap<String, Arc<RoutedUpstream>>,
}

impl RouteTable {
    pub fn new(config: &GatewayConfig) -> Result<Self, rustls::Error> {
        // One client (and pool) per upstream, shared by every path routed to it.
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
            .filter_map(|(path, up)| by_id.get(up.id.as_str()).map(|r| (path.clone(), r.clone())))
            .collect();
        Ok(RouteTable { by_path })
    }

    /// Exact path match; a trailing slash is the same endpoint.
    pub fn select(&self, path: &str) -> Option<&RoutedUpstream> {
        self.by_path
            .get(path)
            .or_else(|| path.strip_suffix('/').and_then(|p| self.by_path.get(p)))
            .map(Arc::as_ref)
    }
}
