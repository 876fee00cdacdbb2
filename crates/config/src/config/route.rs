//! `[[route]]`: a path on the gateway, its upstream, who may use it (auth
//! schemes) and for what (allow/deny rules).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;

use super::locate::Locator;
use super::problems::Problems;
use super::raw::{RawPermission, RawRoute};
use super::resource::ProtectedResource;
use super::upstream::UpstreamRoute;
use crate::identify::{valid_scope, AuthSchemes, SchemeId};
use crate::model::{valid_prefix, ConfigError, Generation};
use crate::permit::{PermissionRule, Permissions};

/// One path of the gateway: its upstreams, who may use it and for what.
#[derive(Debug)]
pub struct RouteConfig {
    /// The upstream behind the path, or the several a federated route joins
    /// (in the order configured: the order of merged lists).
    pub upstreams: Vec<Arc<UpstreamRoute>>,
    /// Set when the route was written with `upstreams`: it answers as one
    /// server over all of them.
    pub federation: Option<FederationSettings>,
    /// Auth schemes tried in order; empty: anonymous only.
    pub auth: Vec<SchemeId>,
    pub allow_anonymous: bool,
    pub permissions: Permissions,
    /// The protocol generations this route serves.
    pub generations: Vec<Generation>,
    /// What the route does with the Tasks extension.
    pub tasks: TaskMode,
    /// What a stdio upstream's `roots/list` is answered with: file URIs,
    /// never the client's own roots.
    pub roots: Vec<String>,
    /// Set when one of `auth` is an `oauth` scheme: the route is an OAuth
    /// protected resource.
    pub protected: Option<ProtectedResource>,
    /// `[[route.approval]]`: asked about before the upstream policy's rules.
    pub approval: portcullis_approval::ApprovalRules,
}

/// What a federated route adds to a route.
#[derive(Debug, Clone)]
pub struct FederationSettings {
    /// Its name as one server (`serverInfo.name`), and the `upstream` label
    /// of the requests it answers from all of its upstreams.
    pub name: String,
    /// How long a merged answer waits for each upstream before leaving it out.
    pub fanout_timeout: Duration,
}

