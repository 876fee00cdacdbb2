//! Word-list phrases found among normalised words, all lists in one pass.
//!
//! A phrase is written in a data file as words (`mot de passe`,
//! `API-Schlüssel`, `パスワード`) and normalised like the text it is compared
//! with, so spelling rules apply to both sides alike. Three marks extend it:
//!
//! * `{a|b|c}` anywhere in a word: alternatives (`{закрытый|закрытого} ключ`);
//! * `*` at the end of the last word: any ending (`парол*` matches `пароль`,
//!   `пароля`, `паролем`);
//! * `#` as the first word: a number before the rest (`# digit code` matches
//!   `6 digit code` and `six digit code`).
//!
//! Phrases match whole words within one clause; a word may carry trailing
//! digits (`password2`, `pin1`).

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, MatchKind};

use super::normalize::Normalised;

/// A phrase in a word list that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PhraseError {
    #[error("phrase {0:?} has no words")]
    Empty(String),
    #[error("phrase {0:?} has an unbalanced {{…}} group")]
    Unbalanced(String),
    #[error("phrase {0:?} expands to more than {MAX_VARIANTS} variants")]
    TooManyVariants(String),
    #[error("phrase {0:?} uses # other than as its first word")]
    Placeholder(String),
    #[error("phrases do not compile: {0}")]
    Compile(String),
}

const MAX_VARIANTS: usize = 1024;

#[derive(Debug, Clone)]
struct Pattern<T> {
    /// The last word may continue (`парол*`).
    stem: bool,
    /// A number must come right before the first word.
    number_lead: bool,
    value: T,
}

/// A found phrase: word indices `start..end` (a leading number included).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PhraseHit<'a, T> {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) value: &'a T,
}

/// One variant of a word-list phrase, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedPhrase {
    /// Normalised words joined by single spaces.
    pub(crate) text: String,
    /// The last word may continue.
    pub(crate) stem: bool,
    /// A number comes first.
    pub(crate) number_lead: bool,
}

/// Every variant of a raw phrase (alternatives expanded), normalised.
pub(crate) fn parse_phrase(raw: &str) -> Result<Vec<ParsedPhrase>, PhraseError> {
    expand(raw)?
        .iter()
        .map(|v| {
            parse(v).map(|(text, stem, number_lead)| ParsedPhrase {
                text,
                stem,
                number_lead,
            })
        })
        .collect()
}

/// Compiled phrases with a value each.
#[derive(Debug, Clone)]
pub(crate) struct PhraseSet<T> {
    ac: Option<AhoCorasick>,
    patterns: Vec<Pattern<T>>,
    /// Phrases given more than once (kept: the first).
    duplicates: Vec<String>,
    /// One word of every all-ASCII phrase, searched in raw text (see
    /// [`PhraseSet::may_match`]).
    anchors: Option<AhoCorasick>,
    /// The words of `anchors`, for a caller that tests them in its own pass.
    anchor_words: Vec<String>,
}

impl<T: Clone> PhraseSet<T> {
    /// Phrases given twice keep their first value (see [`Self::duplicates`]).
    pub(crate) fn new<'s>(
        entries: impl IntoIterator<Item = (&'s str, T)>,
    ) -> Result<Self, PhraseError> {
        let mut duplicates = Vec::new();
        let mut set = Self::merged(entries, |_, _, variant| duplicates.push(variant.to_owned()))?;
        set.duplicates = duplicates;
        Ok(set)
    }

    /// Phrases given twice are one pattern; `merge(kept, again, variant)`
    /// combines their values.
    pub(crate) fn merged<'s>(
        entries: impl IntoIterator<Item = (&'s str, T)>,
        merge: impl FnMut(&mut T, T, &str),
    ) -> Result<Self, PhraseError> {
        Self::build(entries, merge, |_| true)
    }

