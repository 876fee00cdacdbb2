//! Multi-round-trip requests and sessions (ARCHITECTURE.md, "Crates"): `mrtr` (sealing,
//! minting, checking retries and answers, the single-use store) and `sessions` (the sealed
//! 2025-11-25 session id), over `portcullis-model` and `portcullis-policy`.

pub mod mrtr;
pub mod sessions;

pub(crate) use portcullis_model::model;
pub(crate) use portcullis_policy::policy;
