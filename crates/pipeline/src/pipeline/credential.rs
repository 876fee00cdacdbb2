//! Phase: the upstream's credential. The client's token never goes on
//! (`headers::to_upstream` drops it); an upstream with `[upstream.credential]`
//! gets the gateway's own: a static secret, or an OAuth token obtained by
//! client credentials or by exchanging the caller's (RFC 8693), cached by
//! `crate::credential`.

use http::{HeaderMap, HeaderName, HeaderValue};

use super::ctx::RequestCtx;
use super::route::Route;
use crate::credential::SubjectToken;
use crate::identify::{bearer_token, AuthMethod, Principal};
use crate::model::{Reason, Refusal};

/// The caller's own access token, kept when an upstream of the route
/// exchanges it for one of its own (RFC 8693); never forwarded.
pub(crate) fn subject_token(
    route: &Route,
    principal: &Principal,
    headers: &HeaderMap,
) -> Option<SubjectToken> {
    // Any upstream of the route (a federated route's included).
    let exchanges = route
        .config
        .upstreams
        .iter()
        .any(|u| u.credential.as_ref().is_some_and(|c| c.exchanges()));
    if !exchanges || principal.method != AuthMethod::OAuth {
        return None;
    }
    bearer_token(headers).map(SubjectToken::new)
}

/// The upstream's credential header for this request (the gateway's own,
/// never the client's); a failure is the upstream's, named.
pub(crate) async fn attach_to(
    ctx: &RequestCtx,
) -> Result<Option<(HeaderName, HeaderValue)>, Refusal> {
    let upstream = &ctx.route.upstream.settings;
    let Some(credential) = &upstream.credential else {
        return Ok(None);
    };
    // Boxed: fetching a credential is the large future of this phase, and
    // inline every request's forward would carry its size, credential or not.
    match Box::pin(credential.header(&ctx.principal, ctx.subject.as_ref())).await {
        Ok(h) => Ok(Some(h)),
        Err(e) => {
            tracing::warn!(upstream = %upstream.id, error = %e, "no credential for the upstream");
            ctx.gateway
                .metrics
                .credentials
                .failed(&ctx.route.upstream.label, e.kind());
            Err(Refusal::new(
                Reason::UpstreamCredentialUnavailable,
                format!(
                    "the gateway could not obtain its credential for upstream \"{}\"",
                    upstream.name
                ),
            ))
        }
    }
}

/// The upstream answered 401 to the token the gateway gave it for this
/// caller: the cached token is dropped, so the next request gets a new one.
pub(crate) fn refused_by_upstream(ctx: &RequestCtx) {
    if let Some(credential) = &ctx.route.upstream.settings.credential {
        credential.refused(&ctx.principal, ctx.subject.as_ref());
    }
}

/// Whether what the upstream is told of the caller's authority is the
/// gateway's own: its `[upstream.credential]`, or any route that
/// authenticates callers by OAuth (their tokens never go on).
pub(crate) fn upstream_auth_is_ours(route: &Route) -> bool {
    route.upstream.settings.credential.is_some() || route.config.protected.is_some()
}

/// An upstream's 401 or 403 refuses the gateway's credential, not the
/// client's: relayed as is, an OAuth client would sign in to the gateway
/// again (or follow the upstream's challenge to another authorization
/// server). It is answered 502, keeping `data.upstreamStatus`.
pub(crate) fn not_the_clients(refusal: Refusal) -> Refusal {
    let status = refusal.status();
    if refusal.reason == Reason::UpstreamRefused
        && (status == http::StatusCode::UNAUTHORIZED || status == http::StatusCode::FORBIDDEN)
    {
        refusal.with_status(http::StatusCode::BAD_GATEWAY)
    } else {
        refusal
    }
}
