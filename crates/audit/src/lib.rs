//! The audit trail (ARCHITECTURE.md, "Crates"): typed audit events that carry names,
//! never values, and their sinks (off, stdout, a rotated file; OpenTelemetry log records
//! with `[audit.otlp]`), over `portcullis-model`,
//! `portcullis-policy` and `portcullis-mrtr`.

#![warn(unreachable_pub)]

pub mod audit;

pub(crate) use portcullis_approval as approval;
pub(crate) use portcullis_model::model;
pub(crate) use portcullis_mrtr::mrtr;
pub(crate) use portcullis_policy::policy;
