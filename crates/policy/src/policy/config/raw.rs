//! A policy file exactly as written: serde types with `deny_unknown_fields`
//! and spans, so that every later complaint can name a line.

use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) extends: Option<Spanned<String>>,
    // A note for people reading the file: accepted, never read by the gateway.
    #[allow(dead_code)]
    pub(super) description: Option<String>,
    pub(super) mode: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) limits: RawLimits,
    #[serde(default)]
    pub(super) text: RawText,
    #[serde(default)]
    pub(super) secret_fields: RawSecretFields,
    #[serde(default)]
    pub(super) url_mode: RawUrlMode,
    #[serde(default)]
    pub(super) icons: RawIcons,
    #[serde(default)]
    pub(super) deprecated: RawDeprecated,
    #[serde(default)]
    pub(super) injection: RawInjection,
    #[serde(default)]
    pub(super) state: RawPolicyState,
    #[serde(default)]
    pub(super) content: RawContent,
    #[serde(default)]
    pub(super) listing: RawListing,
    /// `[[approval]]`: calls the gateway asks the person about first.
    #[serde(default)]
    pub(super) approval: Vec<Spanned<portcullis_approval::RawApproval>>,
    #[serde(default)]
    pub(super) arguments: RawArguments,
    #[serde(default)]
    pub(super) transport: RawTransport,
    #[serde(default)]
    pub(super) authorization: RawAuthorization,
}

/// `[authorization]`: what an upstream may ask the client to authorize.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuthorization {
    /// A scope challenge asking a reading tool for scopes that write.
    pub(super) excessive_scopes: Option<Spanned<String>>,
}

/// `[transport]`: how an upstream under this policy may be reached.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTransport {
    /// A plain `http://` upstream on a host that is not this machine.
    pub(super) plaintext_remote: Option<Spanned<String>>,
}

/// `[arguments]`: what a call sends a server — checked against the
/// definition the gateway listed, and read for what must not leave.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawArguments {
    pub(super) schema: Option<Spanned<String>>,
    pub(super) undeclared: Option<Spanned<String>>,
    pub(super) secrets: Option<Spanned<String>>,
    pub(super) private_paths: Option<Spanned<String>>,
    pub(super) addresses: Option<Spanned<String>>,
    pub(super) shell: Option<Spanned<String>>,
    pub(super) cross_upstream: Option<Spanned<String>>,
    pub(super) listed_credentials: Option<Spanned<String>>,
    pub(super) local_names: Option<Spanned<String>>,
    pub(super) allowed_hosts: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) denied_hosts: Option<Spanned<Vec<Spanned<String>>>>,
}

/// `[listing]`: what the gateway does with what a server lists: an item
/// whose text works against the user (`on_violation`), one that promotes
/// itself (`promotion`), a remembered definition that changed (`on_change`,
/// rug pulls).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawListing {
    pub(super) on_violation: Option<Spanned<String>>,
    pub(super) promotion: Option<Spanned<String>>,
    pub(super) on_change: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawContent {
    pub(super) injection: Option<Spanned<String>>,
    pub(super) secrets: Option<Spanned<String>>,
    pub(super) secret_stores: Option<Spanned<String>>,
    pub(super) links: Option<Spanned<String>>,
    pub(super) allowed_hosts: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicyState {
    pub(super) single_use: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) max_result_bytes: Option<Spanned<i64>>,
    pub(super) max_request_state_bytes: Option<Spanned<i64>>,
    pub(super) max_input_requests: Option<Spanned<i64>>,
    pub(super) max_properties: Option<Spanned<i64>>,
    pub(super) max_enum_options: Option<Spanned<i64>>,
    pub(super) max_message_chars: Option<Spanned<i64>>,
    pub(super) max_title_chars: Option<Spanned<i64>>,
    pub(super) max_description_chars: Option<Spanned<i64>>,
    pub(super) max_text_bytes: Option<Spanned<i64>>,
    pub(super) max_string_max_length: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawText {
    pub(super) html: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecretFields {
    pub(super) action: Option<Spanned<String>>,
    pub(super) allow_names: Option<Vec<String>>,
    #[serde(default)]
    pub(super) extra: Vec<Spanned<RawSecretPattern>>,
    /// kind → extra terms (phrases like the shipped term files).
    #[serde(default)]
    pub(super) extra_terms: std::collections::BTreeMap<Spanned<String>, Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecretPattern {
    pub(super) kind: Spanned<String>,
    pub(super) pattern: Spanned<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUrlMode {
    pub(super) action: Option<Spanned<String>>,
    pub(super) allow_http_localhost: Option<bool>,
    pub(super) allow_local_names: Option<bool>,
    pub(super) allow_ip_literals: Option<bool>,
    pub(super) allow_punycode: Option<bool>,
    pub(super) allowed_hosts: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) denied_hosts: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) max_url_bytes: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIcons {
    pub(super) action: Option<Spanned<String>>,
    pub(super) allow_svg: Option<bool>,
    pub(super) allowed_hosts: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDeprecated {
    pub(super) sampling: Option<Spanned<String>>,
    pub(super) roots: Option<Spanned<String>>,
    pub(super) sampling_include_context: Option<Spanned<String>>,
    pub(super) sampling_max_tokens: Option<Spanned<i64>>,
    pub(super) sampling_max_messages: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInjection {
    pub(super) builtin: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) rule: Vec<Spanned<RawInjectionRule>>,
    /// Built-in word list → extra phrases (`host_context = ["customer database"]`).
    #[serde(default)]
    pub(super) extra_words: std::collections::BTreeMap<Spanned<String>, Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInjectionRule {
    pub(super) name: Spanned<String>,
    pub(super) pattern: Spanned<String>,
    pub(super) action: Option<Spanned<String>>,
}
