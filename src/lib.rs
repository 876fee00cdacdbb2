//! Portcullis: an elicitation-aware reverse proxy for the Model Context
//! Protocol. See README.md and ARCHITECTURE.md for the data flow; the
//! modules follow it: accept → layers → pipeline (route, request check,
//! identify, throttle, permit, retry check, forward, response check,
//! record), over leaf types in `model` and `json`.
//!
//! This package is the gateway layer of the workspace (ARCHITECTURE.md, "Crates"); the layers
//! below it are their own crates, named here at the root so that `crate::policy` (and
//! `portcullis::policy` for tests, benches and fuzz targets) resolve as before.

pub use portcullis_access::{credential, identify, oauth, permit, throttle, tls};
pub use portcullis_model::{json, model};
pub use portcullis_mrtr::{mrtr, sessions};
pub use portcullis_policy::policy;

pub mod accept;
pub mod admin;
pub mod approval;
pub mod audit;
pub mod config;
#[cfg(feature = "demo")]
pub mod demo;
pub mod explain;
pub mod headers;
pub mod healthcheck;
pub mod layers;
pub mod listings;
pub mod pipeline;
pub mod server;
pub mod telemetry;
pub mod watch;
pub mod workers;
