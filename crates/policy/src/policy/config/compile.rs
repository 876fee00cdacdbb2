//! A chain of policy sources compiled into a [`Policy`]: every setting read
//! once, validated, turned into the detectors and rules the inspector uses.

use std::sync::LazyLock;

use super::*;
use crate::model::Shape;

/// The serde shape of a policy file, read once from [`RawPolicy`].
pub(super) static SHAPE: LazyLock<Shape> = LazyLock::new(Shape::of::<RawPolicy>);

/// A setting's config path, written as the field path of [`RawPolicy`]
/// (`limits.max_result_bytes`) and never typed again as text; debug builds
/// and the tests hold it to the serde names (a rename would show).
macro_rules! name {
    ($first:ident $(. $rest:ident)*) => {{
        const PATH: &str = concat!(stringify!($first) $(, ".", stringify!($rest))*);
        debug_assert!(SHAPE.at(PATH).is_some(), "{PATH} is not a policy key");
        PATH
    }};
}

/// One setting read down the chain by `read` (`size`, `number`, `choice`):
/// its name and how to get it both come from one field path, which the
/// compiler holds to the struct.
macro_rules! setting {
    ($read:ident($chain:expr, $first:ident $(. $rest:ident)* $(, $extra:expr)*)) => {
        $read(
            $chain,
            name!($first $(. $rest)*),
            |r| r.$first $(. $rest)*.as_ref()
            $(, $extra)*
        )
    };
}

pub(super) const BLOCK_ALLOW: &[(&str, Action)] =
    &[("block", Action::Block), ("allow", Action::Allow)];

pub(super) fn compile(chain: &[&Source]) -> Result<Policy, ConfigError> {
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
        max_result_bytes: setting!(size(chain, limits.max_result_bytes))?,
        max_request_state_bytes: setting!(size(chain, limits.max_request_state_bytes))?,
        max_input_requests: setting!(size(chain, limits.max_input_requests))?,
        max_properties: setting!(size(chain, limits.max_properties))?,
        max_enum_options: setting!(size(chain, limits.max_enum_options))?,
        max_message_chars: setting!(size(chain, limits.max_message_chars))?,
        max_title_chars: setting!(size(chain, limits.max_title_chars))?,
        max_description_chars: setting!(size(chain, limits.max_description_chars))?,
        max_text_bytes: setting!(size(chain, limits.max_text_bytes))?,
        max_string_max_length: setting!(number(chain, limits.max_string_max_length))?,
    };
    for (field, value) in [
        (name!(limits.max_message_chars), limits.max_message_chars),
        (name!(limits.max_title_chars), limits.max_title_chars),
        (
            name!(limits.max_description_chars),
            limits.max_description_chars,
        ),
    ] {
        if value < 40 {
            // Room for the truncation marker and some text before it.
            let span = 0..0;
            return Err(own.err(span, field, "must be at least 40 characters"));
        }
    }
    let mode = setting!(choice(
        chain,
        mode,
        &[("enforce", Mode::Enforce), ("monitor", Mode::Monitor)]
    ))?;
    let html = setting!(choice(
        chain,
        text.html,
        &[
            ("strip", HtmlMode::Strip),
            ("safe_subset", HtmlMode::SafeSubset),
        ]
    ))?;
    let secret_fields = setting!(choice(
        chain,
        secret_fields.action,
        &[
            ("block", Action::Block),
            ("strip", Action::Strip),
            ("allow", Action::Allow),
        ]
    ))?;
    let secrets = secret_detector(chain)?;
    let url_mode = setting!(choice(chain, url_mode.action, BLOCK_ALLOW))?;
    let url = url_policy(chain, url_mode)?;
    let icons = icon_policy(chain, &url)?;
    let sampling = setting!(choice(chain, deprecated.sampling, BLOCK_ALLOW))?;
    let roots = setting!(choice(chain, deprecated.roots, BLOCK_ALLOW))?;
    let sampling_include_context = setting!(choice(
        chain,
        deprecated.sampling_include_context,
        BLOCK_ALLOW
    ))?;
    let sampling_max_tokens = setting!(number(chain, deprecated.sampling_max_tokens))?;
    let sampling_max_messages = setting!(size(chain, deprecated.sampling_max_messages))?;
    let single_use = flag(chain, |r| r.state.single_use);
    let injection = injection_rules(chain)?;
    let content = content_policy(chain)?;
    let listing = listing_policy(chain)?;
    let arguments = argument_policy(chain)?;
    let on_change = setting!(choice(
        chain,
        listing.on_change,
        &[
            ("remove", OnChange::Remove),
            ("flag", OnChange::Flag),
            ("allow", OnChange::Allow),
        ]
    ))?;
    let approval = approval_rules(chain)?;
    let plaintext_remote = setting!(choice(
        chain,
        transport.plaintext_remote,
        &[
            ("refuse", PlaintextRemote::Refuse),
            ("warn", PlaintextRemote::Warn),
        ]
    ))?;
    let excessive_scopes = setting!(choice(
        chain,
        authorization.excessive_scopes,
        ENFORCE_MONITOR_OFF
    ))?;
    Ok(Policy {
        name: own.name.clone(),
        mode,
        limits,
        html,
        secret_fields,
        secrets,
        url_mode,
        url,
        icons,
        sampling,
        roots,
        sampling_include_context,
        sampling_max_tokens,
        sampling_max_messages,
        injection,
        raw_cues: std::sync::OnceLock::new(),
        content,
        listing,
        single_use,
        on_change,
        approval,
        arguments,
        plaintext_remote,
        excessive_scopes,
    })
}

