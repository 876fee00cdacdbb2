//! Check a retry: the client's answer to questions this gateway delivered.
//!
//! Toward the client the gateway is the server of the MRTR exchange: every
//! `input_required` it lets through carries its own sealed `requestState`
//! ([`super::mint`]). A retry must bring one back; it is opened and checked
//! against who is asking, where, about what, and when; the answers are
//! checked against what was asked and the operation's limits; then the
//! upstream's own `requestState` (or none) takes its place and the request
//! goes upstream. Nothing is forwarded when any of this fails.

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::answers::{check_answers, AnswerProblem, AnswerReport, AnswerRules};
use super::seal::{OpenError, SealedState};
use super::settings::SingleUse;
use super::{Binding, MrtrShared};
use crate::model::{McpMethod, Reason, Refusal};

/// A retry that passed its checks.
#[derive(Debug)]
pub struct AcceptedRetry {
    /// The request body to forward: the upstream's own state back in place,
    /// only the answers that were asked for.
    pub body: Bytes,
    pub prior: SealedState,
    pub answers: AnswerReport,
    /// The state was consumed before the request went upstream (the
    /// gateway's own approval question: one approval, one call), so the
    /// response does not consume it again.
    pub consumed: bool,
}

/// What the request check read of a retry.
pub struct RetryRequest<'a> {
    /// The client's `id`, as written.
    pub id: &'a RawValue,
    /// The gateway's sealed state the client echoed.
    pub token: &'a str,
    /// `params`, parsed strictly.
    pub params: Map<String, Value>,
    /// The digest of the request's salient params ([`super::params_digest`]).
    pub digest: &'a str,
}

fn refusal(reason: Reason, message: &str) -> Refusal {
    Refusal::new(reason, message)
}

/// A refused retry. `opened` is the state when it did open (a later check
/// failed): its operation and round still name the refusal in the audit trail.
#[derive(Debug)]
pub struct RetryRefused {
    pub refusal: Refusal,
    pub opened: Option<Box<SealedState>>,
}

impl From<Refusal> for RetryRefused {
    fn from(refusal: Refusal) -> Self {
        RetryRefused {
            refusal,
            opened: None,
        }
    }
}

impl MrtrShared {
    /// Check a retry and build the body to forward.
    pub async fn check_retry(
        &self,
        single_use: &SingleUse,
        binding: &Binding<'_>,
        retry: RetryRequest<'_>,
    ) -> Result<AcceptedRetry, RetryRefused> {
        let prior = self.open_state(retry.token)?;
        self.check_retry_opened(single_use, binding, retry, prior)
            .await
    }

    /// [`MrtrShared::check_retry`] of a state already opened
    /// ([`MrtrShared::open_request_state`]) that answers an upstream's questions.
    pub async fn check_retry_opened(
        &self,
        single_use: &SingleUse,
        binding: &Binding<'_>,
        retry: RetryRequest<'_>,
        prior: SealedState,
    ) -> Result<AcceptedRetry, RetryRefused> {
        match self.check_opened(single_use, binding, retry, &prior).await {
            Ok((body, answers)) => Ok(AcceptedRetry {
                body,
                prior,
                answers,
                consumed: false,
            }),
            Err(refusal) => Err(RetryRefused {
                refusal,
                opened: Some(Box::new(prior)),
            }),
        }
    }

    /// Open the client's state: within the size this gateway issues, sealed
    /// with a key it holds, unaltered.
    pub(super) fn open_state(&self, token: &str) -> Result<SealedState, Refusal> {
        if token.len() > self.settings.max_client_state_bytes {
            return Err(refusal(
                Reason::StateTooLarge,
                "requestState is larger than this gateway ever issues",
            ));
        }
        self.settings.keys.open(token).map_err(|e| match e {
            OpenError::UnknownKey => refusal(Reason::StateUnknownKey, "requestState was sealed with a key this gateway does not hold (rotated out, or another deployment)"),
            OpenError::Malformed | OpenError::Tampered => refusal(Reason::StateInvalid, "requestState was not issued by this gateway or has been altered"),
        })
    }

    /// The checks of an opened state, in order: binding, single use, the
    /// answers; then the body to forward.
    async fn check_opened(
        &self,
        single_use: &SingleUse,
        binding: &Binding<'_>,
        retry: RetryRequest<'_>,
        prior: &SealedState,
    ) -> Result<(Bytes, AnswerReport), Refusal> {
        self.check_binding(prior, binding, retry.digest)?;
        if single_use.applies(binding.tool()) {
            self.check_not_consumed(prior).await?;
        }
        let mut params = retry.params;
        let answers = self.take_answers(&mut params, prior)?;
        let body = rewrite(retry.id, binding.method, params, prior)?;
        Ok((body, answers))
    }

