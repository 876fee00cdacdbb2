//! Check a request about one task of the Tasks extension (`tasks/get`,
//! `tasks/update`, `tasks/cancel`) that brings the gateway's state back.
//!
//! Every task the gateway delivers carries its own sealed `requestState`
//! (the upstream's inside, with the task id, the caller and the questions
//! outstanding), as an MRTR question does. A request about the task must
//! come from the same caller, through the same upstream, about the same
//! task; a `tasks/update` is an answer and gets the one answer check: asked
//! keys only, each field against the schema that was asked, the secret
//! scan, each question answered once, the operation's answer budget. Then
//! the upstream's own state takes the gateway's place.

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::answers::AnswerReport;
use super::retry::{rewrite, RetryRefused};
use super::seal::SealedState;
use super::{task_digest, Binding, MrtrShared};
use crate::model::{McpMethod, Reason, Refusal};

/// What the request check read of a task request.
pub struct TaskRequest<'a> {
    /// The client's `id`, as written.
    pub id: &'a RawValue,
    pub method: McpMethod,
    /// `params.taskId` (equal to `Mcp-Name`, checked).
    pub task_id: &'a str,
    /// The gateway's sealed state the client echoed.
    pub token: &'a str,
    /// `params`, parsed strictly.
    pub params: Map<String, Value>,
}

/// A task request that passed its checks.
#[derive(Debug)]
pub struct AcceptedTask {
    /// The body to forward: the upstream's own state back in place (and,
    /// on an update, only the answers that were asked for).
    pub body: Bytes,
    /// The state the client brought: the task's operation and round.
    pub prior: SealedState,
    /// The answers of a `tasks/update` (empty otherwise).
    pub answers: AnswerReport,
}

impl MrtrShared {
    /// Check a task request and build the body to forward.
    pub async fn check_task_request(
        &self,
        binding: &Binding<'_>,
        request: TaskRequest<'_>,
    ) -> Result<AcceptedTask, RetryRefused> {
        let prior = self.open_state(request.token)?;
        match self.check_task_opened(binding, request, &prior).await {
            Ok((body, answers)) => Ok(AcceptedTask {
                body,
                prior,
                answers,
            }),
            Err(refusal) => Err(RetryRefused {
                refusal,
                opened: Some(Box::new(prior)),
            }),
        }
    }

    async fn check_task_opened(
        &self,
        binding: &Binding<'_>,
        request: TaskRequest<'_>,
        prior: &SealedState,
    ) -> Result<(Bytes, AnswerReport), Refusal> {
        // A task's state is sealed for the answer it may take (tasks/update)
        // about one task id; get and cancel are checked against the same.
        let task = Binding {
            method: McpMethod::TasksUpdate,
            target: Some(request.task_id),
            ..*binding
        };
        self.check_bound(prior, &task, &task_digest(request.task_id))?;
        let mut params = request.params;
        // An answer must be fresh; reading or cancelling the task is not an
        // answer, and a client may poll less often than round_timeout.
        let answers = match request.method {
            McpMethod::TasksUpdate => {
                self.check_fresh(prior)?;
                self.task_answers(&mut params, prior).await?
            }
            _ => AnswerReport::default(),
        };
        let body = rewrite(request.id, request.method, params, prior)?;
        Ok((body, answers))
    }

    /// The answers of a `tasks/update`: checked against the questions the
    /// state names, none answered already (one state may take several
    /// partial updates, so this is per question), within the answer budget
    /// of the whole task. A question is consumed when the upstream has
    /// acknowledged its answer ([`MrtrShared::consume_task_answers`]), as a
    /// single-use MRTR state is: an update the upstream never took (a 502,
    /// a timeout) can be sent again.
    async fn task_answers(
        &self,
        params: &mut Map<String, Value>,
        prior: &SealedState,
    ) -> Result<AnswerReport, Refusal> {
        if !matches!(params.get("inputResponses"), Some(Value::Object(_))) {
            return Err(Refusal::new(
                Reason::InvalidAnswer,
                "tasks/update carries its answers in an inputResponses object",
            ));
        }
        let report = self.take_answers(params, prior)?;
        for key in &report.kept {
            match self.replay.is_consumed(&question_id(prior, key)).await {
                Ok(false) => {}
                Ok(true) => return Err(answered_already(key)),
                Err(_) => return Err(store_unavailable()),
            }
        }
        let total = self
            .replay
            .add_bytes(
                &prior.operation,
                report.answer_bytes as u64,
                keep_until(&self.settings, prior),
            )
            .await
            .map_err(|_| store_unavailable())?;
        if total > self.settings.max_answer_bytes {
            let message = format!(
                "the answers to this task exceed {} bytes; the gateway stops it here",
                self.settings.max_answer_bytes
            );
            return Err(Refusal::new(Reason::AnswerLimitExceeded, message)
                .with_data("limit", self.settings.max_answer_bytes.into()));
        }
        Ok(report)
    }

    /// The upstream acknowledged a `tasks/update`: each question it answered
    /// is consumed. Of concurrent updates answering one question (all of
    /// which reached the upstream, as concurrent MRTR retries do), only the
    /// first acknowledgement is delivered; the others are `state_replayed`.
    pub async fn consume_task_answers(
        &self,
        prior: &SealedState,
        keys: &[String],
    ) -> Result<(), Refusal> {
        let until = keep_until(&self.settings, prior);
        for key in keys {
            match self
                .replay
                .consume_once(&question_id(prior, key), until)
                .await
            {
                Ok(true) => {}
                Ok(false) => return Err(answered_already(key)),
                Err(_) => return Err(store_unavailable()),
            }
        }
        Ok(())
    }
}

/// The single-use store's key for one question of a task.
fn question_id(prior: &SealedState, key: &str) -> String {
    format!("{}.task.{key}", prior.operation)
}

/// How long a task's consumed questions and answer bytes are remembered.
fn keep_until(settings: &super::settings::StateSettings, prior: &SealedState) -> u64 {
    prior
        .expires
        .saturating_add(settings.max_operation_time.as_secs())
}

fn answered_already(key: &str) -> Refusal {
    Refusal::new(
        Reason::StateReplayed,
        "this question of the task has been answered already; each is answered once",
    )
    .with_data("key", key.to_owned().into())
}

fn store_unavailable() -> Refusal {
    Refusal::new(
        Reason::StateStoreUnavailable,
        "the gateway cannot check single-use state right now; try again",
    )
}
