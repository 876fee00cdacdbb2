//! Mint the gateway's state for the next round of an operation: when an
//! `input_required` passes policy, everything its retry must be checked
//! against is sealed into the `requestState` the client receives, or the
//! operation is stopped when it is over one of its limits.

use serde_json::Value;

use super::seal::{new_operation_id, SealedState};
use super::{Binding, MrtrShared};
use crate::model::{Asked, Reason, Refusal};

/// What minting the next state needs.
pub struct MintInput<'a> {
    pub binding: &'a Binding<'a>,
    /// [`super::params_digest`] of the request.
    pub digest: &'a str,
    /// The state the request answered, on a retry.
    pub prior: Option<&'a SealedState>,
    /// The operation a state without `prior` belongs to: a task's own
    /// ([`super::task_operation`]), so every state sealed for one task
    /// shares its single-use questions and answer budget; a new one when
    /// `None`.
    pub operation: Option<&'a str>,
    /// Answer bytes the request carried.
    pub answer_bytes: u64,
    pub upstream_state: Option<String>,
    pub asked: Vec<(String, Asked)>,
    /// This state delivers new questions: a round more, under the round and
    /// time limits. An MRTR question always does; a task's state sealed
    /// into a status without new questions stays at its round.
    pub asks: bool,
}

/// The operation and round of a minted state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minted {
    pub operation: String,
    pub round: u32,
}

impl MrtrShared {
    /// Seal the next round's state into `result["requestState"]`.
    pub fn mint(&self, input: MintInput<'_>, result: &mut Value) -> Result<Minted, Refusal> {
        let settings = &self.settings;
        let now_ms = self.clock.now_millis();
        let now = now_ms / 1000;
        let step = u32::from(input.asks);
        let (operation, round, started_ms, prior_bytes) = match input.prior {
            // The clock of a task's questions starts with its first one,
            // not when the (possibly long) task was created.
            Some(p) if p.round == 0 => (p.operation.clone(), step, now_ms, p.answer_bytes),
            Some(p) => (
                p.operation.clone(),
                p.round.saturating_add(step),
                p.started_millis(),
                p.answer_bytes,
            ),
            None => (
                input.operation.map_or_else(new_operation_id, str::to_owned),
                step,
                now_ms,
                0,
            ),
        };
        if input.asks {
            self.check_limits(round, started_ms, now_ms)?;
        }
        let sealed = SealedState {
            v: 1,
            upstream_state: input.upstream_state,
            principal: input.binding.principal_key(),
            upstream: input.binding.upstream.to_owned(),
            method: input.binding.method.as_str().to_owned(),
            target: input.binding.target.map(str::to_owned),
            digest: input.digest.to_owned(),
            operation: operation.clone(),
            round,
            started: started_ms / 1000,
            started_ms,
            expires: now.saturating_add(settings.round_timeout.as_secs()),
            asked: input.asked,
            answer_bytes: prior_bytes.saturating_add(input.answer_bytes),
            approval: None,
        };
        let token = settings.keys.seal(&sealed).ok_or_else(|| {
            Refusal::new(
                Reason::InternalError,
                "the gateway could not seal its requestState",
            )
        })?;
        if let Value::Object(obj) = result {
            obj.insert("requestState".into(), Value::String(token));
        }
        Ok(Minted { operation, round })
    }

    /// The round and time limits of an operation that asks again.
    fn check_limits(&self, round: u32, started_ms: u64, now_ms: u64) -> Result<(), Refusal> {
        let settings = &self.settings;
        if round > settings.max_rounds {
            let message = format!("the server has asked {} rounds of questions in one operation; the gateway stops it here", settings.max_rounds);
            return Err(Refusal::new(Reason::RoundLimitExceeded, message)
                .with_data("limit", settings.max_rounds.into()));
        }
        let max_ms = u64::try_from(settings.max_operation_time.as_millis()).unwrap_or(u64::MAX);
        if now_ms.saturating_sub(started_ms) > max_ms {
            let t = humantime::format_duration(settings.max_operation_time);
            return Err(Refusal::new(
                Reason::OperationExpired,
                format!("the operation has taken longer than {t}; the gateway stops it here"),
            ));
        }
        Ok(())
    }
}
