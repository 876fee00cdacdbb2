//! The term tables and context words, read from the shipped data files
//! (`data/secrets/`, embedded at build time) plus a policy's extra terms,
//! compiled once into a phrase matcher, a lexicon and a word → flags map.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use super::SecretKind;
use crate::policy::detect::{common_words, parse_phrase, Lexicon, Normalised, PhraseSet};

/// The term files, one per language.
pub(super) const TERM_FILES: [(&str, &str); 12] = [
    ("en", data_file!("secrets/terms/en.toml")),
    ("de", data_file!("secrets/terms/de.toml")),
    ("fr", data_file!("secrets/terms/fr.toml")),
    ("es", data_file!("secrets/terms/es.toml")),
    ("pt", data_file!("secrets/terms/pt.toml")),
    ("it", data_file!("secrets/terms/it.toml")),
    ("nl", data_file!("secrets/terms/nl.toml")),
    ("pl", data_file!("secrets/terms/pl.toml")),
    ("ru", data_file!("secrets/terms/ru.toml")),
    ("ja", data_file!("secrets/terms/ja.toml")),
    ("zh", data_file!("secrets/terms/zh.toml")),
    ("ko", data_file!("secrets/terms/ko.toml")),
];
const CONTEXT: &str = data_file!("secrets/context.toml");

/// How much context a term needs before it counts (see `data/secrets/README.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Guard {
    Plain,
    Weak,
    Token,
    Secret,
    SecurityCode,
    Card,
    /// A generic noun (`described_*` in `context.toml`): a secret only when
    /// the clause says where it lives; the place decides the kind.
    Described,
}

impl Guard {
    fn from_name(name: &str) -> Option<Guard> {
        Some(match name {
            "plain" => Guard::Plain,
            "weak" => Guard::Weak,
            "token" => Guard::Token,
            "secret" => Guard::Secret,
            "security_code" => Guard::SecurityCode,
            "card" => Guard::Card,
            _ => return None,
        })
    }
}

/// What a phrase stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Entry {
    Term(SecretKind, Guard),
    /// A word that names a payment card.
    Card,
    /// A generic noun that may describe a secret (a number, a code, words).
    Described,
}

/// Context flags of a word (one lookup answers every list).
pub(super) mod flag {
    pub(crate) const METADATA: u32 = 1;
    pub(crate) const NAME_FLAG: u32 = 1 << 1;
    pub(crate) const PREV_BLOCK: u32 = 1 << 2;
    pub(crate) const FUNCTION: u32 = 1 << 3;
    pub(crate) const POSSESSIVE: u32 = 1 << 4;
    pub(crate) const DETERMINER: u32 = 1 << 5;
    pub(crate) const DEFINITE: u32 = 1 << 6;
    pub(crate) const NEGATION: u32 = 1 << 7;
    pub(crate) const NEGATION_AFTER: u32 = 1 << 8;
    pub(crate) const ASK: u32 = 1 << 9;
    pub(crate) const QUESTION: u32 = 1 << 10;
    pub(crate) const COPULA: u32 = 1 << 11;
    pub(crate) const NEUTRAL: u32 = 1 << 12;
    pub(crate) const TOKEN_LEAD_BLOCK: u32 = 1 << 13;
    pub(crate) const SECRET_NOUN_NEXT: u32 = 1 << 14;
    pub(crate) const OF_SKIPPABLE: u32 = 1 << 15;
    pub(crate) const OF_WORD: u32 = 1 << 16;
    pub(crate) const NUMBER: u32 = 1 << 17;
    pub(crate) const CARD: u32 = 1 << 18;
    pub(crate) const EXPIRY_OWNER: u32 = 1 << 19;
    pub(crate) const GENERIC_FIELD: u32 = 1 << 20;
    pub(crate) const DESCRIBED_NUMBER: u32 = 1 << 21;
    pub(crate) const DESCRIBED_CODE: u32 = 1 << 22;
    pub(crate) const DESCRIBED_WORDS: u32 = 1 << 23;
    pub(crate) const SENT: u32 = 1 << 24;
    pub(crate) const ATM: u32 = 1 << 25;
    pub(crate) const BACK: u32 = 1 << 26;
    pub(crate) const WALLET: u32 = 1 << 27;
    pub(crate) const LOGIN: u32 = 1 << 28;
    pub(crate) const DESCRIBED_OWNER: u32 = 1 << 29;
}

