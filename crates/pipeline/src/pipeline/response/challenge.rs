//! An upstream's own 401 or 403 where the route forwards the client's
//! `Authorization` (`forward_authorization`): the client signs in, or steps
//! up, at the upstream's authorization server, so the upstream's
//! `WWW-Authenticate` is answered with the refusal. Unless it asks, for a
//! tool that only reads, for scopes that write, delete, send or administer
//! (`policy::scopes`, `[authorization] excessive_scopes`): then the
//! challenge is recorded and, when the rule enforces, not passed on.

use http::{header, HeaderMap, StatusCode};

use super::super::ctx::RequestCtx;
use crate::listings::delivered::Found;
use crate::listings::ItemKind;
use crate::model::{McpMethod, Refusal};
use crate::policy::inspect::Report;
use crate::policy::scopes;

/// Whether the upstream's answer is a 401 or 403 the client may follow:
/// the route forwards the client's `Authorization`.
fn followable(ctx: &RequestCtx, status: StatusCode) -> bool {
    ctx.route.upstream.settings.forward_authorization
        && matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
}

/// The upstream's refusal with its challenge, where the client may follow
/// it.
pub(super) fn passed_on(
    ctx: &RequestCtx,
    status: StatusCode,
    headers: &HeaderMap,
    refusal: Refusal,
) -> Refusal {
    if !followable(ctx, status) {
        return refusal;
    }
    headers
        .get_all(header::WWW_AUTHENTICATE)
        .iter()
        .fold(refusal, |r, challenge| r.with_challenge(challenge.clone()))
}

/// The gateway's refusal instead of the upstream's answer, when its
/// challenge asks a tool that only reads for scopes that write and the
/// rule enforces (recorded either way).
pub(super) fn asks_too_much(
    ctx: &RequestCtx,
    status: StatusCode,
    headers: &HeaderMap,
) -> Option<Refusal> {
    if !followable(ctx, status) || ctx.request.method != McpMethod::ToolsCall {
        return None;
    }
    // Every challenge and every `scope` in it, read whatever its bytes
    // (a byte outside UTF-8 must not make it pass unread).
    let scope = headers
        .get_all(header::WWW_AUTHENTICATE)
        .iter()
        .flat_map(|v| scopes::challenge_scopes(&String::from_utf8_lossy(v.as_bytes())))
        .collect::<Vec<_>>()
        .join(" ");
    if scope.is_empty() {
        return None;
    }
    let tool = ctx.request.target.as_deref()?;
    let policy = &ctx.route.upstream.settings.policy;
    let judged = scopes::judge(policy, ctx.upstream_name(), tool, hints(ctx, tool), &scope)?;
    ctx.record_verdicts(&Report {
        verdicts: vec![judged.verdict],
        ..Report::default()
    });
    judged.refusal
}

/// The hints the tool was listed to this caller with, when the gateway
/// has its list.
fn hints(ctx: &RequestCtx, tool: &str) -> Option<portcullis_approval::Annotations> {
    let kind = ItemKind::of_kind("tool")?;
    let upstream = ctx.route.upstream.settings.id.as_str();
    let caller = ctx.binding().principal_key();
    match ctx
        .gateway
        .listings
        .delivered
        .find(upstream, &caller, kind, tool)
    {
        Found::Listed(contract) => contract.hints(),
        _ => None,
    }
}
