//! `[[route]]`: a path on the gateway, its upstream, who may use it (auth
//! schemes) and for what (allow/deny rules).

use std::collections::HashMap;
use std::sync::Arc;

use toml::Spanned;

use super::locate::Locator;
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
}

pub(super) fn routes(
    raw: &[Spanned<RawRoute>],
    upstreams: &[Arc<UpstreamRoute>],
    auth: &AuthSchemes,
    loc: &Locator<'_>,
) -> Result<HashMap<String, Arc<RouteConfig>>, ConfigError> {
    let mut out = HashMap::new();
    for (i, r) in raw.iter().enumerate() {
        let r = r.get_ref();
        let path = r.path.get_ref();
        if !path.starts_with('/') || path.contains(['?', '#', ' ']) {
            return Err(loc.at(
                r.path.span(),
                format!("route[{i}].path"),
                "a path such as \"/mcp/rooms\" (starts with '/', no query)",
            ));
        }
        let Some(up) = upstreams.iter().find(|u| u.id == *r.upstream.get_ref()) else {
            let known: Vec<_> = upstreams.iter().map(|u| u.id.as_str()).collect();
            return Err(loc.at(
                r.upstream.span(),
                format!("route[{i}].upstream"),
                format!(
                    "no upstream with id \"{}\" (known: {})",
                    r.upstream.get_ref(),
                    known.join(", ")
                ),
            ));
        };
        let mut schemes = Vec::new();
        for name in r.auth.iter().flatten() {
            let id = auth.lookup(name.get_ref()).ok_or_else(|| {
                loc.at(
                    name.span(),
                    format!("route[{i}].auth"),
                    format!(
                        "no [[auth]] scheme named \"{}\" (known: {})",
                        name.get_ref(),
                        auth.names().join(", ")
                    ),
                )
            })?;
            schemes.push(id);
        }
        // Without schemes a route is anonymous; with them, anonymous only when asked for.
        let allow_anonymous = r.allow_anonymous.unwrap_or(schemes.is_empty());
        let permissions = Permissions {
            allow: permission_rules(&r.allow, &format!("route[{i}].allow"), loc)?,
            deny: permission_rules(&r.deny, &format!("route[{i}].deny"), loc)?,
        };
        let generations = generations(&r.generations, &format!("route[{i}].generations"), loc)?;
        let route = RouteConfig {
            upstream: up.clone(),
            auth: schemes,
            allow_anonymous,
            permissions,
            generations,
        };
        if out.insert(path.clone(), Arc::new(route)).is_some() {
            return Err(loc.at(
                r.path.span(),
                format!("route[{i}].path"),
                format!("path \"{path}\" is routed twice"),
            ));
        }
    }
    Ok(out)
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
