//! All the text a person reads for one form field and its request, and the
//! order in which it is checked.

use serde_json::Value;

use super::context::{Mode, Scan};
use super::tables::{flag, Tables};
use super::{SecretFieldDetector, SecretKind, SecretMatch, SecretSource};
use crate::policy::detect::{Normalised, Splitting};

/// The human-facing text of one form property.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldText<'a> {
    /// The property name (the JSON key).
    pub name: &'a str,
    pub title: Option<&'a str>,
    pub description: Option<&'a str>,
    /// A string `default` of a free-entry field (shown pre-filled).
    pub default: Option<&'a str>,
    /// String `examples`.
    pub examples: Vec<&'a str>,
    /// Option labels: `oneOf`/`anyOf` titles, `enumNames`.
    pub options: Vec<&'a str>,
    /// A field a person types into (text or number, not a choice, an email
    /// address or a date): only such a field can carry a secret the
    /// request's key names.
    pub entry: bool,
}

impl<'a> FieldText<'a> {
    /// A free-entry field known only by its name.
    pub fn named(name: &'a str) -> Self {
        FieldText {
            name,
            entry: true,
            ..FieldText::default()
        }
    }

    /// Everything a person reads for the property `name` with schema `prop`.
    pub fn of_property(name: &'a str, prop: &'a Value) -> Self {
        let text = |key: &str| prop.get(key).and_then(Value::as_str);
        let ty = text("type");
        let choice = ["enum", "oneOf", "anyOf"]
            .iter()
            .any(|k| prop.get(k).is_some());
        let dated = matches!(text("format"), Some("email" | "date" | "date-time"));
        let entry = match ty {
            Some("string") => !choice && !dated,
            Some("number" | "integer") => true,
            _ => false,
        };
        let mut options = Vec::new();
        collect_labels(prop, &mut options);
        if let Some(items) = prop.get("items") {
            collect_labels(items, &mut options);
        }
        FieldText {
            name,
            title: text("title"),
            description: text("description"),
            default: text("default").filter(|_| entry),
            examples: strings(prop.get("examples")),
            options,
            entry,
        }
    }
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn collect_labels<'a>(schema: &'a Value, out: &mut Vec<&'a str>) {
    for key in ["oneOf", "anyOf"] {
        let titles = schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|o| o.get("title").and_then(Value::as_str));
        out.extend(titles);
    }
    out.extend(strings(schema.get("enumNames")));
}

/// What [`SecretFieldDetector::check_form`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FormFindings {
    /// The request's message asks for a secret.
    pub message: Option<SecretMatch>,
    /// Per field, in the order given.
    pub fields: Vec<Option<SecretMatch>>,
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
    fn new(t: &Tables, f: &FieldText<'_>, name: Normalised) -> Self {
        let text = |s: &str| Scan::new(t, s, Splitting::Text);
        FieldScans {
            name: Scan::of(t, name),
            title: f.title.map(text),
            description: f.description.map(text),
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
    pub fn check_form(
        &self,
        key: &str,
        message: Option<&str>,
        fields: &[FieldText<'_>],
    ) -> FormFindings {
        let t = &*self.tables;
        let message = message.map(|m| Scan::new(t, m, Splitting::Text));
        let key_norm = Normalised::new(key, &t.lexicon, Splitting::Names);
        let key_allowed = self.allow.contains(&key_norm.text);
        let key_scan = (!key_allowed && !key.is_empty()).then(|| Scan::of(t, key_norm));
        let request_card =
            message.as_ref().is_some_and(|s| s.card) || key_scan.as_ref().is_some_and(|s| s.card);
        FormFindings {
            message: message
                .as_ref()
                .and_then(|s| s.find(Mode::Message, request_card))
                .map(found(SecretSource::Message)),
            fields: fields
                .iter()
                .map(|f| self.field(t, f, key, key_scan.as_ref(), request_card))
                .collect(),
        }
    }

    fn field(
        &self,
        t: &Tables,
        f: &FieldText<'_>,
        key: &str,
        key_scan: Option<&Scan>,
        request_card: bool,
    ) -> Option<SecretMatch> {
        let name = Normalised::new(f.name, &t.lexicon, Splitting::Names);
        if self.allow.contains(&name.text) {
            return None;
        }
        let s = FieldScans::new(t, f, name);
        let card = request_card || s.card();
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
            .or_else(|| self.across(t, &s, card))
            .or_else(|| self.by_key(t, f, &s, key, key_scan, card))
    }

    /// A term split between the title and the description ("Card" /
    /// "Number on the front").
    fn across(&self, t: &Tables, s: &FieldScans, card: bool) -> Option<SecretMatch> {
        let (a, b) = (&s.title.as_ref()?.n, &s.description.as_ref()?.n);
        across_boundary(t, a, b, Mode::Text, card).map(found(SecretSource::TitleAndDescription))
    }

    /// The request's key names the secret and the field's own words say
    /// nothing (key `password`, field `value`; key `card`, field `number`).
    fn by_key(
        &self,
        t: &Tables,
        f: &FieldText<'_>,
        s: &FieldScans,
        key: &str,
        key_scan: Option<&Scan>,
        card: bool,
    ) -> Option<SecretMatch> {
        let key_scan = key_scan?;
        if !f.entry || !generic(t, s) {
            return None;
        }
        if let Some(kind) = key_scan.find(Mode::Name, card) {
            return Some(found(SecretSource::Key)(kind));
        }
        let joined = format!("{key} {}", f.name);
        Scan::new(t, &joined, Splitting::Names)
            .find(Mode::Name, card)
            .map(found(SecretSource::KeyAndName))
    }
}

/// The field's name and title are generic words only (`value`, "Your code").
fn generic(t: &Tables, s: &FieldScans) -> bool {
    let all =
        |n: &Normalised, allowed: u32| (0..n.len()).all(|i| t.flags(n.word(i)) & allowed != 0);
    let filler = flag::DETERMINER | flag::POSSESSIVE | flag::FUNCTION;
    !s.name.n.is_empty()
        && all(&s.name.n, flag::GENERIC_FIELD)
        && s.title
            .as_ref()
            .is_none_or(|title| all(&title.n, flag::GENERIC_FIELD | filler))
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
