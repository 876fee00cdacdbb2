//! A client retry, dry-run: the gateway's sealed state is opened with the
//! config's keys and shown (names only), and the retry goes through the
//! retry check of an offline gateway as the caller the state was issued to
//! (or `--principal`). Nothing is sent anywhere, and the single-use store is
//! this process's own: a replay of a live state cannot be seen from here.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use super::answer::refusal_out;
use super::{Check, ExplainArgs, Explanation, UpstreamOut, UsageError};
use crate::audit::InputRequestSummary;
use crate::identify::{AuthSchemes, Principal};
use crate::model::{Reason, Refusal};
use crate::mrtr::seal::SealedState;
use crate::pipeline::ctx::RequestCtx;
use crate::pipeline::request::ParsedRequest;
use crate::pipeline::Gateway;

/// The retry checks, in the order the retry phase runs them
/// (`pipeline::retry::accept`, then `MrtrShared::check_retry`), each with
/// the reasons it refuses with.
const CHECKS: &[(&str, &[Reason])] = &[
    ("request", &[Reason::InvalidRequest]),
    ("state_present", &[Reason::StateMissing]),
    ("state_size", &[Reason::StateTooLarge]),
    (
        "state_seal",
        &[Reason::StateInvalid, Reason::StateUnknownKey],
    ),
    ("state_expiry", &[Reason::StateExpired]),
    ("state_principal", &[Reason::StatePrincipalMismatch]),
    ("state_upstream", &[Reason::StateUpstreamMismatch]),
    ("state_target", &[Reason::StateTargetMismatch]),
    ("state_arguments", &[Reason::StateArgumentsMismatch]),
    (
        "single_use",
        &[Reason::StateReplayed, Reason::StateStoreUnavailable],
    ),
    ("answers", &[Reason::InvalidAnswer, Reason::SecretInAnswer]),
    ("answer_budget", &[Reason::AnswerLimitExceeded]),
];

/// What a retry says and would send upstream: names only, never a value.
#[derive(Debug, Serialize)]
pub struct RetryOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<StateOut>,
    /// Checked as this caller.
    pub principal: String,
    pub answers: Vec<AnswerOut>,
    /// Answer keys that go upstream (accepted retries).
    pub forwarded: Vec<String>,
    /// Keys answered that were never asked (removed).
    pub dropped_keys: Vec<String>,
    /// Keys whose `content` was removed (decline, cancel, URL mode).
    pub dropped_content: Vec<String>,
    /// Why a state may not open here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

#[derive(Debug, Serialize)]
pub struct StateOut {
    pub operation: String,
    pub round: u32,
    pub issued_to: String,
    pub upstream: String,
    pub method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Seconds until the state expires (negative: expired that long ago).
    pub expires_in_seconds: i64,
    /// Whether the upstream's own requestState is sealed inside (never shown).
    pub upstream_state: bool,
    pub asked: Vec<InputRequestSummary>,
}

#[derive(Debug, Serialize)]
pub struct AnswerOut {
    pub key: String,
    pub action: String,
    /// Form fields answered (names only).
    pub fields: Vec<String>,
}

fn state_out(s: &SealedState, now_secs: u64) -> StateOut {
    let expires = i64::try_from(s.expires).unwrap_or(i64::MAX);
    let now = i64::try_from(now_secs).unwrap_or(i64::MAX);
    StateOut {
        operation: s.operation.clone(),
        round: s.round,
        issued_to: s.principal.clone(),
        upstream: s.upstream.clone(),
        method: s.method.clone(),
        target: s.target.clone(),
        expires_in_seconds: expires.saturating_sub(now),
        upstream_state: s.upstream_state.is_some(),
        asked: s
            .asked
            .iter()
            .map(|(k, a)| InputRequestSummary::from_asked(k, a))
            .collect(),
    }
}

/// `SCHEME:NAME` (as sealed states bind callers: the configured auth
/// scheme that accepted the caller, and its name) as a principal.
fn principal(text: &str, schemes: &AuthSchemes) -> Result<Principal, UsageError> {
    if text == "anonymous" {
        return Ok(Principal::anonymous());
    }
    let (scheme, name) = text.split_once(':').unwrap_or(("", text));
    let method = schemes.lookup(scheme).and_then(|id| schemes.method(id)).ok_or_else(|| {
        UsageError::Message(format!(
            "--principal {text}: write SCHEME:NAME with SCHEME one of this config's auth schemes ({}), or anonymous",
            schemes.names().join(", ")
        ))
    })?;
    Ok(Principal {
        name: Arc::from(name),
        groups: Arc::from(Vec::<String>::new()),
        method,
        scheme: Arc::from(scheme),
        grant: None,
    })
}

