//! Phase: record. The provenance audit trail: one JSON line per MRTR step,
//! to stdout or to a size-rotated file, never with a value a user typed.
//!
//! # What an event is
//!
//! Every line is one JSON object with the same envelope:
//!
//! | member       | meaning                                                          |
//! |--------------|------------------------------------------------------------------|
//! | `ts`         | RFC 3339 UTC with milliseconds, taken when the event is emitted  |
//! | `event`      | one of the [`AuditEvent`] names below                            |
//! | `operation`  | the MRTR operation id (sealed in the gateway's `requestState`), the same for every round of one operation; `null` before one exists |
//! | `request_id` | the id of the HTTP request the event happened in                 |
//! | `upstream`   | `{id, name, endpoint}` as configured (endpoint without credentials or query) |
//! | `principal`  | who asked (`anonymous` when nobody was identified)               |
//! | `method`     | the MCP method (`tools/call`, …)                                 |
//! | `target`     | `params.name` / `params.uri`, or `null`                          |
//! | `round`      | the round of questions the event belongs to (1 = the first `input_required`; a retry carries the round it answers), or `null` |
//!
//! followed by the members of the event itself:
//!
//! * `input_required_received`: `requests` (per key: `kind` form | url |
//!   sampling | roots | unknown, form `fields`, url `url_host`),
//!   `upstream_state` (whether the upstream sent a requestState; never its
//!   contents).
//! * `policy_verdict`: `rule`, `action`, `key`, `field`, `detail` (a rule or
//!   finding name, or a URL host; never text from the form).
//! * `delivered`: `requests` as they reached the client (after stripping),
//!   `stripped` (`{key, field}`), `sanitised`.
//! * `refused`: `reason` (the stable refusal reason), `rule`, `key`, `field`.
//! * `retry_received`: `outcome` (ok | invalid | secret_refused), `answers`
//!   (per key: `action`, `fields` answered, `outcome`, `problem_field`),
//!   `dropped_keys`, `dropped_content_keys`.
//! * `forwarded`: `keys` forwarded upstream, `upstream_state` (whether the
//!   upstream's own requestState was put back).
//! * `config_weakened` (tied to no request: its envelope is `ts`, `event`
//!   and `upstream`, `null` for a route's or the gateway's own control):
//!   `control` (the config path), `route`, `listener`, `from`, `to`, `outcome`
//!   (applied | refused).
//! * `operation_end`: `outcome` (complete | refused | declined | cancelled |
//!   expired | round_limit | error), `rounds`, `duration_ms`, `reason`.
//!
//! # Why no value can get in
//!
//! [`AuditEvent`] holds only enums, numbers, booleans, `&'static str` rule and
//! action names, and [`Name`]s: keys, field names and hosts, each clipped to
//! [`MAX_NAME_CHARS`] characters with control and invisible formatting
//! characters removed. There is no free-form text, no message and no
//! `serde_json::Value` anywhere in an event, so an answer, a form message or
//! a requestState has no slot to land in. The constructors that read
//! protocol data ([`AuditEvent::received_from_result`],
//! [`AuditEvent::retry_ok`], …) only ever take member *names* out of it.
//!
//! # Example
//!
//! One operation as it reads in the trail: the upstream asks for a form with
//! a card number, the gateway strips that field, the user answers the rest
//! in a second HTTP request, the answer goes upstream and the tool
//! completes. (After the first line the envelope is shortened to `…`.)
//!
//! ```text
//! {"ts":"2026-07-28T09:14:03.120Z","event":"input_required_received","operation":"Yq3v0hX7RkS2b9WcT1mN4A","request_id":"5f0c1e2a9b7d4c31","upstream":{"id":"billing","name":"Billing (ACME)","endpoint":"https://billing.acme.example/mcp"},"principal":"alice","method":"tools/call","target":"create_invoice","round":1,"requests":[{"key":"customer","kind":"form","fields":["email","vat_id","card_number"]}],"upstream_state":true}
//! {"ts":"2026-07-28T09:14:03.121Z","event":"policy_verdict",…,"round":1,"rule":"secret_field","action":"strip","key":"customer","field":"card_number","detail":"payment_card in name"}
//! {"ts":"2026-07-28T09:14:03.121Z","event":"delivered",…,"round":1,"requests":[{"key":"customer","kind":"form","fields":["email","vat_id"]}],"stripped":[{"key":"customer","field":"card_number"}],"sanitised":false}
//! {"ts":"2026-07-28T09:14:11.402Z","event":"retry_received",…,"request_id":"c2d93e0f1a6b8e47",…,"round":1,"outcome":"ok","answers":[{"key":"customer","action":"accept","fields":["email","vat_id"],"outcome":"ok"}],"dropped_keys":[],"dropped_content_keys":[]}
//! {"ts":"2026-07-28T09:14:11.403Z","event":"forwarded",…,"round":1,"keys":["customer"],"upstream_state":true}
//! {"ts":"2026-07-28T09:14:11.532Z","event":"operation_end",…,"round":1,"outcome":"complete","rounds":1,"duration_ms":8412,"reason":null}
//! ```
//!
//! # OpenTelemetry
//!
//! With `[audit.otlp]` every event is also one OpenTelemetry log record with
//! the same members, exported to a collector (`otlp`, below).
//!
//! # Shutdown
//!
//! Events are written by a background thread; call [`AuditSink::flush`]
//! before the process exits so that nothing queued is lost.

mod config;
mod config_event;
mod drops;
mod event;
mod line;
mod otlp;
mod otlp_config;
mod sink;

#[cfg(test)]
mod tests;

pub use config::{AuditConfigError, AuditSettings, AuditTarget, FileSettings, RawAudit};
pub use config_event::{GatewayAbout, ReloadOutcome};
pub use event::{
    AnswerAction, AnswerSummary, AuditEvent, FieldRef, InputRequestSummary, Name, OperationOutcome,
    RequestKind, Validation, MAX_LIST_ITEMS, MAX_NAME_CHARS,
};
pub use line::{AuditContext, TraceIds};
pub use otlp::OtlpLogsError;
pub use otlp_config::{OtlpLogSettings, RawAuditOtlp, TracesCollector};
pub use sink::AuditSink;

pub use event::is_hidden;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// A short id for one HTTP request: 16 lower-case hex characters (64 bits).
///
/// For correlating log lines, responses and audit events only; it is not a
/// secret and must not be used as one. Each id is SipHash (std's
/// [`RandomState`], keyed from the OS's randomness once per thread and
/// varied per call) of a process-wide counter and the current time, so ids
/// do not repeat within a process, are not guessable from one another, and
/// cost no system call.
pub fn new_request_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(n);
    h.write_u128(nanos);
    format!("{:016x}", h.finish())
}