    /// Like [`Self::merged`]; only phrases whose value `required` accepts
    /// give anchors to [`Self::may_match`] (a match that needs two kinds of
    /// phrase, a verb and an object, needs an object).
    pub(crate) fn build<'s>(
        entries: impl IntoIterator<Item = (&'s str, T)>,
        mut merge: impl FnMut(&mut T, T, &str),
        required: impl Fn(&T) -> bool,
    ) -> Result<Self, PhraseError> {
        let mut seen: HashMap<(String, bool, bool), usize> = HashMap::new();
        let mut texts = Vec::new();
        let mut patterns: Vec<Pattern<T>> = Vec::new();
        for (raw, value) in entries {
            for variant in expand(raw)? {
                let (text, stem, number_lead) = parse(&variant)?;
                if let Some(&i) = seen.get(&(text.clone(), stem, number_lead)) {
                    merge(&mut patterns[i].value, value.clone(), &variant);
                    continue;
                }
                seen.insert((text.clone(), stem, number_lead), patterns.len());
                texts.push(text);
                patterns.push(Pattern {
                    stem,
                    number_lead,
                    value: value.clone(),
                });
            }
        }
        let ac = match texts.is_empty() {
            true => None,
            false => Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .build(&texts)
                    .map_err(|e| PhraseError::Compile(e.to_string()))?,
            ),
        };
        // The longest word of every all-ASCII phrase that `required` accepts.
        let mut anchors: Vec<&str> = texts
            .iter()
            .zip(&patterns)
            .filter(|(t, p)| t.is_ascii() && required(&p.value))
            .map(|(t, _)| t.split(' ').max_by_key(|w| w.len()).unwrap_or(""))
            .collect();
        anchors.sort_unstable();
        anchors.dedup();
        let anchor_words: Vec<String> = anchors.iter().map(|w| w.to_string()).collect();
        let anchors = match anchors.is_empty() {
            true => None,
            // A DFA: the test runs on every text, and the anchors are few.
            false => Some(
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .kind(Some(aho_corasick::AhoCorasickKind::DFA))
                    .build(&anchors)
                    .map_err(|e| PhraseError::Compile(e.to_string()))?,
            ),
        };
        Ok(PhraseSet {
            ac,
            patterns,
            duplicates: Vec::new(),
            anchors,
            anchor_words,
        })
    }
}

impl<T> PhraseSet<T> {
    /// Heap bytes of the automaton.
    #[cfg(test)]
    pub(crate) fn memory_usage(&self) -> usize {
        [&self.ac, &self.anchors]
            .iter()
            .map(|a| a.as_ref().map_or(0, |a| a.memory_usage()))
            .sum()
    }

    #[cfg(test)]
    pub(crate) fn duplicates(&self) -> &[String] {
        &self.duplicates
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.patterns.len()
    }

    /// The anchor words [`Self::may_match`] looks for (any case), for a
    /// caller that folds the test into a pass of its own: with
    /// [`disguised`] false on the same text, `may_match` is whether one
    /// of them occurs.
    pub(crate) fn anchor_words(&self) -> &[String] {
        &self.anchor_words
    }

    /// Could any phrase be found in `raw` once it is normalised? A quick,
    /// conservative test on the raw text: `false` only for ASCII text in
    /// which no phrase's anchor word occurs (case ignored) and which has no
    /// digit or `$ @ ! |` next to a letter (`p4ssw0rd`) and no word spelled
    /// out letter by letter (`S-Y-S`). Normalising such text only lowercases
    /// and splits it, so every word it yields is a piece of the raw text.
    pub(crate) fn may_match(&self, raw: &str) -> bool {
        if !raw.is_ascii() || disguised(raw.as_bytes()) {
            return true;
        }
        self.anchors.as_ref().is_some_and(|a| a.is_match(raw))
    }