/// The request as it would arrive: headers that agree with the body, so
/// that what is judged is the retry and not the headers.
pub(super) fn parse_request(body: Vec<u8>) -> Result<ParsedRequest, Refusal> {
    let loose: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let str_at = |ptr: &str| loose.pointer(ptr).and_then(Value::as_str).unwrap_or("");
    let method = str_at("/method").to_owned();
    let version = str_at("/params/_meta/io.modelcontextprotocol~1protocolVersion").to_owned();
    let target = [str_at("/params/name"), str_at("/params/uri")]
        .into_iter()
        .find(|t| !t.is_empty())
        .map(str::to_owned);
    let mut request = http::Request::builder()
        .method("POST")
        .uri("/")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .header("mcp-method", method);
    if let Some(t) = target {
        request = request.header("mcp-name", t);
    }
    let parts = request
        .body(())
        .map_err(|e| Refusal::new(Reason::InvalidRequest, e.to_string()))?
        .into_parts()
        .0;
    crate::pipeline::request::parse(
        &parts,
        &Bytes::from(body),
        &[crate::model::Generation::Stateless],
    )
    .map_err(|r| r.refusal)
}

/// Which of [`CHECKS`] a refusal came from.
fn failed_at(reason: Reason, not_a_string: bool) -> usize {
    if not_a_string {
        return 1;
    }
    CHECKS
        .iter()
        .position(|(_, reasons)| reasons.contains(&reason))
        .unwrap_or(0)
}

/// A refusal's words, after the key and field it names (answers).
fn where_and_why(r: &Refusal) -> String {
    let name = |m: &str| r.data(m).and_then(Value::as_str).map(str::to_owned);
    match (name("key"), name("field")) {
        (Some(k), Some(f)) => format!("{k} › {f}: {}", r.message),
        (Some(k), None) => format!("{k}: {}", r.message),
        _ => r.message.clone(),
    }
}

/// Every check: passed before the one that failed, not reached after it.
fn checks(
    refusal: Option<&Refusal>,
    not_a_string: bool,
    passed: &dyn Fn(&str) -> String,
) -> Vec<Check> {
    let failed = refusal.map(|r| failed_at(r.reason, not_a_string));
    CHECKS
        .iter()
        .enumerate()
        .map(|(i, (rule, _))| {
            let (action, detail) = match failed {
                Some(f) if i == f => ("fail", refusal.map(where_and_why)),
                Some(f) if i > f => ("not_reached", None),
                _ => ("pass", Some(passed(rule))),
            };
            Check {
                rule,
                action,
                key: None,
                field: None,
                detail,
            }
        })
        .collect()
}

fn pass_detail(rule: &str, state: Option<&StateOut>, ctx: &RequestCtx) -> String {
    let gw = &ctx.gateway;
    let accepted = ctx.retry.as_ref();
    match (rule, state) {
        ("state_size", _) => format!(
            "within the {} bytes this gateway issues",
            gw.mrtr.settings.max_client_state_bytes
        ),
        ("state_seal", _) => "sealed with a key of this config, unaltered".into(),
        ("state_expiry", Some(s)) => format!(
            "expires in {}",
            humantime::format_duration(Duration::from_secs(s.expires_in_seconds.max(0) as u64))
        ),
        ("state_principal", Some(s)) => format!("issued to {}", s.issued_to),
        ("state_upstream", Some(s)) => format!("issued for upstream {}", s.upstream),
        ("state_target", Some(s)) => format!(
            "issued for {} {}",
            s.method,
            s.target.as_deref().unwrap_or("")
        ),
        ("state_arguments", _) => "the arguments are the original request's".into(),
        ("single_use", _) => {
            let single = &ctx.route.upstream.settings.single_use;
            if single.applies(ctx.binding().tool()) {
                "single-use: not answered in this process (a dry run cannot see the live store)"
                    .into()
            } else {
                "not single-use".into()
            }
        }
        ("answers", _) => format!(
            "{} answer(s) fit what was asked",
            accepted.map_or(0, |r| r.answers.actions.len())
        ),
        ("answer_budget", _) => format!(
            "{} answer bytes in this operation, of {}",
            accepted.map_or(0, |r| r.prior.answer_bytes + r.answers.answer_bytes as u64),
            gw.mrtr.settings.max_answer_bytes
        ),
        ("request", _) => "a request with an id".into(),
        ("state_present", _) => "the gateway's requestState came back".into(),
        _ => String::new(),
    }
}

