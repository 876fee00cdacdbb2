//! The gateway asks the person: approval of risky calls. The rules and
//! their `when` conditions are the `portcullis-approval` crate's; here is
//! what the gateway does with them — the facts of a call as the rules
//! read them (`facts.rs`), the gateway's own form (`form.rs`), the memory
//! of decisions (`memory.rs`), the metric family (`metrics.rs`).

pub mod facts;
pub mod form;
pub mod memory;
pub mod metrics;

pub use portcullis_approval::{raw, rule, when};
pub use portcullis_approval::{
    Annotations, ApprovalRule, ApprovalRules, Approver, ArgumentCheck, Because, CallerFacts,
    Circumstances, Facts, Fallback, Hint, RawApproval, Remember, Step, Variable, When,
};
