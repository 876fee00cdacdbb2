//! All the text a person reads for one form field and its request, and the
//! order in which it is checked.

use std::cell::OnceCell;

use serde_json::Value;

use super::context::{Mode, Scan};
use super::tables::{flag, Tables};
use super::{SecretFieldDetector, SecretKind, SecretMatch, SecretSource};
use crate::policy::detect::{Normalised, Splitting};

/// The human-facing text of one form property.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldText<'a> {
    /// The property name (the JSON key).
    pub(crate) name: &'a str,
    pub(crate) title: Option<&'a str>,
    pub(crate) description: Option<&'a str>,
    /// A string `default` of a free-entry field (shown pre-filled).
    pub(crate) default: Option<&'a str>,
    /// String `examples`.
    pub(crate) examples: Vec<&'a str>,
    /// Option labels: `oneOf`/`anyOf` titles, `enumNames`.
    pub(crate) options: Vec<&'a str>,
    /// A field a person types into (text of any format, or a number). A
    /// choice or a boolean cannot carry a secret; only its option labels
    /// are read (they may ask for a secret elsewhere).
    pub(crate) typed: bool,
    /// Typed, and not an email address or a date: only such a field can
    /// carry a secret the request's key names.
    pub(crate) entry: bool,
}

impl<'a> FieldText<'a> {
    /// A free-entry field known only by its name.
    pub(crate) fn named(name: &'a str) -> Self {
        FieldText {
            name,
            typed: true,
            entry: true,
            ..FieldText::default()
        }
    }

    /// Everything a person reads for the property `name` with schema `prop`
    /// (one pass over its members).
    pub(crate) fn of_property(name: &'a str, prop: &'a Value) -> Self {
        let mut f = FieldText {
            name,
            ..FieldText::default()
        };
        let (mut ty, mut choice, mut dated, mut default) = (None, false, false, None);
        for (key, value) in prop.as_object().into_iter().flatten() {
            match key.as_str() {
                "type" => ty = value.as_str(),
                "title" => f.title = value.as_str(),
                "description" => f.description = value.as_str(),
                "default" => default = value.as_str(),
                "examples" => f.examples = strings(Some(value)),
                "format" => dated = matches!(value.as_str(), Some("email" | "date" | "date-time")),
                "enum" => choice = true,
                "oneOf" | "anyOf" | "enumNames" => {
                    choice |= key != "enumNames";
                    collect_labels(key, value, &mut f.options);
                }
                "items" => {
                    for (k, v) in value.as_object().into_iter().flatten() {
                        collect_labels(k, v, &mut f.options);
                    }
                }
                _ => {}
            }
        }
        f.typed = match ty {
            Some("string") => !choice,
            Some("number" | "integer") => true,
            _ => false,
        };
        f.entry = f.typed && !dated;
        f.default = default.filter(|_| f.typed);
        f
    }
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Option labels of a `oneOf` / `anyOf` list (their titles) or `enumNames`.
fn collect_labels<'a>(key: &str, value: &'a Value, out: &mut Vec<&'a str>) {
    match key {
        "oneOf" | "anyOf" => out.extend(
            value
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|o| o.get("title").and_then(Value::as_str)),
        ),
        "enumNames" => out.extend(strings(Some(value))),
        _ => {}
    }
}

/// What [`SecretFieldDetector::check_form`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FormFindings {
    /// The request's message asks for a secret.
    pub(crate) message: Option<SecretMatch>,
    /// Per field, in the order given.
    pub(crate) fields: Vec<Option<SecretMatch>>,
}

/// The request's key and its scan, made on first use.
struct KeyText<'k> {
    key: &'k str,
    scan: &'k OnceCell<Option<Scan>>,
}

/// The scanned text of one field.
struct FieldScans {
    name: Scan,
    title: Option<Scan>,
    description: Option<Scan>,
    default: Option<Scan>,
    examples: Vec<Scan>,
    options: Vec<Scan>,
}

