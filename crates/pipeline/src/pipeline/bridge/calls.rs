//! The bridged calls waiting on this gateway instance for a 2025-11-25
//! client's answers: the client answers a pushed question with a separate
//! POST, which finds the waiting call here by the id sealed into the push.
//! Only this process holds its calls: an answer that reaches another
//! replica is handed here through the relay (`relayed.rs`), found by the
//! instance id each call's id starts with.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::mpsc;

/// What reaches a waiting call.
#[derive(Debug)]
pub(crate) enum CallEvent {
    /// The client answered the question asked under `key`.
    Answer {
        key: String,
        result: Option<Value>,
        error: Option<Value>,
    },
    /// The client cancelled the call (`notifications/cancelled`).
    Cancelled,
}

struct Waiting {
    /// The nonce of the session the call belongs to.
    session: String,
    /// The client's id of the call, as compact JSON text.
    client_id: String,
    events: mpsc::UnboundedSender<CallEvent>,
}

/// Every bridged call of this instance, carried across config reloads:
/// those waiting for a 2025-11-25 client's answers, and (`held.rs`) the
/// 2025-11-25 upstream calls held open for a 2026-07-28 client's retry,
/// with the upstream sessions they run in.
pub(crate) struct BridgeCalls {
    waiting: Mutex<HashMap<String, Waiting>>,
    /// Names this instance in the states of the calls it holds.
    pub(crate) instance: String,
    pub(super) held: Mutex<HashMap<String, super::held::Held>>,
    pub(super) sessions: Mutex<HashMap<String, super::held::Opened>>,
}

impl Default for BridgeCalls {
    fn default() -> Self {
        BridgeCalls {
            waiting: Mutex::default(),
            instance: crate::mrtr::seal::new_operation_id(),
            held: Mutex::default(),
            sessions: Mutex::default(),
        }
    }
}

/// A call's place in [`BridgeCalls`], given back when dropped.
pub(crate) struct Registration {
    calls: Arc<BridgeCalls>,
    pub(crate) id: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.id);
    }
}

impl BridgeCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether no call waits here.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Register a call of `session`, known to the client as `client_id`.
    pub(crate) fn register(
        self: &Arc<Self>,
        id: String,
        session: &str,
        client_id: &str,
    ) -> (Registration, mpsc::UnboundedReceiver<CallEvent>) {
        let (events, rx) = mpsc::unbounded_channel();
        self.lock().insert(
            id.clone(),
            Waiting {
                session: session.to_owned(),
                client_id: compact(client_id),
                events,
            },
        );
        let registration = Registration {
            calls: self.clone(),
            id,
        };
        (registration, rx)
    }

    /// A new call's id: this instance's id, a dot, a random part (the
    /// relay finds the holder of a call by it).
    pub(crate) fn new_call_id(&self) -> String {
        format!(
            "{}.{}",
            self.instance,
            crate::mrtr::seal::new_operation_id()
        )
    }

    /// Whether the call `id` was made by this instance.
    pub(crate) fn holds(&self, id: &str) -> bool {
        crate::pipeline::relay::holder_of(id) == Some(self.instance.as_str())
    }

    /// Hand `event` to the call `id` when it belongs to `session` (what a
    /// relayed answer says it came in); false when no such call waits here.
    pub(crate) fn deliver_in(&self, session: &str, id: &str, event: CallEvent) -> bool {
        self.lock()
            .get(id)
            .is_some_and(|w| w.session == session && w.events.send(event).is_ok())
    }

    /// Whether the call `id` waits here.
    pub(crate) fn is_waiting(&self, id: &str) -> bool {
        self.lock().get(id).is_some_and(|w| !w.events.is_closed())
    }

    /// Hand `event` to the call `id`; false when it no longer waits here.
    pub(crate) fn deliver(&self, id: &str, event: CallEvent) -> bool {
        self.lock()
            .get(id)
            .is_some_and(|w| w.events.send(event).is_ok())
    }

    /// The client of `session` cancelled its request `client_id`.
    pub(crate) fn cancel(&self, session: &str, client_id: &Value) {
        let client_id = client_id.to_string();
        for w in self.lock().values() {
            if w.session == session && w.client_id == client_id {
                let _ = w.events.send(CallEvent::Cancelled);
            }
        }
    }

    /// The session ended: each of its calls is cancelled.
    pub(crate) fn end_session(&self, session: &str) {
        for w in self.lock().values() {
            if w.session == session {
                let _ = w.events.send(CallEvent::Cancelled);
            }
        }
    }
}

/// A JSON-RPC id's text as compact JSON (how a cancellation names it).
fn compact(id: &str) -> String {
    serde_json::from_str::<Value>(id).map_or_else(|_| id.to_owned(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn an_answer_reaches_its_call_until_the_call_ends() {
        let calls = Arc::new(BridgeCalls::default());
        let (reg, mut rx) = calls.register("c1".into(), "s1", " 7 ");
        assert!(calls.is_waiting("c1"));
        assert!(!calls.is_waiting("c2"));
        let answer = CallEvent::Answer {
            key: "k".into(),
            result: Some(json!({"action": "decline"})),
            error: None,
        };
        assert!(calls.deliver("c1", answer));
        assert!(matches!(rx.recv().await, Some(CallEvent::Answer { key, .. }) if key == "k"));
        // Another session's cancellation, or another id, is not this call's.
        calls.cancel("s2", &json!(7));
        calls.cancel("s1", &json!("7"));
        calls.cancel("s1", &json!(7));
        assert!(matches!(rx.recv().await, Some(CallEvent::Cancelled)));
        assert!(rx.try_recv().is_err());
        drop(reg);
        assert!(!calls.is_waiting("c1"));
        assert!(calls.is_empty());
        assert!(!calls.deliver("c1", CallEvent::Cancelled));
    }
}