    /// Appends every phrase found in `n` to `out`, in text order.
    /// `is_number` says whether a word is a number (`6`, `six`).
    pub(crate) fn find<'a>(
        &'a self,
        n: &Normalised,
        is_number: impl Fn(&str) -> bool,
        out: &mut Vec<PhraseHit<'a, T>>,
    ) {
        let Some(ac) = &self.ac else { return };
        let text = n.text.as_bytes();
        for m in ac.find_overlapping_iter(&n.text) {
            let p = &self.patterns[m.pattern().as_usize()];
            let (s, e) = (m.start(), m.end());
            if (s > 0 && text[s - 1] != b' ') || (!p.stem && !ends_word(text, e)) {
                continue;
            }
            let (Some(first), Some(last)) = (n.word_starting_at(s), n.word_containing(e - 1))
            else {
                continue;
            };
            if !n.same_clause(first, last) {
                continue;
            }
            let start = match p.number_lead {
                false => first,
                true => match first.checked_sub(1) {
                    Some(j) if n.same_clause(j, first) && is_number(n.word(j)) => j,
                    _ => continue,
                },
            };
            out.push(PhraseHit {
                start,
                end: last + 1,
                value: &p.value,
            });
        }
    }
}

/// A byte's classes as [`disguised`] reads them, one bit each.
const LETTER: u8 = 1;
/// A digit or `$ @ ! |`: what a letter may be written as.
const LEET: u8 = 2;
const ALNUM: u8 = 4;

/// [`LETTER`], [`LEET`] and [`ALNUM`] of every byte: one load per byte
/// where the tests took a dozen comparisons (the raw-text test reads every
/// string of every result).
static CLASSES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        if c.is_ascii_alphabetic() {
            table[i] = LETTER | ALNUM;
        } else if c.is_ascii_digit() {
            table[i] = LEET | ALNUM;
        } else if matches!(c, b'$' | b'@' | b'!' | b'|') {
            table[i] = LEET;
        }
        i += 1;
    }
    table
};

/// [`disguised`] as a regex over bytes, for a caller that folds the test
/// into a pass of its own: a letter next to a digit or `$ @ ! |`, or three
/// runs of one letter in a row between other characters.
pub(crate) const DISGUISED: &str = concat!(
    r"(?-u)[A-Za-z][0-9$@!|]|[0-9$@!|][A-Za-z]",
    r"|(?:^|[^A-Za-z0-9])[A-Za-z][^A-Za-z0-9]+[A-Za-z][^A-Za-z0-9]+[A-Za-z](?:[^A-Za-z0-9]|$)",
);

/// ASCII text that normalisation could change by more than case and
/// splitting: a digit or `$ @ ! |` next to a letter, or three single letters
/// in a row (`S-Y-S-T-E-M`).
pub(crate) fn disguised(b: &[u8]) -> bool {
    let mut prev = 0u8;
    // Letters and digits since the last separator; single-letter runs in a row.
    let (mut run, mut singles) = (0usize, 0u32);
    for &c in b {
        let class = CLASSES[c as usize];
        // A leet byte after a letter or a letter after a leet byte: the
        // previous byte's LETTER bit moved onto LEET, and its LEET onto LETTER.
        let kind = prev & (LETTER | LEET);
        if ((kind << 1) | (kind >> 1)) & class & (LETTER | LEET) != 0 {
            return true;
        }
        if class & ALNUM != 0 {
            run += 1;
        } else {
            if run == 1 && prev & LETTER != 0 {
                singles += 1;
                if singles >= 3 {
                    return true;
                }
            } else if run > 0 {
                singles = 0;
            }
            run = 0;
        }
        prev = class;
    }
    run == 1 && prev & LETTER != 0 && singles >= 2
}

/// The match ends a word, or only digits follow to the end of it
/// (`password2`), unless the phrase itself ends in a digit.
fn ends_word(text: &[u8], e: usize) -> bool {
    match text.get(e) {
        None | Some(b' ') => true,
        Some(b) if b.is_ascii_digit() && !text[e - 1].is_ascii_digit() => text[e..]
            .iter()
            .take_while(|&&b| b != b' ')
            .all(u8::is_ascii_digit),
        _ => false,
    }
}