    fn check_binding(
        &self,
        prior: &SealedState,
        binding: &Binding<'_>,
        digest: &str,
    ) -> Result<(), Refusal> {
        self.check_fresh(prior)?;
        self.check_bound(prior, binding, digest)
    }

    pub(super) fn check_fresh(&self, prior: &SealedState) -> Result<(), Refusal> {
        if self.clock.now_secs() > prior.expires {
            return Err(refusal(
                Reason::StateExpired,
                "requestState has expired; start the operation again",
            ));
        }
        Ok(())
    }

    /// Who, where and what: the state was sealed for this request.
    pub(super) fn check_bound(
        &self,
        prior: &SealedState,
        binding: &Binding<'_>,
        digest: &str,
    ) -> Result<(), Refusal> {
        if prior.principal != binding.principal_key() {
            return Err(refusal(
                Reason::StatePrincipalMismatch,
                "requestState was issued to a different caller",
            ));
        }
        if prior.upstream != binding.upstream {
            return Err(refusal(
                Reason::StateUpstreamMismatch,
                "requestState was issued for a different MCP server",
            ));
        }
        if prior.method != binding.method.as_str() || prior.target.as_deref() != binding.target {
            return Err(refusal(
                Reason::StateTargetMismatch,
                "requestState was issued for a different tool, prompt or resource",
            ));
        }
        if prior.digest != digest {
            return Err(refusal(
                Reason::StateArgumentsMismatch,
                "a retry must repeat the original request's arguments unchanged",
            ));
        }
        Ok(())
    }

    /// A single-use state whose answer was already delivered is a replay.
    async fn check_not_consumed(&self, prior: &SealedState) -> Result<(), Refusal> {
        match self.replay.is_consumed(&prior.redemption_id()).await {
            Ok(false) => Ok(()),
            Ok(true) => Err(refusal(
                Reason::StateReplayed,
                "this requestState has already been answered; each may be used once",
            )),
            Err(_) => Err(refusal(
                Reason::StateStoreUnavailable,
                "the gateway cannot check single-use state right now; try again",
            )),
        }
    }

    pub(super) fn take_answers(
        &self,
        params: &mut Map<String, Value>,
        prior: &SealedState,
    ) -> Result<AnswerReport, Refusal> {
        let rules = AnswerRules {
            allow_secret_values: self.settings.allow_secret_values,
            scanner: self.scanner.clone(),
        };
        let report = match params.get_mut("inputResponses") {
            None => AnswerReport::default(),
            Some(Value::Object(map)) => {
                check_answers(map, &prior.asked, &rules).map_err(answer_refusal)?
            }
            Some(_) => {
                return Err(refusal(
                    Reason::InvalidAnswer,
                    "inputResponses must be an object",
                ))
            }
        };
        // The operation's answer budget holds on every round, the last one
        // included: checked before anything goes upstream.
        let total = prior
            .answer_bytes
            .saturating_add(report.answer_bytes as u64);
        if total > self.settings.max_answer_bytes {
            let message = format!(
                "the answers in this operation exceed {} bytes; the gateway stops it here",
                self.settings.max_answer_bytes
            );
            return Err(Refusal::new(Reason::AnswerLimitExceeded, message)
                .with_data("limit", self.settings.max_answer_bytes.into()));
        }
        Ok(report)
    }
}

pub(super) fn answer_refusal(p: AnswerProblem) -> Refusal {
    let mut r = Refusal::new(p.reason, p.why).with_data("key", p.key.into());
    if let Some(f) = p.field {
        r = r.with_data("field", f.into());
    }
    r
}

#[derive(Serialize)]
struct Forwarded<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    method: &'static str,
    params: &'a Map<String, Value>,
}

/// The body with the upstream's own state (or none) and the checked answers.
pub(super) fn rewrite(
    id: &RawValue,
    method: McpMethod,
    mut params: Map<String, Value>,
    prior: &SealedState,
) -> Result<Bytes, Refusal> {
    match &prior.upstream_state {
        Some(s) => {
            params.insert("requestState".into(), Value::String(s.clone()));
        }
        None => {
            params.remove("requestState");
        }
    }
    let message = Forwarded {
        jsonrpc: "2.0",
        id,
        method: method.as_str(),
        params: &params,
    };
    serde_json::to_vec(&message)
        .map(Bytes::from)
        .map_err(|_| refusal(Reason::InvalidRequest, "the request cannot be re-encoded"))
}
