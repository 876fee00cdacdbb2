//! The built-in rules as word lists: a verb and an object near each other in
//! one sentence, in any of the shipped languages (`data/injection/`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use serde::Deserialize;

use crate::policy::detect::{
    common_words, parse_phrase, Lexicon, Normalised, PhraseSet, Splitting,
};

const RULES: &str = data_file!("injection/rules.toml");
/// The vocabularies by language (`data/injection/lang/`), shared with the
/// intent detector.
pub(crate) const LANGS: [(&str, &str); 12] = [
    ("en", data_file!("injection/lang/en.toml")),
    ("de", data_file!("injection/lang/de.toml")),
    ("fr", data_file!("injection/lang/fr.toml")),
    ("es", data_file!("injection/lang/es.toml")),
    ("pt", data_file!("injection/lang/pt.toml")),
    ("it", data_file!("injection/lang/it.toml")),
    ("nl", data_file!("injection/lang/nl.toml")),
    ("pl", data_file!("injection/lang/pl.toml")),
    ("ru", data_file!("injection/lang/ru.toml")),
    ("ja", data_file!("injection/lang/ja.toml")),
    ("zh", data_file!("injection/lang/zh.toml")),
    ("ko", data_file!("injection/lang/ko.toml")),
];

/// How far before a verb a negation cancels it ("don't paste …", "we will
/// never ask you to share …").
const NEGATION_REACH: usize = 4;
/// How far after a verb a verb-final negation cancels it ("貼り付けないで").
const NEGATION_AFTER_REACH: usize = 3;

/// Shipped or policy vocabulary that cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("injection vocabulary ({file}): {message}")]
pub(crate) struct VocabularyError {
    pub(crate) file: String,
    pub(crate) message: String,
}

