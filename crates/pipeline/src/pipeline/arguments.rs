//! Phase: what a call sends its server, between the permit and the
//! forward (`policy::arguments` decides; this phase gives it what it
//! reads). A `tools/call` or `prompts/get` (or a completion's reference)
//! is checked against the definition the gateway delivered to this caller
//! for this upstream (`listings::delivered`), which the gateway fetches
//! itself, as the caller, when it has none; every string of the arguments
//! (a `resources/read`'s URI too) is read for what must not leave; what
//! other upstreams returned to this caller is looked up by keyed
//! fingerprint (`mrtr::flows`). A redacted or trimmed call is written
//! again; verdicts are counted and audited like the answer side's.

use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::HeaderValue;
use serde_json::{Map, Value};

use super::ctx::RequestCtx;
use super::Inbound;
use crate::headers::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};
use crate::json::MessageKind;
use crate::listings::delivered::{Found, Item};
use crate::listings::{digest, ItemKind};
use crate::model::{Generation, McpMethod, Refusal};
use crate::mrtr::flows::Lookup;
use crate::policy::arguments::{ArgumentCheck, ArgumentReport, Call, Contract, Listed};
use crate::policy::config::Setting;
use crate::policy::inspect::Report;

/// The most pages of one list the gateway fetches itself.
const MAX_PAGES: usize = 32;

/// JSON-RPC's "method not found": the upstream lists nothing of that kind.
const METHOD_NOT_FOUND: i64 = -32601;

/// The checked call's body: the client's, or written again when a rule
/// changed its arguments.
pub(super) async fn check(
    ctx: &mut RequestCtx,
    parts: &Parts,
    authority: &HeaderValue,
    body: Bytes,
) -> Result<Bytes, Refusal> {
    let method = ctx.request.method;
    let sends = method.sends_arguments();
    let policy = ctx.route.upstream.settings.policy.clone();
    let rules = &policy.arguments;
    let all_off = [
        rules.schema,
        rules.undeclared,
        rules.secrets,
        rules.private_paths,
        rules.addresses,
        rules.shell,
        rules.cross_upstream,
    ]
    .iter()
    .all(|s| *s == Setting::Off);
    if !sends || all_off || ctx.request.kind != MessageKind::Request {
        return Ok(body);
    }
    let item = named_item(ctx);
    let contract = match (&item, rules.schema) {
        // A tool held for a changed definition, which an approval rule
        // asks the person about: the pins left it out of the caller's list,
        // so it is not `not_listed`; the person decides (`approve`), the
        // other rules still read its arguments.
        _ if ctx.listing_held => None,
        (Some((kind, name)), schema) if schema != Setting::Off => {
            Some(listed(ctx, parts, authority, *kind, name).await?)
        }
        _ => None,
    };
    let listed = match (&contract, &item) {
        (Some(Known::Listed(c)), _) => Listed::Item(c),
        (Some(Known::Missing), Some((kind, name))) => Listed::Missing {
            kind: kind.kind,
            name,
        },
        _ => Listed::Unchecked,
    };
    let mut sent = sent_value(ctx);
    let scanner = ctx.gateway.mrtr.scanner.clone();
    let call = Call {
        method,
        upstream_name: ctx.upstream_name(),
    };
    let mut run = ArgumentCheck::new(&policy, call, &scanner);
    let mut outcome = run.check(listed, &mut sent);
    if outcome.is_ok() && rules.cross_upstream != Setting::Off {
        outcome = crossing(ctx, &mut run, &mut sent).await;
    }
    let report = run.finish();
    record(ctx, &report);
    outcome?;
    ctx.argument_asks = report.asks();
    if !report.changed {
        return Ok(body);
    }
    Ok(rewritten(&body, method, sent).unwrap_or(body))
}

/// The listed item a call names: a tool, a prompt, or a completion's
/// reference (a prompt or a resource template).
pub fn named_item(ctx: &RequestCtx) -> Option<(ItemKind, String)> {
    let kind = |k: &str| ItemKind::of_kind(k);
    match ctx.request.method {
        McpMethod::ToolsCall => Some((kind("tool")?, ctx.request.target.clone()?)),
        McpMethod::PromptsGet => Some((kind("prompt")?, ctx.request.target.clone()?)),
        McpMethod::CompletionComplete => {
            let r = ctx.request.reference.as_ref()?;
            match r.get("type").and_then(Value::as_str)? {
                "ref/prompt" => Some((kind("prompt")?, r.get("name")?.as_str()?.to_owned())),
                "ref/resource" => Some((
                    kind("resource_template")?,
                    r.get("uri")?.as_str()?.to_owned(),
                )),
                _ => None,
            }
        }
        _ => None,
    }
}

