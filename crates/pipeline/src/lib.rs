//! The request pipeline (ARCHITECTURE.md, "Crates"): the MCP phases over one request
//! context (`pipeline`), the generic tower layers around them (`layers`), pinned
//! listings (`listings`) and OpenTelemetry traces (`telemetry`), over every crate below;
//! the gateway's own approval questions (`approval`) are internal to it.

#![warn(unreachable_pub)]

pub(crate) mod approval;
pub mod connection;
pub mod layers;
pub mod listings;
pub mod pipeline;
pub mod telemetry;

pub(crate) use portcullis_access::{credential, identify, throttle, tls};
pub(crate) use portcullis_audit::audit;
pub(crate) use portcullis_config::config;
pub(crate) use portcullis_dataplane::headers;
pub(crate) use portcullis_model::{json, model};
pub(crate) use portcullis_mrtr::{mrtr, sessions};
pub(crate) use portcullis_policy::policy;