const ENFORCE_MONITOR_OFF: &[(&str, Setting)] = &[
    ("enforce", Setting::Enforce),
    ("monitor", Setting::Monitor),
    ("off", Setting::Off),
];

const WITH_ASK: &[(&str, Setting)] = &[
    ("enforce", Setting::Enforce),
    ("ask", Setting::Ask),
    ("monitor", Setting::Monitor),
    ("off", Setting::Off),
];

const WITH_REDACT_ASK: &[(&str, Setting)] = &[
    ("enforce", Setting::Enforce),
    ("redact", Setting::Redact),
    ("ask", Setting::Ask),
    ("monitor", Setting::Monitor),
    ("off", Setting::Off),
];

/// Where a policy file lists hosts (`[arguments] allowed_hosts`, ...).
type HostList = fn(&RawPolicy) -> Option<&Spanned<Vec<Spanned<String>>>>;

/// `[arguments]`: the rules for what a call sends a server.
fn argument_policy(chain: &[&Source]) -> Result<ArgumentPolicy, ConfigError> {
    let hosts_of = |field: &str, get: HostList| match pick(chain, get) {
        Some((list, src)) => hosts(src, field, list),
        None => Ok(Vec::new()),
    };
    let allowed_hosts = hosts_of(name!(arguments.allowed_hosts), |r| {
        r.arguments.allowed_hosts.as_ref()
    })?;
    let denied_hosts = hosts_of(name!(arguments.denied_hosts), |r| {
        r.arguments.denied_hosts.as_ref()
    })?;
    if let Some((list, src)) = pick(chain, |r| r.arguments.allowed_hosts.as_ref()) {
        for (a, raw) in allowed_hosts.iter().zip(list.get_ref()) {
            if denied_hosts.iter().any(|d| d.as_str() == a.as_str()) {
                return Err(src.err(
                    raw.span(),
                    name!(arguments.allowed_hosts),
                    format!("\"{}\" is both allowed and denied", a.as_str()),
                ));
            }
        }
    }
    Ok(ArgumentPolicy {
        schema: setting!(choice(chain, arguments.schema, ENFORCE_MONITOR_OFF))?,
        undeclared: setting!(choice(
            chain,
            arguments.undeclared,
            &[
                ("enforce", Setting::Enforce),
                ("remove", Setting::Remove),
                ("monitor", Setting::Monitor),
                ("off", Setting::Off),
            ]
        ))?,
        secrets: setting!(choice(chain, arguments.secrets, WITH_REDACT_ASK))?,
        private_paths: setting!(choice(chain, arguments.private_paths, WITH_ASK))?,
        addresses: setting!(choice(chain, arguments.addresses, WITH_ASK))?,
        shell: setting!(choice(chain, arguments.shell, WITH_ASK))?,
        cross_upstream: setting!(choice(chain, arguments.cross_upstream, WITH_REDACT_ASK))?,
        listed_credentials: setting!(choice(
            chain,
            arguments.listed_credentials,
            ENFORCE_MONITOR_OFF
        ))?,
        local_names: setting!(choice(chain, arguments.local_names, ENFORCE_MONITOR_OFF))?,
        allowed_hosts,
        denied_hosts,
    })
}

