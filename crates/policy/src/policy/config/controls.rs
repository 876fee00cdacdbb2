//! The security controls of a compiled [`Policy`], as two generations of a
//! config compare them: each named by its policy-file path (written as the
//! field path of the raw policy, through `name!`), each value in one of
//! three comparable forms. A reload, or `portcullis check --baseline`,
//! holds the new table against the old one and reports every control that
//! lets more through than before (the config crate's `controls`).

use std::collections::BTreeSet;

use super::compile::SHAPE;
use super::*;

/// How strongly a setting holds, the one order every setting's values are
/// ranked in: refusing beats changing (redact, remove, strip, ask) beats
/// recording beats nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Strength {
    Off,
    Monitor,
    Mitigate,
    Enforce,
}

/// The entry of an [`ControlValue::Allows`] list that lets anything
/// through: any host (an empty `[url_mode] allowed_hosts`), any key (no
/// `tls_pins`), anyone (a route open to anonymous callers).
pub const ANY: &str = "*";

/// A control's value in a form two generations compare by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlValue {
    /// One setting: its spelling and where it stands in [`Strength`].
    Level {
        strength: Strength,
        shown: &'static str,
    },
    /// Entries that let more through as they grow (allowed hosts, accepted
    /// authentication schemes); [`ANY`] stands for all of them.
    Allows(BTreeSet<String>),
    /// Entries that each hold something back (denied hosts, approval
    /// rules): one removed lets more through.
    Holds(BTreeSet<String>),
}

/// One control that a new generation weakened: what it was and what it is,
/// as the config spells them (setting names, host patterns, rule and
/// scheme names; never a secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weakening {
    pub from: String,
    pub to: String,
}

/// The most list entries a [`Weakening`] spells out.
const SHOWN_ENTRIES: usize = 8;

impl ControlValue {
    pub fn level(strength: Strength, shown: &'static str) -> ControlValue {
        ControlValue::Level { strength, shown }
    }

    /// A boolean whose `true` is the stronger side (`single_use`).
    pub fn on_is_stronger(on: bool) -> ControlValue {
        match on {
            true => ControlValue::level(Strength::Enforce, "true"),
            false => ControlValue::level(Strength::Off, "false"),
        }
    }

    /// A boolean whose `true` lets more through (`allow_plaintext`).
    pub fn on_is_weaker(on: bool) -> ControlValue {
        match on {
            true => ControlValue::level(Strength::Off, "true"),
            false => ControlValue::level(Strength::Enforce, "false"),
        }
    }

    pub fn allows<'a>(entries: impl IntoIterator<Item = &'a str>) -> ControlValue {
        ControlValue::Allows(entries.into_iter().map(str::to_owned).collect())
    }

    pub fn holds<'a>(entries: impl IntoIterator<Item = &'a str>) -> ControlValue {
        ControlValue::Holds(entries.into_iter().map(str::to_owned).collect())
    }

    /// How `new` weakens this value, if it does. A value of another form
    /// (a control whose kind changed between versions) says nothing.
    pub fn weakened_to(&self, new: &ControlValue) -> Option<Weakening> {
        let widened = match (self, new) {
            (
                ControlValue::Level { strength, shown },
                ControlValue::Level {
                    strength: to,
                    shown: to_shown,
                },
            ) => {
                return (to < strength).then(|| Weakening {
                    from: (*shown).to_owned(),
                    to: (*to_shown).to_owned(),
                })
            }
            (ControlValue::Allows(old), ControlValue::Allows(now)) => {
                !old.contains(ANY) && now.difference(old).next().is_some()
            }
            (ControlValue::Holds(old), ControlValue::Holds(now)) => {
                old.difference(now).next().is_some()
            }
            _ => false,
        };
        widened.then(|| Weakening {
            from: self.shown(),
            to: new.shown(),
        })
    }

    /// The value as a log line and an audit event show it.
    pub fn shown(&self) -> String {
        let list = |set: &BTreeSet<String>| {
            let mut out: Vec<&str> = set.iter().take(SHOWN_ENTRIES).map(String::as_str).collect();
            let more = set.len().saturating_sub(SHOWN_ENTRIES);
            let extra = format!("… (+{more})");
            if more > 0 {
                out.push(&extra);
            }
            format!("[{}]", out.join(", "))
        };
        match self {
            ControlValue::Level { shown, .. } => (*shown).to_owned(),
            ControlValue::Allows(set) | ControlValue::Holds(set) => list(set),
        }
    }
}

