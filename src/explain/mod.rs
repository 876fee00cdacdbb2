//! `portcullis explain`: a policy dry-run on one message, offline.
//!
//! The message is judged by the gateway's own phases on an offline gateway
//! built from the config (no listener, no upstream, no audit trail): an
//! upstream answer goes through the response check as it would on the
//! wire, a client retry through the retry check. Beside the decision it
//! prints every rule's verdict, passes included (the policy's trace mode),
//! and what the client would receive. Nothing a user typed is printed:
//! answers are shown by key and field name only.
//!
//! Exit status: 0 delivered (or, for a retry, forwarded), 1 refused, 2 for
//! a usage or config problem.

mod answer;
mod call;
mod render;
mod retry;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::config::GatewayConfig;
use crate::pipeline::Gateway;

/// The arguments of `portcullis explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The gateway config: its upstreams, policies and state keys.
    #[arg(short, long, value_name = "FILE")]
    pub config: PathBuf,
    /// The upstream (its `id`) whose policy applies.
    #[arg(long, value_name = "ID")]
    pub upstream: String,
    /// The message: an upstream answer (an input_required result, a JSON-RPC
    /// response, or an SSE event), a client retry carrying the gateway's
    /// requestState, or a client's call (tools/call, prompts/get,
    /// resources/read, completion/complete: its arguments through the
    /// argument rules). `-` reads standard input.
    #[arg(value_name = "MESSAGE.json")]
    pub message: PathBuf,
    /// The client request an upstream answer answers.
    #[arg(long, default_value = "tools/call", value_name = "METHOD")]
    pub method: String,
    /// Its tool or prompt name (or resource URI).
    #[arg(long, default_value = "dry-run", value_name = "NAME")]
    pub target: String,
    /// The capabilities the client declared: comma-separated form, url,
    /// sampling, sampling-context, roots (or none).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "form,url,sampling,sampling-context,roots",
        value_name = "LIST"
    )]
    pub caps: Vec<Capability>,
    /// For a retry: check it as this caller (SCHEME:NAME: the auth scheme's
    /// configured name and the principal, e.g. keys:alice); by default, the
    /// caller the state was issued to.
    #[arg(long, value_name = "SCHEME:NAME")]
    pub principal: Option<String>,
    /// For a call: the upstream's list result (tools/list, prompts/list,
    /// resources/templates/list; or a response carrying one) it is checked
    /// against, as the gateway would have delivered it to the caller.
    #[arg(long, value_name = "LIST.json")]
    pub listing: Option<PathBuf>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One client capability, as `--caps` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Capability {
    Form,
    Url,
    Sampling,
    SamplingContext,
    Roots,
    None,
}

/// One rule's verdict, as printed.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub rule: &'static str,
    /// pass, or what the rule did (block, strip, sanitize, flag, monitor,
    /// allow; for a retry: fail, not_reached).
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The refusal the client would get.
#[derive(Debug, Clone, Serialize)]
pub struct RefusalOut {
    pub reason: &'static str,
    pub code: i64,
    pub message: String,
}

/// The whole dry-run, printed as text or JSON.
#[derive(Debug, Serialize)]
pub struct Explanation {
    pub upstream: UpstreamOut,
    /// What the message was read as.
    pub message: &'static str,
    /// delivered | refused (a retry: forwarded | refused).
    pub decision: &'static str,
    /// What a check's `key` names: an input request, or an item of a list
    /// result (a tool, prompt or resource).
    #[serde(skip)]
    pub keys_name: &'static str,
    /// Every rule that ran, in order, passes included.
    pub checks: Vec<Check>,
    /// When an enforcing policy refused: what every rule would have found
    /// had it only monitored (the rules after the refusal never ran).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub every_rule: Vec<Check>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<RefusalOut>,
    /// Human-facing text the gateway rewrote (where, before, after).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sanitised: Vec<answer::TextChange>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stripped: Vec<answer::FieldOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Value>,
    /// The message the client would receive (an upstream answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_receives: Option<Value>,
    /// What a retry says and would send upstream (names only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<retry::RetryOut>,
    /// A call's arguments the rules redacted or removed (paths only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed_arguments: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct UpstreamOut {
    pub id: String,
    pub name: String,
    pub policy: String,
    pub mode: &'static str,
}

