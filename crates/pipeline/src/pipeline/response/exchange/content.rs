//! What a server hands back that is neither a question, a list nor its
//! description of itself — a tool's result, a resource's contents, a
//! prompt, completions, any other result, and an error's message and
//! data — through `policy::inspect::content`. Most of it has nothing those
//! rules act on, and is delivered as it came after one byte scan
//! ([`scan_raw`], read by [`may_need_content`] and the others); the rest is
//! parsed once and read.

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{read_failure, reencode_failed, response_bytes, Disposition, Exchange};
use crate::json;
use crate::model::Refusal;
use crate::policy::inspect::{
    inspect_content, inspect_error, list_members, may_carry_listing, may_need_content, scan_raw,
    Report,
};

impl Exchange {
    /// Any other result: parsed only when the byte scan says the rules
    /// could find something in it.
    pub(in crate::pipeline::response) fn content_result(
        &self,
        id: Option<&RawValue>,
        result: &str,
    ) -> Disposition {
        let policy = &self.ctx.route.upstream.settings.policy;
        let scan = scan_raw(policy, &self.ctx.gateway.mrtr.scanner, result);
        let listing = may_carry_listing(&scan);
        let secrets = self.may_hold_secrets(&scan);
        if !listing && !secrets && !may_need_content(policy, &scan) {
            return Disposition::Final;
        }
        let mut value = match json::parse_value(result.as_bytes()) {
            Ok(v) => v,
            Err(e) => return Disposition::Refuse(read_failure(&e)),
        };
        let method = self.ctx.request.method;
        let (mut outcome, mut report) =
            inspect_content(policy, &self.subject(), method, &mut value);
        if listing && carries_listing(&value) {
            // Definitions a client reads wherever they come: the listing
            // rules, the permissions and the pins, as in a list's answer.
            self.record_text(&report);
            return match outcome {
                Ok(rewritten) => {
                    self.whole_rewritten(id, &mut value, rewritten, Disposition::Final)
                }
                Err(r) => Disposition::Refuse(r),
            };
        }
        let mut remember = Vec::new();
        if secrets && outcome.is_ok() {
            let (redacted, texts) = self.result_secrets(&mut value, &mut report);
            outcome = outcome.map(|changed| changed || redacted);
            remember = texts;
        }
        let delivered = self.delivered((outcome, report), || response_bytes(id, &value));
        self.remembered(remember, delivered)
    }

    /// An error's `message` and `data` (already checked strictly), read as
    /// data when the byte scan says they may need it.
    pub(super) fn content_error(&self, id: Option<&RawValue>, error: &RawValue) -> Disposition {
        let policy = &self.ctx.route.upstream.settings.policy;
        let scan = scan_raw(policy, &self.ctx.gateway.mrtr.scanner, error.get());
        if !may_need_content(policy, &scan) {
            return Disposition::Final;
        }
        let mut value = match json::parse_value(error.get().as_bytes()) {
            Ok(v) => v,
            Err(e) => return Disposition::Refuse(read_failure(&e)),
        };
        let outcome = inspect_error(policy, &self.subject(), &mut value);
        self.delivered(outcome, || error_bytes(id, &value))
    }

    fn delivered(
        &self,
        (outcome, report): (Result<bool, Refusal>, Report),
        encode: impl FnOnce() -> Option<Bytes>,
    ) -> Disposition {
        self.record_text(&report);
        match outcome {
            Ok(false) => Disposition::Final,
            Ok(true) => match encode() {
                Some(bytes) => Disposition::FinalRewritten(bytes),
                None => Disposition::Refuse(reencode_failed()),
            },
            Err(r) => Disposition::Refuse(r),
        }
    }
}

/// Whether a parsed result carries a list of definitions.
fn carries_listing(value: &Value) -> bool {
    list_members().any(|m| value.get(m).is_some_and(Value::is_array))
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    error: &'a Value,
}

/// An error response carrying `error`, for `id` (`null` when the upstream gave none).
fn error_bytes(id: Option<&RawValue>, error: &Value) -> Option<Bytes> {
    let id = id.unwrap_or(json::null_id());
    serde_json::to_vec(&ErrorOut {
        jsonrpc: "2.0",
        id,
        error,
    })
    .ok()
    .map(Bytes::from)
}
