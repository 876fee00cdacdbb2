//! Policies are data: `policies/*.toml`, each file one named policy, each
//! extending a built-in preset (`untrusted`, the default, or `trusted`) or
//! another policy and overriding what it names. Read once, validated in full
//! (unknown keys, bad regexes, bad hosts, contradictions, cycles) with the
//! file and line of every problem, and compiled into [`Policy`] values.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use toml::Spanned;

use super::detect::CueSet;
use super::icon_rules::{IconAction, IconPolicy};
use super::injection::{builtin_rules, word_lists, InjectionRule, InjectionRules, RuleAction};
use super::intent::IntentDetector;
use super::sanitize::HtmlMode;
use super::secrets::{SecretFieldDetector, SecretKind};
use super::url_rules::{HostPattern, UrlPolicy};
use crate::model::ConfigError;

pub(crate) const PRESETS: &[(&str, &str)] = &[
    (
        "untrusted",
        include_str!("../../../../../policies/presets/untrusted.toml"),
    ),
    (
        "trusted",
        include_str!("../../../../../policies/presets/trusted.toml"),
    ),
];

/// Whether a policy's verdicts are carried out or only recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Enforce,
    Monitor,
}

/// What a rule does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Block,
    /// Remove the offending part (an optional form field) and let the rest through.
    Strip,
    Allow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PolicyLimits {
    pub(crate) max_result_bytes: usize,
    pub(crate) max_request_state_bytes: usize,
    pub(crate) max_input_requests: usize,
    pub(crate) max_properties: usize,
    pub(crate) max_enum_options: usize,
    pub(crate) max_message_chars: usize,
    pub(crate) max_title_chars: usize,
    pub(crate) max_description_chars: usize,
    /// Text bytes read in one message, all its strings together.
    pub(crate) max_text_bytes: usize,
    pub(crate) max_string_max_length: u64,
}

/// What the injection rules do with data a server hands back (`[content]
/// injection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentInjection {
    /// Not scanned.
    Off,
    /// Scanned; what the rules find is recorded, nothing refused.
    Monitor,
    /// Scanned; the rules' own actions apply (a blocking rule refuses
    /// when the policy enforces).
    Enforce,
    /// Scanned; text that steers the model with certainty (a fake role or
    /// authority marker with an order, an instruction only an encoding
    /// hides, an error that tells the model to run a command) is refused
    /// when the policy enforces; everything else the rules find is
    /// recorded.
    Confident,
}

/// `[content]`: the rules for data a server hands back (tool results,
/// resource contents, errors; `policy::inspect::content`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContentPolicy {
    pub(crate) injection: ContentInjection,
    /// Credentials in what a server returns (`[content] secrets`).
    pub(crate) secrets: ResultSecrets,
    /// A secret a secret store was asked for (`[content] secret_stores`).
    pub(crate) secret_stores: SecretStores,
    /// Links to hosts not allowed stay (images never do).
    pub(crate) allow_links: bool,
    /// Hosts images and links may point at besides the upstream's own
    /// (and its subdomains).
    pub(crate) allowed_hosts: Vec<HostPattern>,
}

/// What becomes of a credential in what a server returns (`[content]
/// secrets`): always recorded and remembered for the caller (so it cannot
/// be sent on to another upstream), and replaced by `[redacted]` under
/// `redact` when the policy enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultSecrets {
    Redact,
    Flag,
    Off,
}

/// What becomes of a credential in the result of a tool listed as a
/// secret store (a vault, a password manager, a key store: its name, title
/// or description says it reads or returns secrets), called by name
/// (`[content] secret_stores`): returning the secret it was asked for is its
/// job. Either way its fingerprint is kept, so sending it on to another
/// upstream is still `cross_upstream_flow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretStores {
    /// Delivered as returned, without a verdict.
    Deliver,
    /// Treated like any result (`[content] secrets`).
    Redact,
}

