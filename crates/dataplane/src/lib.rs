//! The data plane (ARCHITECTURE.md, "Crates"): listeners and the accept loop (`accept`,
//! `workers` for the per-core runtime), which headers cross each way (`headers`), the
//! upstream connection pools and the forward phase's client (`forward`), and stdio
//! programs as upstreams (`stdio`). It knows HTTP and connections, not MCP's phases: a
//! listener serves each connection with the service its caller hands it.
//! `stdio::supervise` is the binary's hidden `stdio-supervise` and `stdio-confine`
//! steps (a program's supervisor, and its last step before exec).

#![warn(unreachable_pub)]

pub mod accept;
pub mod described;
pub mod forward;
pub mod headers;
mod peer;
pub mod stdio;
pub mod workers;

pub use peer::Peer;

pub(crate) use portcullis_access::{identify, tls};
pub(crate) use portcullis_config::config;
pub(crate) use portcullis_model::model;
