//! The security controls of a config, in one table: per upstream (how it
//! is reached, and every control of the policy it is held to), per route
//! (who may call it), and the gateway's own. A reload holds the new table
//! against the running one, `portcullis check --baseline` a file against a
//! reviewed one; both report what [`weakened`] finds.
//!
//! Controls are compared where they exist on both sides. An upstream or a
//! route that is new has nothing to weaken (it is reviewed as new config);
//! one that is gone takes its traffic with it (a route's path then answers
//! 404), so neither is a weakening of another. A renamed one is the same
//! one: an upstream whose id changed while its endpoint did not, a route
//! whose path changed while the endpoints it serves did not, is compared
//! with what it was.

use std::collections::BTreeMap;

use super::{GatewayConfig, OnWeakened, RouteConfig, TaskMode, UpstreamRoute};
use crate::identify::AuthMethod;
use crate::policy::config::{ControlValue, Strength, ANY};

/// A config key's path, written as the field path of the config file's
/// raw types and never typed again as text; debug builds and the tests
/// hold it to the file's shape.
macro_rules! key {
    ($first:ident $(. $rest:ident)*) => {{
        const PATH: &str = concat!(stringify!($first) $(, ".", stringify!($rest))*);
        debug_assert!(super::file_shape().at(PATH).is_some(), "{PATH} is not a config key");
        PATH
    }};
}

/// What a control belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Gateway,
    /// A `[[listener]]`, by its name (its settings take effect at the next
    /// restart).
    Listener(String),
    /// An `[[upstream]]`, by its id.
    Upstream(String),
    /// A `[[route]]`, by its path.
    Route(String),
}

impl Scope {
    /// The `upstream` label of the metric: the upstream's id; for a route,
    /// the ids of its upstreams (`+` between a federated route's); empty
    /// for the gateway's own controls.
    pub fn upstream_label(&self, config: &GatewayConfig) -> String {
        match self {
            Scope::Gateway | Scope::Listener(_) => String::new(),
            Scope::Upstream(id) => id.clone(),
            Scope::Route(path) => config.routes.get(path).map_or_else(String::new, |r| {
                let ids: Vec<&str> = r.upstreams.iter().map(|u| u.id.as_str()).collect();
                ids.join("+")
            }),
        }
    }

    pub fn route(&self) -> Option<&str> {
        match self {
            Scope::Route(path) => Some(path),
            _ => None,
        }
    }

    pub fn listener(&self) -> Option<&str> {
        match self {
            Scope::Listener(name) => Some(name),
            _ => None,
        }
    }

    pub fn upstream(&self) -> Option<&str> {
        match self {
            Scope::Upstream(id) => Some(id),
            _ => None,
        }
    }
}

/// The security controls of one config: (scope, config path) → value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityControls {
    table: BTreeMap<(Scope, &'static str), ControlValue>,
    /// What an upstream or a route is whatever it is called: an
    /// upstream's endpoint, the endpoints a route serves.
    identity: BTreeMap<Scope, String>,
}

/// One control a new config weakened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weakened {
    pub scope: Scope,
    /// The control's config path (`arguments.secrets`, `upstream.url`).
    pub control: &'static str,
    pub from: String,
    pub to: String,
}

impl std::fmt::Display for Weakened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.scope {
            Scope::Gateway => write!(f, "{}", self.control)?,
            Scope::Listener(name) => write!(f, "listener \"{name}\" {}", self.control)?,
            Scope::Upstream(id) => write!(f, "upstream \"{id}\" {}", self.control)?,
            Scope::Route(path) => write!(f, "route \"{path}\" {}", self.control)?,
        }
        write!(f, ": {} -> {}", self.from, self.to)
    }
}