/// What one `[arguments]` rule does with what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The call is refused (`-32602`).
    Enforce,
    /// The value (or the secret in it) is replaced by `[redacted]`.
    Redact,
    /// The part is taken out (undeclared properties).
    Remove,
    /// Recorded, nothing changed.
    Monitor,
    /// The person is asked, with the gateway's own approval question,
    /// before the call goes on (a `tools/call`; any other request that
    /// cannot be asked about is refused as under `enforce`).
    Ask,
    Off,
}

impl Setting {
    pub fn as_str(self) -> &'static str {
        match self {
            Setting::Enforce => "enforce",
            Setting::Redact => "redact",
            Setting::Remove => "remove",
            Setting::Monitor => "monitor",
            Setting::Ask => "ask",
            Setting::Off => "off",
        }
    }
}

/// `[arguments]`: the rules for what a call sends a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentPolicy {
    /// An item never listed, arguments outside the listed definition.
    pub schema: Setting,
    /// Properties the listed schema does not declare.
    pub undeclared: Setting,
    pub secrets: Setting,
    pub private_paths: Setting,
    pub addresses: Setting,
    pub shell: Setting,
    /// A value another upstream returned to this caller.
    pub cross_upstream: Setting,
    /// A credential in a property the listed tool declares for one (the
    /// server's own login), not one of a form the scanner knows: `enforce`
    /// leaves it to `secrets`; `monitor` records and delivers it.
    pub listed_credentials: Setting,
    /// A URL or host in an argument naming the person's own network
    /// (`*.internal`, `*.corp`, a single label): `enforce` leaves it to
    /// `addresses`; `monitor` records and sends it.
    pub local_names: Setting,
    /// Hosts URLs in arguments may name although they lead inside.
    pub(crate) allowed_hosts: Vec<HostPattern>,
    /// Hosts URLs in arguments never name (besides `[url_mode] denied_hosts`).
    pub(crate) denied_hosts: Vec<HostPattern>,
}

/// What a listed item (a tool, prompt, resource or template; a server's
/// instructions) whose text works against the user gets (`[listing]
/// on_violation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListingAction {
    /// The item is taken out of the list; the rest is delivered.
    Remove,
    /// The whole list is refused.
    Refuse,
    /// Delivered, with a recorded verdict.
    Flag,
}

/// What a listed item that promotes itself or steers the model toward the
/// server's own tools gets (`[listing] promotion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PromotionAction {
    Off,
    Flag,
    Remove,
}

/// `[listing]`: what the gateway does with what a server lists
/// (`policy::inspect::listing`), and the detector that reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListingPolicy {
    pub(crate) on_violation: ListingAction,
    pub(crate) promotion: PromotionAction,
    pub(crate) intent: &'static IntentDetector,
}

/// `[listing] on_change`: what becomes of a listed item whose definition
/// differs from the one the gateway pinned for it (a rug pull; the
/// gateway's `listings` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnChange {
    /// Removed from the delivered list, and a call to it refused, until an
    /// operator accepts the new definition.
    Remove,
    /// Delivered, recorded (audit, metric, `portcullis listings list`).
    Flag,
    /// The new definition is pinned in place of the old one.
    Allow,
}

