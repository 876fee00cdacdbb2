//! Portcullis: an elicitation-aware reverse proxy for the Model Context
//! Protocol. See README.md and ARCHITECTURE.md for the data flow; the
//! crates follow it: the data plane accepts (listeners, TLS, HTTP) → the
//! generic layers → the pipeline (route, request check, identify, throttle,
//! permit, retry check, forward, response check, record), over the
//! configuration and the leaf types in `model` and `json`.
//!
//! This package is the binary of the workspace (ARCHITECTURE.md, "Crates"): the
//! command line, the server's start, reload and shutdown, the admin listener,
//! `portcullis explain` and the demo. The layers below it are their own crates, named
//! here at the root so that `crate::policy` (and `portcullis::policy` for tests,
//! benches and fuzz targets) resolve as before.

pub use portcullis_access::{credential, identify, oauth, permit, pins, throttle, tls};
pub use portcullis_audit::audit;
pub use portcullis_config::{config, watch};
pub use portcullis_dataplane::{accept, headers, workers};
pub use portcullis_model::{json, model};
pub use portcullis_mrtr::{mrtr, sessions};
pub use portcullis_pipeline::{connection, layers, listings, pipeline, telemetry};
pub use portcullis_policy::policy;

pub mod admin;
pub mod approval_token;
#[cfg(feature = "demo")]
pub mod demo;
pub mod explain;
pub mod healthcheck;
pub mod listings_command;
pub mod server;
pub mod signed;
pub mod weakened;
