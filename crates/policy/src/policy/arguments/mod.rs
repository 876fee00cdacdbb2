//! What a call sends a server, policed as carefully as what comes back
//! (`[arguments]` of the upstream's policy).
//!
//! * **The listing is the contract** (`schema`, `undeclared`): a
//!   `tools/call` or `prompts/get` naming an item the gateway never listed
//!   to this caller is refused (`not_listed`); its arguments are checked
//!   against the definition delivered (`contract.rs`: the tool's
//!   `inputSchema`, a prompt's `arguments`), and members the schema does
//!   not declare are refused, removed or recorded.
//! * **What must not leave** — every string of the arguments, at any depth
//!   (every array element, every object member, names never shown):
//!   credentials (`argument_secret`: the one value scanner, and the one
//!   field detector for a property that says it holds a password or, with
//!   a random-looking value, a key or token), private files
//!   (`private_path`, `paths.rs`), addresses that lead inside
//!   (`address`, `hosts.rs`), shell syntax aimed at execution (`shell`,
//!   `shell.rs`). Each rule refuses, redacts where that makes sense
//!   (`[redacted]` in place of the secret), or only records, as the
//!   upstream's policy says.
//! * **Data that crosses servers** (`cross_upstream_flow`): the check
//!   gathers what in the arguments could be a value another upstream
//!   returned to this caller ([`Material`]); the gateway looks their keyed
//!   fingerprints up and hands back where they came from
//!   ([`ArgumentCheck::flows`]).
//!
//! Refusals are JSON-RPC `-32602` with a stable `data.reason`, `data.path`
//! (a JSON pointer into the arguments) and the class found; never the
//! value. Nothing here compiles per request: the schema is compiled once
//! per listed definition, the tables once per process.

mod contract;
mod declared;
mod edit;
mod flows;
mod hosts;
mod paths;
mod results;
mod secret_store;
mod shell;
mod words;

/// Build the shipped tables of this module's parts now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    flows::warm();
    paths::warm();
    secret_store::warm();
    shell::warm();
}

#[cfg(test)]
mod tests;

use std::fmt::Write as _;

use portcullis_approval::ArgumentCheck as ApprovalCheck;
use serde_json::Value;

pub use contract::{Contract, Problem};
pub use flows::{result_material, Material};
pub use results::{inspect_result_secrets, may_hold_result_secrets, ResultSecrets};

use super::address::HostClass;
use super::config::{Mode, Policy, Setting};
use super::inspect::{Action, Rule, Verdict};
use super::secret_values::{Scanned, SecretValueScanner};
use super::secrets::{FieldText, SecretKind};
use crate::model::{printable_name, McpMethod, Reason, Refusal};
use contract::pointer_join;
use edit::{pointer_mut, redact, remove_at};
use paths::PrivatePaths;
use shell::ShellRules;
use words::{address_words, describe_kind, display_path, refusal};

/// What replaces a secret the policy redacts.
pub const REDACTED: &str = "[redacted]";

/// The call being checked.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub method: McpMethod,
    /// The configured name of the upstream (in refusals).
    pub upstream_name: &'a str,
}

/// What the gateway knows of the item a call names.
#[derive(Debug, Clone, Copy)]
pub enum Listed<'a> {
    /// The definition the gateway delivered to this caller.
    Item(&'a Contract),
    /// The caller's whole list, fetched, has no such item: `kind` is
    /// `tool`, `prompt` or `resource_template`, `name` what the call names.
    Missing { kind: &'static str, name: &'a str },
    /// No list applies (`resources/read`), or none could be had and the
    /// rule does not enforce.
    Unchecked,
}

/// What the check found and did, for the audit trail, the metrics and
/// `explain`: names and classes, never a value.
#[derive(Debug, Default)]
pub struct ArgumentReport {
    pub verdicts: Vec<Verdict>,
    /// Every check that ran, passes included (`explain` only).
    pub trace: Vec<Verdict>,
    /// Values to look up among what other upstreams returned to this
    /// caller (only when the cross-upstream rule is on).
    pub material: Vec<Material>,
    /// The arguments changed (redacted, a member removed): the request is
    /// written again.
    pub changed: bool,
}

