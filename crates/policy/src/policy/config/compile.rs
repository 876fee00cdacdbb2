//! A chain of policy sources compiled into a [`Policy`]: every setting read
//! once, validated, turned into the detectors and rules the inspector uses.

use super::*;

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
        max_text_bytes: size(chain, "limits.max_text_bytes", |r| {
            r.limits.max_text_bytes.as_ref()
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
    let icons = icon_policy(chain, &url)?;
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
    let sampling_max_tokens = number(chain, "deprecated.sampling_max_tokens", |r| {
        r.deprecated.sampling_max_tokens.as_ref()
    })?;
    let sampling_max_messages = size(chain, "deprecated.sampling_max_messages", |r| {
        r.deprecated.sampling_max_messages.as_ref()
    })?;
    let single_use = flag(chain, |r| r.state.single_use);
    let injection = injection_rules(chain)?;
    let content = content_policy(chain)?;
    let listing = listing_policy(chain)?;
    let on_change = choice(
        chain,
        "listing.on_change",
        |r| r.listing.on_change.as_ref(),
        &[
            ("remove", OnChange::Remove),
            ("flag", OnChange::Flag),
            ("allow", OnChange::Allow),
        ],
    )?;
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
        icons,
        sampling,
        roots,
        sampling_include_context,
        sampling_max_tokens,
        sampling_max_messages,
        injection,
        content,
        listing,
        single_use,
        on_change,
    })
}

/// `[listing]`: what a listed item that works against the user gets.
fn listing_policy(chain: &[&Source]) -> Result<ListingPolicy, ConfigError> {
    let on_violation = choice(
        chain,
        "listing.on_violation",
        |r| r.listing.on_violation.as_ref(),
        &[
            ("remove", ListingAction::Remove),
            ("refuse", ListingAction::Refuse),
            ("flag", ListingAction::Flag),
        ],
    )?;
    let promotion = choice(
        chain,
        "listing.promotion",
        |r| r.listing.promotion.as_ref(),
        &[
            ("flag", PromotionAction::Flag),
            ("remove", PromotionAction::Remove),
            ("off", PromotionAction::Off),
        ],
    )?;
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
    let injection = choice(
        chain,
        "content.injection",
        |r| r.content.injection.as_ref(),
        &[
            ("monitor", ContentInjection::Monitor),
            ("enforce", ContentInjection::Enforce),
            ("off", ContentInjection::Off),
        ],
    )?;
    let allow_links = choice(
        chain,
        "content.links",
        |r| r.content.links.as_ref(),
        &[("check", false), ("allow", true)],
    )?;
    let allowed_hosts = match pick(chain, |r| r.content.allowed_hosts.as_ref()) {
        Some((list, src)) => hosts(src, "content.allowed_hosts", list)?,
        None => Vec::new(),
    };
    Ok(ContentPolicy {
        injection,
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
            let kind = kind_at(src, &p.kind, "secret_fields.extra.kind")?;
            if let Err(e) = regex::Regex::new(p.pattern.get_ref()) {
                return Err(src.err(
                    p.pattern.span(),
                    "secret_fields.extra.pattern",
                    format!("not a valid regex: {e}"),
                ));
            }
            extra.push((kind, p.pattern.get_ref().clone()));
        }
        for (kind, terms) in &src.raw.secret_fields.extra_terms {
            let kind = kind_at(src, kind, "secret_fields.extra_terms")?;
            for term in terms {
                if let Err(e) = crate::policy::detect::parse_phrase(term.get_ref()) {
                    return Err(src.err(term.span(), "secret_fields.extra_terms", e.to_string()));
                }
                extra_terms.push((kind, term.get_ref().clone()));
            }
        }
    }
    SecretFieldDetector::with_terms(&extra, &extra_terms, &allow_names).map_err(|e| {
        let own = chain.last().copied();
        own.map(|s| s.err(0..0, "secret_fields", e.to_string()))
            .unwrap_or_else(|| missing(chain, "secret_fields"))
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
    let action = choice(
        chain,
        "icons.action",
        |r| r.icons.action.as_ref(),
        &[
            ("check", IconAction::Check),
            ("strip", IconAction::Strip),
            ("allow", IconAction::Allow),
        ],
    )?;
    let allowed_hosts = match pick(chain, |r| r.icons.allowed_hosts.as_ref()) {
        Some((list, src)) => hosts(src, "icons.allowed_hosts", list)?,
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
    let builtin = choice(
        chain,
        "injection.builtin",
        |r| r.injection.builtin.as_ref(),
        RULE_ACTIONS,
    )?;
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
                return Err(src.err(list.span(), "injection.extra_words", msg));
            }
            for phrase in phrases {
                if let Err(e) = crate::policy::detect::parse_phrase(phrase.get_ref()) {
                    return Err(src.err(phrase.span(), "injection.extra_words", e.to_string()));
                }
                extra.push((list.get_ref().clone(), phrase.get_ref().clone()));
            }
        }
    }
    Ok(extra)
}
