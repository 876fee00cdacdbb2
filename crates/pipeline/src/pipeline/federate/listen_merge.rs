//! One 2026-07-28 `subscriptions/listen` made of several. The client asked
//! for one subscription, so it must see it acknowledged once (the spec's
//! first message of a subscription, saying what the server agreed to) and
//! ended once (the listen's result). Each upstream's acknowledgement is
//! held until every upstream still streaming has sent its own, then one is
//! delivered saying what they agreed to together, followed by what came
//! meanwhile; each upstream's result is held, and the last one is delivered
//! when every stream has ended. A client never reads a second answer to
//! its request while other upstreams still stream.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::model::McpMethod;

use super::super::sse::{event_with_id, SseFramer};

/// Events held while acknowledgements are awaited; past this the
/// acknowledgement is delivered with what has been agreed so far.
const MAX_HELD: usize = 256;

const ACKNOWLEDGED: &str = McpMethod::SubscriptionsAcknowledged.as_str();

/// What one event of a member's stream is, for the merge.
enum Kind {
    Acknowledged(Value),
    /// The member's answer to the listen: its end of the subscription.
    Ended,
    Other,
}

fn kind(event: &Bytes) -> Kind {
    // Notifications other than the acknowledgement, by far the most, are
    // told apart without a parse.
    let acknowledges = memchr::memmem::find(event, b"acknowledged").is_some();
    let may_answer = memchr::memmem::find(event, b"\"id\"").is_some();
    if !acknowledges && !may_answer {
        return Kind::Other;
    }
    let mut framer = SseFramer::new(event.len() + 1);
    framer.push(event);
    let Some(message) = framer
        .next_event()
        .ok()
        .flatten()
        .and_then(|e| e.data)
        .and_then(|d| crate::json::parse_value(d.as_bytes()).ok())
    else {
        return Kind::Other;
    };
    match message.get("method").and_then(Value::as_str) {
        Some(ACKNOWLEDGED) => Kind::Acknowledged(message),
        Some(_) => Kind::Other,
        None if message.get("result").is_some() || message.get("error").is_some() => Kind::Ended,
        None => Kind::Other,
    }
}

pub(super) struct ListenMerge {
    acknowledged: Vec<bool>,
    streaming: Vec<bool>,
    /// The first acknowledgement, its notifications replaced by `agreed`.
    first: Option<Value>,
    agreed: Map<String, Value>,
    held: VecDeque<Bytes>,
    delivered_ack: bool,
    last_answer: Option<Bytes>,
    out: VecDeque<Bytes>,
}

impl ListenMerge {
    pub(super) fn new(members: usize) -> ListenMerge {
        ListenMerge {
            acknowledged: vec![false; members],
            streaming: vec![true; members],
            first: None,
            agreed: Map::new(),
            held: VecDeque::new(),
            delivered_ack: false,
            last_answer: None,
            out: VecDeque::new(),
        }
    }

    /// An event of member `i`'s checked stream.
    pub(super) fn event(&mut self, i: usize, event: Bytes) {
        match kind(&event) {
            Kind::Acknowledged(message) if !self.acknowledged[i] => {
                self.acknowledged[i] = true;
                if let Some(filter) = message.pointer("/params/notifications") {
                    agree(&mut self.agreed, filter);
                }
                self.first.get_or_insert(message);
                self.release_when_all_acknowledged();
            }
            Kind::Ended => self.last_answer = Some(event),
            _ if self.delivered_ack => self.out.push_back(event),
            _ => {
                self.held.push_back(event);
                if self.held.len() > MAX_HELD {
                    self.release();
                }
            }
        }
    }

    /// Member `i`'s stream has ended.
    pub(super) fn ended(&mut self, i: usize) {
        self.streaming[i] = false;
        self.release_when_all_acknowledged();
    }

    /// Every stream has ended: what is still held, then the last answer.
    pub(super) fn finish(&mut self) {
        self.release();
        if let Some(answer) = self.last_answer.take() {
            self.out.push_back(answer);
        }
    }

    /// The next event to deliver.
    pub(super) fn next(&mut self) -> Option<Bytes> {
        self.out.pop_front()
    }

    fn release_when_all_acknowledged(&mut self) {
        let all = (0..self.acknowledged.len()).all(|j| self.acknowledged[j] || !self.streaming[j]);
        if all && self.first.is_some() {
            self.release();
        }
    }

