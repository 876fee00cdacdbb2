//! The shipped vocabularies (`data/intent/`, and the lists of
//! `data/injection/lang/` this detector shares) compiled into one phrase set,
//! one lexicon, the regex concepts and the rules.

use std::collections::{BTreeMap, HashMap, HashSet};

use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use super::Intent;
use crate::policy::detect::{common_words, parse_phrase, Lexicon, PhraseSet};
use crate::policy::injection::injection_languages;

const RULES: &str = data_file!("intent/rules.toml");
const PATTERNS: &str = data_file!("intent/patterns.toml");

/// The languages of `data/intent/lang/`.
pub(super) const LANGS: [(&str, &str); 20] = [
    ("en", data_file!("intent/lang/en.toml")),
    ("de", data_file!("intent/lang/de.toml")),
    ("fr", data_file!("intent/lang/fr.toml")),
    ("es", data_file!("intent/lang/es.toml")),
    ("pt", data_file!("intent/lang/pt.toml")),
    ("it", data_file!("intent/lang/it.toml")),
    ("nl", data_file!("intent/lang/nl.toml")),
    ("pl", data_file!("intent/lang/pl.toml")),
    ("ru", data_file!("intent/lang/ru.toml")),
    ("ja", data_file!("intent/lang/ja.toml")),
    ("zh", data_file!("intent/lang/zh.toml")),
    ("ko", data_file!("intent/lang/ko.toml")),
    ("tr", data_file!("intent/lang/tr.toml")),
    ("uk", data_file!("intent/lang/uk.toml")),
    ("hi", data_file!("intent/lang/hi.toml")),
    ("ar", data_file!("intent/lang/ar.toml")),
    ("id", data_file!("intent/lang/id.toml")),
    ("vi", data_file!("intent/lang/vi.toml")),
    ("sv", data_file!("intent/lang/sv.toml")),
    ("fa", data_file!("intent/lang/fa.toml")),
];

/// (list name in `data/injection/lang/*.toml`, concept here).
pub(super) const INJECTION_LISTS: &[(&str, &str)] = &[
    ("ignore", "ignore"),
    ("run", "run"),
    ("system_prompt", "host_context"),
    ("own_instructions", "host_context"),
    ("host_context", "host_context"),
    ("host_data", "host_data"),
    ("call_argument", "argument"),
    ("instructions", "prior_instructions"),
    ("credentials", "credentials"),
    ("terminal", "terminal"),
];

/// Concepts whose phrases are things (they may be written as one word:
/// `systemprompt`, `apikey`).
const NOUN_CONCEPTS: &[&str] = &[
    "host_context",
    "host_data",
    "credentials",
    "prior_instructions",
];

/// Concepts computed by the detector, not read from a list.
/// `required_argument`: on a parameter's name, when the schema's `required`
/// names it. `in_value`: on every concept found in a schema value (default,
/// enum, const, examples, extra keys: no place for a sentence);
/// `in_argument_text`: on every concept found in a parameter's name or in
/// schema text (a parameter's description) (what the model is told to put into that argument).
pub(super) const COMPUTED: &[&str] = &[
    "own_argument",
    "foreign_tool",
    "required_argument",
    "in_value",
    "in_argument_text",
    "in_name",
    "own_subject",
];

/// Shipped vocabulary that cannot be used (a bug in `data/`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("intent vocabulary ({file}): {message}")]
pub(crate) struct IntentError {
    pub(crate) file: String,
    pub(crate) message: String,
}

