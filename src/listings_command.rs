//! `portcullis listings`: what a running gateway has pinned and held for an
//! upstream, and the operator's acceptance of a held definition. Both go
//! through the gateway's admin listener (`GET /listings`, `POST
//! /listings/accept`), which answers an acceptance only from loopback
//! (`admin.rs`); with Redis, any instance's admin listener reaches the
//! pins every instance shares.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

/// The header an acceptance must carry: a browser cannot send it to
/// another origin without a preflight, which the admin listener refuses.
pub const ACCEPT_HEADER: &str = "x-portcullis-admin";

const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, clap::Args)]
pub struct ListingsArgs {
    #[command(subcommand)]
    pub command: ListingsCommand,
    /// Reach the [admin] address of this config file.
    #[arg(
        short,
        long,
        value_name = "FILE",
        global = true,
        conflicts_with = "admin"
    )]
    pub config: Option<PathBuf>,
    /// Reach the admin listener at this IP:PORT.
    #[arg(long, value_name = "IP:PORT", global = true)]
    pub admin: Option<SocketAddr>,
}

#[derive(Debug, clap::Subcommand)]
pub enum ListingsCommand {
    /// Every item pinned for an upstream, and those held (a changed definition).
    List {
        /// The upstream's configured id.
        #[arg(long, value_name = "ID")]
        upstream: String,
        /// Print the gateway's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Pin the held definition of an item (or of every held item) of an upstream.
    Accept {
        #[arg(long, value_name = "ID")]
        upstream: String,
        /// The item's name (a resource's URI, a template's URI template).
        #[arg(
            long,
            value_name = "NAME",
            required_unless_present = "all",
            conflicts_with = "all"
        )]
        item: Option<String>,
        /// Only the item of this kind: tool, prompt, resource, resource_template.
        #[arg(long, value_name = "KIND", requires = "item")]
        kind: Option<String>,
        /// Every held item of the upstream.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Target(String),
    #[error("cannot reach the admin listener at {0}: {1}")]
    Connect(SocketAddr, String),
    #[error("the admin listener answered {0}: {1}")]
    Status(StatusCode, String),
}

/// The subcommand, against the admin listener at `admin` (`--admin`, or
/// the `[admin] address` of `--config`, which the caller reads: the
/// healthcheck's reading of it). Exit 0 on success, 1 when the gateway
/// refused or nothing matched, 2 on usage errors.
pub async fn run(args: ListingsArgs, admin: Result<SocketAddr, String>) -> ExitCode {
    let admin = match admin {
        Ok(a) => a,
        Err(e) => return usage(&e),
    };
    let outcome = match args.command {
        ListingsCommand::List { upstream, json } => list(admin, &upstream, json).await,
        ListingsCommand::Accept {
            upstream,
            item,
            kind,
            all,
        } => {
            if let Some(k) = kind
                .as_deref()
                .filter(|k| crate::listings::ItemKind::of_kind(k).is_none())
            {
                return usage(&format!(
                    "--kind {k:?} is not one of tool, prompt, resource, resource_template"
                ));
            }
            let body = json!({"upstream": upstream, "item": item, "kind": kind, "all": all});
            accept(admin, &body).await
        }
    };
    match outcome {
        Ok(code) => code,
        Err(CliError::Target(m)) => usage(&m),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

async fn list(admin: SocketAddr, upstream: &str, raw: bool) -> Result<ExitCode, CliError> {
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("upstream", upstream)
        .finish();
    let answer = exchange(admin, Method::GET, &format!("/listings?{query}"), None).await?;
    if raw {
        println!("{answer}");
        return Ok(ExitCode::SUCCESS);
    }
    let entries = answer["entries"].as_array().cloned().unwrap_or_default();
    let held = entries.iter().filter(|e| e["held"].is_string()).count();
    println!(
        "upstream {upstream}: {} item(s) pinned, {held} held",
        entries.len()
    );
    for e in &entries {
        let short = |v: &Value| {
            v.as_str()
                .map_or("-".to_owned(), |d| d.chars().take(16).collect())
        };
        let state = if e["held"].is_string() {
            "HELD  "
        } else {
            "pinned"
        };
        println!(
            "{state} {:<17} {}  pinned {}  held {}",
            e["kind"].as_str().unwrap_or("?"),
            e["name"].as_str().unwrap_or("?"),
            short(&e["pinned"]),
            short(&e["held"]),
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn accept(admin: SocketAddr, body: &Value) -> Result<ExitCode, CliError> {
    let answer = exchange(admin, Method::POST, "/listings/accept", Some(body)).await?;
    let accepted = answer["accepted"].as_array().cloned().unwrap_or_default();
    if accepted.is_empty() {
        eprintln!("nothing held matched; `portcullis listings list` shows what is held");
        return Ok(ExitCode::FAILURE);
    }
    for a in &accepted {
        println!(
            "accepted {} {}",
            a["kind"].as_str().unwrap_or("?"),
            a["name"].as_str().unwrap_or("?")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One request to the admin listener; its JSON answer.
async fn exchange(
    admin: SocketAddr,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, CliError> {
    let connect_err = |e: String| CliError::Connect(admin, e);
    let call = async {
        let stream = tokio::net::TcpStream::connect(admin)
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        tokio::spawn(connection);
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, admin.to_string())
            .header(header::USER_AGENT, "portcullis-listings");
        if body.is_some() {
            request = request
                .header(header::CONTENT_TYPE, "application/json")
                .header(ACCEPT_HEADER, "listings");
        }
        let request = request
            .body(Full::new(bytes))
            .map_err(|e| CliError::Target(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        let status = response.status();
        let text = response
            .into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .map_err(|e| connect_err(e.to_string()))?;
        let text = String::from_utf8_lossy(&text).trim().to_owned();
        if !status.is_success() {
            return Err(CliError::Status(status, text));
        }
        serde_json::from_str(&text).map_err(|e| CliError::Status(status, e.to_string()))
    };
    tokio::time::timeout(TIMEOUT, call)
        .await
        .map_err(|_| connect_err(format!("no answer within {TIMEOUT:?}")))?
}
