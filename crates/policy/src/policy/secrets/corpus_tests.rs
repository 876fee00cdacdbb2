//! Measured detection: the hostile corpus must be caught, the benign corpus
//! must pass, per kind, spelling class and language (printed with
//! `--nocapture`), and generated spelling variants of secret terms must all
//! be caught.

use crate::policy::corpus_tally::Tally;

use proptest::prelude::*;
use serde::Deserialize;

use super::{FieldText, SecretFieldDetector, SecretKind};

const HOSTILE: &str = data_file!("secrets/corpus/hostile.toml");
const BENIGN: &str = data_file!("secrets/corpus/benign.toml");

/// Hostile cases caught, per kind and per class, at least this share.
const MIN_CAUGHT: f64 = 0.95;
/// Benign cases flagged, per class, at most this share…
const MAX_FALSE_POSITIVES: f64 = 0.03;
/// … and over the whole benign corpus.
const MAX_FALSE_POSITIVES_OVERALL: f64 = 0.02;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    kind: Option<String>,
    class: String,
    lang: String,
    key: Option<String>,
    message: Option<String>,
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    default: Option<String>,
    #[serde(default)]
    examples: Vec<String>,
    #[serde(default)]
    options: Vec<String>,
    entry: Option<bool>,
    /// `heldout`: written after the word lists were settled, measured once
    /// before any change for it (the closing report gives that figure);
    /// `described18`: secrets asked for by description only (issue 18),
    /// hostile and benign written together before the lists changed for them.
    set: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

fn detector() -> SecretFieldDetector {
    SecretFieldDetector::builtin().expect("shipped terms compile")
}

fn corpus(text: &str) -> Vec<Case> {
    toml::from_str::<Corpus>(text).expect("corpus parses").case
}

impl Case {
    fn field(&self) -> FieldText<'_> {
        FieldText {
            name: self.name.as_deref().unwrap_or("value"),
            title: self.title.as_deref(),
            description: self.description.as_deref(),
            default: self.default.as_deref(),
            examples: self.examples.iter().map(String::as_str).collect(),
            options: self.options.iter().map(String::as_str).collect(),
            typed: self.entry.unwrap_or(true),
            entry: self.entry.unwrap_or(true),
        }
    }

    /// The kind detected anywhere in the request, if any.
    fn detect(&self, d: &SecretFieldDetector) -> Option<SecretKind> {
        let key = self.key.as_deref().unwrap_or("ask");
        let found = d.check_form(key, self.message.as_deref(), &[self.field()]);
        found
            .message
            .or(found.fields.into_iter().flatten().next())
            .map(|m| m.kind)
    }
}

#[test]
fn hostile_corpus_is_caught() {
    let d = detector();
    let (mut by_kind, mut by_class, mut by_lang) =
        (Tally::default(), Tally::default(), Tally::default());
    let mut heldout = Tally::default();
    let mut missed = Vec::new();
    let cases = corpus(HOSTILE);
    for case in &cases {
        let want = case.kind.as_deref().and_then(SecretKind::from_name);
        assert!(
            want.is_some(),
            "hostile case without a known kind: {case:?}"
        );
        let got = case.detect(&d);
        let hit = got.is_some();
        if got != want {
            missed.push(format!("{case:?} → {got:?}"));
        }
        if let Some(set) = &case.set {
            heldout.add(set, hit);
        }
        by_kind.add(case.kind.as_deref().unwrap_or_default(), hit);
        by_class.add(&case.class, hit);
        by_lang.add(&case.lang, hit);
    }
    let caught: usize = by_class.0.values().map(|v| v.0).sum();
    println!(
        "secret fields, hostile corpus: {caught} / {} caught",
        cases.len()
    );
    println!("{}", by_kind.report("per kind"));
    println!("{}", by_class.report("per spelling class"));
    println!("{}", by_lang.report("per language"));
    println!(
        "{}",
        heldout.report("of which written after the lists were settled, per set")
    );
    println!("wrong or missed: {missed:#?}");
    assert!(cases.len() >= 250, "{} hostile cases", cases.len());
    assert!(by_kind.worst_share() >= MIN_CAUGHT, "{missed:#?}");
    assert!(by_class.worst_share() >= MIN_CAUGHT, "{missed:#?}");
}