impl ArgumentReport {
    /// What a rule set to `ask` found, for the approval rules: the check
    /// and where in the arguments (a JSON pointer; names, never values).
    pub fn asks(&self) -> Vec<(ApprovalCheck, String)> {
        self.verdicts
            .iter()
            .filter(|v| v.action == Action::Ask)
            .filter_map(|v| {
                let check = match v.rule {
                    Rule::ArgumentSecret => ApprovalCheck::Secret,
                    Rule::PrivatePath => ApprovalCheck::PrivatePath,
                    Rule::Address => ApprovalCheck::ForbiddenHost,
                    Rule::Shell => ApprovalCheck::ShellSyntax,
                    Rule::CrossUpstreamFlow => ApprovalCheck::CrossUpstreamFlow,
                    _ => return None,
                };
                Some((check, v.key.clone().unwrap_or_default()))
            })
            .collect()
    }
}

/// One call's arguments under the upstream's `[arguments]` rules.
pub struct ArgumentCheck<'a> {
    policy: &'a Policy,
    call: Call<'a>,
    scanner: &'a SecretValueScanner,
    report: ArgumentReport,
    tracing: bool,
    monitor_only: bool,
}

/// The secrets a property's name says it holds whatever the value looks
/// like; a key or token it names counts when the value looks random.
const NAMED_ALWAYS: [SecretKind; 6] = [
    SecretKind::Password,
    SecretKind::ClientSecret,
    SecretKind::PrivateKey,
    SecretKind::SeedPhrase,
    SecretKind::CardSecurityCode,
    SecretKind::Pin,
];
const NAMED_IF_RANDOM: [SecretKind; 3] = [
    SecretKind::ApiKey,
    SecretKind::AccessToken,
    SecretKind::RefreshToken,
];

/// The most strings one call's arguments are read for (a larger body is
/// bounded by the gateway's request size; past this the rest is not read
/// for content, and that is recorded).
const MAX_STRINGS: usize = 10_000;

impl<'a> ArgumentCheck<'a> {
    pub fn new(policy: &'a Policy, call: Call<'a>, scanner: &'a SecretValueScanner) -> Self {
        ArgumentCheck {
            policy,
            call,
            scanner,
            report: ArgumentReport::default(),
            tracing: false,
            monitor_only: false,
        }
    }

    /// A check that records every rule that ran (`explain`), and whose
    /// rules all run as if monitoring when `every_rule`.
    pub fn traced(mut self, every_rule: bool) -> Self {
        self.tracing = true;
        self.monitor_only = every_rule;
        self
    }

    pub fn finish(self) -> ArgumentReport {
        self.report
    }

    /// What the check gathered for the cross-upstream lookup.
    pub fn material(&self) -> &[Material] {
        &self.report.material
    }

    fn enforcing(&self) -> bool {
        self.policy.mode == Mode::Enforce && !self.monitor_only
    }

    /// What a rule set to `setting` does with a finding now: `None` when
    /// the rule is off.
    fn action(&self, setting: Setting) -> Option<Action> {
        let enforcing = self.enforcing();
        match setting {
            Setting::Off => None,
            Setting::Monitor => Some(Action::Monitor),
            _ if !enforcing => Some(Action::Monitor),
            Setting::Enforce => Some(Action::Block),
            Setting::Redact => Some(Action::Redact),
            Setting::Remove => Some(Action::Remove),
            // Only a tool call can wait for the gateway's question.
            Setting::Ask if self.call.method == McpMethod::ToolsCall => Some(Action::Ask),
            Setting::Ask => Some(Action::Block),
        }
    }

    fn record(&mut self, rule: Rule, action: Action, path: &str, detail: Option<String>) {
        let verdict = Verdict {
            rule,
            action,
            key: Some(path.to_owned()),
            field: None,
            detail,
        };
        if self.tracing {
            self.report.trace.push(verdict.clone());
        }
        if action != Action::Pass {
            self.report.verdicts.push(verdict);
        }
    }

    fn pass(&mut self, rule: Rule, path: &str, what: &str) {
        if self.tracing {
            self.record(rule, Action::Pass, path, Some(what.to_owned()));
        }
    }

    /// The first rules: the item listed at all, the arguments against its
    /// definition, undeclared members; then every string for what must
    /// not leave. `arguments` is what the method sends (a tool's or
    /// prompt's arguments, a completion's argument, a resource's URI as a
    /// string); `Null` when the call has none.
    pub fn check(&mut self, listed: Listed<'_>, arguments: &mut Value) -> Result<(), Refusal> {
        let contract = self.listing(listed, arguments)?;
        let mut walk = Walk {
            contract,
            strings: 0,
        };
        let mut at = String::new();
        self.walk(&mut walk, arguments, &mut at, None, None)
    }