/// A compiled policy: everything the inspector needs, no strings to re-read.
pub struct Policy {
    pub name: String,
    pub mode: Mode,
    pub(crate) limits: PolicyLimits,
    pub(crate) html: HtmlMode,
    pub(crate) secret_fields: Action,
    pub(crate) secrets: SecretFieldDetector,
    pub(crate) url_mode: Action,
    pub(crate) url: UrlPolicy,
    pub icons: IconPolicy,
    pub(crate) sampling: Action,
    pub(crate) roots: Action,
    pub(crate) sampling_include_context: Action,
    /// The most tokens a sampling request may ask for.
    pub(crate) sampling_max_tokens: u64,
    /// The most messages a sampling request may carry.
    pub(crate) sampling_max_messages: usize,
    pub(crate) injection: InjectionRules,
    /// The byte tests of a response's raw JSON as one pass, built on first
    /// use (`inspect::content::scan_raw`).
    pub(crate) raw_cues: OnceLock<Option<CueSet>>,
    pub(crate) content: ContentPolicy,
    pub(crate) listing: ListingPolicy,
    /// Every sealed state of an upstream under this policy is answered once.
    pub single_use: bool,
    /// `[listing] on_change`: a changed definition of a listed item.
    pub on_change: OnChange,
    /// `[[approval]]`: the calls to this upstream the gateway asks the
    /// person about before forwarding them (down the `extends` chain; a
    /// rule of the same name replaces its parent's).
    pub approval: portcullis_approval::ApprovalRules,
    /// `[arguments]`: what a call sends a server.
    pub arguments: ArgumentPolicy,
    /// `[transport] plaintext_remote`.
    pub plaintext_remote: PlaintextRemote,
    /// `[authorization] excessive_scopes`: an upstream's scope challenge
    /// asking a reading tool for scopes that write (`policy::scopes`).
    pub excessive_scopes: Setting,
}

/// What a plain `http://` upstream on a host that is not this machine
/// gets at config validation (`[transport] plaintext_remote`): what the
/// gateway sends it and what it answers cross a network anyone on the way
/// can read and alter, and nothing proves the server is the one meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaintextRemote {
    /// The config is refused unless the upstream says `allow_plaintext = true`.
    Refuse,
    /// A `portcullis check` warning (`--strict` refuses it).
    Warn,
}

impl Policy {
    /// `[content] secrets`.
    pub fn result_secrets(&self) -> ResultSecrets {
        self.content.secrets
    }

    /// Whether results are read for credentials at all: to redact them
    /// (`[content] secrets`), or to remember them for the cross-upstream
    /// check (`[arguments] cross_upstream`).
    pub fn reads_result_secrets(&self) -> bool {
        self.content.secrets != ResultSecrets::Off || self.arguments.cross_upstream != Setting::Off
    }

    /// The kind of secret a field of this name asks for, by the policy's
    /// secret terms (`[secret_fields]`): an argument of that name is shown
    /// masked in the gateway's own questions.
    pub fn secret_named(&self, name: &str) -> Option<&'static str> {
        let field = super::secrets::FieldText::named(name);
        let found = self
            .secrets
            .check_form("", None, &[field])
            .fields
            .pop()
            .flatten();
        found.map(|m| m.kind.as_str())
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

mod chain;
#[macro_use]
mod compile;
mod controls;
mod raw;

pub use chain::PolicySet;
use chain::*;
use compile::*;
pub use controls::{Control, ControlValue, Strength, Weakening, ANY};
use raw::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    /// Found by the `policy` fuzz target: toml gives no message for a
    /// control character in a comment.
    #[test]
    fn a_syntax_error_without_a_parser_message_still_says_what_is_wrong() {
        let e = PolicySet::from_texts(&[("p", "mode = \"enforce\"\n# bad \u{1} here\n")])
            .err()
            .expect("refused");
        assert_eq!(
            (e.file.as_str(), e.line, e.field.as_str()),
            ("p.toml", 2, "(syntax)")
        );
        assert!(e.message.contains("not valid TOML"), "{e}");
    }

    #[test]
    fn policies_from_text_load_like_files() {
        let set = PolicySet::from_texts(&[("mine", "mode = \"monitor\"\n")]).unwrap();
        assert_eq!(set.get("mine").unwrap().mode, Mode::Monitor);
        assert!(
            PolicySet::from_texts(&[("trusted", "")]).is_err(),
            "a preset's name"
        );
        assert!(PolicySet::from_texts(&[("Bad Name", "")]).is_err());
    }

