//! Portcullis leaf types (ARCHITECTURE.md, "Crates"): `model` (the method table, refusal
//! reasons, capabilities, settings errors, the clock, the drain signal) and `json` (strict
//! JSON, the JSON-RPC envelope, error bodies). Depends on no other Portcullis crate.

pub mod json;
pub mod model;
