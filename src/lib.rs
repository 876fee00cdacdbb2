//! Portcullis: an elicitation-aware reverse proxy for the Model Context
//! Protocol (2026-07-28). See README.md and DESIGN.md for the data flow; the
//! modules follow it: accept → pipeline (route, request check, forward,
//! response check, record).

pub mod accept;
pub mod admin;
pub mod audit;
pub mod config;
pub mod demo;
pub mod headers;
pub mod healthcheck;
pub mod identify;
pub mod jsonrpc;
pub mod mrtr;
pub mod pipeline;
pub mod policy;
pub mod refusal;
pub mod server;
pub mod throttle;
pub mod tls;
