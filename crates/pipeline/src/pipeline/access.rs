//! Phases: identify (who is calling, by the route's schemes), throttle (one
//! unit of each limit that applies), permit (may this caller use this tool,
//! prompt or resource), unchanged (is that item held for a changed
//! definition: rug pulls). Each is one function, called once, in that order.

use http::request::Parts;
use http::HeaderValue;

use super::ctx::RequestCtx;
use super::refuse::Refused;
use super::resource::Protected;
use super::route::Route;
use super::{Gateway, Peer};
use crate::identify::{AuthFailure, AuthMethod, Principal};
use crate::model::{Reason, Refusal, TargetKind};
use crate::policy::config::{Mode, OnChange};
use crate::throttle::Scope;

/// Identify: who is calling, by the route's schemes. On an OAuth protected
/// route the token must be issued for the route's resource, and a refusal
/// points the client at the resource's metadata (RFC 9728 §5.1).
pub(crate) async fn identify(
    gateway: &Gateway,
    route: &Route,
    parts: &Parts,
    authority: &HeaderValue,
    peer: &Peer,
) -> Result<Principal, Refused> {
    let config = &route.config;
    let protected = Protected::of(route, peer, authority, parts.uri.path());
    let resource = protected.as_ref().map(|p| p.resource.as_str());
    let failure = match gateway
        .config
        .auth
        .authenticate(
            &config.auth,
            config.allow_anonymous,
            &parts.headers,
            &peer.identity,
            resource,
        )
        .await
    {
        Ok(principal) => return Ok(principal),
        Err(failure) => failure,
    };
    let message = match &failure {
        AuthFailure::Missing => "this endpoint needs a credential (see WWW-Authenticate)".to_owned(),
        AuthFailure::Invalid { why, .. } => format!("the credential was refused: {why}"),
        AuthFailure::InsufficientScope { needed, .. } => format!(
            "the access token lacks scope {}; ask the authorization server for it (see WWW-Authenticate)",
            needed.join(" ")
        ),
        other => other.to_string(),
    };
    let mut refusal = Refusal::new(failure.reason(), message);
    if let AuthFailure::InsufficientScope { needed, .. } = &failure {
        refusal = refusal.with_data("requiredScopes", needed.clone().into());
    }
    let challenge = match &protected {
        Some(p) => p.challenge(&failure),
        None => failure.www_authenticate(None),
    };
    Err(Refused::new(
        refusal.with_challenge(challenge),
        None,
        route.name(),
    ))
}

/// Throttle: one unit of the limit of `scope` for `key`; a refusal is
/// counted under the request's `upstream` label.
pub(crate) async fn throttle(
    gateway: &Gateway,
    upstream: &str,
    scope: Scope,
    key: &[&str],
) -> Result<(), Refusal> {
    match gateway.throttle.check_parts(scope, key).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(limited)) => {
            gateway.metrics.rate_limited(upstream, scope.as_str());
            Err(rate_limited(
                scope,
                limited.retry_after_secs(),
                "too many requests",
            ))
        }
        Err(_) => Err(Refusal::new(
            Reason::RateLimiterUnavailable,
            "the rate limiter is unavailable; try again",
        )),
    }
}

/// A `rate_limited` refusal; its `Retry-After` header is added on the way out.
pub(crate) fn rate_limited(scope: Scope, secs: u64, what: &str) -> Refusal {
    Refusal::new(
        Reason::RateLimited,
        format!("{what} ({}); retry after {secs} s", scope.as_str()),
    )
    .with_data("scope", scope.as_str().into())
    .with_data("retryAfterSeconds", secs.into())
}

/// The `Retry-After` header a refusal asks for, when it asks for one.
pub(crate) fn retry_after(refusal: &Refusal) -> Option<HeaderValue> {
    let secs = refusal.data("retryAfterSeconds")?.as_u64()?;
    HeaderValue::from_str(&secs.to_string()).ok()
}

/// The limits that apply once the target is known.
pub(crate) async fn throttle_target(ctx: &RequestCtx) -> Result<(), Refusal> {
    let gateway = &ctx.gateway;
    let (scheme, principal) = (&*ctx.principal.scheme, &*ctx.principal.name);
    let upstream = ctx.route.upstream.settings.id.as_str();
    let label = &ctx.route.upstream.label;
    throttle(
        gateway,
        label,
        Scope::PrincipalUpstream,
        &[scheme, principal, upstream],
    )
    .await?;
    let kind = ctx.request.method.target().and_then(|t| t.kind);
    if let (Some(TargetKind::Tool), Some(tool)) = (kind, &ctx.request.target) {
        throttle(
            gateway,
            label,
            Scope::PrincipalTool,
            &[scheme, principal, upstream, tool],
        )
        .await?;
    }
    Ok(())
}