/// What the rules read of the call: a tool's or prompt's `arguments`
/// (taken from the parse), a completion's argument as `{name: value}` of
/// the prompt's arguments, a resource's URI as `{"uri": …}`.
pub fn sent_value(ctx: &mut RequestCtx) -> Value {
    match ctx.request.method {
        McpMethod::ResourcesRead => {
            let mut m = Map::new();
            if let Some(uri) = &ctx.request.target {
                m.insert("uri".into(), uri.clone().into());
            }
            Value::Object(m)
        }
        McpMethod::CompletionComplete => {
            let argument = ctx.request.arguments.as_ref();
            let name = argument.and_then(|a| a.get("name")).and_then(Value::as_str);
            let value = argument.and_then(|a| a.get("value")).cloned();
            let mut m = Map::new();
            if let (Some(name), Some(value)) = (name, value) {
                m.insert(name.to_owned(), value);
            }
            Value::Object(m)
        }
        _ => ctx.request.arguments.take().unwrap_or(Value::Null),
    }
}

/// The call with its checked arguments in place of the client's.
fn rewritten(body: &Bytes, method: McpMethod, sent: Value) -> Option<Bytes> {
    let mut message = crate::json::parse_value(body).ok()?;
    let params = message.get_mut("params")?.as_object_mut()?;
    match method {
        McpMethod::ToolsCall | McpMethod::PromptsGet => {
            params.insert("arguments".into(), sent);
        }
        McpMethod::CompletionComplete => {
            let (name, value) = sent.as_object()?.iter().next()?;
            let argument = params.get_mut("argument")?.as_object_mut()?;
            argument.insert("name".into(), name.clone().into());
            argument.insert("value".into(), value.clone());
        }
        _ => return None,
    }
    serde_json::to_vec(&message).ok().map(Bytes::from)
}

/// The definition the caller's catalogue holds of `name` (the gateway
/// fetches the list itself, as the caller, when the catalogue cannot say):
/// what the approval rules read a tool's listed hints from.
pub(crate) async fn definition(
    ctx: &RequestCtx,
    parts: &Parts,
    authority: &HeaderValue,
    kind: ItemKind,
    name: &str,
) -> Option<Arc<Contract>> {
    match listed(ctx, parts, authority, kind, name).await {
        Ok(Known::Listed(c)) => Some(c),
        _ => None,
    }
}

enum Known {
    Listed(Arc<Contract>),
    Missing,
    /// The list could not be had: the call is checked without it.
    Unknown,
}

/// What the caller's catalogue says of the item; the gateway fetches the
/// list itself first when the catalogue cannot say.
async fn listed(
    ctx: &RequestCtx,
    parts: &Parts,
    authority: &HeaderValue,
    kind: ItemKind,
    name: &str,
) -> Result<Known, Refusal> {
    let delivered = &ctx.gateway.listings.delivered;
    let upstream = ctx.route.upstream.settings.id.as_str();
    let caller = ctx.binding().principal_key();
    let known = |found: Found| match found {
        Found::Listed(c) => Some(Known::Listed(c)),
        Found::NotListed => Some(Known::Missing),
        Found::Unknown { .. } => None,
    };
    match delivered.find(upstream, &caller, kind, name) {
        Found::Unknown { fetch: true } => {}
        found => return Ok(known(found).unwrap_or(Known::Unknown)),
    }
    let lock = delivered.fetch_lock(upstream, &caller);
    let _one_at_a_time = lock.lock().await;
    if let Found::Unknown { fetch: true } = delivered.find(upstream, &caller, kind, name) {
        // A list that cannot be had (the upstream failed, refused, or
        // answered something else) leaves the call to the other rules.
        let items = Box::pin(fetch(ctx, parts, authority, kind)).await;
        delivered.fetched(upstream, &caller, kind);
        if let Ok(Some(items)) = items {
            let digests: Vec<String> = items.iter().map(digest).collect();
            let named: Vec<Item<'_>> = items
                .iter()
                .zip(&digests)
                .filter_map(|(definition, digest)| {
                    let name = definition.get(kind.identity)?.as_str()?;
                    Some(Item {
                        kind,
                        name,
                        digest,
                        definition,
                    })
                })
                .collect();
            delivered.record(upstream, &caller, &named, &[kind]);
        }
    }
    let found = delivered.find(upstream, &caller, kind, name);
    Ok(known(found).unwrap_or(Known::Unknown))
}

