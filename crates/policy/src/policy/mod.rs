//! Elicitation policy: what an upstream may ask a person, and how.

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
pub(crate) mod secrets;
pub(crate) mod url_rules;
