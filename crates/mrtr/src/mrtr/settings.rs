//! The MRTR boundary's settings (`[state]`, and the single-use choice of an
//! upstream), as typed data the config loader builds.

use std::time::Duration;

use super::seal::StateKeys;

/// Where single-use state redemptions are remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayBackend {
    Local,
    Redis(String),
}

/// The gateway's MRTR state: keys and the limits of an operation.
#[derive(Debug)]
pub struct StateSettings {
    pub keys: StateKeys,
    pub max_client_state_bytes: usize,
    pub round_timeout: Duration,
    pub max_rounds: u32,
    pub max_operation_time: Duration,
    pub max_answer_bytes: u64,
    pub allow_secret_values: bool,
    pub replay: ReplayBackend,
    /// How long a 2025-11-25 session id is honoured.
    pub session_lifetime: Duration,
    /// How long a pushed request may wait for the client's answer before the
    /// gateway answers the upstream itself.
    pub push_timeout: Duration,
}

/// Which sealed states of an upstream may be redeemed only once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SingleUse {
    /// Every state of the upstream.
    pub all: bool,
    /// States of these tools.
    pub tools: Vec<String>,
}

impl SingleUse {
    pub fn applies(&self, tool: Option<&str>) -> bool {
        self.all || tool.is_some_and(|t| self.tools.iter().any(|x| x == t))
    }
}
