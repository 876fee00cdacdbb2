//! What crosses Redis between replicas: a hand-off to the replica that
//! holds a call, and its reply. An answer crosses only after the replica
//! that received it checked it (its sealed state opened, bound to this
//! session or caller, validated against what was asked, used once); the
//! holder checks again that the call is the one the hand-off names for the
//! same session or caller. Nothing here is ever logged.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::{Reason, Refusal};
use portcullis_approval::{Undecided, Verdict};

/// A message as sealed: with the time (unix seconds) after which the
/// replica it is for drops it (a message replayed from Redis later).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Sealed<T> {
    pub(crate) expires: u64,
    pub(crate) envelope: T,
}

/// One message on a replica's relay channel.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum Envelope {
    /// A hand-off for a call this replica holds; the reply goes to the
    /// channel `reply_to` under `id`.
    Hand {
        id: String,
        reply_to: String,
        hand: Hand,
    },
    /// The reply to a hand-off this replica sent.
    Reply { id: String, reply: Reply },
    /// News for every replica, which nobody replies to.
    Tell { hand: Hand },
}

/// What is handed to the replica that holds a call.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Hand {
    /// A 2025-11-25 client's answer to a request pushed on the stream of
    /// `call` (a bridged call's question, or the gateway's own approval).
    Answer {
        call: String,
        /// The nonce of the session the answer came in.
        session: String,
        key: String,
        result: Option<Value>,
        error: Option<Value>,
    },
    /// A 2026-07-28 client's retry of a call carried in an upstream
    /// session: its answer to the push the held upstream call waits on.
    Retry {
        call: String,
        /// The caller the retry came from (its principal key).
        principal: String,
        answer: Value,
    },
    /// A bridged session's call cancelled by its client (`client_id`, the
    /// id of its request), or, without one, the session ended: told to every
    /// replica, since the one whose call it is is not known.
    Cancel {
        session: String,
        client_id: Option<Value>,
    },
    /// An approver's decision, taken on another replica's approval page,
    /// for the approval `id` held here (checked here: its token, once).
    Decide {
        id: String,
        csrf: String,
        verdict: Verdict,
        remember: bool,
        /// The approver, as recorded.
        by: String,
    },
    /// A 2026-07-28 caller's retry of a call held for an approver on the
    /// replica holding the approval `id`: the holder replies once the
    /// approver decided (or the approval expired), and the call goes on
    /// from the replica the retry reached.
    AwaitDecision {
        id: String,
        /// The caller the retry came from (its principal key), and the
        /// arguments' digest: the approval's own are checked against them.
        principal: String,
        digest: String,
    },
}

impl Hand {
    /// The label the hand-off is counted under.
    pub(crate) fn kind(&self) -> HandKind {
        match self {
            Hand::Answer { .. } => HandKind::Answer,
            Hand::Retry { .. } => HandKind::Retry,
            Hand::Cancel { .. } => HandKind::Cancel,
            Hand::Decide { .. } | Hand::AwaitDecision { .. } => HandKind::Decision,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandKind {
    Answer,
    Retry,
    Cancel,
    Decision,
}

impl HandKind {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            HandKind::Answer => "answer",
            HandKind::Retry => "retry",
            HandKind::Cancel => "cancel",
            HandKind::Decision => "decision",
        }
    }
}

/// The holder's reply to a hand-off.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Reply {
    /// The answer reached the waiting call.
    Delivered,
    /// The holder has no such call waiting (it ended, or was answered).
    NotWaiting,
    /// A retry's outcome: the JSON-RPC message the client gets (the next
    /// `input_required` question or the call's result), addressed to the
    /// call's first id (the replica that received the retry readdresses it).
    Answered { message: Value },
    /// A decision the holder did not take, and why.
    Undecided { why: Undecided },
    /// What the approver decided (`None`: nobody did before the expiry).
    Decided {
        verdict: Option<Verdict>,
        by: String,
        remember: bool,
    },
    /// A retry's refusal, as the holder decided it.
    Refused {
        reason: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extra: Option<Map<String, Value>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
    },
}

impl Reply {
    pub(crate) fn refused(refusal: Refusal) -> Reply {
        let status = refusal.status().as_u16();
        Reply::Refused {
            reason: refusal.reason.as_str().to_owned(),
            message: refusal.message,
            extra: refusal.extra.map(|m| *m),
            status: Some(status),
        }
    }

    /// The refusal a [`Reply::Refused`] carries (an unknown reason is the
    /// holder's internal error: replicas of one release share the table).
    pub(crate) fn to_refusal(
        reason: &str,
        message: String,
        extra: Option<Map<String, Value>>,
        status: Option<u16>,
    ) -> Refusal {
        let mut r = Refusal::new(
            Reason::parse(reason).unwrap_or(Reason::InternalError),
            message,
        );
        if let Some(extra) = extra {
            for (k, v) in extra {
                r = r.with_data(&k, v);
            }
        }
        if let Some(s) = status.and_then(|s| http::StatusCode::from_u16(s).ok()) {
            r = r.with_status(s);
        }
        r
    }
}
