//! An approver's decision on the approval page, and why one was not taken:
//! what the page, the pending approvals and the relay between replicas
//! (which hands a decision to the replica holding the call) all name.

use serde::{Deserialize, Serialize};

use crate::rule::RefusedDecision;

/// What the approver decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approved,
    Declined,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approved => "approved",
            Verdict::Declined => "declined",
        }
    }
}

/// Why an approval could not be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Undecided {
    #[error("no such approval waits (it was decided, expired, or its call went away)")]
    NotFound,
    #[error("the approval has expired")]
    Expired,
    #[error("the approval was already decided")]
    AlreadyDecided,
    #[error("the form's token does not belong to this approval")]
    CsrfMismatch,
    #[error("the gateway holding the call is gone (stopped, or cut from the shared store): the call is lost")]
    HolderGone,
    #[error("the gateway holding the call cannot be reached (its shared store is unreachable); try again")]
    Unreachable,
}

impl Undecided {
    /// How a decision refused for this is recorded; `None` when there is
    /// no approval to record it under.
    pub fn recorded_as(self) -> Option<RefusedDecision> {
        use RefusedDecision as R;
        match self {
            Undecided::NotFound | Undecided::HolderGone | Undecided::Unreachable => None,
            Undecided::Expired => Some(R::Expired),
            Undecided::AlreadyDecided => Some(R::AlreadyDecided),
            Undecided::CsrfMismatch => Some(R::TokenMismatch),
        }
    }
}