#[test]
fn benign_corpus_passes() {
    let d = detector();
    let (mut by_class, mut by_lang) = (Tally::default(), Tally::default());
    let mut heldout = Tally::default();
    let mut flagged = Vec::new();
    let cases = corpus(BENIGN);
    for case in &cases {
        assert!(case.kind.is_none(), "benign case with a kind: {case:?}");
        let got = case.detect(&d);
        if got.is_some() {
            flagged.push(format!("{case:?} → {got:?}"));
        }
        if let Some(set) = &case.set {
            heldout.add(set, got.is_some());
        }
        by_class.add(&case.class, got.is_some());
        by_lang.add(&case.lang, got.is_some());
    }
    println!(
        "secret fields, benign corpus: {} / {} flagged",
        flagged.len(),
        cases.len()
    );
    println!("{}", by_class.report("false positives per class"));
    println!("{}", by_lang.report("false positives per language"));
    println!(
        "{}",
        heldout.report("of which written after the lists were settled, per set")
    );
    println!("flagged: {flagged:#?}");
    assert!(cases.len() >= 200, "{} benign cases", cases.len());
    assert!(
        by_class.highest_share() <= MAX_FALSE_POSITIVES,
        "{flagged:#?}"
    );
    let overall = flagged.len() as f64 / cases.len() as f64;
    assert!(overall <= MAX_FALSE_POSITIVES_OVERALL, "{flagged:#?}");
}

// ---------------------------------------------------------------------------
// Generated spelling variants
// ---------------------------------------------------------------------------

/// (words, kind, long enough to be split when joined in free text).
const SEEDS: &[(&[&str], SecretKind, bool)] = &[
    (&["password"], SecretKind::Password, true),
    (&["api", "key"], SecretKind::ApiKey, true),
    (&["access", "token"], SecretKind::AccessToken, true),
    (&["refresh", "token"], SecretKind::RefreshToken, true),
    (&["client", "secret"], SecretKind::ClientSecret, true),
    (&["private", "key"], SecretKind::PrivateKey, true),
    (&["seed", "phrase"], SecretKind::SeedPhrase, true),
    (&["card", "number"], SecretKind::CardNumber, true),
    (&["cvv"], SecretKind::CardSecurityCode, false),
    (&["iban"], SecretKind::BankAccount, false),
    (&["account", "number"], SecretKind::BankAccount, true),
    (&["passport", "number"], SecretKind::NationalId, true),
    (&["verification", "code"], SecretKind::OneTimeCode, true),
    (&["otp"], SecretKind::OneTimeCode, false),
    (&["pin", "code"], SecretKind::Pin, true),
    (&["kennwort"], SecretKind::Password, true),
    (&["mot", "de", "passe"], SecretKind::Password, true),
    (&["contrasena"], SecretKind::Password, true),
    (&["senha"], SecretKind::Password, true),
    (&["wachtwoord"], SecretKind::Password, true),
    (&["numero", "de", "tarjeta"], SecretKind::CardNumber, true),
    (&["kontonummer"], SecretKind::BankAccount, true),
    (&["codice", "fiscale"], SecretKind::NationalId, true),
    (&["klucz", "prywatny"], SecretKind::PrivateKey, true),
];

#[derive(Debug, Clone, Copy)]
enum Casing {
    Lower,
    Upper,
    Capitalised,
    Camel,
}

#[derive(Debug, Clone, Copy)]
enum Member {
    Name,
    Title,
    Description,
    Default,
    Key,
}