    /// The one acknowledgement (if any upstream sent one), then what was held.
    fn release(&mut self) {
        if !self.delivered_ack {
            if let Some(mut ack) = self.first.take() {
                if let Some(params) = ack.get_mut("params").and_then(Value::as_object_mut) {
                    params.insert("notifications".into(), Value::Object(self.agreed.clone()));
                }
                if let Ok(bytes) = serde_json::to_vec(&ack) {
                    self.out.push_back(event_with_id(None, &bytes));
                }
                self.delivered_ack = true;
            }
        }
        self.out.extend(self.held.drain(..));
    }
}

/// What the upstreams agreed to together: a kind of notification any of
/// them honours, the resources each subscribed (URIs as the client knows
/// them, already under each upstream's prefix).
fn agree(agreed: &mut Map<String, Value>, filter: &Value) {
    let Some(filter) = filter.as_object() else {
        return;
    };
    for (name, value) in filter {
        match (agreed.get_mut(name), value) {
            (None, v) => {
                agreed.insert(name.clone(), v.clone());
            }
            (Some(Value::Bool(b)), Value::Bool(v)) => *b |= *v,
            (Some(Value::Array(all)), Value::Array(more)) => {
                for v in more {
                    if !all.contains(v) {
                        all.push(v.clone());
                    }
                }
            }
            (Some(_), _) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(message: Value) -> Bytes {
        event_with_id(None, message.to_string().as_bytes())
    }

    fn ack(filter: Value) -> Bytes {
        ev(json!({"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {"notifications": filter}}))
    }

    fn drain(m: &mut ListenMerge) -> Vec<Value> {
        std::iter::from_fn(|| m.next())
            .map(|e| {
                let text = String::from_utf8(e.to_vec()).unwrap();
                let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                serde_json::from_str(data).unwrap()
            })
            .collect()
    }

    #[test]
    fn one_acknowledgement_of_what_all_agreed_then_what_came_meanwhile() {
        let mut m = ListenMerge::new(2);
        m.event(
            0,
            ack(json!({"toolsListChanged": true, "resourceSubscriptions": ["a+x"]})),
        );
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        m.event(0, ev(changed.clone()));
        assert!(drain(&mut m).is_empty(), "held until b acknowledges");
        m.event(1, ack(json!({"promptsListChanged": true, "toolsListChanged": false, "resourceSubscriptions": ["b+y", "a+x"]})));
        let got = drain(&mut m);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0]["method"], ACKNOWLEDGED);
        assert_eq!(
            got[0]["params"]["notifications"],
            json!({"toolsListChanged": true, "resourceSubscriptions": ["a+x", "b+y"], "promptsListChanged": true})
        );
        assert_eq!(got[1], changed);
        m.event(1, ev(changed.clone()));
        assert_eq!(drain(&mut m), [changed]);
    }

    #[test]
    fn the_listen_is_answered_once_when_every_stream_has_ended() {
        let mut m = ListenMerge::new(2);
        m.event(0, ack(json!({})));
        m.event(1, ack(json!({})));
        drain(&mut m);
        m.event(
            0,
            ev(json!({"jsonrpc": "2.0", "id": "l1", "result": {"from": "a"}})),
        );
        m.ended(0);
        assert!(drain(&mut m).is_empty(), "b still streams");
        m.event(
            1,
            ev(json!({"jsonrpc": "2.0", "id": "l1", "result": {"from": "b"}})),
        );
        m.ended(1);
        m.finish();
        let got = drain(&mut m);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["result"]["from"], "b");
    }

    #[test]
    fn an_upstream_that_ends_without_acknowledging_does_not_hold_the_others() {
        let mut m = ListenMerge::new(2);
        m.event(0, ack(json!({"toolsListChanged": true})));
        assert!(drain(&mut m).is_empty());
        m.ended(1);
        assert_eq!(drain(&mut m).len(), 1);
    }

    #[test]
    fn a_stream_that_never_acknowledges_is_delivered_as_it_came() {
        let mut m = ListenMerge::new(1);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}});
        m.event(0, ev(note.clone()));
        m.ended(0);
        m.finish();
        assert_eq!(drain(&mut m), [note]);
    }
}