/// `{a|b}` alternatives → every variant.
fn expand(raw: &str) -> Result<Vec<String>, PhraseError> {
    let Some(open) = raw.find('{') else {
        if raw.contains('}') {
            return Err(PhraseError::Unbalanced(raw.to_owned()));
        }
        return Ok(vec![raw.to_owned()]);
    };
    let close = raw[open..]
        .find('}')
        .map(|c| open + c)
        .ok_or_else(|| PhraseError::Unbalanced(raw.to_owned()))?;
    let (head, group, tail) = (&raw[..open], &raw[open + 1..close], &raw[close + 1..]);
    if group.contains('{') {
        return Err(PhraseError::Unbalanced(raw.to_owned()));
    }
    let rest = expand(tail)?;
    let mut out = Vec::new();
    for alt in group.split('|') {
        for r in &rest {
            out.push(format!("{head}{alt}{r}"));
            if out.len() > MAX_VARIANTS {
                return Err(PhraseError::TooManyVariants(raw.to_owned()));
            }
        }
    }
    Ok(out)
}

/// One variant → (normalised text, stem, number lead).
fn parse(variant: &str) -> Result<(String, bool, bool), PhraseError> {
    let mut body = variant.trim();
    let number_lead = body == "#" || body.starts_with("# ");
    if number_lead {
        body = body[1..].trim_start();
    }
    if body.contains('#') {
        return Err(PhraseError::Placeholder(variant.to_owned()));
    }
    let stem = body.ends_with('*');
    let body = body.trim_end_matches('*');
    let text = Normalised::plain(body).text;
    if text.is_empty() {
        return Err(PhraseError::Empty(variant.to_owned()));
    }
    Ok((text, stem, number_lead))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(entries: &[(&str, u8)]) -> PhraseSet<u8> {
        PhraseSet::new(entries.iter().map(|(p, v)| (*p, *v))).expect("compiles")
    }

    fn found(s: &PhraseSet<u8>, text: &str) -> Vec<(usize, usize, u8)> {
        let n = Normalised::plain(text);
        let mut out = Vec::new();
        s.find(
            &n,
            |w| w.bytes().all(|b| b.is_ascii_digit()) || w == "six",
            &mut out,
        );
        out.iter().map(|h| (h.start, h.end, *h.value)).collect()
    }

    #[test]
    fn whole_words_stems_numbers_and_alternatives() {
        let s = set(&[
            ("password", 1),
            ("mot de passe", 2),
            ("парол*", 3),
            ("# digit code", 4),
            ("{закрытый|закрытого} ключ", 5),
            ("API-Schlüssel", 6),
        ]);
        assert_eq!(found(&s, "Your Password2 please"), [(1, 2, 1)]);
        assert_eq!(found(&s, "passwords"), []);
        assert_eq!(found(&s, "userpassword"), []);
        assert_eq!(found(&s, "Votre mot de passe"), [(1, 4, 2)]);
        assert_eq!(found(&s, "mot. de passe"), []);
        assert_eq!(found(&s, "Введите паролем"), [(1, 2, 3)]);
        assert_eq!(found(&s, "the six digit code"), [(1, 4, 4)]);
        assert_eq!(found(&s, "the 6-digit code"), [(1, 4, 4)]);
        assert_eq!(found(&s, "the digit code"), []);
        assert_eq!(found(&s, "закрытого ключ"), [(0, 2, 5)]);
        assert_eq!(found(&s, "Ihr api_schluessel"), []);
        assert_eq!(found(&s, "Ihr API-Schlüssel"), [(1, 3, 6)]);
    }

    #[test]
    fn the_raw_text_test_is_conservative() {
        let s = set(&[("api key", 1), ("mot de passe", 2), ("пароль", 3)]);
        for (text, may) in [
            ("Your API key", true),
            ("stripeApiKey", true),
            ("motDePasse", true),
            ("Which room?", false),
            ("p4ss", true),
            ("k-e-y", true),
            ("пароль", true),
            ("a b", false),
        ] {
            assert_eq!(s.may_match(text), may, "{text}");
        }
    }

    /// [`DISGUISED`] finds what [`disguised`] finds, in every text of up to
    /// six bytes over letters, digits, leet and separators.
    #[test]
    fn the_disguise_regex_reads_as_the_scan() {
        let re = regex::bytes::Regex::new(DISGUISED).unwrap();
        let alphabet = b"aZ1$ -";
        let mut text = Vec::new();
        for len in 0..=6u32 {
            for mut n in 0..alphabet.len().pow(len) {
                text.clear();
                for _ in 0..len {
                    text.push(alphabet[n % alphabet.len()]);
                    n /= alphabet.len();
                }
                assert_eq!(
                    re.is_match(&text),
                    disguised(&text),
                    "{:?}",
                    String::from_utf8_lossy(&text)
                );
            }
        }
    }

    /// [`disguised`] as it read each byte before the class table (the oracle).
    fn disguised_bytewise(b: &[u8]) -> bool {
        let (mut prev_letter, mut prev_leet) = (false, false);
        let (mut run, mut singles) = (0usize, 0u32);
        for &c in b {
            let letter = c.is_ascii_alphabetic();
            let leet = c.is_ascii_digit() || matches!(c, b'$' | b'@' | b'!' | b'|');
            if (leet && prev_letter) || (letter && prev_leet) {
                return true;
            }
            if c.is_ascii_alphanumeric() {
                run += 1;
            } else {
                if run == 1 && prev_letter {
                    singles += 1;
                    if singles >= 3 {
                        return true;
                    }
                } else if run > 0 {
                    singles = 0;
                }
                run = 0;
            }
            prev_letter = letter;
            prev_leet = leet;
        }
        run == 1 && prev_letter && singles >= 2
    }

    #[test]
    fn the_class_table_reads_as_the_byte_tests_did() {
        let pieces = [
            "", "a", "A", "ab", "7", "77", "$", "@", "!", "|", " ", "-", ".", "\"", "_", "é",
        ];
        let mut texts: Vec<Vec<u8>> = Vec::new();
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    for d in ["", " x", "x ", "-y-", "9"] {
                        texts.push(format!("{a}{b}{c}{d}").into_bytes());
                        texts.push(format!("{a} {b} {c}{d}").into_bytes());
                    }
                }
            }
        }
        texts.extend(
            (0..=255u8).flat_map(|x| [vec![x], vec![b'a', x], vec![x, b'a'], vec![b'1', x]]),
        );
        for t in &texts {
            assert_eq!(
                disguised(t),
                disguised_bytewise(t),
                "{:?}",
                String::from_utf8_lossy(t)
            );
        }
    }

    #[test]
    fn bad_phrases_are_errors() {
        let err = |p: &str| PhraseSet::new([(p, 0u8)]).err();
        assert!(matches!(err("  "), Some(PhraseError::Empty(_))));
        assert!(matches!(err("{a|b"), Some(PhraseError::Unbalanced(_))));
        assert!(matches!(err("a}"), Some(PhraseError::Unbalanced(_))));
        assert!(matches!(err("a # b"), Some(PhraseError::Placeholder(_))));
        let many = "{a|b|c|d|e|f|g|h} {a|b|c|d|e|f|g|h} {a|b|c|d|e|f|g|h} {a|b|c}";
        assert!(matches!(err(many), Some(PhraseError::TooManyVariants(_))));
        let dup = set(&[("pin", 1), ("PIN", 2)]);
        assert_eq!(dup.duplicates(), ["PIN"]);
        assert_eq!(dup.len(), 1);
    }
}
