//! The words of the argument rules' refusals: where (a pointer a person
//! can read), what was found, where an address leads. Never a value.

use super::super::inspect::Rule;
use crate::model::{printable_name, Reason, Refusal};

pub(super) fn refusal(reason: Reason, message: String, rule: Rule, path: &str) -> Refusal {
    Refusal::new(reason, message)
        .with_data("rule", rule.as_str().into())
        .with_data("path", path.into())
}

/// A pointer as a message shows it (`/url`; the arguments themselves:
/// `(the arguments)`), with what a person cannot read taken out.
pub(super) fn display_path(path: &str) -> String {
    match path {
        "" => "(the arguments)".to_owned(),
        p => format!("\"{}\"", printable_name(p)),
    }
}

pub(super) fn describe_kind(kind: &str) -> String {
    if let Some(k) = super::super::secret_values::SecretValueKind::from_name(kind) {
        return k.describe().to_owned();
    }
    match kind {
        "url_password" => "a password in a URL".to_owned(),
        other => format!("a {}", other.replace('_', " ")),
    }
}

pub(super) fn address_words(class: &str) -> &'static str {
    match class {
        "metadata" => "a cloud metadata service",
        "loopback" => "this machine (loopback)",
        "private" => "a private network address",
        "link_local" => "a link-local address",
        "reserved" => "a reserved address",
        "local_name" => "a name of the local network",
        "ip_literal" => "a numeric IP address",
        "denied" => "a host the policy denies",
        _ => "an address the policy refuses",
    }
}
