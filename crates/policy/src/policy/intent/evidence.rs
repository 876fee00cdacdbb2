//! What one listed item says, as concepts: every text of the item, in every
//! reading (`read.rs`), normalised once, its phrases, patterns and the
//! computed concepts found, each with the clause it sits in.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use super::read::readings;
use super::vocab::{Concepts, Rule, Vocab, TOOL_AFTER, TOOL_BEFORE};
use super::{Listed, Place};
use crate::policy::detect::{Normalised, Splitting};

/// How far before a verb a negation cancels it.
const NEGATION_REACH: usize = 3;
/// How many words back a blocker opens the noun phrase it blocks.
const BLOCKER_REACH: usize = 4;
/// Bytes around an identifier searched for a word that makes it a tool.
const TOOL_CONTEXT: usize = 48;

/// An identifier that may name a tool: `send_email`, or anything quoted
/// with backticks (`list-messages`, `sendEmail`).
static IDENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"`[A-Za-z][A-Za-z0-9_.:/-]{2,63}`|(?-u:\b)[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?-u:\b)",
    )
    .expect("constant regex")
});
/// One concept (or several) found in one reading of one text.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hit {
    pub(crate) concepts: Concepts,
    /// Which reading of which text of the item (hits combine within one).
    pub(crate) unit: u32,
    pub(crate) clause: u32,
}

/// The concepts of one item.
#[derive(Debug, Default)]
pub(super) struct Evidence {
    pub(crate) hits: Vec<Hit>,
    /// Every concept found anywhere in the item.
    pub(crate) all: Concepts,
    /// The concepts found in the item's name and its parameters' names.
    pub(crate) named: Concepts,
    /// Indices (into the list) of the items whose names this item's prose
    /// mentions.
    pub(crate) mentions: Vec<usize>,
}

/// What the whole list declares: its items' names and parameter names.
pub(super) struct ListContext {
    /// Lowercased names the list declares (tools, prompts, resources).
    pub(crate) own: HashSet<String>,
    /// Lowercased parameter and argument names of every item.
    pub(crate) params: HashSet<String>,
    /// The declared names folded (lowercase letters and digits only), so
    /// that `updateIssue` names the list's own `update_issue`.
    pub(crate) folded: HashSet<String>,
    /// The items' names (at least three characters), one automaton.
    pub(crate) names: Option<aho_corasick::AhoCorasick>,
    /// The item of each pattern of `names`.
    pub(crate) name_items: Vec<usize>,
}

impl ListContext {
    pub(crate) fn new(own_names: &[&str], items: &[Vec<Listed<'_>>]) -> Self {
        let mut patterns = Vec::new();
        let mut name_items = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if let Some(n) = item.iter().find(|l| l.place == Place::Name) {
                let n = n.text.to_lowercase();
                if n.chars().count() >= 3 {
                    patterns.push(n);
                    name_items.push(i);
                }
            }
        }
        let names = match patterns.is_empty() {
            true => None,
            false => aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                .build(&patterns)
                .ok(),
        };
        ListContext {
            folded: own_names.iter().map(|n| fold(n)).collect(),
            own: own_names.iter().map(|n| n.to_lowercase()).collect(),
            params: items
                .iter()
                .flatten()
                .filter(|l| matches!(l.place, Place::PropertyName | Place::ArgumentName))
                .map(|l| l.text.to_lowercase())
                .collect(),
            names,
            name_items,
        }
    }
}