fn err(file: &str, message: impl ToString) -> IntentError {
    IntentError {
        file: file.to_owned(),
        message: message.to_string(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    negatable: Vec<String>,
    quotable: Vec<String>,
    rule: Vec<RawRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    intent: String,
    cue: String,
    all: Vec<Vec<String>>,
    #[serde(default)]
    scope: Option<u32>,
    #[serde(default)]
    item_any: Vec<String>,
    #[serde(default)]
    also: Vec<Vec<String>>,
    #[serde(default)]
    unless: Vec<String>,
    #[serde(default)]
    unless_named: Vec<String>,
    #[serde(default)]
    split: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternsFile {
    patterns: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LangFile {
    #[serde(default)]
    concepts: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    grammar: Grammar,
}

#[derive(Debug, Default, Deserialize)]
struct Grammar {
    #[serde(default)]
    negations: Vec<String>,
    #[serde(default)]
    words: Vec<String>,
    /// Phrases that, right before an identifier, make it a tool's name
    /// ("call", "the tool").
    #[serde(default)]
    tool_before: Vec<String>,
    /// Phrases that, right after an identifier, make it a tool's name
    /// ("tool", "is called").
    #[serde(default)]
    tool_after: Vec<String>,
    /// Words a noun phrase's look-back for a blocker stops at: an owner
    /// ("your", "the") or a word joining two phrases ("of", "and").
    #[serde(default)]
    look_back_stops: Vec<String>,
}

/// Where a tool-context phrase stands: before or after the name.
pub(super) const TOOL_BEFORE: u8 = 1;
pub(super) const TOOL_AFTER: u8 = 2;

/// The parts of an injection language file this detector reads.
#[derive(Debug, Default, Deserialize)]
struct InjectionLang {
    #[serde(default)]
    verbs: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    objects: BTreeMap<String, Vec<String>>,
    /// Per list, words that make its object not the host's ("a system
    /// prompt for the new agent").
    #[serde(default)]
    blockers: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    grammar: Grammar,
}

/// A concept set: bit per concept.
pub(super) type Concepts = u128;

/// One rule, compiled.
#[derive(Debug, Clone)]
pub(super) struct Rule {
    pub(crate) intent: Intent,
    pub(crate) cue: &'static str,
    pub(crate) all: Vec<Concepts>,
    pub(crate) scope: Option<u32>,
    pub(crate) item_any: Concepts,
    /// Groups that must meet, within `scope` clauses of each other, in some
    /// text of the item (the same one as `all`'s or another: the rest of an
    /// instruction cut between a description and a parameter's).
    pub(crate) also: Vec<Concepts>,
    /// Concepts that keep the rule from reading the clause they are in ("for
    /// example", an address at a documentation domain).
    pub(crate) unless: Concepts,
    /// Concepts that, in the item's name or a parameter's name, keep the
    /// rule from firing at all: what the item is for (a tool named
    /// `ask_llm` takes the conversation by design).
    pub(crate) unless_named: Concepts,
    /// May fire on two items read together (one names the other).
    pub(crate) split: bool,
}

/// Everything the detector reads with.
#[derive(Debug)]
pub(super) struct Vocab {
    pub(crate) lexicon: Lexicon,
    pub(crate) phrases: PhraseSet<Concepts>,
    /// Each regex concept: its patterns as one regex.
    pub(crate) patterns: Vec<(Concepts, Regex)>,
    pub(crate) negations: HashSet<Box<str>>,
    /// Per word, the noun concepts it makes someone else's when it opens
    /// their noun phrase ("an optimised code-review system prompt").
    pub(crate) blockers: HashMap<Box<str>, Concepts>,
    /// Words that end that look-back ([`Grammar`]'s `look_back_stops`).
    pub(crate) look_back_stops: HashSet<Box<str>>,
    /// The grammar's `tool_before` ([`TOOL_BEFORE`]) and `tool_after`
    /// ([`TOOL_AFTER`]) phrases of every language.
    pub(crate) tool_context: PhraseSet<u8>,
    pub(crate) rules: Vec<Rule>,
    pub(crate) negatable: Concepts,
    pub(crate) quotable: Concepts,
    /// The concepts whose phrases are things ([`NOUN_CONCEPTS`]).
    pub(crate) nouns: Concepts,
    pub(crate) names: Vec<String>,
}

impl Vocab {
    /// The bit of a concept name (known after [`Vocab::build`]).
    pub(crate) fn bit(&self, name: &str) -> Concepts {
        self.names
            .iter()
            .position(|n| n == name)
            .map_or(0, |i| 1 << i)
    }

    pub(crate) fn build() -> Result<Self, IntentError> {
        let mut names: Vec<String> = COMPUTED.iter().map(|s| s.to_string()).collect();
        let mut index = |name: &str| -> Result<Concepts, IntentError> {
            let i = match names.iter().position(|n| n == name) {
                Some(i) => i,
                None => {
                    names.push(name.to_owned());
                    names.len() - 1
                }
            };
            if i >= Concepts::BITS as usize {
                return Err(err("intent", "more concepts than a concept set holds"));
            }
            Ok(1 << i)
        };

        // Phrases of every language, with the concept each belongs to.
        let mut listed: Vec<(String, Concepts, bool)> = Vec::new();
        let mut negations = HashSet::new();
        let mut blockers: HashMap<Box<str>, Concepts> = HashMap::new();
        let mut look_back_stops = HashSet::new();
        let mut words: Vec<String> = Vec::new();
        let mut tool_context: Vec<(String, u8)> = Vec::new();
        for (lang, text) in LANGS {
            let text = data(&format!("lang/{lang}.toml"), text);
            let file: LangFile = toml::from_str(&text).map_err(|e| err(lang, e))?;
            for (concept, phrases) in &file.concepts {
                let bit = index(concept)?;
                let noun = NOUN_CONCEPTS.contains(&concept.as_str());
                listed.extend(phrases.iter().map(|p| (p.clone(), bit, noun)));
            }
            negations.extend(file.grammar.negations.iter().map(|w| one_word(w)));
            look_back_stops.extend(file.grammar.look_back_stops.iter().map(|w| one_word(w)));
            words.extend(file.grammar.words.iter().cloned());
            for (list, side) in [
                (&file.grammar.tool_before, TOOL_BEFORE),
                (&file.grammar.tool_after, TOOL_AFTER),
            ] {
                for p in list {
                    tool_context.push((p.clone(), side));
                    for v in parse_phrase(p).map_err(|e| err(lang, e))? {
                        words.extend(v.text.split(' ').map(str::to_owned));
                    }
                }
            }
        }
        // The prompt-injection detector's vocabularies, read here too so
        // that each phrase lives in one file.
        for (lang, text) in injection_languages() {
            let file: InjectionLang =
                toml::from_str(text).map_err(|e| err(&format!("injection/{lang}"), e))?;
            for (list, concept) in INJECTION_LISTS {
                let bit = index(concept)?;
                let noun = NOUN_CONCEPTS.contains(concept);
                for phrases in [file.verbs.get(*list), file.objects.get(*list)]
                    .into_iter()
                    .flatten()
                {
                    listed.extend(phrases.iter().map(|p| (p.clone(), bit, noun)));
                }
                for w in file.blockers.get(*list).into_iter().flatten() {
                    *blockers.entry(one_word(w)).or_insert(0) |= bit;
                }
            }
            negations.extend(file.grammar.negations.iter().map(|w| one_word(w)));
            words.extend(file.grammar.words.iter().cloned());
        }

        let pfile: PatternsFile = toml::from_str(&data("patterns.toml", PATTERNS))
            .map_err(|e| err("patterns.toml", e))?;
        let mut patterns = Vec::new();
        for (concept, list) in &pfile.patterns {
            let bit = index(concept)?;
            let joined = list
                .iter()
                // ASCII word boundaries: Unicode ones send the regex
                // engines to their slow paths on any non-ASCII text.
                .map(|p| format!("(?:{})", p.replace(r"\b", r"(?-u:\b)")))
                .collect::<Vec<_>>()
                .join("|");
            let re = RegexBuilder::new(&joined)
                .case_insensitive(true)
                .size_limit(1 << 22)
                .build()
                .map_err(|e| err("patterns.toml", e))?;
            patterns.push((bit, re));
        }

        let rfile: RulesFile =
            toml::from_str(&data("rules.toml", RULES)).map_err(|e| err("rules.toml", e))?;
        let mut set_of = |list: &[String]| -> Result<Concepts, IntentError> {
            list.iter().try_fold(0, |m, n| Ok(m | index(n)?))
        };
        let negatable = set_of(&rfile.negatable)?;
        let quotable = set_of(&rfile.quotable)?;
        let mut rules = Vec::new();
        for r in rfile.rule {
            let intent = Intent::from_name(&r.intent)
                .ok_or_else(|| err("rules.toml", format!("unknown intent {:?}", r.intent)))?;
            let all = r
                .all
                .iter()
                .map(|g| set_of(g))
                .collect::<Result<Vec<_>, _>>()?;
            if all.is_empty() {
                return Err(err("rules.toml", format!("rule {:?} has no groups", r.cue)));
            }
            rules.push(Rule {
                intent,
                cue: Box::leak(r.cue.into_boxed_str()),
                all,
                scope: r.scope,
                item_any: set_of(&r.item_any)?,
                also: r
                    .also
                    .iter()
                    .map(|g| set_of(g))
                    .collect::<Result<Vec<_>, _>>()?,
                unless: set_of(&r.unless)?,
                unless_named: set_of(&r.unless_named)?,
                split: r.split,
            });
        }

        // Every concept a rule names must come from somewhere.
        let defined: HashSet<Concepts> = listed
            .iter()
            .map(|l| l.1)
            .chain(patterns.iter().map(|p| p.0))
            .collect();
        for (i, name) in names.iter().enumerate() {
            if i >= COMPUTED.len() && !defined.contains(&(1 << i)) {
                return Err(err("intent", format!("concept {name:?} has no phrases")));
            }
        }

        let phrases = PhraseSet::merged(
            listed.iter().map(|(p, bit, _)| (p.as_str(), *bit)),
            |kept, again, _| *kept |= again,
        )
        .map_err(|e| err("vocabulary", e))?;
        let tool_context = PhraseSet::merged(
            tool_context.iter().map(|(p, side)| (p.as_str(), *side)),
            |kept, again, _| *kept |= again,
        )
        .map_err(|e| err("tool_before/tool_after", e))?;
        let lexicon = lexicon(&listed, words)?;
        let nouns = listed
            .iter()
            .filter(|(_, _, noun)| *noun)
            .fold(0, |m, (_, bit, _)| m | bit);
        Ok(Vocab {
            lexicon,
            phrases,
            patterns,
            negations,
            blockers,
            look_back_stops,
            tool_context,
            rules,
            negatable,
            quotable,
            nouns,
            names,
        })
    }
}

/// The shipped text of a file of `data/intent/`. Tests may read a working
/// copy instead (`PORTCULLIS_INTENT_DATA=<dir>`), so tuning the data needs
/// no rebuild; the shipped binary reads only what it embeds.
fn data(rel: &str, shipped: &'static str) -> std::borrow::Cow<'static, str> {
    #[cfg(test)]
    if let Some(dir) = std::env::var_os("PORTCULLIS_INTENT_DATA") {
        if let Ok(text) = std::fs::read_to_string(std::path::Path::new(&dir).join(rel)) {
            return std::borrow::Cow::Owned(text);
        }
    }
    let _ = rel;
    std::borrow::Cow::Borrowed(shipped)
}

fn one_word(raw: &str) -> Box<str> {
    crate::policy::detect::Normalised::plain(raw).text.into()
}

/// Known words: every phrase's words, grammar words and the common words
/// of field names; nouns (up to three words) also match written as one word.
fn lexicon(
    listed: &[(String, Concepts, bool)],
    words: Vec<String>,
) -> Result<Lexicon, IntentError> {
    use crate::policy::detect::Normalised;
    let mut known: Vec<String> = words.iter().map(|w| Normalised::plain(w).text).collect();
    known.extend(common_words());
    let mut terms = Vec::new();
    let mut glued: HashMap<String, bool> = HashMap::new();
    for (phrase, _, noun) in listed {
        for p in parse_phrase(phrase).map_err(|e| err("vocabulary", e))? {
            let ws: Vec<&str> = p.text.split(' ').collect();
            known.extend(ws.iter().map(|w| w.to_string()));
            if *noun {
                terms.extend(ws.iter().filter(|w| w.len() > 3).map(|w| w.to_string()));
                if !p.stem && !p.number_lead && (2..=3).contains(&ws.len()) {
                    glued.insert(ws.concat(), true);
                }
            }
        }
    }
    Lexicon::new(known, terms, glued).map_err(|e| err("lexicon", e))
}
