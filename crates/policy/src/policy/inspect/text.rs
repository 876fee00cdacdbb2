//! Rule: every human-facing string is made safe and scanned by the
//! prompt-injection rules. Text a host shows a person as UI (a form's
//! message, titles and labels, a URL-mode message, notifications) is
//! sanitised whole (HTML, links, ANSI, invisible and bidi characters,
//! length). Text a model reads as the server wrote it (what a server lists
//! and says about itself) keeps every visible character: only what no one
//! sees is removed ([`strip_invisible`]); its meaning is judged by the
//! intent detector, item by item (`listing.rs`).

use serde_json::Value;

use super::{Action, Rule};
use super::{Checked, Run};
use crate::model::Reason;
use crate::policy::injection::{RuleAction, TextContext};
use crate::policy::sanitize::{strip_invisible, TextPolicy};

impl Run<'_> {
    /// Sanitise one human-facing string in place (when enforcing) and scan it
    /// for injection.
    pub(super) fn clean(
        &mut self,
        key: &str,
        field: Option<&str>,
        part: &'static str,
        slot: Option<&mut Value>,
        max_chars: usize,
    ) -> Checked<()> {
        self.clean_in(key, field, part, slot, max_chars, TextContext::Form)
    }

    pub(super) fn clean_in(
        &mut self,
        key: &str,
        field: Option<&str>,
        part: &'static str,
        slot: Option<&mut Value>,
        max_chars: usize,
        context: TextContext,
    ) -> Checked<()> {
        let Some(Value::String(text)) = slot else {
            return Ok(());
        };
        if !self.spend(key, field, text.len())? {
            return Ok(());
        }
        let cleaned = if context.is_listing() {
            strip_invisible(text)
        } else {
            let cleaner = TextPolicy {
                html: self.policy.html,
                max_chars,
            };
            cleaner.sanitize(text)
        };
        if cleaned.findings.is_empty() {
            self.pass(Rule::TextSafety, Some(key), field, part);
        } else {
            let findings: Vec<&str> = cleaned.findings.iter().map(|f| f.as_str()).collect();
            let action = if self.enforcing() {
                Action::Sanitize
            } else {
                Action::Monitor
            };
            self.note(
                Rule::TextSafety,
                action,
                Some(key),
                field,
                Some(format!("{part}: {}", findings.join(","))),
            );
        }
        let scanned = self.scan_injection(key, field, part, &cleaned.text, context);
        if self.enforcing() {
            if let std::borrow::Cow::Owned(new) = cleaned.text {
                *text = new;
            }
        }
        scanned
    }

    pub(super) fn scan_injection(
        &mut self,
        key: &str,
        field: Option<&str>,
        part: &'static str,
        text: &str,
        context: TextContext,
    ) -> Checked<()> {
        let hits = self.policy.injection.scan_in(text, context);
        if hits.is_empty() {
            self.pass(Rule::PromptInjection, Some(key), field, part);
        }
        for hit in hits {
            match hit.action {
                RuleAction::Block => {
                    let message = format!(
                        "{} sent text that matches the prompt-injection rule \"{}\"",
                        self.subject.upstream_name, hit.rule
                    );
                    self.violation(
                        Reason::PromptInjection,
                        Rule::PromptInjection,
                        Some(key),
                        field,
                        message,
                    )
                    .map_err(|e| e.with_data("injectionRule", hit.rule.clone().into()))?;
                }
                RuleAction::Flag => self.note(
                    Rule::PromptInjection,
                    Action::Flag,
                    Some(key),
                    field,
                    Some(hit.rule),
                ),
                RuleAction::Off => {}
            }
        }
        Ok(())
    }
}