/// The default name a federated route answers with.
pub const FEDERATION_NAME: &str = "portcullis";

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

    pub(crate) const fn as_str(self) -> &'static str {
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
    pub(crate) upstreams: &'a [Arc<UpstreamRoute>],
    pub(crate) declared: Vec<&'a str>,
    pub(crate) auth: Option<&'a AuthSchemes>,
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
        let members = route_upstreams(r, i, targets, loc, p);
        if r.upstreams.is_none() {
            for (key, span) in [
                ("name", r.name.as_ref()),
                ("fanout_timeout", r.fanout_timeout.as_ref()),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v.span())))
            {
                p.push(loc.at(
                    span,
                    format!("route[{i}].{key}"),
                    "only a federated route (upstreams = [...]) has this",
                ));
            }
        }
        let federation = r.upstreams.is_some().then(|| {
            federation(
                r,
                i,
                members.as_deref().unwrap_or_default(),
                targets,
                loc,
                p,
            )
        });
        let schemes = targets
            .auth
            .map(|auth| route_auth(r, i, auth, loc, p))
            .unwrap_or_default();
        // Without schemes a route is anonymous; with them, anonymous only when asked for.
        let allow_anonymous = r.allow_anonymous.unwrap_or(schemes.is_empty());
        let names = SchemeNames {
            all: targets.auth.map(AuthSchemes::names).unwrap_or_default(),
            route: schemes
                .iter()
                .filter_map(|id| targets.auth.and_then(|a| a.name(*id)))
                .collect(),
        };
        let allow = p.take(permission_rules(
            &r.allow,
            &format!("route[{i}].allow"),
            &names,
            loc,
        ));
        let deny = p.take(permission_rules(
            &r.deny,
            &format!("route[{i}].deny"),
            &names,
            loc,
        ));
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
        let roots = p.take(super::stdio::roots(
            &r.roots,
            &format!("route[{i}].roots"),
            loc,
        ));
        let configured = p.take(super::resource::configured(
            &r.resource,
            &format!("route[{i}].resource"),
            loc,
        ));
        let protected = match (targets.auth, &configured) {
            (Some(auth), Some(configured)) => {
                ProtectedResource::of(&schemes, auth, configured.clone())
            }
            _ => None,
        };
        if let (Some(span), None, Some(_)) = (
            r.resource.as_ref().map(|r| r.span()),
            &protected,
            targets.auth,
        ) {
            p.push(loc.at(
                span,
                format!("route[{i}].resource"),
                "only a route with an `oauth` auth scheme is an OAuth protected resource",
            ));
        }
        let resolved = members.as_deref().unwrap_or_default();
        if protected.is_none() && targets.auth.is_some() {
            if let Some(u) = resolved
                .iter()
                .find(|u| u.credential.as_ref().is_some_and(|c| c.exchanges()))
            {
                p.push(loc.at(
                    r.path.span(),
                    format!("route[{i}].auth"),
                    format!(
                        "upstream \"{}\" exchanges the caller's OAuth token (credential type \"token_exchange\"): the route needs an `oauth` auth scheme",
                        u.id
                    ),
                ));
            }
        }
        if protected.is_some() {
            if let Some(u) = resolved.iter().find(|u| u.forward_authorization) {
                p.push(loc.at(
                    r.path.span(),
                    format!("route[{i}].auth"),
                    format!(
                        "upstream \"{}\" has forward_authorization = true: an OAuth route never passes the client's token on (give the upstream its own [upstream.credential])",
                        u.id
                    ),
                ));
            }
        }
        let approval = p.take(
            portcullis_approval::raw::compile(
                &r.approval,
                &format!("route[{i}].approval"),
                loc.text,
            )
            .map(|rules| portcullis_approval::raw::merge(vec![rules]))
            .map_err(|e| loc.settings(e)),
        );
        let (Some(upstreams), Some(allow), Some(deny), Some(roots), Some(approval)) =
            (members, allow, deny, roots, approval)
        else {
            continue;
        };
        if !roots.is_empty() && upstreams.iter().all(|u| u.stdio.is_none()) {
            p.push(loc.at(
                r.path.span(),
                format!("route[{i}].roots"),
                "only a stdio upstream (command = [...]) asks for roots",
            ));
        }
        let route = RouteConfig {
            upstreams,
            federation,
            auth: schemes,
            allow_anonymous,
            permissions: Permissions { allow, deny },
            generations,
            tasks,
            roots,
            protected,
            approval,
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

/// The route's upstreams: `upstream = "id"` or `upstreams = [...]`, exactly
/// one of the two; `None` when one is unknown (a problem in `p`).
fn route_upstreams(
    r: &RawRoute,
    i: usize,
    targets: &RouteTargets<'_>,
    loc: &Locator<'_>,
    p: &mut Problems,
) -> Option<Vec<Arc<UpstreamRoute>>> {
    let names: Vec<&Spanned<String>> = match (&r.upstream, &r.upstreams) {
        (Some(one), None) => vec![one],
        (None, Some(many)) if !many.get_ref().is_empty() => many.get_ref().iter().collect(),
        (None, Some(many)) => {
            p.push(loc.at(
                many.span(),
                format!("route[{i}].upstreams"),
                "a federated route names at least one upstream",
            ));
            return None;
        }
        (Some(one), Some(_)) => {
            p.push(loc.at(
                one.span(),
                format!("route[{i}].upstream"),
                "give either upstream (one server) or upstreams (several, federated), not both",
            ));
            return None;
        }
        (None, None) => {
            p.push(loc.at(
                r.path.span(),
                format!("route[{i}]"),
                "a route needs upstream = \"<id>\" or upstreams = [\"<id>\", …]",
            ));
            return None;
        }
    };
    let field = match r.upstreams {
        Some(_) => format!("route[{i}].upstreams"),
        None => format!("route[{i}].upstream"),
    };
    let mut out: Vec<Arc<UpstreamRoute>> = Vec::with_capacity(names.len());
    let mut complete = true;
    for wanted in names {
        let id = wanted.get_ref().as_str();
        match targets.upstreams.iter().find(|u| u.id == id) {
            Some(_) if out.iter().any(|u| u.id == id) => {
                p.push(loc.at(
                    wanted.span(),
                    &field,
                    format!("upstream \"{id}\" is named twice"),
                ));
                complete = false;
            }
            Some(up) => out.push(up.clone()),
            None => {
                complete = false;
                if !targets.declared.contains(&id) {
                    p.push(loc.at(
                        wanted.span(),
                        &field,
                        format!(
                            "no upstream with id \"{id}\" (known: {})",
                            targets.declared.join(", ")
                        ),
                    ));
                }
            }
        }
    }
    complete.then_some(out)
}

/// A federated route's own settings, and what its upstreams' prefixes must
/// be for every exposed name to lead back to one upstream.
fn federation(
    r: &RawRoute,
    i: usize,
    members: &[Arc<UpstreamRoute>],
    targets: &RouteTargets<'_>,
    loc: &Locator<'_>,
    p: &mut Problems,
) -> FederationSettings {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for up in members {
        if !valid_prefix(&up.prefix) {
            p.push(loc.at(
                up.prefix_span.clone(),
                format!("upstream \"{}\" prefix", up.id),
                format!(
                    "\"{}\" cannot prefix names in federated route[{i}]: use a lower-case letter, then up to 31 of a-z, 0-9 and '-', or \"\" for names as they are (set prefix = \"…\" on the upstream)",
                    up.prefix
                ),
            ));
        } else if let Some(other) = seen.insert(&up.prefix, &up.id) {
            p.push(loc.at(
                up.prefix_span.clone(),
                format!("upstream \"{}\" prefix", up.id),
                format!(
                    "prefix \"{}\" is also upstream \"{other}\"'s in route[{i}]: their names would collide",
                    up.prefix
                ),
            ));
        }
    }
    let name = match &r.name {
        None => FEDERATION_NAME.to_owned(),
        Some(n) => {
            let name = n.get_ref().trim();
            if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
                p.push(loc.at(
                    n.span(),
                    format!("route[{i}].name"),
                    "a name of 1 to 200 printable characters",
                ));
            } else if targets.declared.contains(&name) {
                p.push(loc.at(
                    n.span(),
                    format!("route[{i}].name"),
                    format!(
                        "\"{name}\" is an upstream's id; the route's metrics would mix with it"
                    ),
                ));
            }
            name.to_owned()
        }
    };
    let default = Duration::from_secs(10);
    let fanout_timeout = p.or(
        loc.duration(
            &r.fanout_timeout,
            &format!("route[{i}].fanout_timeout"),
            default,
        ),
        default,
    );
    FederationSettings {
        name,
        fanout_timeout,
    }
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

/// The auth scheme names a `scheme:name` principal glob may use: any of
/// the config's is read as one, and it must be one of the route's.
struct SchemeNames<'a> {
    all: Vec<&'a str>,
    route: Vec<&'a str>,
}