fn err(file: &str, message: impl ToString) -> VocabularyError {
    VocabularyError {
        file: file.to_owned(),
        message: message.to_string(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    rule: Vec<RawRule>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(crate) name: String,
    pub(crate) verbs: String,
    pub(crate) objects: String,
    /// A third list, one of whose phrases must be in the verb's clause
    /// too ("… into the notes **argument**").
    #[serde(default)]
    pub(crate) near: Option<String>,
    window: usize,
    #[serde(default = "yes")]
    pub(crate) url_mode: bool,
    /// Whether the words apply to data a server hands back (a tool's
    /// output describes: "Execute a shell command" there is not a
    /// request). The patterns always apply.
    #[serde(default = "yes")]
    pub(crate) data: bool,
    #[serde(default)]
    pub(crate) patterns: Vec<String>,
    /// Whether the patterns apply to data a server hands back (they do
    /// unless this says otherwise; `data` is about the words).
    #[serde(default = "yes")]
    pub(crate) data_patterns: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LangFile {
    #[serde(default)]
    verbs: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    objects: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    blockers: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    grammar: Grammar,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Grammar {
    #[serde(default)]
    negations: Vec<String>,
    #[serde(default)]
    negations_after: Vec<String>,
    /// Between a negation and a verb, these undo the negation ("don't
    /// hesitate to paste", "don't forget to share").
    #[serde(default)]
    breakers: Vec<String>,
    #[serde(default)]
    words: Vec<String>,
}

/// One entry of `rules.toml`, compiled.
#[derive(Debug, Clone)]
struct WordRule {
    verbs: usize,
    objects: usize,
    near: Option<usize>,
    window: usize,
}

/// The compiled vocabularies of all rules.
#[derive(Debug)]
pub(super) struct WordEngine {
    lexicon: Lexicon,
    /// Each phrase → the lists (bit per list index) it belongs to.
    phrases: PhraseSet<u64>,
    rules: Vec<WordRule>,
    /// Word → lists (bit per list) whose objects it blocks when right before.
    blockers: HashMap<Box<str>, u64>,
    negations: HashSet<Box<str>>,
    negations_after: HashSet<Box<str>>,
    breakers: HashSet<Box<str>>,
}

/// The rule entries of `rules.toml`, in order.
pub(super) fn raw_rules() -> Result<Vec<RawRule>, VocabularyError> {
    let file: RulesFile = toml::from_str(RULES).map_err(|e| err("rules.toml", e))?;
    Ok(file.rule)
}

static BUILTIN: LazyLock<Result<Arc<WordEngine>, VocabularyError>> =
    LazyLock::new(|| WordEngine::build(&[]).map(Arc::new));

pub(super) fn builtin() -> Result<Arc<WordEngine>, VocabularyError> {
    BUILTIN.clone()
}

/// A phrase and the list it joins.
struct Listed {
    phrase: String,
    list: usize,
    object: bool,
}

impl WordEngine {
    /// The shipped vocabularies plus `extra` (list name, phrase) pairs.
    pub(crate) fn build(extra: &[(String, String)]) -> Result<Self, VocabularyError> {
        let raw = raw_rules()?;
        let mut names: Vec<String> = Vec::new();
        let mut index = |name: &str| match names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                names.push(name.to_owned());
                names.len() - 1
            }
        };
        let rules: Vec<WordRule> = raw
            .iter()
            .map(|r| WordRule {
                verbs: index(&r.verbs),
                objects: index(&r.objects),
                near: r.near.as_deref().map(&mut index),
                window: r.window,
            })
            .collect();
        if names.len() > 64 {
            return Err(err("rules.toml", "more than 64 word lists"));
        }
        let (listed, grammar) = read_languages(&names, extra)?;
        // Every rule needs an object: only objects anchor the raw-text test.
        let objects: u64 = rules.iter().fold(0, |m, r| m | 1 << r.objects);
        let phrases = PhraseSet::build(
            listed.iter().map(|l| (l.phrase.as_str(), 1u64 << l.list)),
            |kept, again, _| *kept |= again,
            |lists| lists & objects != 0,
        )
        .map_err(|e| err("vocabulary", e))?;
        let lexicon = lexicon(&listed, &grammar)?;
        Ok(WordEngine {
            lexicon,
            phrases,
            rules,
            blockers: grammar.blockers,
            negations: grammar.negations,
            negations_after: grammar.negations_after,
            breakers: grammar.breakers,
        })
    }

    /// The words [`Self::may_match`] looks for in plain ASCII text.
    pub(crate) fn anchor_words(&self) -> &[String] {
        self.phrases.anchor_words()
    }

    /// Whether [`Self::matches`] could find anything in `text` (the
    /// conservative raw-text test it starts with).
    pub(crate) fn may_match(&self, text: &str) -> bool {
        self.phrases.may_match(text)
    }

    /// The rule entries (bit per entry of `rules.toml`) that match `text`.
    pub(crate) fn matches(&self, text: &str) -> u64 {
        if !self.phrases.may_match(text) {
            return 0;
        }
        let n = Normalised::new(text, &self.lexicon, Splitting::Text);
        let mut hits = Vec::new();
        self.phrases
            .find(&n, |w| w.bytes().all(|b| b.is_ascii_digit()), &mut hits);
        if hits.is_empty() {
            return 0;
        }
        let mut mask = 0;
        for (i, rule) in self.rules.iter().enumerate() {
            let in_list = |list: usize| {
                let bit = 1u64 << list;
                hits.iter().filter(move |h| *h.value & bit != 0)
            };
            let verbs: Vec<_> = in_list(rule.verbs)
                .filter(|v| !self.negated(&n, v.start, v.end))
                .filter(|v| {
                    rule.near
                        .is_none_or(|near| in_list(near).any(|d| n.same_clause(v.start, d.start)))
                })
                .collect();
            if verbs.is_empty() {
                continue;
            }
            let found = in_list(rule.objects)
                .filter(|o| !self.blocked(&n, o.start, rule.objects))
                .any(|o| {
                    verbs.iter().any(|v| {
                        n.same_clause(v.start, o.start)
                            && gap(v.start..v.end, o.start..o.end).is_some_and(|g| g <= rule.window)
                    })
                });
            if found {
                mask |= 1 << i;
            }
        }
        mask
    }

    /// "never share …", "do not paste …", "貼り付けないで", "teile niemals …",
    /// but not "don't hesitate to paste …".
    fn negated(&self, n: &Normalised, start: usize, end: usize) -> bool {
        let before = (start.saturating_sub(NEGATION_REACH)..start)
            .rev()
            .take_while(|&i| n.same_phrase(i, start) && !self.breakers.contains(n.word(i)))
            .any(|i| self.negations.contains(n.word(i)));
        let after = (end..(end + NEGATION_AFTER_REACH).min(n.len()))
            .take_while(|&j| n.same_phrase(j, start))
            .any(|j| self.negations_after.contains(n.word(j)));
        before || after
    }

    /// "enter a system prompt for the new agent": an object that is not the
    /// host's own.
    fn blocked(&self, n: &Normalised, start: usize, list: usize) -> bool {
        let Some(p) = start.checked_sub(1) else {
            return false;
        };
        n.same_clause(p, start)
            && self
                .blockers
                .get(n.word(p))
                .is_some_and(|lists| lists & (1 << list) != 0)
    }
}

/// Words between two spans, `None` when they overlap.
fn gap(a: std::ops::Range<usize>, b: std::ops::Range<usize>) -> Option<usize> {
    if a.end <= b.start {
        Some(b.start - a.end)
    } else if b.end <= a.start {
        Some(a.start - b.end)
    } else {
        None
    }
}

/// Negations, blockers and helper words of all languages.
struct GrammarSets {
    blockers: HashMap<Box<str>, u64>,
    negations: HashSet<Box<str>>,
    negations_after: HashSet<Box<str>>,
    breakers: HashSet<Box<str>>,
    words: Vec<String>,
}

fn one_word(file: &str, raw: &str) -> Result<Box<str>, VocabularyError> {
    let n = Normalised::plain(raw);
    if n.len() != 1 {
        return Err(err(file, format!("{raw:?} is not one word")));
    }
    Ok(n.text.into())
}

fn read_languages(
    names: &[String],
    extra: &[(String, String)],
) -> Result<(Vec<Listed>, GrammarSets), VocabularyError> {
    let list_of = |file: &str, name: &str| {
        names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| err(file, format!("unknown list {name:?}")))
    };
    let mut listed = Vec::new();
    let mut g = GrammarSets {
        blockers: HashMap::new(),
        negations: HashSet::new(),
        negations_after: HashSet::new(),
        breakers: HashSet::new(),
        words: Vec::new(),
    };
    for (lang, text) in LANGS {
        let file: LangFile = toml::from_str(text).map_err(|e| err(lang, e))?;
        for (object, lists) in [(false, &file.verbs), (true, &file.objects)] {
            for (name, phrases) in lists {
                // The language files are shared with the intent detector
                // (`policy::intent`), which reads the lists no rule here names.
                let Ok(list) = list_of(lang, name) else {
                    continue;
                };
                listed.extend(phrases.iter().map(|p| Listed {
                    phrase: p.clone(),
                    list,
                    object,
                }));
            }
        }
        for (name, words) in &file.blockers {
            let bit = 1u64 << list_of(lang, name)?;
            for w in words {
                *g.blockers.entry(one_word(lang, w)?).or_insert(0) |= bit;
            }
        }
        for w in &file.grammar.negations {
            g.negations.insert(one_word(lang, w)?);
        }
        for w in &file.grammar.negations_after {
            g.negations_after.insert(one_word(lang, w)?);
        }
        for w in &file.grammar.breakers {
            g.breakers.insert(one_word(lang, w)?);
        }
        g.words.extend(file.grammar.words.iter().cloned());
    }
    for (name, phrase) in extra {
        let list = list_of("policy", name)?;
        listed.push(Listed {
            phrase: phrase.clone(),
            list,
            object: true,
        });
    }
    Ok((listed, g))
}

/// Known words: all vocabulary, grammar and common words; objects (up to
/// three words) also match written as one word (`systemprompt`).
fn lexicon(listed: &[Listed], g: &GrammarSets) -> Result<Lexicon, VocabularyError> {
    let mut known: Vec<String> = g.words.iter().map(|w| Normalised::plain(w).text).collect();
    let grammar = g
        .negations
        .iter()
        .chain(&g.negations_after)
        .chain(&g.breakers);
    known.extend(grammar.map(|w| w.to_string()));
    known.extend(common_words());
    let mut terms = Vec::new();
    let mut glued = Vec::new();
    for l in listed {
        for p in parse_phrase(&l.phrase).map_err(|e| err("vocabulary", e))? {
            let words: Vec<&str> = p.text.split(' ').collect();
            known.extend(words.iter().map(|w| w.to_string()));
            if l.object {
                terms.extend(words.iter().filter(|w| w.len() > 3).map(|w| w.to_string()));
                if !p.stem && !p.number_lead && (2..=3).contains(&words.len()) {
                    glued.push((words.concat(), true));
                }
            }
        }
    }
    Lexicon::new(known, terms, glued).map_err(|e| err("lexicon", e))
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&BUILTIN);
}
