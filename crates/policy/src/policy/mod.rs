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