impl SchemeNames<'_> {
    /// The scheme a principal glob is qualified by that the route does not take.
    fn foreign<'p>(&self, glob: &'p str) -> Option<&'p str> {
        let (scheme, _) = glob.split_once(':')?;
        (self.all.contains(&scheme) && !self.route.contains(&scheme)).then_some(scheme)
    }
}

fn permission_rules(
    raw: &[Spanned<RawPermission>],
    field: &str,
    schemes: &SchemeNames<'_>,
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
        let scopes = r.scopes.iter().map(|s| s.get_ref().clone()).collect();
        if let Some(bad) = r.scopes.iter().find(|s| !valid_scope(s.get_ref())) {
            return Err(loc.at(
                bad.span(),
                format!("{field}.scopes"),
                "a scope is printable ASCII without spaces, quotes or backslashes",
            ));
        }
        if let Some((glob, scheme)) = r
            .principals
            .iter()
            .find_map(|g| schemes.foreign(g.get_ref()).map(|s| (g, s)))
        {
            return Err(loc.at(
                glob.span(),
                format!("{field}.principals"),
                format!(
                    "\"{}\" names a principal of the scheme \"{scheme}\", which this route does not take ({})",
                    glob.get_ref(),
                    match schemes.route.is_empty() {
                        true => "it takes no auth scheme".to_owned(),
                        false => format!("its auth: {}", schemes.route.join(", ")),
                    }
                ),
            ));
        }
        let built = PermissionRule::new(
            &strs(&r.principals),
            &strs(&r.groups),
            &strs(&r.tools),
            &strs(&r.prompts),
            &strs(&r.resources),
            &schemes.all,
        )
        .map_err(|e| loc.at(rule.span(), field, format!("bad glob: {e}")))?
        .with_scopes(scopes);
        let built = match &r.when {
            None => built,
            Some(w) => built.with_when(
                portcullis_approval::raw::condition(
                    w,
                    &format!("{field}.when"),
                    loc.text,
                    portcullis_approval::when::PERMIT_VARIABLES,
                )
                .map_err(|e| loc.settings(e))?,
            ),
        };
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

pub(super) fn generations(
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
        return Err(loc.at(list.span(), field, "name at least one generation"));
    }
    Ok(out)
}
