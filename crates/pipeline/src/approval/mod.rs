//! The gateway asks the person: approval of risky calls. The rules and
//! their `when` conditions are the `portcullis-approval` crate's; here is
//! what the gateway does with them — the facts of a call as the rules
//! read them (`facts.rs`), the gateway's own form (`form.rs`), the memory
//! of decisions (`memory.rs`), the metric family (`metrics.rs`).

pub(crate) mod facts;
pub(crate) mod form;
pub(crate) mod memory;
pub(crate) mod metrics;

#[cfg(test)]
pub(crate) use portcullis_approval::{raw, RawApproval};
pub(crate) use portcullis_approval::{
    Annotations, ApprovalRule, ApprovalRules, Approver, ApproversWritten, ArgumentCheck, Because,
    CallerFacts, Circumstances, Facts, Fallback, RefusedDecision, RefusedSignIn, Remember, Step,
    Variable,
};
