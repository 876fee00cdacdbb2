//! Phase: check a retry, and mint the state of the next round.
//!
//! Toward the client the gateway is the server of the MRTR exchange: every
//! `input_required` it lets through carries its own sealed `requestState`
//! ([`mint`]). A retry ([`check_retry`]) must bring one back; it is opened
//! and checked against who is asking, where, about what, and when; the
//! answers are checked against what was asked; then the upstream's own
//! `requestState` (or none) takes its place and the request goes upstream.

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::answers::{check_answers, AnswerProblem, AnswerReport, AnswerRules};
use super::replay::ReplayStore;
use super::seal::{new_operation_id, now_secs, params_digest, OpenError, SealedState};
use super::value_scan::SecretValueScanner;
use crate::config::{StateConfig, UpstreamRoute};
use crate::policy::inspect::{Asked, MRTR_METHODS};
use crate::refusal::{Reason, Refusal};

/// What the MRTR phase needs of the gateway, shared by all requests.
pub struct MrtrShared {
    pub state: Arc<StateConfig>,
    /// Outlives config reloads: a redeemed state stays redeemed.
    pub replay: Arc<ReplayStore>,
    pub scanner: Arc<SecretValueScanner>,
}

impl MrtrShared {
    pub fn new(state: Arc<StateConfig>, replay: Arc<ReplayStore>) -> MrtrShared {
        MrtrShared {
            state,
            replay,
            scanner: Arc::new(SecretValueScanner::builtin()),
        }
    }
}

/// Who is asking about what: the binding a sealed state is checked against.
#[derive(Debug, Clone)]
pub struct Binding {
    pub principal: String,
    pub upstream: String,
    pub method: String,
    pub target: Option<String>,
}

/// A retry that passed its checks.
#[derive(Debug)]
pub struct AcceptedRetry {
    /// The request body to forward: the upstream's own state back in place,
    /// only the answers that were asked for.
    pub body: Bytes,
    pub prior: SealedState,
    pub answers: AnswerReport,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    params: Option<RetryView<'a>>,
}

#[derive(Deserialize)]
struct RetryView<'a> {
    #[serde(default, rename = "requestState", borrow)]
    request_state: Option<&'a RawValue>,
    #[serde(default, rename = "inputResponses", borrow)]
    input_responses: Option<&'a RawValue>,
}

fn state_refusal(reason: Reason, message: &str) -> Refusal {
    Refusal::new(reason, message)
}

/// False only when the body certainly carries neither `requestState` nor
/// `inputResponses`: the names do not occur and no `\u` escape could spell
/// them. Saves the second parse on every ordinary call.
fn may_be_retry(body: &[u8]) -> bool {
    use memchr::memmem;
    memmem::find(body, b"\\u").is_some()
        || memmem::find(body, b"requestState").is_some()
        || memmem::find(body, b"inputResponses").is_some()
}

/// The kind of MRTR step a request is.
pub enum RetryCheck {
    /// Not a retry: a first call (or a method without MRTR).
    Fresh,
    Retry(Box<AcceptedRetry>),
}

