//! `portcullis listings`: what a running gateway has pinned and held for an
//! upstream, a held definition's text, and the operator's acceptance of
//! the definition they read (by its digest). Each goes through the
//! gateway's admin listener (`GET /listings`, `GET /listings/held`, `POST
//! /listings/accept`), signed with the `[state]` keys of `--config`
//! (`signed.rs`); an acceptance is answered only from loopback
//! (`admin.rs`). With Redis, any instance's admin listener reaches the
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

use crate::mrtr::seal::StateKeys;
use crate::signed;

/// The header an acceptance must carry: a browser cannot send it to
/// another origin without a preflight, which the admin listener refuses.
pub const ACCEPT_HEADER: &str = "x-portcullis-admin";

const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, clap::Args)]
pub struct ListingsArgs {
    #[command(subcommand)]
    pub command: ListingsCommand,
    /// The gateway's config file: its [state] keys sign the request, and
    /// its [admin] address is reached unless --admin is given.
    #[arg(short, long, value_name = "FILE", global = true)]
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
    /// The held definition of an item, as the upstream now lists it, and
    /// its digest (what `accept --digest` names).
    Show {
        #[arg(long, value_name = "ID")]
        upstream: String,
        /// The item's name (a resource's URI, a template's URI template).
        #[arg(long, value_name = "NAME")]
        item: String,
        /// Only the item of this kind: tool, prompt, resource, resource_template.
        #[arg(long, value_name = "KIND")]
        kind: Option<String>,
    },
    /// Pin the held definition of an item you read (`show`), by its digest;
    /// or every held item as `list` shows it now.
    Accept {
        #[arg(long, value_name = "ID")]
        upstream: String,
        /// The item's name (a resource's URI, a template's URI template).
        #[arg(
            long,
            value_name = "NAME",
            required_unless_present = "all",
            conflicts_with = "all",
            requires = "digest"
        )]
        item: Option<String>,
        /// Only the item of this kind: tool, prompt, resource, resource_template.
        #[arg(long, value_name = "KIND", requires = "item")]
        kind: Option<String>,
        /// The digest of the held definition you read (`show`): a
        /// definition that changed again since is not pinned.
        #[arg(long, value_name = "HEX", requires = "item")]
        digest: Option<String>,
        /// Every held item of the upstream, each with the digest `list`
        /// shows (printed before they are pinned).
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

/// The admin listener and the keys that sign for it.
struct Admin {
    address: SocketAddr,
    keys: StateKeys,
}

