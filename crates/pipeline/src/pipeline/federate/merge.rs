//! One answer from several upstreams' checked answers: lists merged in the
//! configured order under each upstream's prefix, with a sealed cursor
//! over the upstreams that have more; and what every upstream is told
//! (ping, a notification, the end of a session). The description of one
//! server made of all of them is `describe.rs`.

use std::collections::HashSet;
use std::sync::Arc;

use http::{Response, StatusCode};
use serde_json::{json, Map, Value};

use super::super::body::ProxyBody;
use super::super::ctx::audit_context;
use super::super::refuse::Refused;
use super::super::reply::{accepted, accepted_with, error_response, result_response};
use super::super::route::{Federated, Route};
use super::super::session::end_session;
use super::super::{Gateway, Inbound};
use super::answers::{ask_all, cut_short, left_out, Answer, Outcome, FEDERATION_KEY};
use super::retarget::{cursor_of, Retarget};
use crate::audit::AuditEvent;
use crate::headers::MCP_SESSION_ID;
use crate::model::{expose, McpMethod, Reason, Refusal, TargetKind};
use crate::policy::inspect::{is_gateway_key, Action, Rule, Verdict, PROVENANCE_KEY};
use crate::sessions::{FederatedCursor, PendingList, SessionState};

/// The `_meta` key on each merged item that names its upstream.
pub(super) const UPSTREAM_KEY: &str = "dev.portcullis/upstream";

/// The longest tool or prompt name clients are asked to accept.
const MAX_NAME: usize = 128;

/// Where a list result keeps its items and how each is named.
pub(super) struct ListShape {
    pub(crate) items: &'static str,
    pub(crate) name: &'static str,
    pub(crate) kind: TargetKind,
}

/// `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`.
pub(super) async fn list(
    gateway: &Arc<Gateway>,
    fed: &Arc<Federated>,
    inbound: Inbound,
    shape: ListShape,
) -> Result<Response<ProxyBody>, Refused> {
    let request = &inbound.request;
    let refuse = |r: Refusal| Refused::new(r, request.id(), &fed.settings.name);
    let principal = principal_key(&inbound);
    let pending = pending(gateway, fed, &inbound, &principal).map_err(refuse)?;
    let asked = pending
        .into_iter()
        .map(|(member, cursor)| Ok((member, Retarget::cursor(cursor).apply(&inbound, fed)?)))
        .collect::<Result<Vec<_>, Refused>>()?;
    let answers = ask_all(gateway, fed, asked).await;
    let mut note = left_out(gateway, request.method, &answers);
    let mut merged = Map::new();
    let mut items = Vec::new();
    let mut seen = HashSet::new();
    let mut next = Vec::new();
    let mut answered = false;
    let mut results = Vec::new();
    let budget = cursor_budget(gateway, fed);
    for answer in &answers {
        let Outcome::Result(result) = &answer.outcome else {
            continue;
        };
        answered = true;
        let Some(result) = result.as_object() else {
            continue;
        };
        results.push(result);
        let listed = result.get(shape.items).and_then(Value::as_array);
        let twice = listed_twice(listed.map(Vec::as_slice).unwrap_or_default(), &shape);
        for item in listed.into_iter().flatten() {
            match exposed_item(item, &shape, fed, &answer.member, &mut seen, &twice) {
                Ok(item) => items.push(item),
                Err(Some(removed)) => audit_removed(gateway, &inbound, &answer.member, removed),
                Err(None) => {}
            }
        }
        let up = &answer.member.upstream.settings;
        match next_page(result, budget) {
            Ok(None) => {}
            Ok(Some(cursor)) => next.push(PendingList {
                upstream: up.id.clone(),
                cursor: cursor.to_owned(),
            }),
            Err(reason) => note.push(cut_short(gateway, request.method, up, reason.as_str())),
        }
    }
    if !answered && !note.is_empty() {
        return Err(first_failure(fed, request.id(), &answers));
    }
    if let Some(t) = results.iter().find_map(|r| r.get("resultType")) {
        merged.insert("resultType".to_owned(), t.clone());
    }
    caching(&mut merged, &results);
    let decided: Vec<Value> = results
        .iter()
        .filter_map(|r| r.get("_meta")?.get(PROVENANCE_KEY).cloned())
        .collect();
    if !decided.is_empty() {
        // What the gateway decided about each upstream's list, each naming
        // its upstream and policy.
        merged.insert("_meta".to_owned(), json!({ PROVENANCE_KEY: decided }));
    }
    merged.insert(shape.items.to_owned(), Value::Array(items));
    if !next.is_empty() {
        let cursor = FederatedCursor::new(
            fed.path.to_string(),
            principal,
            request.method.as_str().to_owned(),
            next,
        );
        let sealed = cursor.seal(&gateway.config.state.keys).ok_or_else(|| {
            refuse(Refusal::new(
                Reason::InternalError,
                "the list's cursor could not be sealed",
            ))
        })?;
        merged.insert("nextCursor".to_owned(), Value::String(sealed));
        // The cursor opens only for this caller: the page is theirs.
        if merged.contains_key("cacheScope") {
            merged.insert("cacheScope".to_owned(), "private".into());
        }
    }
    with_note(&mut merged, note);
    Ok(result_response(request.id(), Value::Object(merged), None))
}