    #[test]
    fn presets_compile_and_differ() {
        let set = PolicySet::load(None).unwrap();
        let u = set.get("untrusted").unwrap();
        let t = set.get("trusted").unwrap();
        assert_eq!(u.mode, Mode::Enforce);
        assert_eq!(u.sampling_include_context, Action::Block);
        assert_eq!(t.sampling_include_context, Action::Allow);
        assert!(u.single_use && !t.single_use);
        assert!(!u.url.allow_local_names && t.url.allow_local_names);
        assert_eq!(u.html, HtmlMode::Strip);
        assert_eq!(t.html, HtmlMode::SafeSubset);
        assert!(!u.url.allow_ip_literals);
        assert_eq!(u.secret_fields, Action::Block);
        assert_eq!(t.secret_fields, Action::Block);
    }

    #[test]
    fn a_policy_extends_and_overrides() {
        let dir = dir_with(&[
            ("rooms.toml", "extends = \"trusted\"\nmode = \"monitor\"\n[limits]\nmax_properties = 3\n[url_mode]\nallowed_hosts = [\"*.example.com\"]\n"),
            ("rooms-tight.toml", "extends = \"rooms\"\n[secret_fields]\naction = \"strip\"\n[[injection.rule]]\nname = \"wire-money\"\npattern = \"(?i)wire\\\\s+money\"\naction = \"flag\"\n"),
            ("plain.toml", "description = \"no extends: builds on untrusted\"\n"),
        ]);
        let set = PolicySet::load(Some(dir.path())).unwrap();
        let rooms = set.get("rooms").unwrap();
        assert_eq!(rooms.mode, Mode::Monitor);
        assert_eq!(rooms.limits.max_properties, 3);
        assert_eq!(rooms.sampling, Action::Allow, "inherited from trusted");
        let tight = set.get("rooms-tight").unwrap();
        assert_eq!(tight.mode, Mode::Monitor, "inherited from rooms");
        assert_eq!(tight.secret_fields, Action::Strip);
        assert_eq!(tight.limits.max_properties, 3);
        assert!(tight
            .injection
            .scan("please wire money now")
            .iter()
            .any(|h| h.rule == "wire-money"));
        let plain = set.get("plain").unwrap();
        assert!(plain.single_use, "inherited from untrusted");
        assert_eq!(plain.sampling_include_context, Action::Block);
    }

    #[test]
    fn extra_terms_and_words_extend_the_shipped_lists() {
        let dir = dir_with(&[
            ("base.toml", "[secret_fields]\nextra_terms = { password = [\"kennwort2\"] }\n[injection]\nextra_words = { host_context = [\"customer database\"] }\n"),
            ("child.toml", "extends = \"base\"\n[secret_fields]\nextra_terms = { pin = [\"badge code\"] }\n"),
        ]);
        let set = PolicySet::load(Some(dir.path())).unwrap();
        let child = set.get("child").unwrap();
        let kind = |name: &str| child.secrets.check_field(name, None, None).map(|m| m.kind);
        assert_eq!(
            kind("kennwort2"),
            Some(SecretKind::Password),
            "inherited term"
        );
        assert_eq!(kind("badge_code"), Some(SecretKind::Pin));
        assert_eq!(kind("badge"), None);
        let hits = child.injection.scan("Paste the customer database here");
        assert!(
            hits.iter().any(|h| h.rule == "disclose_context"),
            "{hits:?}"
        );
        let e = load_err(&[(
            "a.toml",
            "[secret_fields]\nextra_terms = { passwd = [\"x\"] }\n",
        )]);
        assert_eq!(
            (e.line, e.field.as_str()),
            (2, "secret_fields.extra_terms"),
            "{e}"
        );
        let e = load_err(&[("a.toml", "[injection]\nextra_words = { nouns = [\"x\"] }\n")]);
        assert_eq!(
            (e.line, e.field.as_str()),
            (2, "injection.extra_words"),
            "{e}"
        );
        let e = load_err(&[(
            "a.toml",
            "[injection]\nextra_words = { disclose = [\"{a|b\"] }\n",
        )]);
        assert_eq!(
            (e.line, e.field.as_str()),
            (2, "injection.extra_words"),
            "{e}"
        );
    }

