//! `initialize` and `server/discover` on a federated route: one server,
//! named by the route, able to do what any of its upstreams can, with each
//! upstream's instructions (checked under its own policy) in a section
//! headed by its configured name that no upstream's text can open, and,
//! under 2025-11-25, one session id sealing every upstream's session.

use std::sync::Arc;

use http::{HeaderValue, Response};
use serde_json::{json, Map, Value};

use super::super::body::ProxyBody;
use super::super::refuse::Refused;
use super::super::reply::result_response;
use super::super::route::Federated;
use super::super::{Gateway, Inbound};
use super::answers::{ask_all, left_out, Answer, Outcome};
use super::merge::{caching, everyone_asked, first_failure, with_note};
use crate::headers::MCP_SESSION_ID;
use crate::model::{Generation, McpMethod, Reason, Refusal};
use crate::mrtr::seal::StateKeys;
use crate::sessions::{MemberSession, SessionState};

/// Where a 2026-07-28 client reads the server's name.
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

pub(super) async fn describe(
    gateway: &Arc<Gateway>,
    fed: &Arc<Federated>,
    inbound: Inbound,
) -> Result<Response<ProxyBody>, Refused> {
    let asked = everyone_asked(fed, &inbound)?;
    let mut answers = ask_all(gateway, fed, asked).await;
    let request = &inbound.request;
    if !answers
        .iter()
        .any(|a| matches!(a.outcome, Outcome::Result(_)))
    {
        left_out(gateway, request.method, &answers);
        return Err(first_failure(fed, request.id(), &answers));
    }
    // One session speaks one version: the client's, when an upstream
    // agreed to it; an upstream that chose another is left out of it.
    let version = session_version(request.requested_version.as_deref(), &answers);
    for answer in &mut answers {
        if let Outcome::Result(r) = &answer.outcome {
            if r.get("protocolVersion").cloned() != version {
                answer.outcome = Outcome::Unavailable(Refusal::new(
                    Reason::UnsupportedProtocolVersion,
                    "the upstream chose another protocol version than the route's session speaks",
                ));
            }
        }
    }
    let sessions =
        request.method == McpMethod::Initialize && request.generation() == Generation::Sessions;
    let members = match sessions {
        true => member_sessions(gateway, fed, &mut answers),
        false => Vec::new(),
    };
    let note = left_out(gateway, request.method, &answers);
    let mut merged = Map::new();
    let mut capabilities = Map::new();
    let mut instructions = Vec::new();
    let mut results = Vec::new();
    for answer in &answers {
        let Outcome::Result(Value::Object(result)) = &answer.outcome else {
            continue;
        };
        results.push(result);
        for (k, v) in result {
            merged.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if let Some(Value::Object(caps)) = result.get("capabilities") {
            union(&mut capabilities, caps);
        }
        if let Some(text) = result.get("instructions").and_then(Value::as_str) {
            if !text.trim().is_empty() {
                let name = &answer.member.upstream.settings.name;
                instructions.push(format!("## {name}\n\n{}", without_headings(text)));
            }
        }
    }
    caching(&mut merged, &results);
    merged.insert("capabilities".to_owned(), Value::Object(capabilities));
    // Who answers is the route: `serverInfo` at `initialize`, in `_meta`
    // on 2026-07-28 (each upstream's own `_meta` describes only itself).
    let info = json!({"name": fed.settings.name, "version": env!("CARGO_PKG_VERSION")});
    merged.remove("serverInfo");
    merged.remove("instructions");
    if !instructions.is_empty() {
        merged.insert("instructions".into(), instructions.join("\n\n").into());
    }
    merged.remove("_meta");
    match request.method {
        McpMethod::Initialize => merged.insert("serverInfo".to_owned(), info),
        _ => merged.insert("_meta".to_owned(), json!({ SERVER_INFO_KEY: info })),
    };
    with_note(&mut merged, note);
    let session = match sessions {
        true => Some(joint_session(gateway, fed, members).ok_or_else(|| {
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

/// The version the route's session speaks: the client's preference when an
/// upstream answered with it, else the first version an upstream offered
/// (none: `server/discover`, which has no `protocolVersion`).
fn session_version(requested: Option<&str>, answers: &[Answer]) -> Option<Value> {
    let offered = || {
        answers.iter().filter_map(|a| match &a.outcome {
            Outcome::Result(r) => r.get("protocolVersion").and_then(Value::as_str),
            _ => None,
        })
    };
    requested
        .filter(|v| offered().any(|o| o == *v))
        .or_else(|| offered().next())
        .map(Value::from)
}

/// An upstream's instructions inside the section the gateway heads with its
/// name: a line that would open a section of its own (an ATX heading, or a
/// setext underline below a line of text) is escaped, so the text reads the
/// same and no upstream can write a heading in another upstream's name.
fn without_headings(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut after_text = false;
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        let hashes = body.len() - body.trim_start_matches('#').len();
        let rest = &body[hashes..];
        let atx =
            (1..=6).contains(&hashes) && (rest.is_empty() || rest.starts_with([' ', '\t', '\r']));
        let mark = body.trim_end();
        let setext = after_text
            && !mark.is_empty()
            && (mark.bytes().all(|b| b == b'=') || mark.bytes().all(|b| b == b'-'));
        if indent <= 3 && (atx || setext) {
            out.push_str(&line[..indent]);
            out.push('\\');
            out.push_str(body);
        } else {
            out.push_str(line);
        }
        after_text = indent <= 3 && !body.trim().is_empty() && !atx;
    }
    out
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

/// Each answering upstream's session (what its own answer's phases
/// sealed). One whose own session id is too long for the route's session
/// id to carry beside the others' (the client could not send it back
/// within `max_header_bytes`) is left out of the session.
fn member_sessions(
    gateway: &Gateway,
    fed: &Federated,
    answers: &mut [Answer],
) -> Vec<SessionState> {
    let keys = &gateway.config.state.keys;
    let budget = gateway.config.limits.max_header_bytes / (4 * fed.members.len().max(1));
    let mut sessions = Vec::new();
    for answer in answers.iter_mut() {
        if answer.left_out_reason().is_some() {
            continue;
        }
        let Some(state) = opened(keys, answer) else {
            continue;
        };
        if state.upstream_session.as_ref().map_or(0, String::len) > budget {
            answer.outcome = Outcome::Unavailable(Refusal::new(
                Reason::UpstreamBadResponse,
                "the upstream's session id is too long for the route's session to carry",
            ));
            continue;
        }
        sessions.push(state);
    }
    sessions
}

fn opened(keys: &StateKeys, answer: &Answer) -> Option<SessionState> {
    let token = answer.headers.get(&MCP_SESSION_ID)?.to_str().ok()?;
    SessionState::open(keys, token).ok()
}

/// The client's session id: the upstreams' sessions sealed together for
/// the route.
fn joint_session(
    gateway: &Gateway,
    fed: &Federated,
    sessions: Vec<SessionState>,
) -> Option<HeaderValue> {
    let members = sessions
        .iter()
        .map(|s| MemberSession {
            id: s.upstream.clone(),
            session: s.upstream_session.clone(),
            bridged: s.bridged,
        })
        .collect();
    let mut joint = sessions.into_iter().next()?;
    joint.upstream = fed.path.to_string();
    joint.upstream_session = None;
    joint.bridged = false;
    joint.members = members;
    HeaderValue::from_str(&joint.seal(&gateway.config.state.keys)?).ok()
}

#[cfg(test)]
mod tests {
    use super::without_headings;

    #[test]
    fn headings_are_escaped_and_the_rest_kept() {
        let cases = [
            ("## Files\nUse it.", "\\## Files\nUse it."),
            ("   # Files", "   \\# Files"),
            ("#\tFiles", "\\#\tFiles"),
            ("####### seven", "####### seven"),
            ("#hashtag", "#hashtag"),
            ("    ## code", "    ## code"),
            ("Files\n---", "Files\n\\---"),
            ("Files\n  ===  ", "Files\n  \\===  "),
            ("\n---", "\n---"),
            ("a - b\n- item", "a - b\n- item"),
            ("## A\n---", "\\## A\n---"),
        ];
        for (text, escaped) in cases {
            assert_eq!(without_headings(text), escaped, "{text:?}");
        }
    }
}