/// An upstream to ask for a page, and its own cursor (none: its first).
type Page = (Arc<Route>, Option<String>);

/// The upstreams to ask and each one's cursor: all of them from their
/// first page, or those the client's cursor (the gateway's own) names.
fn pending(
    gateway: &Gateway,
    fed: &Federated,
    inbound: &Inbound,
    principal: &str,
) -> Result<Vec<Page>, Refusal> {
    let invalid = || {
        Refusal::new(
            Reason::CursorInvalid,
            "this cursor was not issued by this gateway for this list; list again without a cursor",
        )
    };
    let request = &inbound.request;
    let token = match cursor_of(request) {
        None => return Ok(fed.members.iter().map(|m| (m.clone(), None)).collect()),
        Some(raw) => serde_json::from_str::<String>(raw.get()).map_err(|_| invalid())?,
    };
    let cursor =
        FederatedCursor::open(&gateway.config.state.keys, &token).map_err(|_| invalid())?;
    if cursor.route != *fed.path
        || cursor.principal != principal
        || cursor.method != request.method.as_str()
    {
        return Err(invalid());
    }
    cursor
        .pending
        .into_iter()
        .map(|p| {
            Ok((
                fed.by_id(&p.upstream).ok_or_else(invalid)?.clone(),
                Some(p.cursor),
            ))
        })
        .collect()
}

/// The caller, as sealed states name it.
fn principal_key(inbound: &Inbound) -> String {
    inbound.principal.key()
}

/// How long and how widely a merged answer may be cached (2026-07-28): the
/// shortest `ttlMs` an upstream gave, and `cacheScope` `public` only when
/// every upstream said `public` (`private` once one said otherwise, or
/// nothing while another said something).
pub(super) fn caching(merged: &mut Map<String, Value>, results: &[&Map<String, Value>]) {
    let ttl = results
        .iter()
        .filter_map(|r| r.get("ttlMs").and_then(Value::as_u64))
        .min();
    match ttl {
        Some(ttl) => merged.insert("ttlMs".to_owned(), ttl.into()),
        None => merged.remove("ttlMs"),
    };
    let scopes: Vec<Option<&str>> = results
        .iter()
        .map(|r| r.get("cacheScope").and_then(Value::as_str))
        .collect();
    if scopes.iter().all(Option::is_none) {
        merged.remove("cacheScope");
        return;
    }
    let public = scopes.iter().all(|s| *s == Some("public"));
    let scope = if public { "public" } else { "private" };
    merged.insert("cacheScope".to_owned(), scope.into());
}

