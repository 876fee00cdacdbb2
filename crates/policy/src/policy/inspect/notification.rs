//! Rule: the text of a notification a server may send on a request's stream
//! (`notifications/progress` messages, `notifications/message` log data and
//! its `logger`, the `reason` of `notifications/cancelled`, the `title` of
//! `notifications/resources/updated`),
//! and the server's description of itself (`instructions` and the
//! `serverInfo` of an `initialize` result or the `_meta` one of any result,
//! which clients put in the model's context: `server_info.rs`), is read by
//! a person or a model, so it gets the text rules: made safe, and scanned
//! for prompt injection (a server's description of itself as what it lists
//! is read: it describes, where a form asks).

use serde_json::Value;

use super::{Checked, Run, Verdict};
use crate::model::McpMethod;
use crate::policy::injection::TextContext;
use crate::policy::intent::Place;

impl Run<'_> {
    /// Clean the readable text of `params` in place; `true` when it changed.
    pub(super) fn check_notification(
        &mut self,
        method: McpMethod,
        params: &mut Value,
    ) -> Checked<bool> {
        let before = self.report.verdicts.len();
        let max = self.policy.limits.max_message_chars;
        match method {
            McpMethod::Progress => {
                let slot = params.get_mut("message");
                self.clean_in("progress", None, "message", slot, max, TextContext::Form)?;
            }
            McpMethod::LogMessage => {
                let slot = params.get_mut("logger");
                self.clean_in("log", None, "logger", slot, max, TextContext::Form)?;
                if let Some(data) = params.get_mut("data") {
                    self.clean_all(data, max)?;
                }
            }
            McpMethod::Cancelled => {
                let slot = params.get_mut("reason");
                self.clean_in("cancelled", None, "reason", slot, max, TextContext::Form)?;
            }
            McpMethod::ResourcesUpdated => {
                let max = self.policy.limits.max_title_chars;
                let slot = params.get_mut("title");
                self.clean_in("resource", None, "title", slot, max, TextContext::Form)?;
            }
            McpMethod::Initialize | McpMethod::ServerDiscover => {
                self.check_server_description(params)?;
            }
            _ => {}
        }
        let changed = self.report.verdicts[before..].iter().any(Verdict::rewrites);
        Ok(changed)
    }

    fn check_server_description(&mut self, result: &mut Value) -> Checked<()> {
        self.check_description_text(result)?;
        self.check_meta_server_info(result)
    }

    /// `instructions` and `serverInfo`, without the `_meta` identity.
    /// Instructions are as long as the server needs (the body limit bounds
    /// them): only invisible characters removed, never cut; judged as one
    /// item (removed when they work against the user: `intent.rs`).
    pub(super) fn check_description_text(&mut self, result: &mut Value) -> Checked<()> {
        let slot = result.get_mut("instructions");
        self.clean_in(
            "server",
            None,
            "instructions",
            slot,
            usize::MAX,
            TextContext::Listing,
        )?;
        if let Value::Object(map) = result {
            self.judge_members(
                "instructions",
                map,
                &[("instructions", Place::Instructions)],
            )?;
        }
        match result.get_mut("serverInfo") {
            Some(info) => self.check_server_info(info),
            None => Ok(()),
        }
    }

    /// Every string of log data, at any depth: the strict parse already
    /// bounds the depth (`json::MAX_DEPTH`), so none is left unread.
    fn clean_all(&mut self, value: &mut Value, max: usize) -> Checked<()> {
        match value {
            Value::String(_) => {
                self.clean_in("log", None, "data", Some(value), max, TextContext::Form)
            }
            // Every other member or element costs its share of the budget.
            _ if !self.spend("log", None, 0)? => Ok(()),
            Value::Array(items) => items.iter_mut().try_for_each(|v| self.clean_all(v, max)),
            Value::Object(map) => map.values_mut().try_for_each(|v| self.clean_all(v, max)),
            _ => Ok(()),
        }
    }
}