/// Every page of the list of `kind`, asked of the upstream through the
/// phases as the caller (so checked, pinned and filtered as the caller
/// would get it): `Ok(None)` when the upstream gave no list.
async fn fetch(
    ctx: &RequestCtx,
    parts: &Parts,
    authority: &HeaderValue,
    kind: ItemKind,
) -> Result<Option<Vec<Value>>, Refusal> {
    let Some(method) = list_method(kind) else {
        return Ok(None);
    };
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..MAX_PAGES {
        let inbound = asking(ctx, parts, authority, method, cursor.as_deref(), page)?;
        let resp = Box::pin(ctx.gateway.through(ctx.route.clone(), Box::new(inbound)))
            .await
            .map_err(|refused| refused.refusal)?;
        let max = ctx.gateway.config.limits.max_response_body_bytes;
        let message = super::bridge::Messages::new(resp, max).response().await?;
        let Some(message) = message else {
            return Ok(None);
        };
        if let Some(error) = message.get("error") {
            let code = error.get("code").and_then(Value::as_i64);
            return Ok((code == Some(METHOD_NOT_FOUND)).then(Vec::new));
        }
        let Some(result) = message.get("result") else {
            return Ok(None);
        };
        // An answer that is no list of that kind says nothing of it.
        let Some(Value::Array(page_items)) = result.get(kind.member) else {
            return Ok(None);
        };
        items.extend(page_items.iter().cloned());
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            return Ok(Some(items));
        }
    }
    // Past the page limit the list is not whole: its items still count.
    Ok(Some(items))
}

fn list_method(kind: ItemKind) -> Option<McpMethod> {
    Some(match kind.kind {
        "tool" => McpMethod::ToolsList,
        "prompt" => McpMethod::PromptsList,
        "resource_template" => McpMethod::ResourcesTemplatesList,
        _ => return None,
    })
}

/// The request for one page, made from the caller's: its head (its
/// credentials and, in a 2025-11-25 session, its session), its generation
/// and capabilities.
fn asking(
    ctx: &RequestCtx,
    parts: &Parts,
    authority: &HeaderValue,
    method: McpMethod,
    cursor: Option<&str>,
    page: usize,
) -> Result<Inbound, Refusal> {
    let mut head = super::request::copy_head(parts);
    head.method = http::Method::POST;
    head.headers.remove(http::header::CONTENT_LENGTH);
    head.headers.remove(&MCP_NAME);
    let version = ctx.request.version;
    let stateless = version.generation() == Generation::Stateless;
    let mut params = Map::new();
    if let Some(c) = cursor {
        params.insert("cursor".into(), c.into());
    }
    if stateless {
        let mut meta = Map::new();
        meta.insert(
            "io.modelcontextprotocol/protocolVersion".into(),
            version.as_str().into(),
        );
        meta.insert(
            "io.modelcontextprotocol/clientCapabilities".into(),
            ctx.request.client.to_value(),
        );
        params.insert("_meta".into(), Value::Object(meta));
        head.headers.insert(
            MCP_METHOD.clone(),
            HeaderValue::from_static(method.as_str()),
        );
    } else {
        head.headers.remove(&MCP_METHOD);
    }
    head.headers.insert(
        MCP_PROTOCOL_VERSION.clone(),
        HeaderValue::from_static(version.as_str()),
    );
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": format!("portcullis-list-{page}"),
        "method": method.as_str(),
        "params": Value::Object(params),
    });
    let body = Bytes::from(body.to_string());
    let generations = &ctx.route.config.generations;
    let request = super::request::parse(&head, &body, generations).map_err(|r| r.refusal)?;
    Ok(Inbound {
        parts: head,
        authority: authority.clone(),
        principal: ctx.principal.clone(),
        request,
        peer: ctx.peer.clone(),
        request_id: ctx.request_id.clone(),
        started: ctx.started,
        trace: ctx.trace.clone(),
        subject: ctx.subject.clone(),
        carried: false,
        own: true,
    })
}

/// The cross-upstream rule: the call's material looked up among what
/// other upstreams returned to this caller.
async fn crossing(
    ctx: &RequestCtx,
    run: &mut ArgumentCheck<'_>,
    sent: &mut Value,
) -> Result<(), Refusal> {
    let gateway = &ctx.gateway;
    let caller = ctx.binding().principal_key();
    let Some(key) = gateway.mrtr.settings.keys.fingerprint_key() else {
        return Ok(());
    };
    let flows = &gateway.flows;
    let hits = if run.material().is_empty() || !flows.may_hold(key, &caller) {
        Vec::new()
    } else {
        let lookups: Vec<Lookup<'_>> = run
            .material()
            .iter()
            .map(|m| Lookup {
                path: &m.path,
                text: &m.text,
            })
            .collect();
        let upstream = ctx.route.upstream.settings.id.as_str();
        // Boxed: most calls have no material another upstream could have
        // sent, and this future would otherwise size every call's.
        match Box::pin(flows.find(key, &caller, upstream, &lookups)).await {
            Ok(hits) => hits,
            Err(_) => {
                gateway
                    .mrtr
                    .replay
                    .fell_back(crate::model::Fallback::Unchecked);
                Vec::new()
            }
        }
    };
    run.flows(sent, &hits)
}

/// Count and audit the verdicts (names, classes and paths; never a value).
fn record(ctx: &RequestCtx, report: &ArgumentReport) {
    ctx.record_verdicts(&Report {
        verdicts: report.verdicts.clone(),
        ..Report::default()
    });
}