impl Evidence {
    pub(crate) fn gather(vocab: &Vocab, item: &[Listed<'_>], ctx: &ListContext, me: usize) -> Self {
        let own_args: Vec<String> = item
            .iter()
            .filter(|l| matches!(l.place, Place::PropertyName | Place::ArgumentName))
            .map(|l| l.text.to_lowercase())
            .filter(|n| n.chars().count() >= 3)
            .collect();
        let own_finder = match own_args.is_empty() {
            true => None,
            // An NFA: a DFA costs more to build than one item's few searches.
            false => aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
                .build(&own_args)
                .ok(),
        };
        let mut ev = Evidence::default();
        let mut unit = 0u32;
        let own_bit = vocab.bit("own_argument");
        let foreign_bit = vocab.bit("foreign_tool");
        let quote_bit = vocab.bit("quote_mention");
        let required_bit = vocab.bit("required_argument");
        let value_bit = vocab.bit("in_value");
        let argument_bit = vocab.bit("in_argument_text");
        let name_bit = vocab.bit("in_name");
        let subject_bit = vocab.bit("own_subject");
        let private = vocab.bit("private_path")
            | vocab.bit("credentials")
            | vocab.bit("host_context")
            | vocab.bit("host_data");
        // What the item is about, by its name, its parameters' names and
        // the one-word values they take: a private thing named there
        // (`ssh_hosts` reading ~/.ssh/config, a share link's `password`, a
        // generator whose `type` is one of `uuid`, `password`) is the tool's
        // own subject.
        let subject: HashSet<String> = item
            .iter()
            .filter(|l| match l.place {
                Place::Name | Place::PropertyName | Place::ArgumentName => true,
                Place::SchemaValue => is_one_word(l.text),
                _ => false,
            })
            .flat_map(|l| name_words(l.text))
            .collect();
        // A parameter that takes an API credential (`api_key`, `token`)
        // makes an API key the text asks for that parameter's value (not a
        // private key or a password: `api_credential`).
        let field_bit = vocab.bit("credential_field");
        let takes_a_key = vocab.patterns.iter().any(|(bit, re)| {
            *bit == field_bit
                && item.iter().any(|l| {
                    matches!(l.place, Place::PropertyName | Place::ArgumentName)
                        && re.is_match(l.text)
                })
        });
        let held = if takes_a_key {
            vocab.bit("api_credential")
        } else {
            0
        };
        // Strings of `required` (and other schema values) that name one of
        // the item's parameters.
        let values: HashSet<&str> = item
            .iter()
            .filter(|l| l.place == Place::SchemaValue)
            .map(|l| l.text)
            .collect();
        for listed in item {
            let prose = !matches!(
                listed.place,
                Place::Name | Place::PropertyName | Place::ArgumentName
            );
            let splitting = match prose {
                true => Splitting::Text,
                false => Splitting::Names,
            };
            for reading in readings(listed.text) {
                let raw: &str = &reading;
                let first = ev.hits.len();
                // A parameter's name says what it carries: its own words
                // make it no one's job.
                let no_subject = HashSet::new();
                let subject = match prose {
                    true => &subject,
                    false => &no_subject,
                };
                let subject_words = Subject {
                    words: subject,
                    private,
                    held: if prose { held } else { 0 },
                    bit: subject_bit,
                };
                words(vocab, raw, splitting, unit, &subject_words, &mut ev.hits);
                let mut found: Vec<(usize, Concepts)> = Vec::new();
                if listed.place == Place::PropertyName && values.contains(listed.text) {
                    found.push((0, required_bit));
                }
                for (bit, re) in &vocab.patterns {
                    found.extend(re.find_iter(raw).map(|m| {
                        // A private thing the item is about is its job, not
                        // something it reaches for.
                        let own = *bit & private != 0
                            && name_words(m.as_str()).any(|w| subject.contains(&w));
                        let concepts = match own {
                            true => (*bit & !private) | subject_bit,
                            false => *bit,
                        };
                        (m.start() + clause_start(m.as_str()), concepts)
                    }));
                }
                if prose {
                    let lower = raw.to_lowercase();
                    if lower.len() == raw.len() {
                        if let Some(f) = &own_finder {
                            found.extend(
                                f.find_iter(&lower)
                                    .filter(|m| is_word_at(&lower, m.start(), m.end()))
                                    .map(|m| (m.start(), own_bit)),
                            );
                        }
                        if let Some(names) = &ctx.names {
                            for m in names.find_iter(&lower) {
                                let j = ctx.name_items[m.pattern().as_usize()];
                                if j != me && is_word_at(&lower, m.start(), m.end()) {
                                    ev.mentions.push(j);
                                }
                            }
                        }
                    }
                    found.extend(
                        foreign_tools(vocab, raw, ctx, &own_args).map(|at| (at, foreign_bit)),
                    );
                }
                found.sort_unstable_by_key(|f| f.0);
                let clauses = clauses_at(raw, found.iter().map(|f| f.0));
                ev.hits.extend(
                    found
                        .iter()
                        .zip(clauses)
                        .map(|(&(_, concepts), clause)| Hit {
                            concepts,
                            unit,
                            clause,
                        }),
                );
                drop_quoted(vocab, raw, quote_bit, &mut ev.hits[first..]);
                if !prose {
                    ev.named |= ev.hits[first..].iter().fold(0, |m, h| m | h.concepts);
                }
                let place_bit = match listed.place {
                    Place::SchemaValue => value_bit,
                    Place::PropertyName | Place::ArgumentName => argument_bit | name_bit,
                    Place::ArgumentText | Place::SchemaText => argument_bit,
                    _ => 0,
                };
                if place_bit != 0 {
                    for h in &mut ev.hits[first..] {
                        if h.concepts != 0 {
                            h.concepts |= place_bit;
                        }
                    }
                }
                unit += 1;
            }
        }
        ev.mentions.sort_unstable();
        ev.mentions.dedup();
        ev.hits.retain(|h| h.concepts != 0);
        ev.all = ev.hits.iter().fold(0, |m, h| m | h.concepts);
        ev
    }

    /// The evidence of the text as it was sent (its first reading) alone.
    pub(crate) fn as_sent(&self) -> Evidence {
        let hits: Vec<Hit> = self.hits.iter().filter(|h| h.unit == 0).copied().collect();
        let all = hits.iter().fold(0, |m, h| m | h.concepts);
        Evidence {
            hits,
            all,
            named: self.named,
            mentions: Vec::new(),
        }
    }

    /// Does `rule` fire on this item? Every group needs a hit in the same
    /// reading within `scope` clauses of a hit of the first group; the
    /// groups of `also` likewise, in any reading of any text of the item.
    /// A clause with one of the rule's `unless` concepts is not read.
    pub(crate) fn fires(&self, rule: &Rule) -> bool {
        if rule.item_any != 0 && self.all & rule.item_any == 0 {
            return false;
        }
        if self.named & rule.unless_named != 0 {
            return false;
        }
        if rule.all.iter().chain(&rule.also).any(|g| self.all & g == 0) {
            return false;
        }
        let excused: HashSet<(u32, u32)> = match rule.unless & self.all {
            0 => HashSet::new(),
            unless => self
                .hits
                .iter()
                .filter(|h| h.concepts & unless != 0)
                .map(|h| (h.unit, h.clause))
                .collect(),
        };
        self.meet(&rule.all, rule.scope, &excused)
            && (rule.also.is_empty() || self.meet(&rule.also, rule.scope, &excused))
    }

    /// Do `groups` meet in one reading within `scope` clauses?
    pub(crate) fn meets(&self, groups: &[Concepts], scope: u32) -> bool {
        groups.iter().all(|g| self.all & g != 0) && self.meet(groups, Some(scope), &HashSet::new())
    }

    /// Do `groups` meet in one reading, within `scope` clauses of a hit of
    /// the first group, outside the `excused` clauses?
    fn meet(&self, groups: &[Concepts], scope: Option<u32>, excused: &HashSet<(u32, u32)>) -> bool {
        let Some((first, rest)) = groups.split_first() else {
            return false;
        };
        let read = |h: &&Hit| !excused.contains(&(h.unit, h.clause));
        self.hits
            .iter()
            .filter(read)
            .filter(|a| a.concepts & first != 0)
            .any(|a| {
                rest.iter().all(|g| {
                    self.hits.iter().filter(read).any(|h| {
                        h.unit == a.unit
                            && h.concepts & g != 0
                            && scope.is_none_or(|s| h.clause.abs_diff(a.clause) <= s)
                    })
                })
            })
    }

    /// Does `rule` fire on the evidence of two items read as one (an attack
    /// split across them)? Groups may sit anywhere in either.
    /// `continuation`: the concepts of an item that points the model at
    /// another's text ("follow the notes of …", "continued in …"); without
    /// one, two items naming each other are two descriptions, not one text.
    pub(crate) fn fires_split(
        &self,
        other: &Evidence,
        rule: &Rule,
        continuation: Concepts,
    ) -> bool {
        if self.all & continuation == 0 {
            return false;
        }
        let all = self.all | other.all;
        (self.named | other.named) & rule.unless_named == 0
            && (rule.item_any == 0 || all & rule.item_any != 0)
            && rule.all.iter().chain(&rule.also).all(|g| all & g != 0)
    }
}

/// The item's own subject: the words of its name, and the concepts whose
/// hits on one of them get `bit`.
struct Subject<'a> {
    words: &'a HashSet<String>,
    private: Concepts,
    /// A kind of private thing a parameter of the item takes by design:
    /// a hit of it is no longer private.
    held: Concepts,
    bit: Concepts,
}