impl Explanation {
    fn refused(&self) -> bool {
        self.decision == "refused"
    }
}

/// A problem with the command line or the files it names (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigErrors),
    #[error("no upstream with id \"{id}\" in the config (known: {known})")]
    UnknownUpstream { id: String, known: String },
    #[error(
        "no [[route]] leads to upstream \"{0}\"; explain needs the route a request would take"
    )]
    NoRoute(String),
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot build the offline gateway: {0}")]
    Gateway(String),
    #[error("{0}")]
    Message(String),
}

/// Run `portcullis explain`; prints the explanation and returns the exit status.
pub async fn run(args: &ExplainArgs) -> ExitCode {
    match explain(args).await {
        Ok(e) => {
            if args.json {
                match serde_json::to_string_pretty(&e) {
                    Ok(text) => println!("{text}"),
                    Err(err) => {
                        eprintln!("error: {err}");
                        return ExitCode::from(2);
                    }
                }
            } else {
                print!("{}", render::text(&e));
            }
            ExitCode::from(u8::from(e.refused()))
        }
        Err(UsageError::Config(errors)) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The route path a request for `upstream` takes.
fn route_to(config: &GatewayConfig, upstream: &str) -> Result<String, UsageError> {
    if !config.upstreams.iter().any(|u| u.id == upstream) {
        let known: Vec<&str> = config.upstreams.iter().map(|u| u.id.as_str()).collect();
        return Err(UsageError::UnknownUpstream {
            id: upstream.to_owned(),
            known: known.join(", "),
        });
    }
    // A route of its own before a federated route that includes it.
    let mut paths: Vec<(bool, &String)> = config
        .routes
        .iter()
        .filter(|(_, r)| r.upstreams.iter().any(|u| u.id == upstream))
        .map(|(p, r)| (r.federation.is_some(), p))
        .collect();
    paths.sort();
    let paths: Vec<&String> = paths.into_iter().map(|(_, p)| p).collect();
    paths
        .first()
        .map(|p| (*p).clone())
        .ok_or_else(|| UsageError::NoRoute(upstream.to_owned()))
}

fn read_message(path: &std::path::Path) -> Result<Vec<u8>, UsageError> {
    let read = if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map(|_| buf)
    } else {
        std::fs::read(path)
    };
    read.map_err(|source| UsageError::Read {
        path: std::path::absolute(path)
            .unwrap_or_else(|_| path.to_owned())
            .display()
            .to_string(),
        source,
    })
}

async fn explain(args: &ExplainArgs) -> Result<Explanation, UsageError> {
    let config_path = args.config.clone();
    let config = tokio::task::spawn_blocking(move || GatewayConfig::load(&config_path))
        .await
        .map_err(|e| UsageError::Gateway(e.to_string()))??;
    let path = route_to(&config, &args.upstream)?;
    let bytes = read_message(&args.message)?;
    let gateway: Arc<Gateway> =
        Gateway::offline(config).map_err(|e| UsageError::Gateway(e.to_string()))?;
    let upstream = upstream_out(&gateway, &args.upstream);
    match answer::Incoming::read(&bytes, gateway.config.limits.max_response_body_bytes)? {
        answer::Incoming::Retry(body) => {
            retry::explain(&gateway, &path, args, body, upstream).await
        }
        answer::Incoming::Call(body) => call::explain(&gateway, &path, args, body, upstream),
        incoming => answer::explain(&gateway, &path, args, incoming, upstream),
    }
}

fn upstream_out(gateway: &Gateway, id: &str) -> UpstreamOut {
    let up = gateway.config.upstreams.iter().find(|u| u.id == id);
    UpstreamOut {
        id: id.to_owned(),
        name: up.map(|u| u.name.clone()).unwrap_or_default(),
        policy: up.map(|u| u.policy.name.clone()).unwrap_or_default(),
        mode: match up.map(|u| u.policy.mode) {
            Some(crate::policy::config::Mode::Monitor) => "monitor",
            _ => "enforce",
        },
    }
}
