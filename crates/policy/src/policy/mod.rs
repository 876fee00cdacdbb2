//! Elicitation policy: what an upstream may ask a person, and how.

pub mod config;
#[cfg(test)]
mod corpus_tally;
pub mod detect;
pub mod form;
pub mod icon_rules;
pub mod injection;
pub mod inspect;
pub mod intent;
pub mod sanitize;
pub mod secrets;
pub mod url_rules;