/// The words (three letters or more, lowercase) of a name or a matched
/// path: `ssh_hosts` → ssh, hosts; `~/.aws/credentials` → aws, credentials;
/// `getAwsProfile` → get, aws, profile.
fn name_words(text: &str) -> impl Iterator<Item = String> + '_ {
    crate::policy::detect::name_words(text)
        .into_iter()
        .filter(|w| w.chars().count() >= 3)
}

/// A schema value that is one word (`password`, `api_key`), not a path, an
/// address or a sentence.
fn is_one_word(text: &str) -> bool {
    (3..=40).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// A name folded to lowercase letters and digits.
fn fold(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Where in a pattern's match its concept sits: after the end of a clause
/// the match begins with (an order is found with the sentence end before
/// it, and belongs to the clause after).
fn clause_start(m: &str) -> usize {
    let b = m.as_bytes();
    let mut at = 0;
    for i in 0..b.len() {
        let ends = matches!(b[i], b'.' | b'!' | b'?' | b';' | b':')
            && b.get(i + 1).is_some_and(u8::is_ascii_whitespace);
        if ends || b[i] == b'\n' {
            at = i + 1;
        }
    }
    while at < b.len() && b[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

/// Phrase hits of one reading (negated verbs lose their negatable concepts;
/// a private thing the item's name or parameters are about is `own_subject`
/// instead of private).
fn words(
    vocab: &Vocab,
    raw: &str,
    splitting: Splitting,
    unit: u32,
    subject: &Subject<'_>,
    out: &mut Vec<Hit>,
) {
    let n = Normalised::new(raw, &vocab.lexicon, splitting);
    let mut hits = Vec::new();
    vocab
        .phrases
        .find(&n, |w| w.bytes().all(|b| b.is_ascii_digit()), &mut hits);
    // A word of a compound noun is the noun's: "access" in "access token",
    // "secret access key" is no order to access anything.
    let in_a_noun = |h: &crate::policy::detect::phrases::PhraseHit<'_, Concepts>| {
        *h.value & vocab.nouns == 0
            && hits.iter().any(|o| {
                *o.value & vocab.nouns != 0
                    && o.start <= h.start
                    && h.end <= o.end
                    && o.end - o.start > h.end - h.start
            })
    };
    let absorbed: Vec<bool> = hits.iter().map(in_a_noun).collect();
    for (h, _) in hits.into_iter().zip(absorbed).filter(|(_, a)| !a) {
        let mut concepts = *h.value;
        if concepts & vocab.nouns != 0 {
            concepts &= !generic(vocab, &n, h.start);
        }
        if concepts & vocab.negatable != 0 && negated(vocab, &n, h.start) {
            concepts &= !vocab.negatable;
        }
        if concepts & subject.held != 0 {
            concepts = (concepts & !subject.private) | subject.bit;
        }
        if concepts & subject.private != 0
            && !subject.words.is_empty()
            && (h.start..h.end).any(|i| subject.words.contains(n.word(i)))
        {
            concepts = (concepts & !subject.private) | subject.bit;
        }
        let clause = n.words.get(h.start).map_or(0, |w| w.clause);
        out.push(Hit {
            concepts,
            unit,
            clause,
        });
    }
}

/// The noun concepts a thing starting at `start` is not, by the words that
/// open its noun phrase: "an optimised code-review system prompt" is a
/// system prompt, not the host's; "a copy of your system prompt" is.
fn generic(vocab: &Vocab, n: &Normalised, start: usize) -> Concepts {
    for i in (start.saturating_sub(BLOCKER_REACH)..start).rev() {
        let w = n.word(i);
        if !n.same_phrase(i, start) || vocab.look_back_stops.contains(w) {
            return 0;
        }
        if let Some(&blocked) = vocab.blockers.get(w) {
            return blocked;
        }
    }
    0
}

fn negated(vocab: &Vocab, n: &Normalised, start: usize) -> bool {
    (start.saturating_sub(NEGATION_REACH)..start)
        .rev()
        .take_while(|&i| n.same_phrase(i, start))
        .any(|i| vocab.negations.contains(n.word(i)))
}

/// A quoted example in a clause that says it is one ("detects phrases such
/// as 'ignore previous instructions'") is mentioned, not meant.
fn drop_quoted(vocab: &Vocab, raw: &str, quote_bit: Concepts, hits: &mut [Hit]) {
    let quoted = raw.contains(['"', '\'', '`', '“', '”', '‘', '’', '«', '»']);
    if !quoted || vocab.quotable == 0 {
        return;
    }
    let mention: HashSet<(u32, u32)> = hits
        .iter()
        .filter(|h| h.concepts & quote_bit != 0)
        .map(|h| (h.unit, h.clause))
        .collect();
    for h in hits.iter_mut() {
        if mention.contains(&(h.unit, h.clause)) {
            h.concepts &= !vocab.quotable;
        }
    }
}

/// `text[start..end]` is not part of a longer word.
fn is_word_at(text: &str, start: usize, end: usize) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    !text[..start].chars().next_back().is_some_and(is_word)
        && !text[end..].chars().next().is_some_and(is_word)
}

/// Offsets of identifiers that look like a tool's name, next to a phrase
/// that makes them one (the languages' `tool_before`, `tool_after`: "call
/// x", "the x tool", "x is called", "x ツール"), and that the list does not
/// declare.
fn foreign_tools<'a>(
    vocab: &'a Vocab,
    raw: &'a str,
    ctx: &'a ListContext,
    own_args: &'a [String],
) -> impl Iterator<Item = usize> + 'a {
    IDENT.find_iter(raw).filter_map(move |whole| {
        let quoted = whole.as_str().starts_with('`');
        let (start, name) = match quoted {
            true => (whole.start() + 1, whole.as_str().trim_matches('`')),
            false => (whole.start(), whole.as_str()),
        };
        if name.bytes().all(|b| !b.is_ascii_lowercase()) {
            return None; // API_KEY, an environment variable
        }
        if name.contains('/') || name.contains('.') && !name.contains('_') {
            return None; // a path or a file name
        }
        let lower = name.to_lowercase();
        let declared = ctx.own.contains(&lower)
            || ctx.folded.contains(&fold(&lower))
            || ctx.params.contains(&lower)
            || own_args.contains(&lower)
            || lower
                .rsplit(['.', ':', '/'])
                .next()
                .is_some_and(|t| ctx.own.contains(t));
        if declared {
            return None;
        }
        let lo = floor(raw, whole.start().saturating_sub(TOOL_CONTEXT));
        let hi = ceil(raw, (whole.end() + TOOL_CONTEXT).min(raw.len()));
        let (before, after) = (&raw[lo..whole.start()], &raw[whole.end()..hi]);
        (tool_context(vocab, before, TOOL_BEFORE) || tool_context(vocab, after, TOOL_AFTER))
            .then_some(start)
    })
}