/// Permit: tool permissions, judged from the checked body. Refused for want
/// of a scope an allow rule names, an OAuth caller is told which to ask for
/// (403 `insufficient_scope`, step-up; `authority` and `path` name the
/// resource the challenge points at).
pub(crate) fn permit(ctx: &RequestCtx, authority: &HeaderValue, path: &str) -> Result<(), Refused> {
    let kind = ctx.request.method.target().and_then(|t| t.kind);
    let (Some(kind), Some(target)) = (kind, &ctx.request.target) else {
        return Ok(());
    };
    let permissions = &ctx.route.config.permissions;
    let who = &ctx.principal;
    let prefix = ctx.route.prefix();
    let arguments = crate::approval::facts::Arguments::default();
    let exposed = prefix.map(|p| crate::model::expose(kind, p, target));
    let call = crate::approval::Facts {
        caller: crate::approval::facts::caller(who),
        route: path,
        upstream: &ctx.route.upstream.settings.id,
        tool: exposed.as_deref().unwrap_or(target),
        upstream_tool: target,
        arguments: permissions
            .reads_arguments()
            .then(|| arguments.get(ctx.request.params_text())),
        ..Default::default()
    };
    if permissions.permits_in(who, kind, target, prefix, Some(&call)) {
        return Ok(());
    }
    let refused = |r: Refusal| Refused::new(r, ctx.id(), ctx.route.name());
    let step_up = (who.method == AuthMethod::OAuth)
        .then(|| permissions.missing_scopes(who, kind, target, prefix, Some(&call)))
        .flatten()
        .zip(Protected::of(&ctx.route, &ctx.peer, authority, path));
    let Some((needed, protected)) = step_up else {
        return Err(refused(Refusal::new(
            Reason::ToolNotPermitted,
            format!(
                "this caller may not use that {} on this route",
                kind.as_str()
            ),
        )));
    };
    let refusal = Refusal::new(
        Reason::InsufficientScope,
        format!(
            "that {} needs scope {}; ask the authorization server for it (see WWW-Authenticate)",
            kind.as_str(),
            needed.join(" ")
        ),
    )
    .with_data("requiredScopes", needed.clone().into());
    let failure = AuthFailure::InsufficientScope {
        principal: Box::new(who.clone()),
        needed,
    };
    Err(refused(
        refusal.with_challenge(protected.challenge(&failure)),
    ))
}

/// Whether the item a request names is held for a changed definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    No,
    /// Held, and an approval rule with `changed_listing` may let the
    /// person approve this call (the approve phase asks, or refuses).
    Askable,
}

/// A held tool's call an approval rule may ask about instead of refusing.
fn may_be_asked_about(ctx: &RequestCtx) -> bool {
    ctx.request.method == crate::model::McpMethod::ToolsCall
        && (ctx.route.config.approval.any_changed_listing()
            || ctx
                .route
                .upstream
                .settings
                .policy
                .approval
                .any_changed_listing())
}

/// The refusal of a call to an item held for a changed definition.
pub(crate) fn listing_changed(kind: &str) -> Refusal {
    Refusal::new(
        Reason::ListingChanged,
        format!(
            "this {kind} changed its definition since the gateway first saw it; it is held until an operator accepts the change"
        ),
    )
    .with_data("kind", kind.to_owned().into())
}

/// Unchanged: a `tools/call`, `prompts/get` or `resources/read` naming an
/// item the gateway holds for a changed definition (`[listing] on_change =
/// "remove"`, enforced) is refused, as its removal from the list promised,
/// until an operator accepts it — unless an approval rule with
/// `changed_listing` may ask the person about this tool call instead
/// ([`Held::Askable`]: the approve phase then asks, or refuses). A resource read through a template is
/// not an item of its own and is not held.
pub(crate) async fn unchanged(ctx: &RequestCtx) -> Result<Held, Refusal> {
    let policy = &ctx.route.upstream.settings.policy;
    if policy.on_change != OnChange::Remove || policy.mode != Mode::Enforce {
        return Ok(Held::No);
    }
    let kind = ctx.request.method.target().and_then(|t| t.kind);
    let (Some(kind), Some(target)) = (kind, &ctx.request.target) else {
        return Ok(Held::No);
    };
    let field = crate::listings::digest::field(kind.as_str(), target);
    let upstream = &ctx.route.upstream.settings.id;
    let store = &ctx.gateway.listings;
    let held = match store.memory() {
        Some(memory) => Ok(memory.is_held(upstream, &field)),
        // Boxed: the shared store's call is a large future, taken only
        // with a shared backend.
        None => Box::pin(store.is_held(upstream, &field)).await,
    };
    match held {
        Ok(false) => Ok(Held::No),
        // A rule may let the person approve this call instead.
        Ok(true) if may_be_asked_about(ctx) => Ok(Held::Askable),
        Ok(true) => Err(listing_changed(kind.as_str())),
        Err(_) => Err(Refusal::new(
            Reason::ListingStoreUnavailable,
            "the gateway cannot check this item against the definitions it pinned (its store is unreachable); try again",
        )),
    }
}