/// Check a request that may be a retry. Nothing is forwarded when this fails.
pub async fn check_retry(
    shared: &MrtrShared,
    upstream: &UpstreamRoute,
    binding: &Binding,
    body: &Bytes,
) -> Result<RetryCheck, Refusal> {
    if !MRTR_METHODS.contains(&binding.method.as_str()) || !may_be_retry(body) {
        return Ok(RetryCheck::Fresh);
    }
    let env: Envelope<'_> = serde_json::from_slice(body).map_err(|_| {
        state_refusal(
            Reason::InvalidRequest,
            "the request's params cannot be read",
        )
    })?;
    let Some(view) = env.params else {
        return Ok(RetryCheck::Fresh);
    };
    let token = match (view.request_state, view.input_responses) {
        (None, None) => return Ok(RetryCheck::Fresh),
        (None, Some(_)) => {
            return Err(state_refusal(
                Reason::StateMissing,
                "inputResponses came without the requestState this gateway issued with the question; retry with both",
            ))
        }
        (Some(raw), _) => serde_json::from_str::<String>(raw.get()).map_err(|_| state_refusal(Reason::StateInvalid, "requestState must be a string"))?,
    };
    let state = &shared.state;
    if token.len() > state.max_client_state_bytes {
        return Err(state_refusal(
            Reason::StateTooLarge,
            "requestState is larger than this gateway ever issues",
        ));
    }
    let prior = state.keys.open(&token).map_err(|e| match e {
        OpenError::UnknownKey => state_refusal(Reason::StateUnknownKey, "requestState was sealed with a key this gateway does not hold (rotated out, or another deployment)"),
        OpenError::Malformed | OpenError::Tampered => state_refusal(Reason::StateInvalid, "requestState was not issued by this gateway or has been altered"),
    })?;
    let mut params = body_params(body)?;
    check_binding(&prior, binding, &params)?;
    redeem_once(shared, upstream, binding, &prior).await?;
    let answers = take_answers(shared, &mut params, &prior)?;
    let new_body = rewrite(body, params, &prior)?;
    Ok(RetryCheck::Retry(Box::new(AcceptedRetry {
        body: new_body,
        prior,
        answers,
    })))
}

fn body_params(body: &Bytes) -> Result<Map<String, Value>, Refusal> {
    let mut message: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|_| state_refusal(Reason::InvalidRequest, "the request cannot be read"))?;
    match message.remove("params") {
        Some(Value::Object(p)) => Ok(p),
        _ => Err(state_refusal(
            Reason::InvalidRequest,
            "params must be an object",
        )),
    }
}

fn check_binding(
    prior: &SealedState,
    binding: &Binding,
    params: &Map<String, Value>,
) -> Result<(), Refusal> {
    if now_secs() > prior.expires {
        return Err(state_refusal(
            Reason::StateExpired,
            "requestState has expired; start the operation again",
        ));
    }
    if prior.principal != binding.principal {
        return Err(state_refusal(
            Reason::StatePrincipalMismatch,
            "requestState was issued to a different caller",
        ));
    }
    if prior.upstream != binding.upstream {
        return Err(state_refusal(
            Reason::StateUpstreamMismatch,
            "requestState was issued for a different MCP server",
        ));
    }
    if prior.method != binding.method || prior.target != binding.target {
        return Err(state_refusal(
            Reason::StateTargetMismatch,
            "requestState was issued for a different tool, prompt or resource",
        ));
    }
    if prior.digest != params_digest(params) {
        return Err(state_refusal(
            Reason::StateArgumentsMismatch,
            "a retry must repeat the original request's arguments unchanged",
        ));
    }
    Ok(())
}

async fn redeem_once(
    shared: &MrtrShared,
    upstream: &UpstreamRoute,
    binding: &Binding,
    prior: &SealedState,
) -> Result<(), Refusal> {
    let single_use = upstream.single_use_state
        || binding.target.as_ref().is_some_and(|t| {
            binding.method == "tools/call" && upstream.single_use_tools.iter().any(|x| x == t)
        });
    if !single_use {
        return Ok(());
    }
    let id = format!("{}.{}", prior.operation, prior.round);
    match shared.replay.redeem(&id, prior.expires, now_secs()).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(state_refusal(
            Reason::StateReplayed,
            "this requestState has already been used; each may be used once",
        )),
        Err(_) => Err(state_refusal(
            Reason::StateStoreUnavailable,
            "the gateway cannot check single-use state right now; try again",
        )),
    }
}

fn answer_refusal(p: AnswerProblem) -> Refusal {
    let reason = if p.reason == "secret_in_answer" {
        Reason::SecretInAnswer
    } else {
        Reason::InvalidAnswer
    };
    let mut r = Refusal::new(reason, p.why).with_data("key", p.key.into());
    if let Some(f) = p.field {
        r = r.with_data("field", f.into());
    }
    r
}