/// Identifiers a text names as tools by its languages' phrases ("call x",
/// "run the x tool", "x ツール"), whatever list they belong to: (byte
/// offset, name). Data a server returns has no list of its own; which of
/// these the upstream listed is the caller's question (`inspect::redirect`).
pub(super) fn tools_named<'t>(vocab: &Vocab, raw: &'t str) -> Vec<(usize, &'t str)> {
    let none = ListContext::new(&[], &[]);
    foreign_tools(vocab, raw, &none, &[])
        .map(|at| (at, identifier_at(raw, at)))
        .collect()
}

/// The identifier that starts at `at` (as [`IDENT`] spells one).
fn identifier_at(raw: &str, at: usize) -> &str {
    let rest = raw.get(at..).unwrap_or_default();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-')))
        .unwrap_or(rest.len());
    rest[..end].trim_end_matches(['.', ':', '/', '-'])
}

/// Does a `side` phrase end `before` (`TOOL_BEFORE`) or start `after`
/// (`TOOL_AFTER`), within the clause the name is in?
fn tool_context(vocab: &Vocab, window: &str, side: u8) -> bool {
    // Only spaces and quotes between the phrase and the name (after it,
    // also the hyphen of `x-Werkzeug` and the bracket of `x(으)로`).
    let gap = |c: char| {
        matches!(
            c,
            ' ' | '\t' | '`' | '\'' | '"' | '“' | '”' | '«' | '»' | '「' | '」'
        )
    };
    let next = match side {
        TOOL_BEFORE => window.trim_end_matches(gap).chars().next_back(),
        _ => window
            .trim_start_matches(|c| gap(c) || matches!(c, '-' | '('))
            .chars()
            .next(),
    };
    if !next.is_some_and(char::is_alphanumeric) || !vocab.tool_context.may_match(window) {
        return false;
    }
    let n = Normalised::new(window, &vocab.lexicon, Splitting::Text);
    let Some(last) = n.len().checked_sub(1) else {
        return false;
    };
    // The name's clause: a sentence end inside the window starts another.
    let edge = match side {
        TOOL_BEFORE => last,
        _ => 0,
    };
    let mut hits = Vec::new();
    vocab.tool_context.find(&n, |_| false, &mut hits);
    hits.iter().any(|h| {
        *h.value & side != 0
            && n.same_clause(h.start, edge)
            && match side {
                TOOL_BEFORE => h.end == n.len(),
                _ => h.start == 0,
            }
    })
}

fn floor(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The clause (as [`Normalised`] counts them) of each sorted byte offset.
fn clauses_at(raw: &str, offsets: impl Iterator<Item = usize>) -> Vec<u32> {
    let mut out = Vec::new();
    let mut clause = 0u32;
    let mut breaks = 0u8;
    let mut chars = raw.char_indices().peekable();
    for off in offsets {
        while let Some(&(i, c)) = chars.peek() {
            if i >= off {
                break;
            }
            chars.next();
            let next = chars.peek().map(|p| p.1);
            let line = c == '\n' || c == '\u{2028}' || (c == '\r' && next != Some('\n'));
            if line {
                breaks = breaks.saturating_add(1);
            } else if c.is_alphanumeric() {
                breaks = 0;
            }
            let dot = c == '.' && next.is_none_or(char::is_whitespace);
            if dot
                || (line && breaks >= 2)
                || matches!(c, ';' | '!' | '?' | '。' | '！' | '？' | '\u{2029}')
            {
                clause += 1;
            }
        }
        out.push(clause);
    }
    out
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&IDENT);
}
