//! An `input_required` result: held to the upstream's policy, then, when it
//! passes, sealed with the gateway's own state for the next round. Also the
//! end of an operation (a final answer to a retry). Audit events and metrics
//! read the policy's report; nothing parses the message again.

use std::time::Duration;

use serde_json::value::RawValue;

use super::disposition::Disposition;
use super::exchange::{reencode_failed, response_bytes, Exchange};
use crate::audit::{AuditContext, AuditEvent, OperationOutcome};
use crate::model::Refusal;
use crate::mrtr::mint::{MintInput, Minted};
use crate::mrtr::seal::new_operation_id;
use crate::policy::inspect::{inspect_result, Report};

impl Exchange {
    pub(super) fn question(&mut self, id: Option<&RawValue>, result: &str) -> Disposition {
        let ctx = &self.ctx;
        let route = &ctx.route.upstream.settings;
        let (outcome, report) = inspect_result(&route.policy, &self.subject(), result.as_bytes());
        let delivered = outcome.is_ok();
        ctx.gateway.metrics.record_input_required(
            &route.id,
            ctx.request.generation(),
            delivered,
            &report.verdicts,
        );
        for v in &report.verdicts {
            tracing::info!(upstream = %route.id, rule = v.rule.as_str(), action = v.action.as_str(), key = v.key.as_deref().unwrap_or("-"), field = v.field.as_deref().unwrap_or("-"), "elicitation verdict");
        }
        let minted = outcome.and_then(|mut value| {
            let minted = self.mint(&report, &mut value)?;
            Ok((value, minted))
        });
        match minted {
            Err(r) => {
                self.audit_question(&report, None, Some(&r));
                Disposition::Refuse(r)
            }
            Ok((value, minted)) => {
                self.ctx.trace.operation(&minted.operation, minted.round);
                self.audit_question(&report, Some(&minted), None);
                match response_bytes(id, &value) {
                    Some(bytes) => Disposition::Ask(bytes),
                    None => Disposition::Refuse(reencode_failed()),
                }
            }
        }
    }

    /// Seal the next round's state into a delivered `input_required`.
    fn mint(&self, report: &Report, value: &mut serde_json::Value) -> Result<Minted, Refusal> {
        let ctx = &self.ctx;
        let retry = ctx.retry.as_ref();
        let input = MintInput {
            binding: &ctx.binding(),
            digest: ctx.request.digest(),
            prior: retry.map(|r| &r.prior),
            operation: None,
            answer_bytes: retry.map_or(0, |r| r.answers.answer_bytes as u64),
            upstream_state: report.request_state.clone(),
            asked: report.asked.clone(),
            asks: true,
        };
        ctx.gateway.mrtr.mint(input, value)
    }

    /// The audit context at the operation and round this answer belongs to.
    /// A first question refused before a state was minted still opened an
    /// operation: it gets an id of its own, so its events read as one story.
    fn audit_at(&self, minted: Option<&Minted>) -> AuditContext {
        let base = self.ctx.audit_context();
        match (minted, self.ctx.retry.as_ref().map(|r| &r.prior)) {
            (Some(m), _) => base.with_operation(&m.operation, m.round),
            (None, Some(prior)) => base.with_operation(&prior.operation, prior.round + 1),
            (None, None) => base.with_operation(&new_operation_id(), 1),
        }
    }

    /// The provenance events of one question: received, each verdict, then
    /// delivered (under the operation and round just minted) or refused.
    pub(super) fn audit_question(
        &self,
        report: &Report,
        minted: Option<&Minted>,
        refused: Option<&Refusal>,
    ) {
        let sink = &self.ctx.gateway.audit;
        if !sink.enabled() {
            return;
        }
        let at = self.audit_at(minted);
        sink.emit(&at, AuditEvent::received(report));
        for e in AuditEvent::verdicts(report) {
            sink.emit(&at, e);
        }
        match refused {
            None => sink.emit(&at, AuditEvent::delivered(report)),
            Some(r) => {
                sink.emit(&at, AuditEvent::refused(r));
                let rounds = at.round.unwrap_or(1);
                let outcome = OperationOutcome::from_reason(r.reason);
                let end =
                    AuditEvent::operation_end(outcome, rounds, self.elapsed(), Some(r.reason));
                sink.emit(&at, end);
            }
        }
    }

    /// Time since the operation started (zero for a first round).
    fn elapsed(&self) -> Duration {
        let Some(retry) = &self.ctx.retry else {
            return Duration::ZERO;
        };
        let now = self.ctx.gateway.clock.now_millis();
        Duration::from_millis(now.saturating_sub(retry.prior.started_millis()))
    }

    /// A retry answered with a final result: the operation is over.
    pub(super) fn operation_completed(&self) {
        let Some(retry) = &self.ctx.retry else {
            return;
        };
        let prior = &retry.prior;
        let upstream = &self.ctx.route.upstream.settings.id;
        self.ctx
            .gateway
            .metrics
            .operation_completed(upstream, prior.round);
        let sink = &self.ctx.gateway.audit;
        if sink.enabled() {
            let at = self
                .ctx
                .audit_context()
                .with_operation(&prior.operation, prior.round);
            let outcome = OperationOutcome::after_answers(&retry.answers);
            sink.emit(
                &at,
                AuditEvent::operation_end(outcome, prior.round, self.elapsed(), None),
            );
        }
    }

    /// A retry answered with a JSON-RPC error: the operation is over.
    pub(super) fn operation_ended_with_error(&self) {
        let Some(retry) = &self.ctx.retry else {
            return;
        };
        let prior = &retry.prior;
        let sink = &self.ctx.gateway.audit;
        if sink.enabled() {
            let at = self
                .ctx
                .audit_context()
                .with_operation(&prior.operation, prior.round);
            let end = AuditEvent::operation_end(
                OperationOutcome::Error,
                prior.round,
                self.elapsed(),
                None,
            );
            sink.emit(&at, end);
        }
    }
}