/// The `[state]` keys of a config file, read as the gateway reads them.
pub(crate) fn keys_of(config: &std::path::Path) -> Result<StateKeys, String> {
    let text = std::fs::read_to_string(config)
        .map_err(|e| format!("cannot read {}: {e}", config.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: {e}", config.display()))?;
    let state = table.get("state");
    let named = |key: &str| state.and_then(|s| s.get(key)).and_then(toml::Value::as_str);
    let keys = match (named("keys_file"), named("keys_env")) {
        (Some(file), _) => {
            let base = config.parent().unwrap_or(std::path::Path::new("."));
            StateKeys::from_file(&base.join(file))
        }
        (None, Some(var)) => StateKeys::from_env(var),
        (None, None) => {
            return Err(format!(
                "{} names no [state] keys_file or keys_env: the gateway made its own keys, and nothing can sign for its admin listener",
                config.display()
            ))
        }
    };
    keys.map_err(|e| e.to_string())
}

/// The subcommand, against the admin listener at `admin` (`--admin`, or
/// the `[admin] address` of `--config`, which the caller reads: the
/// healthcheck's reading of it). Exit 0 on success, 1 when the gateway
/// refused or nothing matched, 2 on usage errors.
pub async fn run(args: ListingsArgs, admin: Result<SocketAddr, String>) -> ExitCode {
    let address = match admin {
        Ok(a) => a,
        Err(e) => return usage(&e),
    };
    let keys = match &args.config {
        Some(config) => keys_of(config),
        None => Err("give --config FILE: its [state] keys sign the request".into()),
    };
    let admin = match keys {
        Ok(keys) => Admin { address, keys },
        Err(e) => return usage(&e),
    };
    let bad_kind = |kind: &Option<String>| {
        kind.as_deref()
            .filter(|k| crate::listings::ItemKind::of_kind(k).is_none())
            .map(|k| {
                usage(&format!(
                    "--kind {k:?} is not one of tool, prompt, resource, resource_template"
                ))
            })
    };
    let outcome = match args.command {
        ListingsCommand::List { upstream, json } => list(&admin, &upstream, json).await,
        ListingsCommand::Show {
            upstream,
            item,
            kind,
        } => {
            if let Some(code) = bad_kind(&kind) {
                return code;
            }
            show(&admin, &upstream, &item, kind.as_deref()).await
        }
        ListingsCommand::Accept {
            upstream,
            item,
            kind,
            digest,
            all,
        } => {
            if let Some(code) = bad_kind(&kind) {
                return code;
            }
            match (item, digest, all) {
                (Some(item), Some(digest), false) => {
                    let body =
                        json!({"upstream": upstream, "item": item, "kind": kind, "digest": digest});
                    accept(&admin, &body).await
                }
                _ => accept_all(&admin, &upstream).await,
            }
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

/// `GET /listings` for `upstream`.
async fn entries(admin: &Admin, upstream: &str) -> Result<Value, CliError> {
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("upstream", upstream)
        .finish();
    exchange(admin, Method::GET, &format!("/listings?{query}"), None).await
}

async fn list(admin: &Admin, upstream: &str, raw: bool) -> Result<ExitCode, CliError> {
    let answer = entries(admin, upstream).await?;
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

async fn show(
    admin: &Admin,
    upstream: &str,
    item: &str,
    kind: Option<&str>,
) -> Result<ExitCode, CliError> {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query
        .append_pair("upstream", upstream)
        .append_pair("item", item);
    if let Some(kind) = kind {
        query.append_pair("kind", kind);
    }
    let path = format!("/listings/held?{}", query.finish());
    let answer = exchange(admin, Method::GET, &path, None).await?;
    let held = answer["held"].as_array().cloned().unwrap_or_default();
    if held.is_empty() {
        eprintln!("{upstream} has no held definition of {item}");
        return Ok(ExitCode::FAILURE);
    }
    for h in &held {
        let kind = h["kind"].as_str().unwrap_or("?");
        let digest = h["held"].as_str().unwrap_or("?");
        println!("{kind} {item} of {upstream}");
        println!("pinned digest: {}", h["pinned"].as_str().unwrap_or("-"));
        println!("held digest:   {digest}");
        match h["text"]
            .as_str()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
        {
            Some(text) => println!(
                "{}",
                serde_json::to_string_pretty(&text).unwrap_or_default()
            ),
            None => {
                println!("(the held definition was too large to keep; read it from the upstream)")
            }
        }
        println!(
            "to pin it: portcullis listings accept --upstream {upstream} --item {item:?} --kind {kind} --digest {digest}"
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn accept(admin: &Admin, body: &Value) -> Result<ExitCode, CliError> {
    let answer = exchange(admin, Method::POST, "/listings/accept", Some(body)).await?;
    let accepted = answer["accepted"].as_array().cloned().unwrap_or_default();
    if accepted.is_empty() {
        eprintln!("nothing held matched: the item is not held, or its held definition is no longer the one of that digest (`portcullis listings show`)");
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

/// Every held item, each with the digest the gateway shows now (printed).
async fn accept_all(admin: &Admin, upstream: &str) -> Result<ExitCode, CliError> {
    let answer = entries(admin, upstream).await?;
    let mut digests = serde_json::Map::new();
    for e in answer["entries"].as_array().into_iter().flatten() {
        let (Some(kind), Some(name), Some(held)) =
            (e["kind"].as_str(), e["name"].as_str(), e["held"].as_str())
        else {
            continue;
        };
        println!("held {kind} {name}  {held}");
        digests.insert(format!("{kind}:{name}"), held.into());
    }
    let body = json!({"upstream": upstream, "digests": digests});
    accept(admin, &body).await
}

/// One request to the admin listener; its JSON answer.
async fn exchange(
    admin: &Admin,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, CliError> {
    let keys = &admin.keys;
    let admin = admin.address;
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
        let signature = signed::sign(keys, method.as_str(), path, &bytes)
            .ok_or_else(|| CliError::Target("the [state] keys cannot sign".into()))?;
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, admin.to_string())
            .header(header::AUTHORIZATION, signature)
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