fn capitalise(w: &str) -> String {
    let mut c = w.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Letters replaced by a digit or symbol, a look-alike or a fullwidth letter.
fn disguise(word: &str, style: u8, mask: u32) -> String {
    word.chars()
        .enumerate()
        .map(|(i, c)| {
            if mask & (1 << (i % 32)) == 0 {
                return c.to_string();
            }
            let lower = c.to_ascii_lowercase();
            let swapped = match style {
                0 => match lower {
                    'a' => Some('4'),
                    'e' => Some('3'),
                    'o' => Some('0'),
                    's' => Some('$'),
                    'i' => Some('1'),
                    _ => None,
                },
                1 => match c {
                    'a' => Some('\u{430}'),
                    'e' => Some('\u{435}'),
                    'o' => Some('\u{43E}'),
                    'p' => Some('\u{440}'),
                    'c' => Some('\u{441}'),
                    'A' => Some('\u{410}'),
                    'E' => Some('\u{415}'),
                    'O' => Some('\u{41E}'),
                    'P' => Some('\u{420}'),
                    'C' => Some('\u{421}'),
                    _ => None,
                },
                2 => c
                    .is_ascii_alphabetic()
                    .then(|| char::from_u32(c as u32 - 0x21 + 0xFF01))
                    .flatten(),
                _ => None,
            };
            match (style, swapped) {
                (3, _) => format!("{c}\u{200B}"),
                (_, Some(s)) => s.to_string(),
                (_, None) => c.to_string(),
            }
        })
        .collect()
}

fn spell(words: &[&str], case: Casing, sep: &str) -> String {
    let cased: Vec<String> = words
        .iter()
        .enumerate()
        .map(|(i, w)| match case {
            Casing::Lower => w.to_string(),
            Casing::Upper => w.to_uppercase(),
            Casing::Capitalised => capitalise(w),
            Casing::Camel if i == 0 => w.to_string(),
            Casing::Camel => capitalise(w),
        })
        .collect();
    match case {
        Casing::Camel => cased.concat(),
        _ => cased.join(sep),
    }
}

fn variant() -> impl Strategy<Value = (String, Member, SecretKind)> {
    let case = prop::sample::select(vec![
        Casing::Lower,
        Casing::Upper,
        Casing::Capitalised,
        Casing::Camel,
    ]);
    let sep = prop::sample::select(vec!["_", "-", " ", ".", ""]);
    let member = prop::sample::select(vec![
        Member::Name,
        Member::Title,
        Member::Description,
        Member::Default,
        Member::Key,
    ]);
    let prefix = prop::sample::select(vec!["", "user", "new", "my", "your"]);
    (
        0..SEEDS.len(),
        case,
        sep,
        member,
        prefix,
        0u8..5,
        any::<u32>(),
    )
        .prop_filter_map(
            "joined short terms are split in names only",
            |(i, case, sep, member, prefix, style, mask)| {
                let (words, kind, long) = SEEDS[i];
                let free_text = matches!(
                    member,
                    Member::Title | Member::Description | Member::Default
                );
                let joined = sep.is_empty() && !matches!(case, Casing::Camel);
                if free_text && !long && (joined || !prefix.is_empty() && sep.is_empty()) {
                    return None;
                }
                let mut all: Vec<&str> = Vec::new();
                if !(prefix.is_empty() || free_text && prefix == "user" && joined) {
                    all.push(prefix);
                }
                all.extend(words);
                let spelled = spell(&all, case, sep);
                let text = disguise(&spelled, style, mask & 0x5555_5555);
                Some((text, member, kind))
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Case, separators, joining, a prefix word, digits and symbols,
    /// look-alike and fullwidth letters, invisible characters, and which
    /// member carries the term: every variant is caught.
    #[test]
    fn generated_spelling_variants_are_caught((text, member, kind) in variant()) {
        let d = detector();
        let mut field = FieldText::named("value");
        let mut key = "ask";
        match member {
            Member::Name => field.name = &text,
            Member::Title => field.title = Some(&text),
            Member::Description => field.description = Some(&text),
            Member::Default => field.default = Some(&text),
            Member::Key => key = &text,
        }
        let found = d.check_form(key, None, &[field]);
        let got = found.fields.into_iter().flatten().next().map(|m| m.kind);
        prop_assert_eq!(got, Some(kind), "{:?} in {:?}", text, member);
    }
}