fn take_answers(
    shared: &MrtrShared,
    params: &mut Map<String, Value>,
    prior: &SealedState,
) -> Result<AnswerReport, Refusal> {
    let rules = AnswerRules {
        allow_secret_values: shared.state.allow_secret_values,
        scanner: shared.scanner.clone(),
    };
    match params.get_mut("inputResponses") {
        None => Ok(AnswerReport::default()),
        Some(Value::Object(map)) => {
            check_answers(map, &prior.asked, &rules).map_err(answer_refusal)
        }
        Some(_) => Err(state_refusal(
            Reason::InvalidAnswer,
            "inputResponses must be an object",
        )),
    }
}

/// The body with the upstream's own state (or none) and the checked answers.
fn rewrite(
    body: &Bytes,
    params: Map<String, Value>,
    prior: &SealedState,
) -> Result<Bytes, Refusal> {
    let mut message: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|_| state_refusal(Reason::InvalidRequest, "the request cannot be read"))?;
    let mut params = params;
    match &prior.upstream_state {
        Some(s) => {
            params.insert("requestState".into(), Value::String(s.clone()));
        }
        None => {
            params.remove("requestState");
        }
    }
    message.insert("params".into(), Value::Object(params));
    serde_json::to_vec(&message)
        .map(Bytes::from)
        .map_err(|_| state_refusal(Reason::InvalidRequest, "the request cannot be re-encoded"))
}

/// Everything needed to mint the next state when an `input_required`
/// passes policy.
pub struct MintInput<'a> {
    pub binding: &'a Binding,
    pub request_body: &'a Bytes,
    pub prior: Option<&'a SealedState>,
    pub answer_bytes: u64,
    pub upstream_state: Option<String>,
    pub asked: Vec<(String, Asked)>,
}

/// Seal the state of the next round into `result["requestState"]`, or
/// refuse when the operation is over one of its limits.
/// Returns the operation id and round of the minted state.
pub fn mint(
    state: &StateConfig,
    input: MintInput<'_>,
    result: &mut Value,
) -> Result<(String, u32), Refusal> {
    let now = now_secs();
    let (operation, round, started, prior_bytes) = match input.prior {
        Some(p) => (
            p.operation.clone(),
            p.round.saturating_add(1),
            p.started,
            p.answer_bytes,
        ),
        None => (new_operation_id(), 1, now, 0),
    };
    if round > state.max_rounds {
        let message = format!("the server has asked {} rounds of questions in one operation; the gateway stops it here", state.max_rounds);
        return Err(Refusal::new(Reason::RoundLimitExceeded, message)
            .with_data("limit", state.max_rounds.into()));
    }
    if now.saturating_sub(started) > state.max_operation_time.as_secs() {
        let t = humantime::format_duration(state.max_operation_time);
        return Err(Refusal::new(
            Reason::OperationExpired,
            format!("the operation has taken longer than {t}; the gateway stops it here"),
        ));
    }
    let answer_bytes = prior_bytes.saturating_add(input.answer_bytes);
    if answer_bytes > state.max_answer_bytes {
        let message = format!(
            "the answers in this operation exceed {} bytes; the gateway stops it here",
            state.max_answer_bytes
        );
        return Err(Refusal::new(Reason::AnswerLimitExceeded, message));
    }
    let params = body_params(input.request_body)?;
    let sealed = SealedState {
        v: 1,
        upstream_state: input.upstream_state,
        principal: input.binding.principal.clone(),
        upstream: input.binding.upstream.clone(),
        method: input.binding.method.clone(),
        target: input.binding.target.clone(),
        digest: params_digest(&params),
        operation: operation.clone(),
        round,
        started,
        expires: now.saturating_add(state.round_timeout.as_secs()),
        asked: input.asked,
        answer_bytes,
    };
    let token = state.keys.seal(&sealed).ok_or_else(|| {
        Refusal::new(
            Reason::UpstreamBadResponse,
            "the gateway could not seal its requestState",
        )
    })?;
    if let Value::Object(obj) = result {
        obj.insert("requestState".into(), Value::String(token));
    }
    Ok((operation, round))
}