/// One control of a policy: its policy-file path and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    pub path: &'static str,
    pub value: ControlValue,
}

fn setting(s: Setting) -> ControlValue {
    let strength = match s {
        Setting::Enforce => Strength::Enforce,
        Setting::Redact | Setting::Remove | Setting::Ask => Strength::Mitigate,
        Setting::Monitor => Strength::Monitor,
        Setting::Off => Strength::Off,
    };
    ControlValue::level(strength, s.as_str())
}

fn action(a: Action) -> ControlValue {
    match a {
        Action::Block => ControlValue::level(Strength::Enforce, "block"),
        Action::Strip => ControlValue::level(Strength::Mitigate, "strip"),
        Action::Allow => ControlValue::level(Strength::Off, "allow"),
    }
}

fn hosts(list: &[HostPattern]) -> impl Iterator<Item = &str> {
    list.iter().map(HostPattern::as_str)
}

/// `[arguments]`, taken apart whole like the policy.
fn argument_controls(a: &ArgumentPolicy) -> Vec<Control> {
    let ArgumentPolicy {
        schema,
        undeclared,
        secrets,
        private_paths,
        addresses,
        shell,
        cross_upstream,
        listed_credentials,
        local_names,
        allowed_hosts,
        denied_hosts,
    } = a;
    let c = |path: &'static str, value: ControlValue| Control { path, value };
    let settings = [
        (name!(arguments.schema), schema),
        (name!(arguments.undeclared), undeclared),
        (name!(arguments.secrets), secrets),
        (name!(arguments.private_paths), private_paths),
        (name!(arguments.addresses), addresses),
        (name!(arguments.shell), shell),
        (name!(arguments.cross_upstream), cross_upstream),
        (name!(arguments.listed_credentials), listed_credentials),
        (name!(arguments.local_names), local_names),
    ];
    let mut out: Vec<Control> = settings.map(|(p, s)| c(p, setting(*s))).into();
    out.extend([
        c(
            name!(arguments.allowed_hosts),
            ControlValue::allows(hosts(allowed_hosts)),
        ),
        c(
            name!(arguments.denied_hosts),
            ControlValue::holds(hosts(denied_hosts)),
        ),
    ]);
    out
}

/// `[url_mode] allowed_hosts`: an empty list is any host.
fn url_allowed(list: &[HostPattern]) -> ControlValue {
    match list.is_empty() {
        true => ControlValue::allows([ANY]),
        false => ControlValue::allows(hosts(list)),
    }
}

impl Policy {
    /// Every security control of this policy, in one fixed order. The
    /// policy is taken apart whole: a setting added to it is a compile
    /// error here until it is placed in the table or said not to be a
    /// control.
    pub fn controls(&self) -> Vec<Control> {
        let Policy {
            name: _,
            mode,
            // Sizes and budgets: how much is read, not what is let through.
            limits: _,
            sampling_max_tokens: _,
            sampling_max_messages: _,
            html: _,
            secrets: _,
            injection: _,
            // A cache of the injection rules' regexes, built from them.
            raw_cues: _,
            icons: _,
            secret_fields,
            url_mode,
            url,
            sampling,
            roots,
            sampling_include_context,
            content,
            listing,
            single_use,
            on_change,
            approval,
            arguments,
            plaintext_remote,
            excessive_scopes,
        } = self;
        let c = |path: &'static str, value: ControlValue| Control { path, value };
        let mut out = vec![
            c(name!(mode), mode_value(*mode)),
            c(name!(secret_fields.action), action(*secret_fields)),
            c(name!(url_mode.action), action(*url_mode)),
            c(
                name!(url_mode.allowed_hosts),
                url_allowed(&url.allowed_hosts),
            ),
            c(
                name!(url_mode.denied_hosts),
                ControlValue::holds(hosts(&url.denied_hosts)),
            ),
        ];
        let url_flags = [
            (
                name!(url_mode.allow_http_localhost),
                url.allow_http_localhost,
            ),
            (name!(url_mode.allow_ip_literals), url.allow_ip_literals),
            (name!(url_mode.allow_punycode), url.allow_punycode),
            (name!(url_mode.allow_local_names), url.allow_local_names),
        ];
        out.extend(url_flags.map(|(p, on)| c(p, ControlValue::on_is_weaker(on))));
        out.extend([
            c(name!(deprecated.sampling), action(*sampling)),
            c(name!(deprecated.roots), action(*roots)),
            c(
                name!(deprecated.sampling_include_context),
                action(*sampling_include_context),
            ),
            c(name!(content.injection), content_injection(content)),
            c(name!(content.secrets), content_secrets(content)),
            c(name!(content.secret_stores), secret_stores(content)),
            c(name!(content.links), links(content)),
            c(
                name!(content.allowed_hosts),
                ControlValue::allows(hosts(&content.allowed_hosts)),
            ),
            c(name!(listing.on_violation), listing_violation(listing)),
            c(name!(listing.promotion), listing_promotion(listing)),
            c(name!(listing.on_change), listing_change(*on_change)),
            c(
                name!(state.single_use),
                ControlValue::on_is_stronger(*single_use),
            ),
            c(
                name!(approval),
                ControlValue::holds(approval.iter().map(|r| r.name.as_str())),
            ),
            c(
                name!(transport.plaintext_remote),
                plaintext(*plaintext_remote),
            ),
            c(
                name!(authorization.excessive_scopes),
                setting(*excessive_scopes),
            ),
        ]);
        out.extend(argument_controls(arguments));
        out
    }
}

