//! The integration tests, one binary: real HTTP over loopback, real MCP SDK
//! peers (rmcp), a real Redis, the gateway in-process or as its binary.
//! `common` holds the shared harness; each module one area.

mod common;

mod access_log;
mod approval;
mod approval_page;
mod approval_sessions;
mod approval_sign_in;
mod architecture;
mod argument_contract;
mod audit;
mod audit_ids;
mod book_examples;
mod bridge;
mod bridge_legacy;
mod cli;
mod config_errors;
mod dashboards;
mod docs;
mod drain;
mod explain;
mod failure_metrics;
mod federation;
mod federation_bridge;
mod federation_hostile;
mod federation_shadowing;
mod hardening;
mod hostile_reasons;
mod identity;
mod inspection;
mod listings;
mod mcp_apps;
mod mrtr;
mod oauth;
mod otlp;
mod otlp_logs;
mod policy;
mod proxy;
mod redirect_results;
mod reload;
mod reload_live;
mod reload_metrics;
mod reload_weakened;
mod resumed;
mod rmcp_e2e;
mod runtime;
mod scope_challenge;
mod session_ends;
mod sessions;
mod stdio;
mod tasks;
mod tasks_hostile;
mod throttle_redis;
mod tls;
mod trace_context;
