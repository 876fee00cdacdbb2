//! A client's call, dry-run: a `tools/call`, `prompts/get`,
//! `resources/read` or `completion/complete` through the argument rules of
//! its upstream's policy (`pipeline::arguments`), every rule traced. The
//! listing is the one given with `--listing` (a list result the upstream
//! returned), recorded as delivered to the caller; without one the item is
//! not checked against a definition (the running gateway fetches it). The
//! cross-upstream rule needs the running gateway's memory of what other
//! upstreams returned: it is not read offline. What the upstream would be
//! sent is shown by path only: never a value.

use std::sync::Arc;

use serde_json::Value;

use super::answer::{checks, refusal_out};
use super::{Check, ExplainArgs, Explanation, UpstreamOut, UsageError};
use crate::listings::delivered::{Found, Item};
use crate::listings::{digest, KINDS};
use crate::pipeline::arguments::{named_item, sent_value};
use crate::pipeline::ctx::RequestCtx;
use crate::pipeline::Gateway;
use crate::policy::arguments::{ArgumentCheck, Call, Contract, Listed};

pub(super) fn explain(
    gateway: &Arc<Gateway>,
    path: &str,
    args: &ExplainArgs,
    body: Vec<u8>,
    upstream: UpstreamOut,
) -> Result<Explanation, UsageError> {
    let request = super::retry::parse_request(body)
        .map_err(|r| UsageError::Message(format!("the call: {}", r.message)))?;
    let mut ctx = RequestCtx::offline_to(gateway.clone(), path, &args.upstream, request)
        .ok_or_else(|| UsageError::NoRoute(args.upstream.clone()))?;
    if let Some(listing) = &args.listing {
        record_listing(&ctx, listing)?;
    }
    let item = named_item(&ctx);
    let (contract, note) = contract_of(&ctx, item.as_ref());
    let listed = match (&contract, &item) {
        (Some(Some(c)), _) => Listed::Item(c),
        (Some(None), Some((kind, name))) => Listed::Missing {
            kind: kind.kind,
            name,
        },
        _ => Listed::Unchecked,
    };
    let policy = ctx.route.upstream.settings.policy.clone();
    let scanner = gateway.mrtr.scanner.clone();
    let mut sent = sent_value(&mut ctx);
    let call = Call {
        method: ctx.request.method,
        upstream_name: ctx.upstream_name(),
    };
    let mut original = sent.clone();
    let mut run = ArgumentCheck::new(&policy, call, &scanner).traced(false);
    let outcome = run.check(listed, &mut sent);
    let report = run.finish();
    let mut every_rule = Vec::new();
    if outcome.is_err() {
        let mut all = ArgumentCheck::new(&policy, call, &scanner).traced(true);
        let _ = all.check(listed, &mut original);
        every_rule = checks(&all.finish().trace);
    }
    let mut traced = checks(&report.trace);
    if let Some(note) = note {
        traced.insert(0, note);
    }
    traced.push(Check {
        rule: "cross_upstream_flow",
        action: "not_reached",
        key: None,
        field: None,
        detail: Some(
            "needs the running gateway's memory of what other upstreams returned to the caller"
                .into(),
        ),
    });
    let asked = match outcome {
        Ok(()) => would_ask(
            &ctx,
            path,
            contract.as_ref().and_then(Option::as_ref),
            &report,
        ),
        Err(_) => None,
    };
    let decision = match (&outcome, &asked) {
        (Err(_), _) => "refused",
        (Ok(()), Some(_)) => "asked",
        (Ok(()), None) => "forwarded",
    };
    traced.extend(asked);
    let changed: Vec<String> = report
        .verdicts
        .iter()
        .filter(|v| v.action.as_str() == "redact" || v.action.as_str() == "remove")
        .filter_map(|v| v.key.clone())
        .collect();
    Ok(Explanation {
        upstream,
        message: "a call from a client",
        decision,
        keys_name: "argument",
        checks: traced,
        every_rule,
        refusal: outcome.as_ref().err().map(refusal_out),
        sanitised: Vec::new(),
        stripped: Vec::new(),
        provenance: None,
        client_receives: None,
        retry: None,
        changed_arguments: changed,
    })
}

