//! Phase: federate. A federated route answers as one server over several
//! upstreams. After the request is parsed, this phase decides which of them
//! it concerns, by the method's [`Carriage`] (one table, `model/federated.rs`):
//! the upstream a name's prefix, a resource URI's prefix, a completion's
//! reference or the gateway's own sealed state leads to — the request then
//! takes the usual phases to that one upstream ([`Gateway::through`]), with
//! its name as the upstream wrote it — or every upstream, whose answers,
//! each checked under its own upstream's policy, are merged (`merge.rs`;
//! one server's description: `describe.rs`), a 2025-11-25 session's
//! streams joined (`listen.rs`).

mod answers;
mod describe;
mod expose;
mod listen;
mod listen_merge;
mod merge;
mod retarget;

use std::sync::Arc;

use http::Response;
use serde_json::Value;

use super::body::ProxyBody;
use super::record::RequestRecord;
use super::refuse::Refused;
use super::request::Transport;
use super::route::{Federated, Route};
use super::{Gateway, Inbound};
use crate::json::MessageKind;
use crate::model::{Carriage, Reason, Refusal, TargetKind};
use crate::mrtr::seal::SealedState;
use crate::sessions::{PushState, PUSH_PREFIX};
use retarget::{Member, Retarget};

/// Carry a request on a federated route.
pub(crate) async fn serve(
    gateway: &Arc<Gateway>,
    fed: &Arc<Federated>,
    inbound: Inbound,
    record: &mut RequestRecord,
) -> Result<Response<ProxyBody>, Refused> {
    let request = &inbound.request;
    match request.transport {
        Transport::Listen => return listen::merged(gateway, fed, inbound).await,
        Transport::End => return merge::ended(gateway, fed, inbound).await,
        Transport::Post => {}
    }
    let carriage = match request.kind {
        // A client's answer goes back to the upstream that asked.
        MessageKind::Response => Carriage::State,
        MessageKind::Notification => Carriage::Everyone,
        MessageKind::Request => request.method.carriage(),
    };
    let refuse = |r: Refusal| Refused::new(r, request.id(), &fed.settings.name);
    let (member, retarget) = match carriage {
        Carriage::List { items, name, kind } => {
            return merge::list(
                gateway,
                fed,
                inbound,
                merge::ListShape { items, name, kind },
            )
            .await
        }
        Carriage::Describe => return describe::describe(gateway, fed, inbound).await,
        Carriage::Listen => return listen::merged(gateway, fed, inbound).await,
        Carriage::Everyone => return merge::everyone(gateway, fed, inbound).await,
        Carriage::Target(kind) => by_target(fed, &inbound, kind).map_err(refuse)?,
        Carriage::Reference => by_reference(fed, &inbound).map_err(refuse)?,
        Carriage::State => (by_state(gateway, fed, &inbound).map_err(refuse)?, None),
    };
    record.set_upstream(member.upstream.metrics.clone());
    let inbound = match retarget {
        Some(r) => r.apply_to_one(inbound, fed)?,
        None => inbound,
    };
    let prefix = member.member.as_ref().map(|m| m.prefix.clone());
    let answered = gateway.through(member, Box::new(inbound)).await?;
    Ok(match prefix {
        Some(prefix) => expose::answer(answered, &prefix).await,
        None => answered,
    })
}

/// The upstream whose prefix starts the name, and the request with its own name.
fn by_target(
    fed: &Federated,
    inbound: &Inbound,
    kind: TargetKind,
) -> Result<(Arc<Route>, Option<Retarget>), Refusal> {
    let exposed = inbound.request.target.as_deref().unwrap_or_default();
    let (member, own) = member_of(fed, kind, exposed)?;
    Ok((member, Some(Retarget::target(kind, own))))
}

/// `completion/complete`: the prompt or resource its `ref` names.
fn by_reference(
    fed: &Federated,
    inbound: &Inbound,
) -> Result<(Arc<Route>, Option<Retarget>), Refusal> {
    let params = inbound.request.params_map();
    let reference = params.get("ref").and_then(Value::as_object);
    let (kind, member) = match reference
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str)
    {
        Some("ref/prompt") => (TargetKind::Prompt, Member::Name),
        Some("ref/resource") => (TargetKind::Resource, Member::Uri),
        _ => {
            return Err(Refusal::new(
                Reason::InvalidRequest,
                "completion/complete needs params.ref of type ref/prompt or ref/resource",
            ))
        }
    };
    let exposed = reference
        .and_then(|r| r.get(member.as_str()))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (route, own) = member_of(fed, kind, exposed)?;
    Ok((route, Some(Retarget::reference(member, own))))
}

/// The upstream an exposed name leads to and its own name, or the refusal
/// that lists the prefixes.
pub(super) fn member_of<'a>(
    fed: &Federated,
    kind: TargetKind,
    exposed: &'a str,
) -> Result<(Arc<Route>, &'a str), Refusal> {
    fed.owner(kind, exposed)
        .map(|(member, own)| (member.clone(), own))
        .ok_or_else(|| {
            Refusal::new(
                Reason::UnknownName,
                format!(
                    "no {} of that name here: on this route each name starts with an upstream's prefix ({}) and '{}'",
                    kind.as_str(),
                    fed.prefixes(),
                    crate::model::separator(kind),
                ),
            )
            .with_data("prefixes", fed.members.iter().filter_map(|m| m.prefix()).collect::<Vec<_>>().into())
        })
}

/// A request only the gateway's own sealed state ties to an upstream: a
/// task's `requestState`, or the id of the pushed request a client answers.
/// The state is opened here only to choose the upstream; the phases of
/// that upstream check it in full.
fn by_state(gateway: &Gateway, fed: &Federated, inbound: &Inbound) -> Result<Arc<Route>, Refusal> {
    let request = &inbound.request;
    let keys = &gateway.config.state.keys;
    let upstream = match request.kind {
        MessageKind::Response => request
            .id()
            .and_then(|id| serde_json::from_str::<String>(id).ok())
            .filter(|id| id.starts_with(PUSH_PREFIX))
            .and_then(|id| PushState::open(keys, &id).ok())
            .map(|p| p.upstream),
        _ => request
            .request_state
            .as_deref()
            .and_then(|s| keys.open(s).ok())
            .map(|s: SealedState| s.upstream),
    };
    upstream
        .and_then(|id| fed.by_id(&id).cloned())
        .ok_or_else(|| match request.kind {
            MessageKind::Response => Refusal::new(
                Reason::AnswerNotRequested,
                "this answers no request an upstream of this route asked in this session",
            ),
            _ => Refusal::new(
                Reason::StateMissing,
                "on a federated route a request about a task brings back the requestState the gateway issued with it",
            ),
        })
}