    fn listing<'c>(
        &mut self,
        listed: Listed<'c>,
        arguments: &mut Value,
    ) -> Result<Option<&'c Contract>, Refusal> {
        let setting = self.policy.arguments.schema;
        let contract = match listed {
            Listed::Unchecked => return Ok(None),
            Listed::Missing { kind, name } => {
                let Some(action) = self.action(setting) else {
                    return Ok(None);
                };
                self.record(
                    Rule::Arguments,
                    action,
                    "",
                    Some(format!("{kind} not listed")),
                );
                if action == Action::Block {
                    let message = format!(
                        "{} did not list the {} \"{}\" to this caller; the gateway forwards calls only to what it listed",
                        self.call.upstream_name,
                        kind.replace('_', " "),
                        printable_name(name)
                    );
                    return Err(Refusal::new(Reason::NotListed, message)
                        .with_data("rule", Rule::Arguments.as_str().into())
                        .with_data("kind", kind.into()));
                }
                return Ok(None);
            }
            Listed::Item(c) => c,
        };
        if setting == Setting::Off {
            return Ok(Some(contract));
        }
        let problems = match self.call.method {
            McpMethod::CompletionComplete => contract.completion_problems(arguments),
            McpMethod::ToolsCall if arguments.is_null() => {
                contract.problems(&Value::Object(Default::default()))
            }
            _ => contract.problems(arguments),
        };
        if problems.is_empty() {
            self.pass(Rule::Arguments, "", "the listed definition");
        }
        let mut removed = Vec::new();
        for problem in problems {
            let undeclared = problem.keyword == "undeclared";
            let setting = match undeclared {
                true => self.policy.arguments.undeclared,
                false => setting,
            };
            let Some(action) = self.action(setting) else {
                continue;
            };
            self.record(
                Rule::Arguments,
                action,
                &problem.path,
                Some(problem.keyword.clone()),
            );
            match action {
                Action::Block => return Err(self.invalid(&problem, undeclared)),
                Action::Remove => removed.push(problem.path),
                _ => {}
            }
        }
        for path in removed.iter().rev() {
            if remove_at(arguments, path) {
                self.report.changed = true;
            }
        }
        Ok(Some(contract))
    }

    fn invalid(&self, problem: &Problem, undeclared: bool) -> Refusal {
        let reason = match undeclared {
            true => Reason::UndeclaredArgument,
            false => Reason::ArgumentsInvalid,
        };
        let what = match self.call.method {
            McpMethod::PromptsGet | McpMethod::CompletionComplete => "prompt",
            _ => "tool",
        };
        let at = display_path(&problem.path);
        let message = format!(
            "argument {at} {} (the {what} as {} listed it)",
            problem.why, self.call.upstream_name
        );
        refusal(reason, message, Rule::Arguments, &problem.path)
            .with_data("keyword", problem.keyword.clone().into())
    }

    fn walk(
        &mut self,
        walk: &mut Walk<'_>,
        value: &mut Value,
        at: &mut String,
        key: Option<&str>,
        param: Option<&str>,
    ) -> Result<(), Refusal> {
        match value {
            Value::String(_) => {
                walk.strings += 1;
                if walk.strings == MAX_STRINGS + 1 {
                    self.record(
                        Rule::Limit,
                        Action::Monitor,
                        at,
                        Some("strings read".into()),
                    );
                }
                if walk.strings > MAX_STRINGS {
                    return Ok(());
                }
                self.string(walk, value, at, key, param)
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = at.len();
                    let _ = write!(at, "/{i}");
                    let r = self.walk(walk, item, at, key, param);
                    at.truncate(len);
                    r?;
                }
                Ok(())
            }
            Value::Object(members) => {
                for (name, item) in members.iter_mut() {
                    let len = at.len();
                    contract::push_segment(at, name);
                    let top = param.or(Some(name.as_str()));
                    let r = self.walk(walk, item, at, Some(name), top);
                    at.truncate(len);
                    r?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Every rule over one string: secrets, private files, addresses,
    /// shell, and its material for the cross-upstream lookup.
    fn string(
        &mut self,
        walk: &Walk<'_>,
        slot: &mut Value,
        at: &str,
        key: Option<&str>,
        param: Option<&str>,
    ) -> Result<(), Refusal> {
        let Value::String(text) = slot else {
            return Ok(());
        };
        if text.is_empty() {
            return Ok(());
        }
        let rules = &self.policy.arguments;
        let scanned = (rules.secrets != Setting::Off || rules.cross_upstream != Setting::Off)
            .then(|| self.scanner.find_all(text));
        if rules.cross_upstream != Setting::Off {
            if let Some(scanned) = &scanned {
                flows::argument_material(scanned, at, &mut self.report.material);
            }
        }
        if let Some(scanned) = scanned {
            let redacted = self.secrets(walk, text, scanned, at, key)?;
            if let Some(new) = redacted {
                *text = new;
                self.report.changed = true;
                return Ok(());
            }
        }
        self.private_path(text, at)?;
        self.address(walk, text, at, key)?;
        self.shell(walk, text, at, param)
    }

    /// Credentials: what the scanner finds, a password where the property
    /// says so, a random-looking key or token where it names one. The
    /// value redacted, when the rule redacts.
    fn secrets(
        &mut self,
        walk: &Walk<'_>,
        text: &str,
        scanned: Scanned<'_>,
        at: &str,
        key: Option<&str>,
    ) -> Result<Option<String>, Refusal> {
        let rules = &self.policy.arguments;
        if rules.secrets == Setting::Off {
            return Ok(None);
        }
        let field_kind = key.and_then(|k| self.property_kind(walk, k));
        let named = field_kind.filter(|kind| value_fits(*kind, text));
        let url_password = hosts::has_url_password(text);
        // What the listed tool asks for in a parameter named for it: a
        // password, a token, a card number where the name says so (and
        // nothing of another kind in the value).
        let asked = field_kind.is_some_and(|kind| {
            (named.is_some() || !scanned.found.is_empty())
                && scanned
                    .found
                    .iter()
                    .all(|f| f.kind.as_str() == kind.as_str())
        }) && !url_password
            && key.is_some_and(|k| listing_asks_for(walk.contract, k, at));
        let setting = match (asked, rules.listed_credentials) {
            (true, Setting::Monitor) => Setting::Monitor,
            (true, Setting::Off) => Setting::Off,
            _ => rules.secrets,
        };
        let Some(action) = self.action(setting) else {
            return Ok(None);
        };
        let kinds: Vec<&'static str> = scanned
            .found
            .iter()
            .map(|f| f.kind.as_str())
            .chain(named.map(SecretKind::as_str))
            .chain(url_password.then_some("url_password"))
            .collect();
        let Some(first) = kinds.first().copied() else {
            self.pass(Rule::ArgumentSecret, at, "credentials");
            return Ok(None);
        };
        self.record(Rule::ArgumentSecret, action, at, Some(first.to_owned()));
        match action {
            Action::Block => {
                let what = describe_kind(first);
                let message = format!(
                    "argument {} holds {what}; the gateway does not send credentials to {}",
                    display_path(at),
                    self.call.upstream_name
                );
                Err(
                    refusal(Reason::SecretInArguments, message, Rule::ArgumentSecret, at)
                        .with_data("kind", first.into()),
                )
            }
            Action::Redact => Ok(Some(redact(
                text,
                &scanned,
                named.is_some() || url_password,
            ))),
            _ => Ok(None),
        }
    }

    /// The secret a property's name (and its listed description) says it
    /// holds.
    fn property_kind(&self, walk: &Walk<'_>, key: &str) -> Option<SecretKind> {
        let detector = &self.policy.secrets;
        match walk.contract {
            Some(contract) => contract.property_kind(key, detector),
            None => detector.property_kind(FieldText::named(key)),
        }
    }

    fn private_path(&mut self, text: &str, at: &str) -> Result<(), Refusal> {
        let Some(action) = self.action(self.policy.arguments.private_paths) else {
            return Ok(());
        };
        let Some(class) = PrivatePaths::builtin().find(text) else {
            self.pass(Rule::PrivatePath, at, "private files");
            return Ok(());
        };
        self.record(Rule::PrivatePath, action, at, Some(class.to_owned()));
        if action != Action::Block {
            return Ok(());
        }
        let message = format!(
            "argument {} names a private file ({}); the gateway does not send it to {}",
            display_path(at),
            class.replace('_', " "),
            self.call.upstream_name
        );
        Err(refusal(
            Reason::PrivatePathInArguments,
            message,
            Rule::PrivatePath,
            at,
        )
        .with_data("pathClass", class.into()))
    }

    fn address(
        &mut self,
        walk: &Walk<'_>,
        text: &str,
        at: &str,
        key: Option<&str>,
    ) -> Result<(), Refusal> {
        let rules = &self.policy.arguments;
        if rules.addresses == Setting::Off {
            return Ok(());
        }
        let addressed = key.is_some_and(|k| match walk.contract {
            Some(contract) => contract.names_address(k),
            None => hosts::is_address_name(k),
        });
        let Some(found) = hosts::find(text, key, addressed, rules, &self.policy.url) else {
            self.pass(Rule::Address, at, "addresses");
            return Ok(());
        };
        // A name of the person's own network is theirs to name; the
        // addresses every network has (loopback, metadata, link-local,
        // private and reserved ranges) are what steered calls aim at.
        let local_name = found.class == HostClass::LocalName.as_str();
        let setting = match (local_name, rules.local_names) {
            (true, Setting::Monitor) => Setting::Monitor,
            (true, Setting::Off) => Setting::Off,
            _ => rules.addresses,
        };
        let Some(action) = self.action(setting) else {
            return Ok(());
        };
        self.record(Rule::Address, action, at, Some(found.class.to_owned()));
        if action != Action::Block {
            return Ok(());
        }
        let message = format!(
            "argument {} leads to {}; the gateway does not send {} there",
            display_path(at),
            address_words(found.class),
            self.call.upstream_name
        );
        Err(
            refusal(Reason::AddressNotAllowed, message, Rule::Address, at)
                .with_data("addressClass", found.class.into()),
        )
    }

    fn shell(
        &mut self,
        walk: &Walk<'_>,
        text: &str,
        at: &str,
        param: Option<&str>,
    ) -> Result<(), Refusal> {
        let Some(action) = self.action(self.policy.arguments.shell) else {
            return Ok(());
        };
        let rules = ShellRules::builtin();
        let command = || {
            param.is_some_and(|p| {
                let description = walk
                    .contract
                    .and_then(Contract::schema)
                    .and_then(|s| s.get("properties"))
                    .and_then(|ps| ps.get(p))
                    .and_then(|d| d.get("description"))
                    .and_then(Value::as_str);
                rules.is_command_parameter(p, description)
            })
        };
        let Some(construct) = rules.find(text, command, param) else {
            self.pass(Rule::Shell, at, "shell syntax");
            return Ok(());
        };
        self.record(Rule::Shell, action, at, Some(construct.to_owned()));
        if action != Action::Block {
            return Ok(());
        }
        let message = format!(
            "argument {} holds shell syntax aimed at execution ({}); the gateway does not send it to {}",
            display_path(at),
            construct.replace('_', " "),
            self.call.upstream_name
        );
        Err(refusal(Reason::ShellInArguments, message, Rule::Shell, at)
            .with_data("construct", construct.into()))
    }

    /// The cross-upstream rule, once the gateway looked the material up:
    /// `hits` are (path, origin upstream id) of values another upstream
    /// returned to this caller.
    pub fn flows(
        &mut self,
        arguments: &mut Value,
        hits: &[(String, String)],
    ) -> Result<(), Refusal> {
        let Some(action) = self.action(self.policy.arguments.cross_upstream) else {
            return Ok(());
        };
        if hits.is_empty() {
            self.pass(
                Rule::CrossUpstreamFlow,
                "",
                "values other upstreams returned",
            );
            return Ok(());
        }
        for (path, origin) in hits {
            self.record(Rule::CrossUpstreamFlow, action, path, Some(origin.clone()));
            match action {
                Action::Block => {
                    let message = format!(
                        "argument {} carries a value that another upstream ({}) returned to this caller; the gateway does not send it to {}",
                        display_path(path),
                        printable_name(origin),
                        self.call.upstream_name
                    );
                    return Err(refusal(
                        Reason::CrossUpstreamFlow,
                        message,
                        Rule::CrossUpstreamFlow,
                        path,
                    )
                    .with_data("origin", origin.clone().into()));
                }
                Action::Redact => {
                    if let Some(slot) = pointer_mut(arguments, path) {
                        *slot = Value::String(REDACTED.to_owned());
                        self.report.changed = true;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// What the walk carries: the definition (for a parameter's description)
/// and how many strings were read.
struct Walk<'c> {
    contract: Option<&'c Contract>,
    strings: usize,
}

/// Whether a value fits the secret its property names: always for a
/// password, only when random-looking for a key or token.
fn value_fits(kind: SecretKind, value: &str) -> bool {
    NAMED_ALWAYS.contains(&kind) || (NAMED_IF_RANDOM.contains(&kind) && flows::looks_random(value))
}

/// Whether the listed definition declares `key` as one of the call's own
/// parameters (`at` is `/key`): a credential there is what the tool asks
/// for, a login to the server's own service.
fn listing_asks_for(contract: Option<&Contract>, key: &str, at: &str) -> bool {
    at == pointer_join("", key) && contract.is_some_and(|c| c.declares_argument(key))
}