/// `[[approval]]`, each file's rules compiled where they are written, then
/// merged down the chain.
fn approval_rules(chain: &[&Source]) -> Result<portcullis_approval::ApprovalRules, ConfigError> {
    let mut files = Vec::with_capacity(chain.len());
    for src in chain {
        let field = name!(approval);
        let rules = portcullis_approval::raw::compile(&src.raw.approval, field, &src.text)
            .map_err(|e| src.err(e.span, &e.field, e.message))?;
        files.push(rules);
    }
    Ok(portcullis_approval::raw::merge(files))
}

/// `[listing]`: what a listed item that works against the user gets.
fn listing_policy(chain: &[&Source]) -> Result<ListingPolicy, ConfigError> {
    let on_violation = setting!(choice(
        chain,
        listing.on_violation,
        &[
            ("remove", ListingAction::Remove),
            ("refuse", ListingAction::Refuse),
            ("flag", ListingAction::Flag),
        ]
    ))?;
    let promotion = setting!(choice(
        chain,
        listing.promotion,
        &[
            ("flag", PromotionAction::Flag),
            ("remove", PromotionAction::Remove),
            ("off", PromotionAction::Off),
        ]
    ))?;
    let intent = IntentDetector::builtin()
        .map_err(|e| missing(chain, &format!("listing (the intent detector: {e})")))?;
    Ok(ListingPolicy {
        on_violation,
        promotion,
        intent,
    })
}

/// `[content]`: how data a server hands back is read.
fn content_policy(chain: &[&Source]) -> Result<ContentPolicy, ConfigError> {
    let injection = setting!(choice(
        chain,
        content.injection,
        &[
            ("monitor", ContentInjection::Monitor),
            ("enforce", ContentInjection::Enforce),
            ("confident", ContentInjection::Confident),
            ("off", ContentInjection::Off),
        ]
    ))?;
    let secrets = setting!(choice(
        chain,
        content.secrets,
        &[
            ("redact", ResultSecrets::Redact),
            ("flag", ResultSecrets::Flag),
            ("off", ResultSecrets::Off),
        ]
    ))?;
    let secret_stores = setting!(choice(
        chain,
        content.secret_stores,
        &[
            ("deliver", SecretStores::Deliver),
            ("redact", SecretStores::Redact),
        ]
    ))?;
    let allow_links = setting!(choice(
        chain,
        content.links,
        &[("check", false), ("allow", true)]
    ))?;
    let allowed_hosts = match pick(chain, |r| r.content.allowed_hosts.as_ref()) {
        Some((list, src)) => hosts(src, name!(content.allowed_hosts), list)?,
        None => Vec::new(),
    };
    Ok(ContentPolicy {
        injection,
        secrets,
        secret_stores,
        allow_links,
        allowed_hosts,
    })
}

pub(super) fn secret_kind(name: &str) -> Option<SecretKind> {
    SecretKind::ALL.iter().copied().find(|k| k.as_str() == name)
}

