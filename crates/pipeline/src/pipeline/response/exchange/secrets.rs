//! Credentials in what a server returns (`policy::arguments::results`):
//! found, recorded and, per `[content] secrets`, redacted; and what of
//! the result the caller's memory keeps (`mrtr::flows`: keyed
//! fingerprints), so it cannot be sent on to another upstream. The memory
//! store is written at once; Redis before the message is delivered (a
//! `Held` message, bounded by its timeout; unreachable, it is delivered).

use serde_json::Value;

use super::super::disposition::{Disposition, Held};
use super::Exchange;
use crate::policy::arguments::{inspect_result_secrets, may_hold_result_secrets, result_material};
use crate::policy::inspect::{RawScan, Report};

impl Exchange {
    /// Whether the raw result may hold what these rules read.
    pub(super) fn may_hold_secrets(&self, raw: &RawScan<'_>) -> bool {
        let policy = &self.ctx.route.upstream.settings.policy;
        may_hold_result_secrets(policy, &self.ctx.gateway.mrtr.scanner, raw)
    }

    /// Find and redact the credentials in a parsed result (verdicts into
    /// `report`); what to remember of it for the caller. Whether it changed.
    pub(super) fn result_secrets(
        &self,
        value: &mut Value,
        report: &mut Report,
    ) -> (bool, Vec<String>) {
        let policy = &self.ctx.route.upstream.settings.policy;
        let scanner = &self.ctx.gateway.mrtr.scanner;
        let remembered = result_material(policy, scanner, value);
        let found = inspect_result_secrets(policy, &self.subject(), scanner, value);
        report.verdicts.extend(found.verdicts);
        (found.changed, remembered)
    }

    /// `then`, once the caller's memory holds `texts` (delivered by this
    /// upstream).
    pub(super) fn remembered(&self, texts: Vec<String>, then: Disposition) -> Disposition {
        let gateway = self.ctx.gateway.clone();
        let Some(key) = gateway.mrtr.settings.keys.fingerprint_key() else {
            return then;
        };
        if texts.is_empty() || matches!(then, Disposition::Refuse(_)) {
            return then;
        }
        let caller = self.ctx.binding().principal_key();
        let origin = self.ctx.route.upstream.settings.id.clone();
        let flows = gateway.flows.clone();
        let key = key.clone();
        let shared = gateway.mrtr.replay.is_shared();
        let remember = async move {
            if flows
                .remember(&key, &caller, &origin, &texts)
                .await
                .is_err()
            {
                gateway
                    .mrtr
                    .replay
                    .fell_back(crate::model::Fallback::Unchecked);
            }
            then
        };
        if shared {
            return Disposition::Held(Held::new(remember));
        }
        futures_util::FutureExt::now_or_never(remember).unwrap_or(Disposition::Refuse(
            crate::model::Refusal::new(
                crate::model::Reason::InternalError,
                "the gateway's memory of delivered values did not answer",
            ),
        ))
    }
}