/// The most of one upstream's own cursor (JSON-encoded) a merged cursor
/// carries: every upstream's together, sealed, must fit in the request
/// that brings them back (`max_request_body_bytes`).
fn cursor_budget(gateway: &Gateway, fed: &Federated) -> usize {
    gateway.config.limits.max_request_body_bytes / (4 * fed.members.len().max(1))
}

/// An upstream's own `nextCursor` when it has more pages; one that is no
/// string, or longer than `budget`, cannot be carried: that upstream's part
/// of the walk ends here, and the reason is named.
fn next_page(result: &Map<String, Value>, budget: usize) -> Result<Option<&str>, Reason> {
    match result.get("nextCursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) => match serde_json::to_string(c) {
            Ok(encoded) if encoded.len() <= budget => Ok(Some(c)),
            _ => Err(Reason::UpstreamResponseTooLarge),
        },
        Some(_) => Err(Reason::UpstreamProtocolViolation),
    }
}

/// The names one upstream's list gives more than one item.
fn listed_twice<'a>(items: &'a [Value], shape: &ListShape) -> HashSet<&'a str> {
    let mut once = HashSet::new();
    items
        .iter()
        .filter_map(|item| item.get(shape.name).and_then(Value::as_str))
        .filter(|name| !once.insert(*name))
        .collect()
}

/// An upstream's item under its exposed name, saying where it came from
/// (in place of anything the upstream wrote in the gateway's namespace);
/// the verdict that removed it when it has no name to expose, or that name
/// is too long or already taken (`Err(None)`: not an item at all, which
/// the upstream's own phases refuse).
fn exposed_item(
    item: &Value,
    shape: &ListShape,
    fed: &Federated,
    member: &Arc<Route>,
    seen: &mut HashSet<String>,
    twice: &HashSet<&str>,
) -> Result<Value, Option<Verdict>> {
    let mut item = item.as_object().ok_or(None)?.clone();
    let prefix = member.prefix().ok_or(None)?;
    let removed = |field: Option<String>, why: String| {
        Some(Verdict {
            rule: Rule::Name,
            action: Action::Remove,
            key: Some(shape.kind.as_str().to_owned()),
            field,
            detail: Some(why),
        })
    };
    let Some(own) = item.get(shape.name).and_then(Value::as_str) else {
        let why = format!("its {} is missing or not a string", shape.name);
        return Err(removed(None, why));
    };
    let exposed = expose(shape.kind, prefix, own);
    let too_long = shape.kind != TargetKind::Resource && exposed.chars().count() > MAX_NAME;
    // Under an empty prefix a name may look like another upstream's.
    let elsewhere = fed
        .owner(shape.kind, &exposed)
        .is_none_or(|(owner, _)| !Arc::ptr_eq(owner, member));
    let why = if too_long {
        Some("longer than 128 characters once prefixed")
    } else if elsewhere {
        Some("reads as another upstream's name")
    } else if twice.contains(own) || !seen.insert(exposed.clone()) {
        // Which of its definitions the upstream runs, nobody can tell the
        // client: none is delivered.
        Some("listed twice")
    } else {
        None
    };
    if let Some(why) = why {
        return Err(removed(Some(exposed), why.to_owned()));
    }
    item.insert(shape.name.to_owned(), Value::String(exposed));
    if shape.kind == TargetKind::Tool {
        super::expose::tool_ui(&mut item, prefix);
    }
    let settings = &member.upstream.settings;
    let origin = json!({"id": settings.id, "name": settings.name});
    match item.get_mut("_meta") {
        Some(Value::Object(meta)) => {
            meta.retain(|k, _| !is_gateway_key(k));
            meta.insert(UPSTREAM_KEY.to_owned(), origin);
        }
        _ => {
            item.insert("_meta".to_owned(), json!({ UPSTREAM_KEY: origin }));
        }
    }
    Ok(Value::Object(item))
}