pub(super) fn secret_detector(chain: &[&Source]) -> Result<SecretFieldDetector, ConfigError> {
    let allow_names: Vec<String> = pick(chain, |r| r.secret_fields.allow_names.as_ref())
        .map(|(v, _)| v.clone())
        .unwrap_or_default();
    // Extra patterns and terms accumulate down the chain: a child adds to its parent's.
    let mut extra: Vec<(SecretKind, String)> = Vec::new();
    let mut extra_terms: Vec<(SecretKind, String)> = Vec::new();
    for src in chain {
        for p in &src.raw.secret_fields.extra {
            let p = p.get_ref();
            let kind = kind_at(src, &p.kind, name!(secret_fields.extra.kind))?;
            if let Err(e) = regex::Regex::new(p.pattern.get_ref()) {
                return Err(src.err(
                    p.pattern.span(),
                    name!(secret_fields.extra.pattern),
                    format!("not a valid regex: {e}"),
                ));
            }
            extra.push((kind, p.pattern.get_ref().clone()));
        }
        for (kind, terms) in &src.raw.secret_fields.extra_terms {
            let kind = kind_at(src, kind, name!(secret_fields.extra_terms))?;
            for term in terms {
                if let Err(e) = crate::policy::detect::parse_phrase(term.get_ref()) {
                    return Err(src.err(
                        term.span(),
                        name!(secret_fields.extra_terms),
                        e.to_string(),
                    ));
                }
                extra_terms.push((kind, term.get_ref().clone()));
            }
        }
    }
    SecretFieldDetector::with_terms(&extra, &extra_terms, &allow_names).map_err(|e| {
        let own = chain.last().copied();
        own.map(|s| s.err(0..0, name!(secret_fields), e.to_string()))
            .unwrap_or_else(|| missing(chain, name!(secret_fields)))
    })
}

/// A secret kind named in a policy file.
pub(super) fn kind_at(
    src: &Source,
    name: &Spanned<String>,
    field: &str,
) -> Result<SecretKind, ConfigError> {
    secret_kind(name.get_ref()).ok_or_else(|| {
        let kinds: Vec<&str> = SecretKind::ALL.iter().map(|k| k.as_str()).collect();
        src.err(
            name.span(),
            field,
            format!("\"{}\" is not one of {}", name.get_ref(), kinds.join(", ")),
        )
    })
}

