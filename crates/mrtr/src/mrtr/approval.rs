//! The gateway's own approval question in a 2026-07-28 exchange (an
//! `[[approval]]` rule asked about a call): its state is sealed like every
//! other `requestState` the gateway issues — bound to the caller, the
//! upstream, the tool and the arguments' digest — and marked as the
//! gateway's, so its retry is checked here and never reaches the upstream.
//! One approval is one call: the state is consumed before the call goes
//! upstream, not when the answer comes back.

use std::time::Duration;

use serde_json::Value;

use super::mint::Minted;
use super::retry::{rewrite, AcceptedRetry, RetryRefused, RetryRequest};
pub use super::seal::SealedApproval;
use super::seal::{new_operation_id, SealedState};
use super::{Binding, MrtrShared};
use crate::model::{Asked, Reason, Refusal};

/// The gateway's approval question, to be sealed.
pub struct ApprovalQuestion<'a> {
    pub binding: &'a Binding<'a>,
    /// [`super::params_digest`] of the call.
    pub digest: &'a str,
    pub rule: &'a str,
    pub because: &'a str,
    pub key: &'a str,
    /// The question as its answer is checked: the gateway's form, or (for
    /// an approver on the approval page) the page's link.
    pub asked: Asked,
    /// The approval on the page the link leads to.
    pub pending: Option<&'a str>,
    /// How long the question waits for its answer (the rule's `timeout`).
    pub timeout: Duration,
}

/// What the person decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Accepted with `approve` ticked; `remember`: "don't ask again" ticked.
    Approved {
        remember: bool,
    },
    /// Declined, or accepted without `approve` ticked.
    Declined,
    Cancelled,
    /// The caller accepted the link to the approval page (URL mode): the
    /// approver there decides.
    Opened,
}

/// A checked answer to the gateway's approval question.
#[derive(Debug)]
pub struct ApprovalAnswer {
    pub decision: Decision,
    /// What was sealed of the question (the rule that asked, and why).
    pub asked: SealedApproval,
    /// The original call (no `inputResponses`, no `requestState`), its
    /// state consumed.
    pub accepted: AcceptedRetry,
}

/// The form's fields the decision is read from (the gateway's form writes them).
pub struct DecisionFields<'a> {
    pub approve: &'a str,
    pub remember: &'a str,
}

impl MrtrShared {
    /// Seal the state of the gateway's approval question: the first round
    /// of a new operation, its expiry the rule's `timeout`.
    pub fn seal_approval(&self, q: ApprovalQuestion<'_>) -> Result<(String, Minted), Refusal> {
        let now_ms = self.clock.now_millis();
        let now = now_ms / 1000;
        let operation = new_operation_id();
        let sealed = SealedState {
            v: 1,
            upstream_state: None,
            principal: q.binding.principal_key(),
            upstream: q.binding.upstream.to_owned(),
            method: q.binding.method.as_str().to_owned(),
            target: q.binding.target.map(str::to_owned),
            digest: q.digest.to_owned(),
            operation: operation.clone(),
            round: 1,
            started: now,
            started_ms: now_ms,
            expires: now.saturating_add(q.timeout.as_secs().max(1)),
            asked: vec![(q.key.to_owned(), q.asked)],
            answer_bytes: 0,
            approval: Some(SealedApproval {
                rule: q.rule.to_owned(),
                key: q.key.to_owned(),
                because: q.because.to_owned(),
                pending: q.pending.map(str::to_owned),
            }),
        };
        let token = self.settings.keys.seal(&sealed).ok_or_else(|| {
            Refusal::new(
                Reason::InternalError,
                "the gateway could not seal its requestState",
            )
        })?;
        Ok((
            token,
            Minted {
                operation,
                round: 1,
            },
        ))
    }

    /// Open a client's `requestState` (size, key, integrity), before it is
    /// known whose question it answers.
    pub fn open_request_state(&self, token: &str) -> Result<SealedState, RetryRefused> {
        self.open_state(token).map_err(RetryRefused::from)
    }

    /// Check the answer to the gateway's approval question: bound to this
    /// caller, upstream, tool and arguments; in time; answered as asked;
    /// never answered before (consumed here, before anything is forwarded).
    pub async fn check_approval(
        &self,
        binding: &Binding<'_>,
        retry: RetryRequest<'_>,
        prior: SealedState,
        fields: &DecisionFields<'_>,
    ) -> Result<ApprovalAnswer, RetryRefused> {
        match self.approval_checks(binding, retry, &prior, fields).await {
            Ok((decision, body, answers, asked)) => Ok(ApprovalAnswer {
                decision,
                asked,
                accepted: AcceptedRetry {
                    body,
                    prior,
                    answers,
                    consumed: true,
                },
            }),
            Err(refusal) => Err(RetryRefused {
                refusal,
                opened: Some(Box::new(prior)),
            }),
        }
    }

    async fn approval_checks(
        &self,
        binding: &Binding<'_>,
        retry: RetryRequest<'_>,
        prior: &SealedState,
        fields: &DecisionFields<'_>,
    ) -> Result<
        (
            Decision,
            bytes::Bytes,
            super::answers::AnswerReport,
            SealedApproval,
        ),
        Refusal,
    > {
        let Some(approval) = &prior.approval else {
            return Err(Refusal::new(
                Reason::StateInvalid,
                "requestState does not belong to the gateway's approval question",
            ));
        };
        self.check_bound(prior, binding, retry.digest)?;
        if self.clock.now_secs() > prior.expires {
            return Err(Refusal::new(
                Reason::ApprovalExpired,
                "the approval question was not answered in time; nothing was forwarded; call again to be asked again",
            )
            .with_data("rule", approval.rule.clone().into()));
        }
        let mut params = retry.params;
        let answers = self.take_answers(&mut params, prior)?;
        let decision = read_decision(&params, approval, fields)?;
        match self
            .replay
            .consume_once(&prior.redemption_id(), prior.expires)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                return Err(Refusal::new(
                    Reason::StateReplayed,
                    "this approval has already been answered; each may be used once",
                ))
            }
            Err(_) => {
                return Err(Refusal::new(
                    Reason::StateStoreUnavailable,
                    "the gateway cannot check single-use state right now; try again",
                ))
            }
        }
        // The upstream gets the call as if it had never been asked about.
        params.remove("inputResponses");
        let body = rewrite(retry.id, binding.method, params, prior)?;
        Ok((decision, body, answers, approval.clone()))
    }
}

/// The decision in the checked answers (only asked keys are left).
fn read_decision(
    params: &serde_json::Map<String, Value>,
    approval: &SealedApproval,
    fields: &DecisionFields<'_>,
) -> Result<Decision, Refusal> {
    let key = approval.key.as_str();
    let answer = params
        .get("inputResponses")
        .and_then(|r| r.get(key))
        .ok_or_else(|| {
            Refusal::new(
                Reason::InvalidAnswer,
                "the retry does not answer the gateway's approval question",
            )
            .with_data("key", key.into())
        })?;
    let ticked = |field: &str| {
        answer
            .get("content")
            .and_then(|c| c.get(field))
            .and_then(Value::as_bool)
            == Some(true)
    };
    let url_mode = approval.pending.is_some();
    Ok(match answer.get("action").and_then(Value::as_str) {
        Some("accept") if url_mode => Decision::Opened,
        Some("accept") if ticked(fields.approve) => Decision::Approved {
            remember: ticked(fields.remember),
        },
        Some("cancel") => Decision::Cancelled,
        _ => Decision::Declined,
    })
}
