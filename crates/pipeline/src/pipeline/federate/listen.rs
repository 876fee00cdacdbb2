//! A 2025-11-25 session's stream of server messages on a federated route:
//! each upstream's stream opened through its own phases (so each event is
//! inspected under that upstream's policy, a pushed request sealed for it),
//! the events of all of them delivered as they come, each whole.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use hyper::body::Body;

use super::super::body::{EventSource, ProxyBody};
use super::super::refuse::Refused;
use super::super::route::Federated;
use super::super::{Gateway, Inbound};
use super::answers::cut_short;
use super::expose;
use super::member_of;
use super::retarget::Retarget;
use crate::model::{McpMethod, Reason, Refusal, TargetKind};
use serde_json::Value;

/// Open every upstream's stream; answer with their events merged. An
/// upstream whose stream does not open (it offers none, it is down) is
/// left out; with none open, the first refusal is the answer.
pub(super) async fn merged(
    gateway: &Arc<Gateway>,
    fed: &Arc<Federated>,
    inbound: Inbound,
) -> Result<Response<ProxyBody>, Refused> {
    let timeout = fed.settings.fanout_timeout;
    let method = inbound.request.method;
    let subscriptions = subscriptions(fed, &inbound)
        .map_err(|r| Refused::new(r, inbound.request.id(), &fed.settings.name))?;
    let mut asked = Vec::with_capacity(fed.members.len());
    for (i, member) in fed.members.iter().enumerate() {
        let retarget = match &subscriptions {
            Some(by_member) => Retarget::Subscriptions(by_member[i].clone()),
            None => Retarget::Unchanged,
        };
        asked.push((member.clone(), retarget.apply(&inbound, fed)?));
    }
    let opened = futures_util::future::join_all(asked.into_iter().map(|(member, inbound)| {
        let name = member.name().to_owned();
        async move {
            match tokio::time::timeout(timeout, gateway.through(member, Box::new(inbound))).await {
                Ok(opened) => opened,
                Err(_) => Err(Refused::new(
                    Refusal::new(
                        Reason::UpstreamTimeout,
                        "the stream did not open within the federated route's fanout_timeout",
                    ),
                    None,
                    &name,
                )),
            }
        }
    }))
    .await;
    let mut head = None;
    let mut streams = Vec::new();
    let mut prefixes = Vec::new();
    let mut first_refusal = None;
    for (member, opened) in fed.members.iter().zip(opened) {
        match opened {
            Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                let (parts, body) = resp.into_parts();
                head.get_or_insert(parts);
                streams.push(Some(body));
                prefixes.push(member.prefix().unwrap_or_default().to_owned());
            }
            // A whole answer instead of a stream (an error, or a listen
            // the upstream ended at once) cannot be one of the merged
            // stream's events: that upstream is left out, and its answer is
            // the route's only when no upstream streams.
            Ok(resp) => {
                let reason = match resp.status().is_success() {
                    true => Reason::UpstreamBadResponse.as_str(),
                    false => Reason::UpstreamRefused.as_str(),
                };
                cut_short(gateway, method, &member.upstream.settings, reason);
                first_refusal.get_or_insert(Ok(resp));
            }
            Err(refused) => {
                let reason = refused.refusal.reason.as_str();
                cut_short(gateway, method, &member.upstream.settings, reason);
                first_refusal.get_or_insert(Err(refused));
            }
        }
    }
    match (head, first_refusal) {
        (Some(parts), _) => {
            let merged = MergedEvents {
                streams,
                prefixes,
                next: 0,
            };
            Ok(Response::from_parts(
                parts,
                ProxyBody::stream(Box::new(merged)),
            ))
        }
        (None, Some(first)) => first,
        (None, None) => Err(Refused::new(
            Refusal::new(
                Reason::UpstreamBadResponse,
                "no upstream of this route answered",
            ),
            None,
            &fed.settings.name,
        )),
    }
}

/// Whether an upstream answered with an event stream.
fn is_event_stream(resp: &Response<ProxyBody>) -> bool {
    resp.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// The resource URIs a `subscriptions/listen` names, split by upstream
/// (each its own URIs, in the route's order); `None` when it names none.
fn subscriptions(fed: &Federated, inbound: &Inbound) -> Result<Option<Vec<Vec<String>>>, Refusal> {
    if inbound.request.method != McpMethod::SubscriptionsListen {
        return Ok(None);
    }
    let params = inbound.request.params_map();
    let Some(uris) = params
        .get("notifications")
        .and_then(|n| n.get("resourceSubscriptions"))
        .and_then(Value::as_array)
    else {
        return Ok(None);
    };
    let mut by_member = vec![Vec::new(); fed.members.len()];
    for uri in uris {
        let exposed = uri.as_str().unwrap_or_default();
        let (member, own) = member_of(fed, TargetKind::Resource, exposed)?;
        if let Some(i) = fed.members.iter().position(|m| Arc::ptr_eq(m, &member)) {
            by_member[i].push(own.to_owned());
        }
    }
    Ok(Some(by_member))
}

/// Several checked streams as one: whole events, taken in turn from
/// whichever stream has one, until every stream has ended. A resource's
/// update names the resource as the client knows it (with its prefix).
struct MergedEvents {
    streams: Vec<Option<ProxyBody>>,
    /// Each stream's upstream prefix.
    prefixes: Vec<String>,
    /// Where the next turn starts, so no stream starves the others.
    next: usize,
}

impl EventSource for MergedEvents {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let n = self.streams.len();
        for turn in 0..n {
            let i = (self.next + turn) % n;
            let Some(stream) = self.streams[i].as_mut() else {
                continue;
            };
            match Pin::new(stream).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    self.next = i + 1;
                    if let Ok(data) = frame.into_data() {
                        return Poll::Ready(Some(expose::event(data, &self.prefixes[i])));
                    }
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Ready(Some(Err(never))) => match never {},
                Poll::Ready(None) => self.streams[i] = None,
                Poll::Pending => {}
            }
        }
        match self.streams.iter().all(Option::is_none) {
            true => Poll::Ready(None),
            false => Poll::Pending,
        }
    }

    fn refused(&self) -> Option<Reason> {
        None
    }
}