/// The lists of `context.toml`, by field name, with their flag.
const CONTEXT_LISTS: [(&str, u32); 31] = [
    ("metadata", flag::METADATA),
    ("name_flags", flag::NAME_FLAG),
    ("prev_block", flag::PREV_BLOCK),
    ("function", flag::FUNCTION),
    ("possessives", flag::POSSESSIVE),
    ("determiners", flag::DETERMINER),
    ("definite", flag::DEFINITE),
    ("negations", flag::NEGATION),
    ("negations_after", flag::NEGATION_AFTER),
    ("ask_verbs", flag::ASK),
    ("question_words", flag::QUESTION),
    ("copulas", flag::COPULA),
    ("neutral", flag::NEUTRAL),
    ("token_lead_block", flag::TOKEN_LEAD_BLOCK),
    ("secret_noun_next", flag::SECRET_NOUN_NEXT),
    ("of_skippable", flag::OF_SKIPPABLE),
    ("of_words", flag::OF_WORD),
    ("number_words", flag::NUMBER),
    ("card_words", flag::CARD),
    ("expiry_owners", flag::EXPIRY_OWNER),
    ("generic_fields", flag::GENERIC_FIELD),
    ("cjk_words", 0),
    ("described_numbers", flag::DESCRIBED_NUMBER),
    ("described_codes", flag::DESCRIBED_CODE),
    ("described_words", flag::DESCRIBED_WORDS),
    ("sent_words", flag::SENT),
    ("atm_words", flag::ATM),
    ("back_words", flag::BACK),
    ("wallet_words", flag::WALLET),
    ("login_words", flag::LOGIN),
    ("described_owners", flag::DESCRIBED_OWNER),
];

/// The lists whose words are also phrases of their own (found in a text
/// like terms are).
const PHRASE_LISTS: [(&str, Entry); 4] = [
    ("card_words", Entry::Card),
    ("described_numbers", Entry::Described),
    ("described_codes", Entry::Described),
    ("described_words", Entry::Described),
];

/// Shipped or policy data that does not compile.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum TableError {
    #[error("secret terms ({file}): {message}")]
    Data { file: String, message: String },
}

fn data_err(file: &str, message: impl ToString) -> TableError {
    TableError::Data {
        file: file.to_owned(),
        message: message.to_string(),
    }
}

/// Everything the detector needs, built once per configuration.
#[derive(Debug)]
pub(super) struct Tables {
    pub(crate) phrases: PhraseSet<Entry>,
    pub(crate) lexicon: Lexicon,
    words: HashMap<Box<str>, u32>,
}

impl Tables {
    pub(crate) fn flags(&self, word: &str) -> u32 {
        let own = self.words.get(word).copied().unwrap_or(0);
        if own & flag::NUMBER == 0 && !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()) {
            own | flag::NUMBER
        } else {
            own
        }
    }

    pub(crate) fn is_number(&self, word: &str) -> bool {
        self.flags(word) & flag::NUMBER != 0
    }
}

/// The shipped tables, compiled on first use.
static BUILTIN: LazyLock<Result<Arc<Tables>, TableError>> =
    LazyLock::new(|| build(&[]).map(Arc::new));

pub(super) fn builtin() -> Result<Arc<Tables>, TableError> {
    BUILTIN.clone()
}

