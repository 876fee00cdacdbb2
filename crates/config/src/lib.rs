//! The configuration (ARCHITECTURE.md, "Crates"): the TOML file as written turned, once,
//! into each phase's typed settings (`config`), and the stamps of the files a config is
//! made of (`watch`), over the layer crates whose settings it reads.

#![warn(unreachable_pub)]

pub mod config;
pub mod watch;

pub(crate) use portcullis_access::{credential, identify, oauth, permit, throttle, tls};
pub(crate) use portcullis_audit::audit;
pub(crate) use portcullis_model::model;
pub(crate) use portcullis_mrtr::mrtr;
pub(crate) use portcullis_policy::policy;
