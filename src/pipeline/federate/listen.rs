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
use super::retarget::Retarget;
use crate::model::{McpMethod, Reason, Refusal};

/// Open every upstream's stream; answer with their events merged. An
/// upstream whose stream does not open (it offers none, it is down) is
/// left out; with none open, the first refusal is the answer.
pub(super) async fn merged(
    gateway: &Arc<Gateway>,
    fed: &Arc<Federated>,
    inbound: Inbound,
) -> Result<Response<ProxyBody>, Refused> {
    let timeout = fed.settings.fanout_timeout;
    let mut asked = Vec::with_capacity(fed.members.len());
    for member in &fed.members {
        asked.push((member.clone(), Retarget::Unchanged.apply(&inbound, fed)?));
    }
    let opened = futures_util::future::join_all(asked.into_iter().map(|(member, inbound)| {
        let name = member.name().to_owned();
        async move {
            match tokio::time::timeout(timeout, gateway.through(member, inbound)).await {
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
    let mut first_refusal = None;
    for (member, opened) in fed.members.iter().zip(opened) {
        match opened {
            Ok(resp) if resp.status().is_success() => {
                let (parts, body) = resp.into_parts();
                head.get_or_insert(parts);
                streams.push(Some(body));
            }
            Ok(resp) => {
                let reason = Reason::UpstreamRefused.as_str();
                cut_short(gateway, McpMethod::Other, &member.upstream.settings, reason);
                first_refusal.get_or_insert(Ok(resp));
            }
            Err(refused) => {
                let reason = refused.refusal.reason.as_str();
                cut_short(gateway, McpMethod::Other, &member.upstream.settings, reason);
                first_refusal.get_or_insert(Err(refused));
            }
        }
    }
    match (head, first_refusal) {
        (Some(parts), _) => {
            let merged = MergedEvents { streams, next: 0 };
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

/// Several checked streams as one: whole events, taken in turn from
/// whichever stream has one, until every stream has ended.
struct MergedEvents {
    streams: Vec<Option<ProxyBody>>,
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
                        return Poll::Ready(Some(data));
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