/// One term file: kind → guard → phrases.
type TermFile = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The shipped terms of every language, then `extra` (a policy's own,
/// counted as `plain`).
pub(super) fn term_entries(
    extra: &[(SecretKind, String)],
) -> Result<Vec<(String, SecretKind, Guard)>, TableError> {
    let mut out = Vec::new();
    for (lang, text) in TERM_FILES {
        let file: TermFile = toml::from_str(text).map_err(|e| data_err(lang, e))?;
        for (kind_name, guards) in file {
            let kind = SecretKind::from_name(&kind_name)
                .ok_or_else(|| data_err(lang, format!("unknown kind {kind_name:?}")))?;
            for (guard_name, phrases) in guards {
                let guard = Guard::from_name(&guard_name)
                    .ok_or_else(|| data_err(lang, format!("unknown guard {guard_name:?}")))?;
                out.extend(phrases.into_iter().map(|p| (p, kind, guard)));
            }
        }
    }
    out.extend(extra.iter().map(|(k, p)| (p.clone(), *k, Guard::Plain)));
    Ok(out)
}

pub(super) fn build(extra: &[(SecretKind, String)]) -> Result<Tables, TableError> {
    let terms = term_entries(extra)?;
    let context: BTreeMap<String, Vec<String>> =
        toml::from_str(CONTEXT).map_err(|e| data_err("context.toml", e))?;
    let words = context_flags(&context)?;
    let mut entries: Vec<(&str, Entry)> = terms
        .iter()
        .map(|(p, k, g)| (p.as_str(), Entry::Term(*k, *g)))
        .collect();
    for (list, entry) in PHRASE_LISTS {
        let words = context.get(list).map(Vec::as_slice).unwrap_or(&[]);
        entries.extend(words.iter().map(|w| (w.as_str(), entry)));
    }
    let phrases = PhraseSet::new(entries).map_err(|e| data_err("terms", e))?;
    let lexicon = lexicon(&terms, &words)?;
    Ok(Tables {
        phrases,
        lexicon,
        words,
    })
}

fn context_flags(
    context: &BTreeMap<String, Vec<String>>,
) -> Result<HashMap<Box<str>, u32>, TableError> {
    let mut words: HashMap<Box<str>, u32> = HashMap::new();
    for (name, list) in context {
        let bit = CONTEXT_LISTS
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| *b)
            .ok_or_else(|| data_err("context.toml", format!("unknown list {name:?}")))?;
        for raw in list {
            let n = Normalised::plain(raw);
            if n.len() != 1 {
                let msg = format!("{name}: {raw:?} is not one word");
                return Err(data_err("context.toml", msg));
            }
            *words.entry(n.text.into()).or_insert(0) |= bit;
        }
    }
    Ok(words)
}

/// Known words: every term word, context word and common word. Term words
/// (for look-alike readings and splits): the words of terms that are not
/// function words. Joined terms: each term of up to three words, glued.
fn lexicon(
    terms: &[(String, SecretKind, Guard)],
    words: &HashMap<Box<str>, u32>,
) -> Result<Lexicon, TableError> {
    const GRAMMAR: u32 = flag::FUNCTION
        | flag::DETERMINER
        | flag::POSSESSIVE
        | flag::OF_WORD
        | flag::DEFINITE
        | flag::NUMBER;
    let mut known: Vec<String> = words.keys().map(|w| w.to_string()).collect();
    known.extend(common_words());
    let mut term_words = Vec::new();
    let mut glued = Vec::new();
    for (raw, _, guard) in terms {
        for p in parse_phrase(raw).map_err(|e| data_err("terms", e))? {
            let parts: Vec<&str> = p.text.split(' ').collect();
            known.extend(parts.iter().map(|w| w.to_string()));
            term_words.extend(
                parts
                    .iter()
                    .filter(|w| words.get(**w).is_none_or(|f| f & GRAMMAR == 0))
                    .map(|w| w.to_string()),
            );
            if !p.stem && !p.number_lead && parts.len() <= 3 {
                glued.push((parts.concat(), *guard == Guard::Plain));
            }
        }
    }
    Lexicon::new(known, term_words, glued).map_err(|e| data_err("lexicon", e))
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&BUILTIN);
}
