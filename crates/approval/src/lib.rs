//! Portcullis approval rules (ARCHITECTURE.md, "Crates"): when the gateway
//! asks the person before it forwards a call, and the `when` conditions
//! (CEL) that approval and allow/deny rules share. Depends only on
//! `portcullis-model`.
//!
//! Public surface:
//! - [`when`]: [`When`] (a compiled condition), [`Facts`] (what it reads),
//!   [`Variable`], [`Hint`] and [`Annotations`] (a listed tool's hints).
//! - [`rule`]: [`ApprovalRule`], [`ApprovalRules`] (first match wins),
//!   [`Because`], and the name tables [`ArgumentCheck`], [`Remember`],
//!   [`Approver`], [`Fallback`].
//! - [`decision`]: an approver's [`Verdict`] on the approval page, and why
//!   one was not taken ([`Undecided`]).
//! - [`raw`]: [`RawApproval`] as written in a policy file or a route, and
//!   [`compile`](raw::compile) / [`merge`](raw::merge) /
//!   [`condition`](raw::condition), which pin every problem to its span.

pub(crate) use portcullis_model::model;

pub mod decision;
pub mod raw;
pub mod rule;
pub mod when;

pub use decision::{Undecided, Verdict};
pub use raw::RawApproval;
pub use rule::{
    ApprovalRule, ApprovalRules, Approver, ApproversWritten, ArgumentCheck, Because, Circumstances,
    Fallback, HintMatch, RefusedDecision, RefusedSignIn, Remember, Step, ToolNames, ARGUMENTS_RULE,
};
pub use when::{Annotations, CallerFacts, Facts, Hint, Variable, When, WhenError, WhenFailed};
