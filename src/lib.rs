//! Portcullis: an elicitation-aware reverse proxy for the Model Context
//! Protocol. See README.md and ARCHITECTURE.md for the data flow; the
//! modules follow it: accept → layers → pipeline (route, request check,
//! identify, throttle, permit, retry check, forward, response check,
//! record), over leaf types in `model` and `json`.

pub mod accept;
pub mod admin;
pub mod audit;
pub mod config;
pub mod demo;
pub mod explain;
pub mod headers;
pub mod healthcheck;
pub mod identify;
pub mod json;
pub mod layers;
pub mod listings;
pub mod model;
pub mod mrtr;
pub mod permit;
pub mod pipeline;
pub mod policy;
pub mod server;
pub mod sessions;
pub mod telemetry;
pub mod throttle;
pub mod tls;
pub mod watch;
