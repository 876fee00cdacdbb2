//! Events about the gateway's own configuration, tied to no request: a
//! reload (or a check against a baseline) that weakens a security control.
//! Their line has its own envelope ([`GatewayAbout`]): no request id,
//! principal or method, since nobody asked anything.

use serde::Serialize;

use super::event::Name;

/// `config_weakened`: one security control a new config holds less
/// strongly than the running one. Config paths, ids, setting names, host
/// patterns and rule names only: never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigWeakened {
    /// The control's config path (`arguments.secrets`, `upstream.url`).
    pub control: Name,
    /// The route (its path) the control belongs to, for a route's control.
    pub route: Option<Name>,
    pub from: Name,
    pub to: Name,
    pub outcome: ReloadOutcome,
}

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