impl FieldScans {
    /// `words`: normalise the name, title and description even when they
    /// cannot hold a term (operator regexes read their words).
    fn new(t: &Tables, f: &FieldText<'_>, words: bool) -> Self {
        let scan = |s: &str, splitting| match words {
            true => Scan::full(t, s, splitting),
            false => Scan::new(t, s, splitting),
        };
        let text = |s: &str| Scan::new(t, s, Splitting::Text);
        FieldScans {
            name: scan(f.name, Splitting::Names),
            title: f.title.map(|s| scan(s, Splitting::Text)),
            description: f.description.map(|s| scan(s, Splitting::Text)),
            default: f.default.map(text),
            examples: f.examples.iter().map(|s| text(s)).collect(),
            options: f.options.iter().map(|s| text(s)).collect(),
        }
    }

    fn card(&self) -> bool {
        let one = |s: &Option<Scan>| s.as_ref().is_some_and(|s| s.card);
        self.name.card
            || one(&self.title)
            || one(&self.description)
            || one(&self.default)
            || self.examples.iter().chain(&self.options).any(|s| s.card)
    }
}

fn found(source: SecretSource) -> impl Fn(SecretKind) -> SecretMatch {
    move |kind| SecretMatch { kind, source }
}

impl SecretFieldDetector {
    /// Checks a form: the message (it must *ask*), then every field over all
    /// the text a person reads for it; the request's `key` counts for fields
    /// whose own name says nothing (`value`, `input`, `code`).
    pub(crate) fn check_form(
        &self,
        key: &str,
        message: Option<&str>,
        fields: &[FieldText<'_>],
    ) -> FormFindings {
        let t = &*self.tables;
        let message = message.map(|m| Scan::new(t, m, Splitting::Text));
        let request_card = message.as_ref().is_some_and(|s| s.card);
        // The key is read only for a field with a generic name.
        let key_scan = OnceCell::new();
        let key = KeyText {
            key,
            scan: &key_scan,
        };
        FormFindings {
            message: message
                .as_ref()
                .and_then(|s| s.find(Mode::Message, request_card))
                .map(found(SecretSource::Message)),
            fields: fields
                .iter()
                .map(|f| self.field(t, f, &key, request_card))
                .collect(),
        }
    }

    /// The request's key, scanned on first use.
    fn key_scan<'k>(&self, t: &Tables, key: &KeyText<'k>) -> Option<&'k Scan> {
        key.scan
            .get_or_init(|| {
                if key.key.is_empty() || !t.phrases.may_match(key.key) {
                    return None;
                }
                let n = Normalised::new(key.key, &t.lexicon, Splitting::Names);
                (!self.allow.contains(&n.text)).then(|| Scan::of(t, n))
            })
            .as_ref()
    }

    fn field(
        &self,
        t: &Tables,
        f: &FieldText<'_>,
        key: &KeyText<'_>,
        request_card: bool,
    ) -> Option<SecretMatch> {
        if !self.allow.is_empty() {
            let name = Normalised::new(f.name, &t.lexicon, Splitting::Names);
            if self.allow.contains(&name.text) {
                return None;
            }
        }
        let s = FieldScans::new(t, f, self.extra.is_some());
        let card = request_card || s.card();
        if !f.typed {
            return s
                .options
                .iter()
                .find_map(|o| o.find(Mode::Message, card))
                .map(found(SecretSource::OptionLabel));
        }
        let own = |scan: &Option<Scan>, mode| scan.as_ref().and_then(|s| s.find(mode, card));
        let many = |scans: &[Scan], mode| scans.iter().find_map(|s| s.find(mode, card));
        let extra = |scan: &Option<Scan>| scan.as_ref().and_then(|s| self.extra_match(&s.n));
        s.name
            .find(Mode::Name, card)
            .or_else(|| self.extra_match(&s.name.n))
            .map(found(SecretSource::Name))
            .or_else(|| {
                own(&s.title, Mode::Text)
                    .or_else(|| extra(&s.title))
                    .map(found(SecretSource::Title))
            })
            .or_else(|| {
                own(&s.description, Mode::Text)
                    .or_else(|| extra(&s.description))
                    .map(found(SecretSource::Description))
            })
            .or_else(|| own(&s.default, Mode::Text).map(found(SecretSource::Default)))
            .or_else(|| many(&s.examples, Mode::Text).map(found(SecretSource::Example)))
            .or_else(|| many(&s.options, Mode::Message).map(found(SecretSource::OptionLabel)))
            .or_else(|| self.across(t, f, card))
            .or_else(|| self.by_key(t, f, key, card))
    }

    /// A term split between the title and the description ("Card" /
    /// "Number on the front").
    fn across(&self, t: &Tables, f: &FieldText<'_>, card: bool) -> Option<SecretMatch> {
        let (title, description) = (f.title?, f.description?);
        let joined = [
            format!("{title} {description}"),
            format!("{title}{description}"),
        ];
        if !joined.iter().any(|j| t.phrases.may_match(j)) {
            return None;
        }
        let a = Normalised::new(title, &t.lexicon, Splitting::Text);
        let b = Normalised::new(description, &t.lexicon, Splitting::Text);
        across_boundary(t, &a, &b, Mode::Text, card).map(found(SecretSource::TitleAndDescription))
    }

    /// The request's key names the secret and the field's own words say
    /// nothing (key `password`, field `value`; key `card`, field `number`).
    fn by_key(
        &self,
        t: &Tables,
        f: &FieldText<'_>,
        key: &KeyText<'_>,
        card: bool,
    ) -> Option<SecretMatch> {
        if !f.entry || key.key.is_empty() {
            return None;
        }
        let key_scan = self.key_scan(t, key);
        let joined = format!("{} {}", key.key, f.name);
        if key_scan.is_none() && !t.phrases.may_match(&joined) {
            return None;
        }
        if !generic(t, f) {
            return None;
        }
        if let Some(kind) = key_scan.and_then(|s| s.find(Mode::Name, card)) {
            return Some(found(SecretSource::Key)(kind));
        }
        Scan::new(t, &joined, Splitting::Names)
            .find(Mode::Name, card)
            .map(found(SecretSource::KeyAndName))
    }
}

