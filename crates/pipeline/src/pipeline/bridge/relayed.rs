//! The holder's side of the relay: a hand-off another replica received
//! and checked, for a call that waits here. The holder checks again that
//! the call is the one named, for the same session (an answer) or caller
//! (a retry), then does what the answer would have done had it come here.

use std::sync::{Arc, Weak};

use super::super::relay::{Hand, Holder, Reply};
use super::calls::{BridgeCalls, CallEvent};
use super::legacy::resume_relayed;

/// The [`Holder`] of this instance's calls.
pub(crate) fn holder(calls: &Arc<BridgeCalls>) -> Arc<dyn Holder> {
    Arc::new(Calls(Arc::downgrade(calls)))
}

/// Weak: the relay is kept by the gateway, which keeps the calls.
struct Calls(Weak<BridgeCalls>);

#[async_trait::async_trait]
impl Holder for Calls {
    async fn take(&self, hand: Hand) -> Reply {
        let Some(calls) = self.0.upgrade() else {
            return Reply::NotWaiting;
        };
        match hand {
            Hand::Answer {
                call,
                session,
                key,
                result,
                error,
            } => {
                let event = CallEvent::Answer { key, result, error };
                match calls.deliver_in(&session, &call, event) {
                    true => Reply::Delivered,
                    false => Reply::NotWaiting,
                }
            }
            Hand::Retry {
                call,
                principal,
                answer,
            } => match resume_relayed(&calls, call, &principal, answer).await {
                Ok(message) => Reply::Answered { message },
                Err(refusal) => Reply::refused(refusal),
            },
            Hand::Cancel {
                session,
                client_id: Some(id),
            } => {
                calls.cancel(&session, &id);
                Reply::Delivered
            }
            Hand::Cancel {
                session,
                client_id: None,
            } => {
                calls.end_session(&session);
                Reply::Delivered
            }
            // The approvals' holder takes decisions before they come here.
            Hand::Decide { .. } | Hand::AwaitDecision { .. } => Reply::NotWaiting,
        }
    }
}