impl SecurityControls {
    pub fn of(config: &GatewayConfig) -> SecurityControls {
        let mut table = BTreeMap::new();
        let mut identity = BTreeMap::new();
        for (path, value) in gateway(config) {
            table.insert((Scope::Gateway, path), value);
        }
        for l in &config.listeners {
            let tls = match l.tls {
                Some(_) => ControlValue::level(Strength::Enforce, "on"),
                None => ControlValue::level(Strength::Off, "off"),
            };
            table.insert((Scope::Listener(l.name.clone()), key!(listener.tls)), tls);
        }
        for u in &config.upstreams {
            identity.insert(Scope::Upstream(u.id.clone()), u.url.to_string());
            for (path, value) in upstream(u) {
                table.insert((Scope::Upstream(u.id.clone()), path), value);
            }
        }
        for (path, r) in &config.routes {
            let mut served: Vec<String> = r.upstreams.iter().map(|u| u.url.to_string()).collect();
            served.sort();
            identity.insert(Scope::Route(path.clone()), served.join(" "));
            for (key, value) in route(r, config) {
                table.insert((Scope::Route(path.clone()), key), value);
            }
        }
        SecurityControls { table, identity }
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// Every control `new` holds less strongly than `old`, in the table's
/// order (gateway, upstreams by id, routes by path). Strengthening,
/// reordering and controls on one side only say nothing.
pub fn weakened(old: &SecurityControls, new: &SecurityControls) -> Vec<Weakened> {
    let renamed = renamed(old, new);
    old.table
        .iter()
        .filter_map(|((scope, control), was)| {
            let scope = renamed.get(scope).unwrap_or(scope);
            let now = new.table.get(&(scope.clone(), *control))?;
            let w = was.weakened_to(now)?;
            Some(Weakened {
                scope: scope.clone(),
                control,
                from: w.from,
                to: w.to,
            })
        })
        .collect()
}

/// The upstreams and routes of `old` that `new` has under another name:
/// gone by their name, and the one new name of the same kind that is what
/// they were (the same endpoint; the same endpoints served).
fn renamed(old: &SecurityControls, new: &SecurityControls) -> BTreeMap<Scope, Scope> {
    let same_kind = |a: &Scope, b: &Scope| {
        matches!(
            (a, b),
            (Scope::Upstream(_), Scope::Upstream(_)) | (Scope::Route(_), Scope::Route(_))
        )
    };
    let mut out = BTreeMap::new();
    for (gone, what) in &old.identity {
        if new.identity.contains_key(gone) {
            continue;
        }
        let mut candidates = new.identity.iter().filter(|(scope, is)| {
            same_kind(gone, scope) && *is == what && !old.identity.contains_key(*scope)
        });
        if let (Some((scope, _)), None) = (candidates.next(), candidates.next()) {
            out.insert(gone.clone(), scope.clone());
        }
    }
    out
}

fn gateway(c: &GatewayConfig) -> Vec<(&'static str, ControlValue)> {
    let admin = match c.admin {
        Some(a) if !a.ip().is_loopback() => ControlValue::level(Strength::Off, "not loopback"),
        _ => ControlValue::level(Strength::Enforce, "loopback"),
    };
    let on_weakened = match c.on_weakened {
        OnWeakened::Refuse => ControlValue::level(Strength::Enforce, "refuse"),
        OnWeakened::Apply => ControlValue::level(Strength::Monitor, "apply"),
    };
    vec![
        (key!(admin.address), admin),
        (
            key!(security.allowed_origins),
            ControlValue::allows(c.allowed_origins.iter().map(String::as_str)),
        ),
        (
            key!(state.allow_secret_values),
            ControlValue::on_is_weaker(c.state.allow_secret_values),
        ),
        (key!(reload.on_weakened), on_weakened),
    ]
}

fn upstream(u: &UpstreamRoute) -> Vec<(&'static str, ControlValue)> {
    let mut out = Vec::new();
    match &u.stdio {
        Some(stdio) => {
            let sandbox = stdio.sandbox.as_ref();
            let confined = match sandbox {
                Some(_) => ControlValue::level(Strength::Enforce, "on"),
                None => ControlValue::level(Strength::Off, "off"),
            };
            out.push((key!(upstream.sandbox), confined));
            if let Some(s) = sandbox {
                out.push((
                    key!(upstream.sandbox.network),
                    ControlValue::on_is_weaker(s.network),
                ));
            }
        }
        None => {
            let scheme = match u.tls {
                Some(_) => ControlValue::level(Strength::Enforce, "https"),
                None => ControlValue::level(Strength::Off, "http"),
            };
            // No pins accept any key the CA vouches for.
            let pins = match u.tls_pins.is_empty() {
                true => ControlValue::allows([ANY]),
                false => ControlValue::allows(u.tls_pins.iter().map(String::as_str)),
            };
            out.extend([
                (key!(upstream.url), scheme),
                (
                    key!(upstream.allow_plaintext),
                    ControlValue::on_is_weaker(u.allow_plaintext),
                ),
                (key!(upstream.tls_pins), pins),
            ]);
        }
    }
    out.push((
        key!(upstream.forward_authorization),
        ControlValue::on_is_weaker(u.forward_authorization),
    ));
    out.push((
        key!(upstream.single_use_state),
        ControlValue::on_is_stronger(u.single_use.all),
    ));
    out.extend(u.policy.controls().into_iter().map(|c| (c.path, c.value)));
    out
}

fn route(r: &RouteConfig, c: &GatewayConfig) -> Vec<(&'static str, ControlValue)> {
    let schemes: Vec<String> = r
        .auth
        .iter()
        .map(|id| {
            let name = c.auth.name(*id).unwrap_or_default();
            let kind = c.auth.method(*id).unwrap_or(AuthMethod::Anonymous);
            format!("{name} ({})", kind.as_str())
        })
        .collect();
    // No scheme at all is anonymous only; anonymous callers are anyone.
    let anyone = (r.allow_anonymous || r.auth.is_empty()).then_some(ANY);
    let tasks = match r.tasks {
        TaskMode::Refuse => ControlValue::level(Strength::Enforce, TaskMode::Refuse.as_str()),
        TaskMode::Police => ControlValue::level(Strength::Mitigate, TaskMode::Police.as_str()),
    };
    let permissions = &r.permissions;
    let allowed: Vec<String> = permissions.allow.iter().map(|p| p.written()).collect();
    let denied: Vec<String> = permissions.deny.iter().map(|p| p.written()).collect();
    // No allow rule lets every call through (the deny rules aside).
    let allow = match allowed.is_empty() {
        true => ControlValue::allows([ANY]),
        false => ControlValue::allows(allowed.iter().map(String::as_str)),
    };
    vec![
        (key!(route.allow), allow),
        (
            key!(route.deny),
            ControlValue::holds(denied.iter().map(String::as_str)),
        ),
        (
            key!(route.auth),
            ControlValue::allows(schemes.iter().map(String::as_str).chain(anyone)),
        ),
        (key!(route.tasks), tasks),
        (
            key!(route.approval),
            ControlValue::holds(r.approval.iter().map(|a| a.name.as_str())),
        ),
    ]
}

#[cfg(test)]
#[path = "controls_tests.rs"]
mod tests;
