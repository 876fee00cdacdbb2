//! One answer from several upstreams' checked answers: lists merged in the
//! configured order under each upstream's prefix, with a sealed cursor
//! over the upstreams that have more; the description of one server made of
//! all of them; and what every upstream is told (ping, a notification, the
//! end of a session).

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};

use super::super::body::ProxyBody;
use super::super::ctx::audit_context;
use super::super::refuse::Refused;
use super::super::route::{Federated, Route};
use super::super::session::end_session;
use super::super::{Gateway, Inbound};
use super::answers::{ask_all, left_out, Answer, Outcome, FEDERATION_KEY};
use super::retarget::Retarget;
use crate::audit::AuditEvent;
use crate::headers::MCP_SESSION_ID;
use crate::model::{expose, Generation, McpMethod, Reason, Refusal, TargetKind};
use crate::policy::inspect::{Action, Rule, Verdict};
use crate::sessions::{FederatedCursor, MemberSession, PendingList, SessionState};

/// The `_meta` key on each merged item that names its upstream.
pub(super) const UPSTREAM_KEY: &str = "dev.portcullis/upstream";

/// Where a 2026-07-28 result names the server that produced it.
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// The longest tool or prompt name clients are asked to accept.
const MAX_NAME: usize = 128;

/// Where a list result keeps its items and how each is named.
pub(super) struct ListShape {
    pub items: &'static str,
    pub name: &'static str,
    pub kind: TargetKind,
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
        .map(|(member, cursor)| Ok((member, Retarget::Cursor(cursor).apply(&inbound, fed)?)))
        .collect::<Result<Vec<_>, Refused>>()?;
    let answers = ask_all(gateway, fed, asked).await;
    let note = left_out(gateway, request.method, &answers);
    let mut merged = Map::new();
    let mut items = Vec::new();
    let mut seen = HashSet::new();
    let mut next = Vec::new();
    let mut answered = false;
    for answer in &answers {
        let Outcome::Result(result) = &answer.outcome else {
            continue;
        };
        answered = true;
        let Some(result) = result.as_object() else {
            continue;
        };
        carry_list_fields(&mut merged, result);
        let listed = result.get(shape.items).and_then(Value::as_array);
        for item in listed.into_iter().flatten() {
            match exposed_item(item, &shape, fed, &answer.member, &mut seen) {
                Ok(item) => items.push(item),
                Err(Some(removed)) => audit_removed(gateway, &inbound, &answer.member, removed),
                Err(None) => {}
            }
        }
        if let Some(cursor) = result.get("nextCursor").and_then(Value::as_str) {
            next.push(PendingList {
                upstream: answer.member.upstream.settings.id.clone(),
                cursor: cursor.to_owned(),
            });
        }
    }
    if !answered && note.is_some() {
        return Err(first_failure(fed, request.id(), &answers));
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
    let token = match request.params_map().remove("cursor") {
        None => return Ok(fed.members.iter().map(|m| (m.clone(), None)).collect()),
        Some(Value::String(token)) => token,
        Some(_) => return Err(invalid()),
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

/// `method:name` of the caller, as sealed states name it.
fn principal_key(inbound: &Inbound) -> String {
    let p = &inbound.principal;
    match p.is_anonymous() {
        true => "anonymous".to_owned(),
        false => format!("{}:{}", p.method.as_str(), p.name),
    }
}

/// The members of a list result besides its items that the merged list
/// keeps: its type (2026-07-28), and the shortest time it may be cached
/// (by this caller only: the merged list and its cursor are the caller's).
fn carry_list_fields(merged: &mut Map<String, Value>, result: &Map<String, Value>) {
    if let Some(t) = result.get("resultType") {
        merged.entry("resultType").or_insert_with(|| t.clone());
    }
    if result.contains_key("cacheScope") {
        merged.insert("cacheScope".to_owned(), "private".into());
    }
    if let Some(ttl) = result.get("ttlMs").and_then(Value::as_u64) {
        let shorter = merged
            .get("ttlMs")
            .and_then(Value::as_u64)
            .map_or(ttl, |t| t.min(ttl));
        merged.insert("ttlMs".to_owned(), shorter.into());
    }
}

/// An upstream's item under its exposed name, saying where it came from;
/// the verdict that removed it when that name is too long or already taken
/// (`Err(None)`: not an item at all, which the upstream's own phases refuse).
fn exposed_item(
    item: &Value,
    shape: &ListShape,
    fed: &Federated,
    member: &Arc<Route>,
    seen: &mut HashSet<String>,
) -> Result<Value, Option<Verdict>> {
    let mut item = item.as_object().ok_or(None)?.clone();
    let prefix = member.prefix().ok_or(None)?;
    let own = item.get(shape.name).and_then(Value::as_str).ok_or(None)?;
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
    } else if !seen.insert(exposed.clone()) {
        Some("listed twice")
    } else {
        None
    };
    if let Some(why) = why {
        return Err(Some(Verdict {
            rule: Rule::Name,
            action: Action::Remove,
            key: Some(shape.kind.as_str().to_owned()),
            field: Some(exposed),
            detail: Some(why.to_owned()),
        }));
    }
    item.insert(shape.name.to_owned(), Value::String(exposed));
    let settings = &member.upstream.settings;
    let origin = json!({"id": settings.id, "name": settings.name});
    match item.get_mut("_meta") {
        Some(Value::Object(meta)) => {
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

fn with_note(result: &mut Map<String, Value>, note: Option<Value>) {
    let Some(note) = note else { return };
    let meta = result
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(FEDERATION_KEY.to_owned(), note);
    }
}

/// `initialize` and `server/discover`: one server, named by the route, able
/// to do what any of its upstreams can, with each upstream's instructions
/// (checked under its own policy) under a heading that names it.
pub(super) async fn describe(
    gateway: &Arc<Gateway>,
    fed: &Arc<Federated>,
    inbound: Inbound,
) -> Result<Response<ProxyBody>, Refused> {
    let asked = everyone_asked(fed, &inbound)?;
    let mut answers = ask_all(gateway, fed, asked).await;
    let request = &inbound.request;
    let version = answers.iter().find_map(|a| match &a.outcome {
        Outcome::Result(r) => Some(r.get("protocolVersion").cloned()),
        _ => None,
    });
    let Some(version) = version else {
        left_out(gateway, request.method, &answers);
        return Err(first_failure(fed, request.id(), &answers));
    };
    // One session speaks one version: an upstream that chose another is
    // left out of it.
    for answer in &mut answers {
        if let Outcome::Result(r) = &answer.outcome {
            if r.get("protocolVersion").cloned() != version {
                answer.outcome = Outcome::Unavailable(Refusal::new(
                    Reason::UnsupportedProtocolVersion,
                    "the upstream chose another protocol version than the route's first upstream",
                ));
            }
        }
    }
    let note = left_out(gateway, request.method, &answers);
    let mut merged = Map::new();
    let mut capabilities = Map::new();
    let mut instructions = Vec::new();
    for answer in &answers {
        let Outcome::Result(Value::Object(result)) = &answer.outcome else {
            continue;
        };
        for (k, v) in result {
            merged.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if let Some(Value::Object(caps)) = result.get("capabilities") {
            union(&mut capabilities, caps);
        }
        if let Some(text) = result.get("instructions").and_then(Value::as_str) {
            if !text.trim().is_empty() {
                let name = &answer.member.upstream.settings.name;
                instructions.push(format!("## {name}\n\n{text}"));
            }
        }
    }
    merged.insert("capabilities".to_owned(), Value::Object(capabilities));
    merged.remove("instructions");
    if !instructions.is_empty() {
        merged.insert("instructions".into(), instructions.join("\n\n").into());
    }
    // Who answers is the route: `serverInfo` at `initialize`, in `_meta`
    // on 2026-07-28 (each upstream's own `_meta` describes only itself).
    merged.remove("_meta");
    let server = json!({"name": fed.settings.name, "version": env!("CARGO_PKG_VERSION")});
    match request.method {
        McpMethod::Initialize => {
            merged.insert("serverInfo".to_owned(), server);
        }
        _ => {
            merged.remove("serverInfo");
            merged.insert("_meta".to_owned(), json!({ SERVER_INFO_KEY: server }));
        }
    }
    with_note(&mut merged, note);
    let session = match request.method == McpMethod::Initialize
        && request.generation() == Generation::Sessions
    {
        true => Some(joint_session(gateway, fed, &answers).ok_or_else(|| {
            Refused::new(
                Refusal::new(
                    Reason::UpstreamBadResponse,
                    "the upstreams' sessions cannot be carried",
                ),
                request.id(),
                &fed.settings.name,
            )
        })?),
        false => None,
    };
    Ok(result_response(
        request.id(),
        Value::Object(merged),
        session,
    ))
}

/// What any upstream can do: objects joined member by member, the first
/// upstream's value where they disagree on anything else.
fn union(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => union(a, b),
            (Some(Value::Bool(a)), Value::Bool(b)) => *a |= *b,
            (Some(_), _) => {}
            (None, v) => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The client's session id: each upstream's session (what its own
/// answer's phases sealed), sealed together for the route.
fn joint_session(gateway: &Gateway, fed: &Federated, answers: &[Answer]) -> Option<HeaderValue> {
    let keys = &gateway.config.state.keys;
    let mut joint: Option<SessionState> = None;
    let mut members = Vec::new();
    for answer in answers {
        if answer.left_out_reason().is_some() {
            continue;
        }
        let Some(token) = answer.headers.get(&MCP_SESSION_ID) else {
            continue;
        };
        let state = SessionState::open(keys, token.to_str().ok()?).ok()?;
        members.push(MemberSession {
            id: state.upstream.clone(),
            session: state.upstream_session.clone(),
        });
        joint.get_or_insert(state);
    }
    let mut joint = joint?;
    joint.upstream = fed.path.to_string();
    joint.upstream_session = None;
    joint.members = members;
    HeaderValue::from_str(&joint.seal(keys)?).ok()
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
        Outcome::Error(e) => Some(e),
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
    if !answers.iter().any(|a| a.left_out_reason().is_none()) {
        left_out(gateway, McpMethod::Other, &answers);
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

fn everyone_asked(
    fed: &Federated,
    inbound: &Inbound,
) -> Result<Vec<(Arc<Route>, Inbound)>, Refused> {
    fed.members
        .iter()
        .map(|m| Ok((m.clone(), Retarget::Unchanged.apply(inbound, fed)?)))
        .collect()
}

/// The refusal of the first upstream that failed (when none answered).
fn first_failure(fed: &Federated, id: Option<&str>, answers: &[Answer]) -> Refused {
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

fn json_response(body: Vec<u8>, session: Option<HeaderValue>) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::full(Bytes::from(body)));
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(session) = session {
        headers.insert(MCP_SESSION_ID.clone(), session);
    }
    resp
}

/// A JSON-RPC message to the client's `id` (its JSON text, as written).
fn message(id: Option<&str>, member: &str, value: &Value) -> Vec<u8> {
    let value = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
    let id = id.unwrap_or("null");
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"{member}\":{value}}}").into_bytes()
}

fn result_response(
    id: Option<&str>,
    result: Value,
    session: Option<HeaderValue>,
) -> Response<ProxyBody> {
    json_response(message(id, "result", &result), session)
}

fn error_response(id: Option<&str>, error: &Value) -> Response<ProxyBody> {
    json_response(message(id, "error", error), None)
}

fn accepted() -> Response<ProxyBody> {
    accepted_with(StatusCode::ACCEPTED)
}

fn accepted_with(status: StatusCode) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::empty());
    *resp.status_mut() = status;
    resp
}