fn mode_value(mode: Mode) -> ControlValue {
    match mode {
        Mode::Enforce => ControlValue::level(Strength::Enforce, "enforce"),
        Mode::Monitor => ControlValue::level(Strength::Monitor, "monitor"),
    }
}

fn content_injection(content: &ContentPolicy) -> ControlValue {
    let (strength, shown) = match content.injection {
        ContentInjection::Enforce => (Strength::Enforce, "enforce"),
        ContentInjection::Confident => (Strength::Mitigate, "confident"),
        ContentInjection::Monitor => (Strength::Monitor, "monitor"),
        ContentInjection::Off => (Strength::Off, "off"),
    };
    ControlValue::level(strength, shown)
}

fn content_secrets(content: &ContentPolicy) -> ControlValue {
    match content.secrets {
        ResultSecrets::Redact => ControlValue::level(Strength::Mitigate, "redact"),
        ResultSecrets::Flag => ControlValue::level(Strength::Monitor, "flag"),
        ResultSecrets::Off => ControlValue::level(Strength::Off, "off"),
    }
}

fn secret_stores(content: &ContentPolicy) -> ControlValue {
    match content.secret_stores {
        SecretStores::Redact => ControlValue::level(Strength::Mitigate, "redact"),
        SecretStores::Deliver => ControlValue::level(Strength::Off, "deliver"),
    }
}

fn listing_violation(listing: &ListingPolicy) -> ControlValue {
    match listing.on_violation {
        ListingAction::Refuse => ControlValue::level(Strength::Enforce, "refuse"),
        ListingAction::Remove => ControlValue::level(Strength::Mitigate, "remove"),
        ListingAction::Flag => ControlValue::level(Strength::Monitor, "flag"),
    }
}

fn listing_promotion(listing: &ListingPolicy) -> ControlValue {
    match listing.promotion {
        PromotionAction::Remove => ControlValue::level(Strength::Mitigate, "remove"),
        PromotionAction::Flag => ControlValue::level(Strength::Monitor, "flag"),
        PromotionAction::Off => ControlValue::level(Strength::Off, "off"),
    }
}

fn listing_change(on_change: OnChange) -> ControlValue {
    match on_change {
        OnChange::Remove => ControlValue::level(Strength::Mitigate, "remove"),
        OnChange::Flag => ControlValue::level(Strength::Monitor, "flag"),
        OnChange::Allow => ControlValue::level(Strength::Off, "allow"),
    }
}

fn links(content: &ContentPolicy) -> ControlValue {
    match content.allow_links {
        true => ControlValue::level(Strength::Off, "allow"),
        false => ControlValue::level(Strength::Mitigate, "check"),
    }
}

fn plaintext(plaintext_remote: PlaintextRemote) -> ControlValue {
    match plaintext_remote {
        PlaintextRemote::Refuse => ControlValue::level(Strength::Enforce, "refuse"),
        PlaintextRemote::Warn => ControlValue::level(Strength::Monitor, "warn"),
    }
}