/// A merged list's removal: logged and written to the audit trail (the
/// item's name, never its text).
fn audit_removed(gateway: &Gateway, inbound: &Inbound, member: &Route, verdict: Verdict) {
    tracing::warn!(
        upstream = %member.upstream.settings.id,
        kind = verdict.key.as_deref().unwrap_or_default(),
        why = verdict.detail.as_deref().unwrap_or_default(),
        "federated route: listed item removed"
    );
    if gateway.audit.enabled() {
        let at = audit_context(
            member,
            &inbound.request_id,
            &inbound.principal,
            &inbound.request,
        );
        gateway.audit.emit(&at, AuditEvent::verdict(&verdict));
    }
}

/// The upstreams left out of a merged answer, named in its `_meta`.
pub(super) fn with_note(result: &mut Map<String, Value>, unavailable: Vec<Value>) {
    if unavailable.is_empty() {
        return;
    }
    let meta = result
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        let note = json!({ "unavailable": unavailable });
        meta.insert(FEDERATION_KEY.to_owned(), note);
    }
}

/// `ping`, `logging/setLevel`, a client's notification, any other method:
/// every upstream is told; the first that answered answers.
pub(super) async fn everyone(
    gateway: &Arc<Gateway>,
    fed: &Arc<Federated>,
    inbound: Inbound,
) -> Result<Response<ProxyBody>, Refused> {
    let asked = everyone_asked(fed, &inbound)?;
    let answers = ask_all(gateway, fed, asked).await;
    let request = &inbound.request;
    for answer in &answers {
        match &answer.outcome {
            Outcome::Result(r) => return Ok(result_response(request.id(), r.clone(), None)),
            Outcome::Accepted => return Ok(accepted()),
            _ => {}
        }
    }
    left_out(gateway, request.method, &answers);
    if let Some(error) = answers.iter().find_map(|a| match &a.outcome {
        Outcome::Error(e, _) => Some(e),
        _ => None,
    }) {
        return Ok(error_response(request.id(), error));
    }
    Err(first_failure(fed, request.id(), &answers))
}

/// DELETE: every upstream's session ends, then the client's.
pub(super) async fn ended(
    gateway: &Arc<Gateway>,
    fed: &Arc<Federated>,
    inbound: Inbound,
) -> Result<Response<ProxyBody>, Refused> {
    let session = inbound
        .parts
        .headers
        .get(&MCP_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(|t| SessionState::open(&gateway.config.state.keys, t).ok());
    let asked = everyone_asked(fed, &inbound)?;
    let answers = ask_all(gateway, fed, asked).await;
    left_out(gateway, McpMethod::Other, &answers);
    if !answers.iter().any(|a| a.left_out_reason().is_none()) {
        return Err(first_failure(fed, None, &answers));
    }
    // The upstreams checked the session; it is the route's own.
    if let Some(state) = session.filter(|s| s.upstream == *fed.path) {
        end_session(gateway, &state)
            .await
            .map_err(|r| Refused::new(r, None, &fed.settings.name))?;
    }
    Ok(accepted_with(StatusCode::OK))
}

pub(super) fn everyone_asked(
    fed: &Federated,
    inbound: &Inbound,
) -> Result<Vec<(Arc<Route>, Inbound)>, Refused> {
    fed.members
        .iter()
        .map(|m| Ok((m.clone(), Retarget::Unchanged.apply(inbound, fed)?)))
        .collect()
}

/// The refusal of the first upstream that failed (when none answered).
pub(super) fn first_failure(fed: &Federated, id: Option<&str>, answers: &[Answer]) -> Refused {
    let (refusal, name) = answers
        .iter()
        .find_map(|a| match &a.outcome {
            Outcome::Unavailable(r) => Some((r.clone(), a.member.name())),
            _ => None,
        })
        .unwrap_or_else(|| {
            let r = Refusal::new(
                Reason::UpstreamBadResponse,
                "no upstream of this route answered",
            );
            (r, fed.settings.name.as_str())
        });
    Refused::new(refusal, id, name)
}
