//! What events about the gateway's own configuration carry besides their
//! members (`AuditEvent::ConfigWeakened`): they are tied to no request, so
//! their line has its own envelope ([`GatewayAbout`]): no request id,
//! principal or method, since nobody asked anything.

use serde::Serialize;

/// What became of the reload that weakened a control (`[reload]
/// on_weakened`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReloadOutcome {
    /// The new config was swapped in.
    Applied,
    /// The running config stayed.
    Refused,
}

/// What an event tied to no request is about: the upstream whose control
/// changed (as configured), or nothing for the gateway's and a route's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GatewayAbout {
    pub upstream_id: Option<String>,
    pub upstream_name: String,
    pub upstream_endpoint: String,
}