/// The field's name and title are generic words only (`value`, "Your code").
fn generic(t: &Tables, f: &FieldText<'_>) -> bool {
    let all = |text: &str, splitting, allowed: u32| {
        let n = Normalised::new(text, &t.lexicon, splitting);
        !n.is_empty() && (0..n.len()).all(|i| t.flags(n.word(i)) & allowed != 0)
    };
    let filler = flag::DETERMINER | flag::POSSESSIVE | flag::FUNCTION;
    all(f.name, Splitting::Names, flag::GENERIC_FIELD)
        && f.title
            .is_none_or(|title| all(title, Splitting::Text, flag::GENERIC_FIELD | filler))
}

/// Terms that span the end of `a` and the start of `b`, read as one text,
/// and the last word of `a` glued to the first of `b` ("Pass" + "word").
fn across_boundary(
    t: &Tables,
    a: &Normalised,
    b: &Normalised,
    mode: Mode,
    card: bool,
) -> Option<SecretKind> {
    const REACH: usize = 6;
    let (a_words, b_words) = (a.len(), b.len());
    if a_words == 0 || b_words == 0 {
        return None;
    }
    let tail: Vec<&str> = (a_words.saturating_sub(REACH)..a_words)
        .map(|i| a.word(i))
        .collect();
    let head: Vec<&str> = (0..b_words.min(REACH)).map(|i| b.word(i)).collect();
    let boundary = tail.len();
    let window = Scan::new(
        t,
        &format!("{} {}", tail.join(" "), head.join(" ")),
        Splitting::Text,
    );
    let spanning = window.find_where(mode, card, |h| h.start < boundary && h.end > boundary);
    spanning.or_else(|| {
        let glued = format!(
            "{} {}{} {}",
            tail[..boundary - 1].join(" "),
            tail[boundary - 1],
            head[0],
            head[1..].join(" ")
        );
        let at = boundary - 1;
        Scan::new(t, &glued, Splitting::Text)
            .find_where(mode, card, |h| h.start <= at && h.end > at)
    })
}
