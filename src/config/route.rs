//! `[[route]]`: a path on the gateway, its upstream, who may use it (auth
//! schemes) and for what (allow/deny rules).

use std::collections::HashMap;
use std::sync::Arc;

use toml::Spanned;

use super::locate::Locator;
use super::problems::Problems;
use super::raw::{RawPermission, RawRoute};
use super::upstream::UpstreamRoute;
use crate::identify::{AuthSchemes, SchemeId};
use crate::model::{ConfigError, Generation};
use crate::permit::{PermissionRule, Permissions};

/// One path of the gateway: its upstream, who may use it and for what.
#[derive(Debug)]
pub struct RouteConfig {
    pub upstream: Arc<UpstreamRoute>,
    /// Auth schemes tried in order; empty: anonymous only.
    pub auth: Vec<SchemeId>,
    pub allow_anonymous: bool,
    pub permissions: Permissions,
    /// The protocol generations this route serves.
    pub generations: Vec<Generation>,
    /// What the route does with the Tasks extension.
    pub tasks: TaskMode,
}

/// `route.tasks`: tasks are policed like every other carrier of a question
/// (the default), or refused outright where an operator wants none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskMode {
    #[default]
    Police,
    Refuse,
}

impl TaskMode {
    const ALL: [TaskMode; 2] = [TaskMode::Police, TaskMode::Refuse];

    pub const fn as_str(self) -> &'static str {
        match self {
            TaskMode::Police => "police",
            TaskMode::Refuse => "refuse",
        }
    }
}

/// What the routes are checked against: the upstreams that are valid, the
/// ids declared at all (a route to an upstream with a problem of its own
/// is not a second problem), and the auth schemes when they could be built.
pub(super) struct RouteTargets<'a> {
    pub upstreams: &'a [Arc<UpstreamRoute>],
    pub declared: Vec<&'a str>,
    pub auth: Option<&'a AuthSchemes>,
}

pub(super) fn routes(
    raw: &[Spanned<RawRoute>],
    targets: &RouteTargets<'_>,
    loc: &Locator<'_>,
    p: &mut Problems,
) -> HashMap<String, Arc<RouteConfig>> {
    let mut out = HashMap::new();
    for (i, r) in raw.iter().enumerate() {
        let r = r.get_ref();
        let path = r.path.get_ref();
        if !path.starts_with('/') || path.contains(['?', '#', ' ']) {
            p.push(loc.at(
                r.path.span(),
                format!("route[{i}].path"),
                "a path such as \"/mcp/rooms\" (starts with '/', no query)",
            ));
        }
        let wanted = r.upstream.get_ref().as_str();
        let up = targets.upstreams.iter().find(|u| u.id == wanted);
        if up.is_none() && !targets.declared.contains(&wanted) {
            p.push(loc.at(
                r.upstream.span(),
                format!("route[{i}].upstream"),
                format!(
                    "no upstream with id \"{wanted}\" (known: {})",
                    targets.declared.join(", ")
                ),
            ));
        }
        let schemes = targets
            .auth
            .map(|auth| route_auth(r, i, auth, loc, p))
            .unwrap_or_default();
        // Without schemes a route is anonymous; with them, anonymous only when asked for.
        let allow_anonymous = r.allow_anonymous.unwrap_or(schemes.is_empty());
        let allow = p.take(permission_rules(
            &r.allow,
            &format!("route[{i}].allow"),
            loc,
        ));
        let deny = p.take(permission_rules(&r.deny, &format!("route[{i}].deny"), loc));
        let generations = p
            .take(generations(
                &r.generations,
                &format!("route[{i}].generations"),
                loc,
            ))
            .unwrap_or_else(|| Generation::ALL.to_vec());
        let tasks = p
            .take(task_mode(&r.tasks, &format!("route[{i}].tasks"), loc))
            .unwrap_or_default();
        let (Some(up), Some(allow), Some(deny)) = (up, allow, deny) else {
            continue;
        };
        let route = RouteConfig {
            upstream: up.clone(),
            auth: schemes,
            allow_anonymous,
            permissions: Permissions { allow, deny },
            generations,
            tasks,
        };
        if out.insert(path.clone(), Arc::new(route)).is_some() {
            p.push(loc.at(
                r.path.span(),
                format!("route[{i}].path"),
                format!("path \"{path}\" is routed twice"),
            ));
        }
    }
    out
}

fn route_auth(
    r: &RawRoute,
    i: usize,
    auth: &AuthSchemes,
    loc: &Locator<'_>,
    p: &mut Problems,
) -> Vec<SchemeId> {
    let mut schemes = Vec::new();
    for name in r.auth.iter().flatten() {
        match auth.lookup(name.get_ref()) {
            Some(id) => schemes.push(id),
            None => p.push(loc.at(
                name.span(),
                format!("route[{i}].auth"),
                format!(
                    "no [[auth]] scheme named \"{}\" (known: {})",
                    name.get_ref(),
                    auth.names().join(", ")
                ),
            )),
        }
    }
    schemes
}

fn permission_rules(
    raw: &[Spanned<RawPermission>],
    field: &str,
    loc: &Locator<'_>,
) -> Result<Vec<PermissionRule>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for rule in raw {
        let r = rule.get_ref();
        fn strs(v: &[Spanned<String>]) -> Vec<&str> {
            v.iter().map(|s| s.get_ref().as_str()).collect()
        }
        if r.tools.is_empty() && r.prompts.is_empty() && r.resources.is_empty() {
            return Err(loc.at(
                rule.span(),
                field,
                "a rule names at least one of tools, prompts, resources (use [\"*\"] for all)",
            ));
        }
        let built = PermissionRule::new(
            &strs(&r.principals),
            &strs(&r.groups),
            &strs(&r.tools),
            &strs(&r.prompts),
            &strs(&r.resources),
        )
        .map_err(|e| loc.at(rule.span(), field, format!("bad glob: {e}")))?;
        out.push(built);
    }
    Ok(out)
}

fn task_mode(
    raw: &Option<Spanned<String>>,
    field: &str,
    loc: &Locator<'_>,
) -> Result<TaskMode, ConfigError> {
    let Some(raw) = raw else {
        return Ok(TaskMode::default());
    };
    TaskMode::ALL
        .into_iter()
        .find(|m| m.as_str() == raw.get_ref())
        .ok_or_else(|| {
            let names: Vec<String> = TaskMode::ALL
                .iter()
                .map(|m| format!("\"{}\"", m.as_str()))
                .collect();
            loc.at(
                raw.span(),
                field,
                format!(
                    "\"{}\" is not a tasks mode; use {}",
                    raw.get_ref(),
                    names.join(" or ")
                ),
            )
        })
}

fn generations(
    raw: &Option<Spanned<Vec<Spanned<String>>>>,
    field: &str,
    loc: &Locator<'_>,
) -> Result<Vec<Generation>, ConfigError> {
    let Some(list) = raw else {
        return Ok(Generation::ALL.to_vec());
    };
    let mut out = Vec::new();
    for g in list.get_ref() {
        let Some(gen) = Generation::parse(g.get_ref()) else {
            return Err(loc.at(
                g.span(),
                field,
                format!(
                    "\"{}\" is not a protocol generation; use \"2026-07-28\" and/or \"2025-11-25\"",
                    g.get_ref()
                ),
            ));
        };
        if !out.contains(&gen) {
            out.push(gen);
        }
    }
    if out.is_empty() {
        return Err(loc.at(list.span(), field, "a route serves at least one generation"));
    }
    Ok(out)
}