/// The `[[approval]]` rule that would ask the person about a tool call
/// the argument rules let through (its hints from the listing given), as
/// one more check of the trace: `None` when no rule would ask. Whether an
/// approval is remembered is the running gateway's: not read offline.
fn would_ask(
    ctx: &RequestCtx,
    path: &str,
    contract: Option<&Arc<Contract>>,
    report: &crate::policy::arguments::ArgumentReport,
) -> Option<Check> {
    if ctx.request.method != crate::model::McpMethod::ToolsCall {
        return None;
    }
    let target = ctx.request.target.as_deref()?;
    let route = &ctx.route;
    let policy = &route.upstream.settings.policy;
    let rules = crate::pipeline::approve::Rules {
        route: &route.config.approval,
        policy: &policy.approval,
        policy_name: &policy.name,
    };
    let exposed = route
        .prefix()
        .map(|p| crate::model::expose(crate::model::TargetKind::Tool, p, target));
    let found = report.asks();
    let called = crate::pipeline::approve::Called {
        path,
        tool: exposed.as_deref().unwrap_or(target),
        upstream_tool: target,
        annotations: contract.and_then(|c| c.hints()),
        found: &found,
    };
    let asking = called.asking(ctx, &rules)?;
    Some(Check {
        rule: "approval",
        action: "ask",
        key: Some(asking.rule.name.clone()),
        field: None,
        detail: Some(format!(
            "the gateway would ask the person before forwarding ({})",
            asking.because.label()
        )),
    })
}

/// `--listing FILE`: a list result (or a response carrying one), as
/// delivered to the anonymous caller of the offline gateway.
fn record_listing(ctx: &RequestCtx, file: &std::path::Path) -> Result<(), UsageError> {
    let bytes = std::fs::read(file).map_err(|source| UsageError::Read {
        path: file.display().to_string(),
        source,
    })?;
    let value: Value = crate::json::parse_value(&bytes)
        .map_err(|e| UsageError::Message(format!("--listing {}: {e}", file.display())))?;
    let list = value.get("result").unwrap_or(&value);
    let mut items = Vec::new();
    let mut whole = Vec::new();
    for kind in KINDS {
        let Some(Value::Array(listed)) = list.get(kind.member) else {
            continue;
        };
        whole.push(*kind);
        for definition in listed {
            if let Some(name) = definition.get(kind.identity).and_then(Value::as_str) {
                items.push((*kind, name.to_owned(), digest(definition), definition));
            }
        }
    }
    let items: Vec<Item<'_>> = items
        .iter()
        .map(|(kind, name, digest, definition)| Item {
            kind: *kind,
            name,
            digest,
            definition,
        })
        .collect();
    let delivered = &ctx.gateway.listings.delivered;
    let caller = ctx.binding().principal_key();
    delivered.record(&ctx.route.upstream.settings.id, &caller, &items, &whole);
    Ok(())
}

/// The definition the call is checked against: `Some(Some)` listed,
/// `Some(None)` not in the listing given, `None` no listing to say; and a
/// note for the trace when there is none.
fn contract_of(
    ctx: &RequestCtx,
    item: Option<&(crate::listings::ItemKind, String)>,
) -> (Option<Option<Arc<Contract>>>, Option<Check>) {
    let Some((kind, name)) = item else {
        return (None, None);
    };
    let delivered = &ctx.gateway.listings.delivered;
    let caller = ctx.binding().principal_key();
    match delivered.find(&ctx.route.upstream.settings.id, &caller, *kind, name) {
        Found::Listed(c) => (Some(Some(c)), None),
        Found::NotListed => (Some(None), None),
        Found::Unknown { .. } => (
            None,
            Some(Check {
                rule: "arguments",
                action: "not_reached",
                key: None,
                field: None,
                detail: Some(format!(
                    "no listing given (--listing FILE): the running gateway checks the {} against the list it delivered, fetched itself when the caller never asked",
                    kind.kind.replace('_', " ")
                )),
            }),
        ),
    }
}
