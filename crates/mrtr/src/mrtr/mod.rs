//! The MRTR boundary: toward the client the gateway is the server of every
//! multi-round exchange. It seals its own `requestState` into each question
//! it delivers ([`mint`]), and checks each retry against it ([`retry`]):
//! who, where, what, when, how often, and that the answers fit the questions.

pub mod answers;
pub mod approval;
mod canonical;
pub mod flows;
pub mod mint;
pub mod replay;
pub mod retry;
mod sampling_answer;
pub mod seal;
pub mod settings;
pub mod task;
pub use crate::policy::secret_values as value_scan;

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{Map, Value};

use crate::model::{McpMethod, SharedClock};
use replay::ReplayStore;
use seal::SealedState;
use settings::StateSettings;
use value_scan::SecretValueScanner;

/// What the MRTR phases need of the gateway, shared by all requests.
pub struct MrtrShared {
    pub settings: Arc<StateSettings>,
    /// Outlives config reloads: a consumed state stays consumed.
    pub replay: Arc<ReplayStore>,
    pub scanner: Arc<SecretValueScanner>,
    pub(crate) clock: SharedClock,
}

impl MrtrShared {
    pub fn new(
        settings: Arc<StateSettings>,
        replay: Arc<ReplayStore>,
        clock: SharedClock,
    ) -> MrtrShared {
        MrtrShared {
            settings,
            replay,
            scanner: Arc::new(SecretValueScanner::builtin()),
            clock,
        }
    }

    /// Mark a single-use state answered: its answer is being delivered.
    /// `false` when another retry with the same state was answered first
    /// (concurrent retries all reach the upstream, as a network retry must;
    /// only one of their answers is delivered). An unreachable store is
    /// logged and lets the answer through, as before.
    pub async fn consume(&self, prior: &SealedState) -> bool {
        let id = prior.redemption_id();
        match self.replay.consume_once(&id, prior.expires).await {
            Ok(first) => first,
            Err(_) => {
                tracing::warn!(
                    "single-use state store unavailable; a replay of this state may be accepted"
                );
                self.replay.fell_back(crate::model::Fallback::Unchecked);
                true
            }
        }
    }
}

/// Who is asking about what: the binding a sealed state is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    /// The auth scheme that accepted the principal, and its name (`None`:
    /// anonymous). The scheme, not the method: two schemes' `alice` differ.
    pub principal: Option<(&'a str, &'a str)>,
    pub upstream: &'a str,
    pub method: McpMethod,
    pub target: Option<&'a str>,
}

impl Binding<'_> {
    /// How a principal is bound into a sealed state.
    pub fn principal_key(&self) -> String {
        match self.principal {
            None => "anonymous".to_owned(),
            Some((scheme, name)) => format!("{scheme}:{name}"),
        }
    }

    /// The tool, when the request is a tools/call.
    pub fn tool(&self) -> Option<&str> {
        self.target.filter(|_| self.method == McpMethod::ToolsCall)
    }
}

impl SealedState {
    /// The single-use store's key for this round of this operation.
    pub(crate) fn redemption_id(&self) -> String {
        format!("{}.{}", self.operation, self.round)
    }
}

/// base64url SHA-256 of the RFC 8785 canonical form of `params` without the
/// members that change between rounds (`_meta`, `inputResponses`,
/// `requestState`).
pub fn params_digest(params: &Map<String, Value>) -> String {
    let salient = params
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "_meta" | "inputResponses" | "requestState"));
    let mut hash = Sha256Writer(ring::digest::Context::new(&ring::digest::SHA256));
    // Writing fails only on a non-finite number, which no parsed value holds.
    let _ = canonical::write_object(salient, &mut hash);
    URL_SAFE_NO_PAD.encode(hash.0.finish().as_ref())
}

/// The canonical bytes go straight into the hash, not into a buffer first.
struct Sha256Writer(ring::digest::Context);

impl std::io::Write for Sha256Writer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The digest a task's sealed state binds: its task id, as
/// [`params_digest`] of `{"taskId": …}` (the salient params of every
/// `tasks/*` request about it).
pub fn task_digest(task_id: &str) -> String {
    let mut params = Map::new();
    params.insert("taskId".into(), Value::String(task_id.to_owned()));
    params_digest(&params)
}

/// The operation of a task, the same for every state sealed for it: who
/// asks (the principal), through which upstream, about which task. A
/// state minted without a prior (a poll without the gateway's state, a
/// status notification on a listen stream) then still shares the task's
/// consumed questions and answer budget.
pub fn task_operation(binding: &Binding<'_>, task_id: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [binding.principal_key().as_str(), binding.upstream, task_id] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part.as_bytes());
    }
    let digest = ctx.finish();
    format!("task-{}", URL_SAFE_NO_PAD.encode(&digest.as_ref()[..16]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tasks_operation_is_one_per_caller_upstream_and_task() {
        let b = |principal, upstream| Binding {
            principal,
            upstream,
            method: McpMethod::TasksUpdate,
            target: None,
        };
        let alice = b(Some(("api_key", "alice")), "up");
        let op = task_operation(&alice, "t-1");
        assert_eq!(op, task_operation(&alice, "t-1"));
        assert_ne!(op, task_operation(&alice, "t-2"));
        assert_ne!(
            op,
            task_operation(&b(Some(("api_key", "bob")), "up"), "t-1")
        );
        assert_ne!(
            op,
            task_operation(&b(Some(("api_key", "alice")), "up2"), "t-1")
        );
        assert_ne!(op, task_operation(&b(None, "up"), "t-1"));
        // Lengths are bound in: moving a byte between parts changes it.
        assert_ne!(
            task_operation(&b(None, "upx"), "t"),
            task_operation(&b(None, "up"), "xt")
        );
    }

    #[test]
    fn digest_ignores_round_members_and_key_order() {
        let a: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"name":"book_room","arguments":{"hint":"x","n":1.0},"_meta":{"a":1},"requestState":"s"}"#).unwrap();
        let b: serde_json::Map<String, serde_json::Value> = serde_json::from_str(
            r#"{"arguments":{"n":1,"hint":"x"},"inputResponses":{},"name":"book_room"}"#,
        )
        .unwrap();
        assert_eq!(params_digest(&a), params_digest(&b));
        let c: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"name":"book_room","arguments":{"hint":"y"}}"#).unwrap();
        assert_ne!(params_digest(&a), params_digest(&c));
    }
}