pub(super) async fn explain(
    gateway: &Arc<Gateway>,
    path: &str,
    args: &ExplainArgs,
    body: Vec<u8>,
    upstream: UpstreamOut,
) -> Result<Explanation, UsageError> {
    let now = gateway.clock.now_secs();
    let request = match parse_request(body) {
        Ok(r) => r,
        Err(refusal) => return Ok(refused_early(upstream, &refusal)),
    };
    let opened = request
        .request_state
        .as_deref()
        .and_then(|t| gateway.mrtr.settings.keys.open(t).ok());
    let state = opened.as_ref().map(|s| state_out(s, now));
    let as_caller = match (&args.principal, &state) {
        (Some(p), _) => principal(p, &gateway.config.auth)?,
        (None, Some(s)) => principal(&s.issued_to, &gateway.config.auth)?,
        (None, None) => Principal::anonymous(),
    };
    let not_a_string = request.request_state_not_string;
    let mut ctx = RequestCtx::offline_to(Arc::clone(gateway), path, &args.upstream, request)
        .ok_or_else(|| UsageError::NoRoute(args.upstream.clone()))?;
    ctx.principal = as_caller;
    let outcome = crate::pipeline::retry::check(&mut ctx).await;
    let refusal = outcome.as_ref().err();
    let checks = checks(refusal, not_a_string, &|rule| {
        pass_detail(rule, state.as_ref(), &ctx)
    });
    let accepted = ctx.retry.as_ref();
    let answers = accepted
        .map(|r| {
            r.answers
                .actions
                .iter()
                .map(|(key, action)| AnswerOut {
                    key: key.clone(),
                    action: action.clone(),
                    fields: r
                        .answers
                        .fields_answered
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, f)| f.clone())
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let retry = RetryOut {
        state,
        principal: ctx.binding().principal_key(),
        answers,
        forwarded: accepted.map(|r| r.answers.kept.clone()).unwrap_or_default(),
        dropped_keys: accepted
            .map(|r| r.answers.dropped_keys.clone())
            .unwrap_or_default(),
        dropped_content: accepted
            .map(|r| r.answers.dropped_content.clone())
            .unwrap_or_default(),
        note: gateway.mrtr.settings.keys.is_generated().then_some(
            "this config has no [state] keys_file or keys_env, so only states sealed by this same run open; give it the keys the gateway runs with",
        ),
    };
    Ok(Explanation {
        keys_name: "input request",
        upstream,
        message: "a client retry",
        decision: if refusal.is_some() {
            "refused"
        } else {
            "forwarded"
        },
        checks,
        every_rule: Vec::new(),
        refusal: refusal.map(refusal_out),
        sanitised: Vec::new(),
        stripped: Vec::new(),
        provenance: None,
        client_receives: None,
        retry: Some(retry),
        changed_arguments: Vec::new(),
    })
}

/// A retry the request check refuses before any state is looked at.
fn refused_early(upstream: UpstreamOut, refusal: &Refusal) -> Explanation {
    Explanation {
        keys_name: "input request",
        upstream,
        message: "a client retry",
        decision: "refused",
        checks: vec![Check {
            rule: "request",
            action: "fail",
            key: None,
            field: None,
            detail: Some(refusal.message.clone()),
        }],
        every_rule: Vec::new(),
        refusal: Some(refusal_out(refusal)),
        sanitised: Vec::new(),
        stripped: Vec::new(),
        provenance: None,
        client_receives: None,
        retry: None,
        changed_arguments: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ReasonSet;

    /// A retry's state or answers refused for a reason no check names
    /// would be shown as failing the first check: every reason of the
    /// table's `State` column has its check here.
    #[test]
    fn every_state_refusal_has_its_check() {
        for r in Reason::ALL.iter().filter(|r| r.is_in(ReasonSet::State)) {
            assert!(
                CHECKS.iter().any(|(_, reasons)| reasons.contains(r)),
                "{r} has no retry check in explain"
            );
        }
    }
}