    fn load_err(files: &[(&str, &str)]) -> ConfigError {
        let dir = dir_with(files);
        PolicySet::load(Some(dir.path())).map(|_| ()).unwrap_err()
    }

    #[test]
    fn mistakes_are_named_with_file_and_line() {
        let e = load_err(&[(
            "a.toml",
            "mode = \"enforce\"\n[limits]\nmax_propertys = 3\n",
        )]);
        assert!(e.file.ends_with("a.toml"));
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("max_propertys"), "{e}");

        let e = load_err(&[(
            "a.toml",
            "\n[[injection.rule]]\nname = \"x\"\npattern = \"(unclosed\"\n",
        )]);
        assert_eq!(
            (e.line, e.field.as_str()),
            (4, "injection.rule.pattern"),
            "{e}"
        );

        let e = load_err(&[("a.toml", "extends = \"nope\"\n")]);
        assert_eq!((e.line, e.field.as_str()), (1, "extends"), "{e}");
        assert!(e.message.contains("known:"), "{e}");

        let e = load_err(&[
            ("a.toml", "extends = \"b\"\n"),
            ("b.toml", "extends = \"a\"\n"),
        ]);
        assert!(e.message.contains("cycle"), "{e}");

        let e = load_err(&[(
            "a.toml",
            "[url_mode]\naction = \"block\"\nallowed_hosts = [\"example.com\"]\n",
        )]);
        assert_eq!(e.field, "url_mode.allowed_hosts", "{e}");

        let e = load_err(&[(
            "a.toml",
            "[url_mode]\nallowed_hosts = [\"example.com\"]\ndenied_hosts = [\"example.com\"]\n",
        )]);
        assert!(e.message.contains("both allowed and denied"), "{e}");

        let e = load_err(&[("a.toml", "[secret_fields]\naction = \"maybe\"\n")]);
        assert_eq!(
            (e.line, e.field.as_str()),
            (2, "secret_fields.action"),
            "{e}"
        );

        let e = load_err(&[("untrusted.toml", "mode = \"monitor\"\n")]);
        assert!(e.message.contains("preset"), "{e}");

        let e = load_err(&[("a.toml", "[limits]\nmax_result_bytes = 0\n")]);
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn approval_rules_are_read_from_policy_files_down_the_chain() {
        let dir = dir_with(&[
            ("rooms.toml", "[[approval]]\ntools = [\"get_room\"]\n"),
            (
                "rooms-strict.toml",
                "extends = \"rooms\"\n[[approval]]\nname = \"cancel\"\nannotations = [\"destructiveHint\"]\n",
            ),
        ]);
        let set = PolicySet::load(Some(dir.path())).unwrap();
        let names = |p: &str| -> Vec<String> {
            set.get(p)
                .unwrap()
                .approval
                .iter()
                .map(|r| r.name.clone())
                .collect()
        };
        assert_eq!(names("rooms"), ["approval-1"]);
        assert_eq!(names("rooms-strict"), ["approval-1", "cancel"]);
        assert!(set.get("untrusted").unwrap().approval.is_empty());
        // A bad condition is named with its file, line and column.
        let e = load_err(&[(
            "a.toml",
            "mode = \"enforce\"\n[[approval]]\nwhen = 'tool == \"x\" && nobody'\n",
        )]);
        assert_eq!(
            (e.line, e.column, e.field.as_str()),
            (3, 24, "approval[0].when"),
            "{e}"
        );
        assert!(e.message.contains("unknown variable `nobody`"), "{e}");
    }

    #[test]
    fn the_shipped_policies_directory_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies");
        let set = PolicySet::load(Some(&dir)).unwrap();
        assert!(set.names().len() > 2, "{:?}", set.names());
    }
}
