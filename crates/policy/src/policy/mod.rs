//! Elicitation policy: what an upstream may ask a person, and how.

pub mod address;
pub mod arguments;
pub mod config;
#[cfg(test)]
mod corpus_tally;
pub mod detect;
pub mod form;
pub mod icon_rules;
pub(crate) mod injection;
pub mod inspect;
pub(crate) mod intent;
pub mod sanitize;
pub mod scopes;
pub(crate) mod secrets;
/// The one scanner of values for secrets: what a person typed into a form
/// (MRTR answers), what a call's arguments send, what a result returns.
pub use secrets::values as secret_values;
pub(crate) mod url_rules;

/// Build every table the policy ships (word lists, regex sets, sanitiser
/// builders, detectors) now instead of on the first message that needs
/// one: the gateway calls it when it starts, so no request pays for a
/// compile (tens of milliseconds on the first risky call otherwise).
/// Idempotent and cheap after the first call.
pub fn warm() {
    address::warm();
    arguments::warm();
    injection::warm();
    inspect::warm();
    intent::warm();
    sanitize::warm();
    scopes::warm();
    secrets::warm();
}
