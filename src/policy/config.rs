//! Policies are data: `policies/*.toml`, each file one named policy, each
//! extending a built-in preset (`untrusted`, the default, or `trusted`) or
//! another policy and overriding what it names. Read once, validated in full
//! (unknown keys, bad regexes, bad hosts, contradictions, cycles) with the
//! file and line of every problem, and compiled into [`Policy`] values.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::injection::{InjectionRule, InjectionRules, RuleAction, BUILTIN_RULES};
use super::sanitize::HtmlMode;
use super::secrets::{SecretFieldDetector, SecretKind};
use super::url_rules::{HostPattern, UrlPolicy};
use crate::model::ConfigError;

pub const PRESETS: &[(&str, &str)] = &[
    (
        "untrusted",
        include_str!("../../policies/presets/untrusted.toml"),
    ),
    (
        "trusted",
        include_str!("../../policies/presets/trusted.toml"),
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

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Block => "block",
            Action::Strip => "strip",
            Action::Allow => "allow",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyLimits {
    pub max_result_bytes: usize,
    pub max_request_state_bytes: usize,
    pub max_input_requests: usize,
    pub max_properties: usize,
    pub max_enum_options: usize,
    pub max_message_chars: usize,
    pub max_title_chars: usize,
    pub max_description_chars: usize,
    pub max_string_max_length: u64,
}

/// A compiled policy: everything the inspector needs, no strings to re-read.
pub struct Policy {
    pub name: String,
    pub description: Option<String>,
    pub mode: Mode,
    pub limits: PolicyLimits,
    pub html: HtmlMode,
    pub secret_fields: Action,
    pub secrets: SecretFieldDetector,
    pub url_mode: Action,
    pub url: UrlPolicy,
    pub sampling: Action,
    pub roots: Action,
    pub sampling_include_context: Action,
    pub injection: InjectionRules,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

// ------------------------------------------------------------------ raw file

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    extends: Option<Spanned<String>>,
    description: Option<String>,
    mode: Option<Spanned<String>>,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    text: RawText,
    #[serde(default)]
    secret_fields: RawSecretFields,
    #[serde(default)]
    url_mode: RawUrlMode,
    #[serde(default)]
    deprecated: RawDeprecated,
    #[serde(default)]
    injection: RawInjection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_result_bytes: Option<Spanned<i64>>,
    max_request_state_bytes: Option<Spanned<i64>>,
    max_input_requests: Option<Spanned<i64>>,
    max_properties: Option<Spanned<i64>>,
    max_enum_options: Option<Spanned<i64>>,
    max_message_chars: Option<Spanned<i64>>,
    max_title_chars: Option<Spanned<i64>>,
    max_description_chars: Option<Spanned<i64>>,
    max_string_max_length: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawText {
    html: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecretFields {
    action: Option<Spanned<String>>,
    allow_names: Option<Vec<String>>,
    #[serde(default)]
    extra: Vec<Spanned<RawSecretPattern>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecretPattern {
    kind: Spanned<String>,
    pattern: Spanned<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUrlMode {
    action: Option<Spanned<String>>,
    allow_http_localhost: Option<bool>,
    allow_ip_literals: Option<bool>,
    allow_punycode: Option<bool>,
    allowed_hosts: Option<Spanned<Vec<Spanned<String>>>>,
    denied_hosts: Option<Spanned<Vec<Spanned<String>>>>,
    max_url_bytes: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeprecated {
    sampling: Option<Spanned<String>>,
    roots: Option<Spanned<String>>,
    sampling_include_context: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInjection {
    builtin: Option<Spanned<String>>,
    #[serde(default)]
    rule: Vec<Spanned<RawInjectionRule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInjectionRule {
    name: Spanned<String>,
    pattern: Spanned<String>,
    action: Option<Spanned<String>>,
}

// ------------------------------------------------------------- locating

/// A parsed policy file with what is needed to point at its lines.
struct Source {
    name: String,
    file: String,
    text: String,
    raw: RawPolicy,
}

impl Source {
    fn err(&self, span: Range<usize>, field: &str, message: impl Into<String>) -> ConfigError {
        let start = span.start.min(self.text.len());
        let before = &self.text[..start];
        ConfigError {
            file: self.file.clone(),
            line: before.matches('\n').count() + 1,
            column: before.rfind('\n').map_or(start, |nl| start - nl - 1) + 1,
            field: field.to_owned(),
            message: message.into(),
        }
    }

    fn parse(name: &str, file: &str, text: String) -> Result<Source, ConfigError> {
        let raw: RawPolicy = match toml::from_str(&text) {
            Ok(r) => r,
            Err(e) => {
                let s = Source {
                    name: name.to_owned(),
                    file: file.to_owned(),
                    text,
                    raw: RawPolicy::default(),
                };
                return Err(s.err(
                    e.span().unwrap_or(0..0),
                    "(syntax)",
                    crate::config::syntax_message(&e),
                ));
            }
        };
        Ok(Source {
            name: name.to_owned(),
            file: file.to_owned(),
            text,
            raw,
        })
    }
}

/// The policy names available: the presets plus every `*.toml` directly in
/// the policies directory (file stem = policy name).
pub struct PolicySet {
    compiled: HashMap<String, Arc<Policy>>,
}

impl PolicySet {
    /// Load the presets and, when given, every policy file in `dir`.
    pub fn load(dir: Option<&Path>) -> Result<PolicySet, ConfigError> {
        let mut sources = presets()?;
        if let Some(dir) = dir {
            for path in policy_files(dir)? {
                let name = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_owned();
                let file = path.display().to_string();
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| file_error(&file, format!("cannot read: {e}")))?;
                add_user_policy(&mut sources, name, file, text)?;
            }
        }
        compile_all(&sources)
    }

    /// The presets plus `(name, text)` policies, each read as the file
    /// `NAME.toml` of a policies directory would be: what `load` does,
    /// without the file system (the fuzz target of the policy loader).
    pub fn from_texts(policies: &[(&str, &str)]) -> Result<PolicySet, ConfigError> {
        let mut sources = presets()?;
        for (name, text) in policies {
            let file = format!("{name}.toml");
            add_user_policy(&mut sources, (*name).to_owned(), file, (*text).to_owned())?;
        }
        compile_all(&sources)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Policy>> {
        self.compiled.get(name).cloned()
    }

    pub fn names(&self) -> Vec<&str> {
        let mut n: Vec<&str> = self.compiled.keys().map(String::as_str).collect();
        n.sort_unstable();
        n
    }
}

fn presets() -> Result<HashMap<String, Source>, ConfigError> {
    let mut sources = HashMap::new();
    for (name, text) in PRESETS {
        let file = format!("(built-in preset {name})");
        sources.insert(
            (*name).to_owned(),
            Source::parse(name, &file, (*text).to_owned())?,
        );
    }
    Ok(sources)
}

fn file_error(file: &str, message: String) -> ConfigError {
    ConfigError {
        file: file.to_owned(),
        line: 0,
        column: 0,
        field: "(file)".into(),
        message,
    }
}

/// A policy file named `name` (its file stem): not a preset's name, a valid name.
fn add_user_policy(
    sources: &mut HashMap<String, Source>,
    name: String,
    file: String,
    text: String,
) -> Result<(), ConfigError> {
    if PRESETS.iter().any(|(p, _)| *p == name) {
        return Err(file_error(&file, format!("\"{name}\" is a built-in preset name; name the file differently and use extends = \"{name}\"")));
    }
    if !valid_name(&name) {
        return Err(file_error(
            &file,
            format!("policy name \"{name}\" (the file name): use a-z, 0-9, '-' and '_'"),
        ));
    }
    let source = Source::parse(&name, &file, text)?;
    sources.insert(name, source);
    Ok(())
}

fn compile_all(sources: &HashMap<String, Source>) -> Result<PolicySet, ConfigError> {
    let mut compiled = HashMap::new();
    let mut names: Vec<&String> = sources.keys().collect();
    names.sort();
    for name in names {
        let chain = inheritance_chain(name, sources)?;
        compiled.insert(name.clone(), Arc::new(compile(&chain)?));
    }
    Ok(PolicySet { compiled })
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn policy_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let entries = std::fs::read_dir(dir).map_err(|e| ConfigError {
        file: dir.display().to_string(),
        line: 0,
        column: 0,
        field: "policies.dir".into(),
        message: format!("cannot read the policies directory: {e}"),
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// The chain from the preset root down to `name`, refusing unknown parents and cycles.
fn inheritance_chain<'a>(
    name: &str,
    sources: &'a HashMap<String, Source>,
) -> Result<Vec<&'a Source>, ConfigError> {
    let mut chain: Vec<&Source> = Vec::new();
    let mut current = sources.get(name);
    while let Some(src) = current {
        if chain.iter().any(|s| s.name == src.name) {
            let path: Vec<&str> = chain.iter().map(|s| s.name.as_str()).collect();
            let span = src.raw.extends.as_ref().map(|e| e.span()).unwrap_or(0..0);
            return Err(src.err(
                span,
                "extends",
                format!(
                    "policies extend each other in a cycle: {} → {}",
                    path.join(" → "),
                    src.name
                ),
            ));
        }
        chain.push(src);
        let is_preset = PRESETS.iter().any(|(p, _)| *p == src.name);
        let parent = match &src.raw.extends {
            Some(p) => Some(p),
            None if is_preset => None,
            // A user policy without `extends` builds on the default preset.
            None => {
                current = sources.get("untrusted");
                continue;
            }
        };
        current = match parent {
            None => None,
            Some(p) => Some(sources.get(p.get_ref().as_str()).ok_or_else(|| {
                let mut known: Vec<&str> = sources.keys().map(String::as_str).collect();
                known.sort_unstable();
                src.err(
                    p.span(),
                    "extends",
                    format!(
                        "no policy named \"{}\" (known: {})",
                        p.get_ref(),
                        known.join(", ")
                    ),
                )
            })?),
        };
    }
    chain.reverse();
    Ok(chain)
}

/// The last value set along the chain (root first), with the source that set it.
fn pick<'a, T>(
    chain: &[&'a Source],
    get: impl Fn(&'a RawPolicy) -> Option<&'a T>,
) -> Option<(&'a T, &'a Source)> {
    chain
        .iter()
        .rev()
        .find_map(|s| get(&s.raw).map(|v| (v, *s)))
}

fn choice<'a, T: Copy>(
    chain: &[&'a Source],
    field: &str,
    get: impl Fn(&'a RawPolicy) -> Option<&'a Spanned<String>>,
    options: &[(&str, T)],
) -> Result<T, ConfigError> {
    let (raw, src) = pick(chain, get).ok_or_else(|| missing(chain, field))?;
    options
        .iter()
        .find(|(n, _)| *n == raw.get_ref())
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            src.err(
                raw.span(),
                field,
                format!("\"{}\" is not one of {}", raw.get_ref(), names.join(", ")),
            )
        })
}

fn missing(chain: &[&Source], field: &str) -> ConfigError {
    let last = chain.last().map(|s| s.file.clone()).unwrap_or_default();
    ConfigError {
        file: last,
        line: 0,
        column: 0,
        field: field.to_owned(),
        message: "no value set (the presets set every field)".into(),
    }
}

fn number<'a>(
    chain: &[&'a Source],
    field: &str,
    get: impl Fn(&'a RawPolicy) -> Option<&'a Spanned<i64>>,
) -> Result<u64, ConfigError> {
    let (raw, src) = pick(chain, get).ok_or_else(|| missing(chain, field))?;
    u64::try_from(*raw.get_ref())
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| src.err(raw.span(), field, "must be a positive whole number"))
}

fn size(
    chain: &[&Source],
    field: &str,
    get: impl for<'b> Fn(&'b RawPolicy) -> Option<&'b Spanned<i64>>,
) -> Result<usize, ConfigError> {
    number(chain, field, get).map(|v| usize::try_from(v).unwrap_or(usize::MAX))
}

const BLOCK_ALLOW: &[(&str, Action)] = &[("block", Action::Block), ("allow", Action::Allow)];

fn compile(chain: &[&Source]) -> Result<Policy, ConfigError> {
    let Some(own) = chain.last() else {
        return Err(ConfigError {
            file: String::new(),
            line: 0,
            column: 0,
            field: "extends".into(),
            message: "empty policy chain".into(),
        });
    };
    let limits = PolicyLimits {
        max_result_bytes: size(chain, "limits.max_result_bytes", |r| {
            r.limits.max_result_bytes.as_ref()
        })?,
        max_request_state_bytes: size(chain, "limits.max_request_state_bytes", |r| {
            r.limits.max_request_state_bytes.as_ref()
        })?,
        max_input_requests: size(chain, "limits.max_input_requests", |r| {
            r.limits.max_input_requests.as_ref()
        })?,
        max_properties: size(chain, "limits.max_properties", |r| {
            r.limits.max_properties.as_ref()
        })?,
        max_enum_options: size(chain, "limits.max_enum_options", |r| {
            r.limits.max_enum_options.as_ref()
        })?,
        max_message_chars: size(chain, "limits.max_message_chars", |r| {
            r.limits.max_message_chars.as_ref()
        })?,
        max_title_chars: size(chain, "limits.max_title_chars", |r| {
            r.limits.max_title_chars.as_ref()
        })?,
        max_description_chars: size(chain, "limits.max_description_chars", |r| {
            r.limits.max_description_chars.as_ref()
        })?,
        max_string_max_length: number(chain, "limits.max_string_max_length", |r| {
            r.limits.max_string_max_length.as_ref()
        })?,
    };
    for (field, value) in [
        ("limits.max_message_chars", limits.max_message_chars),
        ("limits.max_title_chars", limits.max_title_chars),
        ("limits.max_description_chars", limits.max_description_chars),
    ] {
        if value < 40 {
            // Room for the truncation marker and some text before it.
            let span = 0..0;
            return Err(own.err(span, field, "must be at least 40 characters"));
        }
    }
    let mode = choice(
        chain,
        "mode",
        |r| r.mode.as_ref(),
        &[("enforce", Mode::Enforce), ("monitor", Mode::Monitor)],
    )?;
    let html = choice(
        chain,
        "text.html",
        |r| r.text.html.as_ref(),
        &[
            ("strip", HtmlMode::Strip),
            ("safe_subset", HtmlMode::SafeSubset),
        ],
    )?;
    let secret_fields = choice(
        chain,
        "secret_fields.action",
        |r| r.secret_fields.action.as_ref(),
        &[
            ("block", Action::Block),
            ("strip", Action::Strip),
            ("allow", Action::Allow),
        ],
    )?;
    let secrets = secret_detector(chain)?;
    let url_mode = choice(
        chain,
        "url_mode.action",
        |r| r.url_mode.action.as_ref(),
        BLOCK_ALLOW,
    )?;
    let url = url_policy(chain, url_mode)?;
    let sampling = choice(
        chain,
        "deprecated.sampling",
        |r| r.deprecated.sampling.as_ref(),
        BLOCK_ALLOW,
    )?;
    let roots = choice(
        chain,
        "deprecated.roots",
        |r| r.deprecated.roots.as_ref(),
        BLOCK_ALLOW,
    )?;
    let sampling_include_context = choice(
        chain,
        "deprecated.sampling_include_context",
        |r| r.deprecated.sampling_include_context.as_ref(),
        BLOCK_ALLOW,
    )?;
    let injection = injection_rules(chain)?;
    Ok(Policy {
        name: own.name.clone(),
        description: own.raw.description.clone(),
        mode,
        limits,
        html,
        secret_fields,
        secrets,
        url_mode,
        url,
        sampling,
        roots,
        sampling_include_context,
        injection,
    })
}

fn secret_kind(name: &str) -> Option<SecretKind> {
    SecretKind::ALL.iter().copied().find(|k| k.as_str() == name)
}

fn secret_detector(chain: &[&Source]) -> Result<SecretFieldDetector, ConfigError> {
    let allow_names: Vec<String> = pick(chain, |r| r.secret_fields.allow_names.as_ref())
        .map(|(v, _)| v.clone())
        .unwrap_or_default();
    // Extra patterns accumulate down the chain: a child adds to its parent's.
    let mut extra: Vec<(SecretKind, String)> = Vec::new();
    for src in chain {
        for p in &src.raw.secret_fields.extra {
            let p = p.get_ref();
            let kind = secret_kind(p.kind.get_ref()).ok_or_else(|| {
                let kinds: Vec<&str> = SecretKind::ALL.iter().map(|k| k.as_str()).collect();
                src.err(
                    p.kind.span(),
                    "secret_fields.extra.kind",
                    format!(
                        "\"{}\" is not one of {}",
                        p.kind.get_ref(),
                        kinds.join(", ")
                    ),
                )
            })?;
            if let Err(e) = regex::Regex::new(p.pattern.get_ref()) {
                return Err(src.err(
                    p.pattern.span(),
                    "secret_fields.extra.pattern",
                    format!("not a valid regex: {e}"),
                ));
            }
            extra.push((kind, p.pattern.get_ref().clone()));
        }
    }
    SecretFieldDetector::new(&extra, &allow_names).map_err(|e| {
        let own = chain.last().copied();
        own.map(|s| s.err(0..0, "secret_fields.extra", e.to_string()))
            .unwrap_or_else(|| missing(chain, "secret_fields.extra"))
    })
}

fn hosts(
    src: &Source,
    field: &str,
    list: &Spanned<Vec<Spanned<String>>>,
) -> Result<Vec<HostPattern>, ConfigError> {
    list.get_ref()
        .iter()
        .map(|h| {
            HostPattern::parse(h.get_ref()).map_err(|e| src.err(h.span(), field, e.to_string()))
        })
        .collect()
}

fn url_policy(chain: &[&Source], url_mode: Action) -> Result<UrlPolicy, ConfigError> {
    let flag = |get: fn(&RawPolicy) -> Option<bool>| {
        chain
            .iter()
            .rev()
            .find_map(|s| get(&s.raw))
            .unwrap_or(false)
    };
    let (allowed, allowed_src) = match pick(chain, |r| r.url_mode.allowed_hosts.as_ref()) {
        Some((list, src)) => (
            hosts(src, "url_mode.allowed_hosts", list)?,
            Some((list, src)),
        ),
        None => (Vec::new(), None),
    };
    let denied = match pick(chain, |r| r.url_mode.denied_hosts.as_ref()) {
        Some((list, src)) => hosts(src, "url_mode.denied_hosts", list)?,
        None => Vec::new(),
    };
    if let Some((list, src)) = allowed_src {
        if url_mode == Action::Block && !allowed.is_empty() {
            return Err(src.err(
                list.span(),
                "url_mode.allowed_hosts",
                "hosts are allowed but url_mode.action is \"block\": one of the two is a mistake",
            ));
        }
        for (a, raw) in allowed.iter().zip(list.get_ref()) {
            if denied.iter().any(|d| d.as_str() == a.as_str()) {
                return Err(src.err(
                    raw.span(),
                    "url_mode.allowed_hosts",
                    format!("\"{}\" is both allowed and denied", a.as_str()),
                ));
            }
        }
    }
    let max_url_bytes = match pick(chain, |r| r.url_mode.max_url_bytes.as_ref()) {
        Some(_) => size(chain, "url_mode.max_url_bytes", |r| {
            r.url_mode.max_url_bytes.as_ref()
        })?,
        None => 2048,
    };
    Ok(UrlPolicy {
        allow_http_localhost: flag(|r| r.url_mode.allow_http_localhost),
        allow_ip_literals: flag(|r| r.url_mode.allow_ip_literals),
        allow_punycode: flag(|r| r.url_mode.allow_punycode),
        allowed_hosts: allowed,
        denied_hosts: denied,
        max_url_bytes,
    })
}

const RULE_ACTIONS: &[(&str, RuleAction)] = &[
    ("block", RuleAction::Block),
    ("flag", RuleAction::Flag),
    ("off", RuleAction::Off),
];

fn injection_rules(chain: &[&Source]) -> Result<InjectionRules, ConfigError> {
    let builtin = choice(
        chain,
        "injection.builtin",
        |r| r.injection.builtin.as_ref(),
        RULE_ACTIONS,
    )?;
    let mut rules: Vec<InjectionRule> = BUILTIN_RULES
        .iter()
        .filter_map(|(name, pattern)| InjectionRule::new(name, pattern, builtin).ok())
        .collect();
    // Rules accumulate down the chain; a rule with an existing name replaces it.
    for src in chain {
        let mut seen = std::collections::HashSet::new();
        for r in &src.raw.injection.rule {
            let raw = r.get_ref();
            let name = raw.name.get_ref();
            if !valid_name(name) {
                return Err(src.err(
                    raw.name.span(),
                    "injection.rule.name",
                    "use 1 to 64 of a-z, 0-9, '-' and '_'",
                ));
            }
            if !seen.insert(name.clone()) {
                return Err(src.err(
                    raw.name.span(),
                    "injection.rule.name",
                    format!("rule \"{name}\" is defined twice in this file"),
                ));
            }
            let action = match &raw.action {
                None => RuleAction::Block,
                Some(a) => RULE_ACTIONS
                    .iter()
                    .find(|(n, _)| *n == a.get_ref())
                    .map(|(_, v)| *v)
                    .ok_or_else(|| {
                        src.err(
                            a.span(),
                            "injection.rule.action",
                            format!("\"{}\" is not one of block, flag, off", a.get_ref()),
                        )
                    })?,
            };
            let rule = InjectionRule::new(name, raw.pattern.get_ref(), action).map_err(|e| {
                src.err(
                    raw.pattern.span(),
                    "injection.rule.pattern",
                    format!("not a valid regex: {e}"),
                )
            })?;
            rules.retain(|existing| existing.name != *name);
            rules.push(rule);
        }
    }
    InjectionRules::new(rules).map_err(|e| missing(chain, &format!("injection ({e})")))
}

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
        assert_eq!(u.sampling, Action::Block);
        assert_eq!(t.sampling, Action::Allow);
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
        assert_eq!(plain.sampling, Action::Block);
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
    fn the_shipped_policies_directory_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
        let set = PolicySet::load(Some(&dir)).unwrap();
        assert!(set.names().len() > 2, "{:?}", set.names());
    }
}