pub(super) fn hosts(
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

pub(super) fn url_policy(chain: &[&Source], url_mode: Action) -> Result<UrlPolicy, ConfigError> {
    let flag = |get| flag(chain, get);
    let (allowed, allowed_src) = match pick(chain, |r| r.url_mode.allowed_hosts.as_ref()) {
        Some((list, src)) => (
            hosts(src, name!(url_mode.allowed_hosts), list)?,
            Some((list, src)),
        ),
        None => (Vec::new(), None),
    };
    let denied = match pick(chain, |r| r.url_mode.denied_hosts.as_ref()) {
        Some((list, src)) => hosts(src, name!(url_mode.denied_hosts), list)?,
        None => Vec::new(),
    };
    if let Some((list, src)) = allowed_src {
        if url_mode == Action::Block && !allowed.is_empty() {
            return Err(src.err(
                list.span(),
                name!(url_mode.allowed_hosts),
                "hosts are allowed but url_mode.action is \"block\": one of the two is a mistake",
            ));
        }
        for (a, raw) in allowed.iter().zip(list.get_ref()) {
            if denied.iter().any(|d| d.as_str() == a.as_str()) {
                return Err(src.err(
                    raw.span(),
                    name!(url_mode.allowed_hosts),
                    format!("\"{}\" is both allowed and denied", a.as_str()),
                ));
            }
        }
    }
    let max_url_bytes = match pick(chain, |r| r.url_mode.max_url_bytes.as_ref()) {
        Some(_) => setting!(size(chain, url_mode.max_url_bytes))?,
        None => 2048,
    };
    Ok(UrlPolicy {
        allow_http_localhost: flag(|r| r.url_mode.allow_http_localhost),
        allow_ip_literals: flag(|r| r.url_mode.allow_ip_literals),
        allow_punycode: flag(|r| r.url_mode.allow_punycode),
        allow_local_names: flag(|r| r.url_mode.allow_local_names),
        allowed_hosts: allowed,
        denied_hosts: denied,
        max_url_bytes,
    })
}

/// Icons given by URL get the URL-mode checks (scheme, addresses, names,
/// denied hosts) but their own allowed hosts: where a server may send a
/// person to sign in is not where its pictures live.
fn icon_policy(chain: &[&Source], url: &UrlPolicy) -> Result<IconPolicy, ConfigError> {
    let action = setting!(choice(
        chain,
        icons.action,
        &[
            ("check", IconAction::Check),
            ("strip", IconAction::Strip),
            ("allow", IconAction::Allow),
        ]
    ))?;
    let allowed_hosts = match pick(chain, |r| r.icons.allowed_hosts.as_ref()) {
        Some((list, src)) => hosts(src, name!(icons.allowed_hosts), list)?,
        None => Vec::new(),
    };
    let allow_svg = flag(chain, |r| r.icons.allow_svg);
    Ok(IconPolicy {
        action,
        allow_svg,
        url: UrlPolicy {
            allowed_hosts,
            ..url.clone()
        },
    })
}

pub(super) const RULE_ACTIONS: &[(&str, RuleAction)] = &[
    ("block", RuleAction::Block),
    ("flag", RuleAction::Flag),
    ("off", RuleAction::Off),
];

pub(super) fn injection_rules(chain: &[&Source]) -> Result<InjectionRules, ConfigError> {
    let builtin = setting!(choice(chain, injection.builtin, RULE_ACTIONS))?;
    let mut rules: Vec<InjectionRule> =
        builtin_rules(builtin).map_err(|e| missing(chain, &format!("injection ({e})")))?;
    // Rules accumulate down the chain; a rule with an existing name replaces it.
    for src in chain {
        let mut seen = std::collections::HashSet::new();
        for r in &src.raw.injection.rule {
            let raw = r.get_ref();
            let name = raw.name.get_ref();
            if !valid_name(name) {
                return Err(src.err(
                    raw.name.span(),
                    name!(injection.rule.name),
                    "use 1 to 64 of a-z, 0-9, '-' and '_'",
                ));
            }
            if !seen.insert(name.clone()) {
                return Err(src.err(
                    raw.name.span(),
                    name!(injection.rule.name),
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
                            name!(injection.rule.action),
                            format!("\"{}\" is not one of block, flag, off", a.get_ref()),
                        )
                    })?,
            };
            let rule = InjectionRule::new(name, raw.pattern.get_ref(), action).map_err(|e| {
                src.err(
                    raw.pattern.span(),
                    name!(injection.rule.pattern),
                    format!("not a valid regex: {e}"),
                )
            })?;
            rules.retain(|existing| existing.name != *name);
            rules.push(rule);
        }
    }
    let extra = injection_words(chain)?;
    InjectionRules::with_words(rules, &extra)
        .map_err(|e| missing(chain, &format!("injection ({e})")))
}

/// `[injection] extra_words`, accumulated down the chain.
pub(super) fn injection_words(chain: &[&Source]) -> Result<Vec<(String, String)>, ConfigError> {
    let lists = word_lists().map_err(|e| missing(chain, &format!("injection ({e})")))?;
    let mut extra = Vec::new();
    for src in chain {
        for (list, phrases) in &src.raw.injection.extra_words {
            if !lists.contains(list.get_ref()) {
                let msg = format!("\"{}\" is not one of {}", list.get_ref(), lists.join(", "));
                return Err(src.err(list.span(), name!(injection.extra_words), msg));
            }
            for phrase in phrases {
                if let Err(e) = crate::policy::detect::parse_phrase(phrase.get_ref()) {
                    return Err(src.err(
                        phrase.span(),
                        name!(injection.extra_words),
                        e.to_string(),
                    ));
                }
                extra.push((list.get_ref().clone(), phrase.get_ref().clone()));
            }
        }
    }
    Ok(extra)
}
