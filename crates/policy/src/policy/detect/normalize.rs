//! Characters → folded lowercase words with their clause and phrase.
//!
//! [`Normalised::plain`] does the character work (NFKC, invisible characters,
//! word splitting, case, accent and digit folding); [`Normalised::new`] also
//! asks a [`Lexicon`] for the readings of words it does not know (see the
//! module documentation of [`super`]).

use unicode_general_category::{get_general_category, GeneralCategory as Gc};
use unicode_normalization::UnicodeNormalization;

use super::lexicon::{Lexicon, Splitting};
use crate::model::Invisible;

/// What a word is made of; decides which readings the lexicon tries.
pub(super) mod shape {
    /// A run of Han, kana or Hangul characters (no spaces inside).
    pub(crate) const CJK: u8 = 1;
    /// Has a non-ASCII letter (a look-alike may hide an ASCII word).
    pub(crate) const NON_ASCII: u8 = 2;
    /// Mixes letters with digits or `$ @ ! |` (`p4ssw0rd`, `pa$$word`).
    pub(crate) const LEET: u8 = 4;
}

/// One word: a span of [`Normalised::text`] plus where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// Sentence-like unit; context windows stay inside it.
    pub(crate) clause: u32,
    /// Comma-delimited part of a clause; negation stays inside it.
    pub(crate) phrase: u32,
    /// Written in capitals in the source (`PIN`), a hint for acronyms.
    pub(crate) caps: bool,
    pub(super) shape: u8,
}

/// Lowercase words joined by single spaces, with their spans.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Normalised {
    pub(crate) text: String,
    pub(crate) words: Vec<Word>,
}

impl Normalised {
    /// Character-level normalisation only (no lexicon): used for word lists
    /// and wherever the same spelling rules must apply to both sides.
    pub(crate) fn plain(input: &str) -> Self {
        if input.is_ascii() {
            split(input)
        } else {
            split(&input.nfkc().collect::<String>())
        }
    }

    /// Full normalisation: characters, then the lexicon's readings of words
    /// it does not know.
    pub(crate) fn new(input: &str, lexicon: &Lexicon, splitting: Splitting) -> Self {
        lexicon.refine(Self::plain(input), splitting)
    }

    pub(crate) fn len(&self) -> usize {
        self.words.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    pub(crate) fn word(&self, i: usize) -> &str {
        self.words
            .get(i)
            .and_then(|w| self.text.get(w.start..w.end))
            .unwrap_or("")
    }

    pub(crate) fn same_clause(&self, a: usize, b: usize) -> bool {
        match (self.words.get(a), self.words.get(b)) {
            (Some(x), Some(y)) => x.clause == y.clause,
            _ => false,
        }
    }

    pub(crate) fn same_phrase(&self, a: usize, b: usize) -> bool {
        match (self.words.get(a), self.words.get(b)) {
            (Some(x), Some(y)) => x.phrase == y.phrase,
            _ => false,
        }
    }

    /// Word indices of the clause around `i`, if it has at most `max` words.
    /// Looks at no more than `max` words on either side.
    pub(crate) fn short_clause(&self, i: usize, max: usize) -> Option<std::ops::Range<usize>> {
        let mut start = i;
        while start > 0 && self.same_clause(start - 1, i) {
            start -= 1;
            if i - start >= max {
                return None;
            }
        }
        let mut end = i + 1;
        while self.same_clause(end, i) {
            end += 1;
            if end - start > max {
                return None;
            }
        }
        Some(start..end)
    }

    /// The word that starts exactly at byte `offset` of [`Self::text`].
    pub(crate) fn word_starting_at(&self, offset: usize) -> Option<usize> {
        self.words.binary_search_by_key(&offset, |w| w.start).ok()
    }

    /// The word that contains byte `offset` of [`Self::text`].
    pub(crate) fn word_containing(&self, offset: usize) -> Option<usize> {
        let i = self
            .words
            .partition_point(|w| w.start <= offset)
            .checked_sub(1)?;
        (offset < self.words[i].end).then_some(i)
    }

    /// Appends a word (the text must not contain a space).
    pub(super) fn push_word(&mut self, text: &str, like: &Word, shape: u8) {
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        let start = self.text.len();
        self.text.push_str(text);
        self.words.push(Word {
            start,
            end: self.text.len(),
            shape,
            ..*like
        });
    }
}

// ---------------------------------------------------------------------------
// Characters
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Upper,
    Lower,
    Digit,
    /// Han, kana, Hangul: words without spaces.
    Cjk,
    /// `$ @ ! |`: a letter inside a word (`pa$$word`), punctuation elsewhere.
    Leet,
    /// Ends the current word.
    Sep,
    /// Invisible (format characters, marks, fillers): dropped, and the word
    /// around it stays one word (`pass\u{200B}word`).
    Skip,
}

fn classify(c: char) -> Class {
    if c.is_ascii() {
        return match c {
            '0'..='9' => Class::Digit,
            'A'..='Z' => Class::Upper,
            'a'..='z' => Class::Lower,
            '$' | '@' | '!' | '|' => Class::Leet,
            _ => Class::Sep,
        };
    }
    match Invisible::of(c) {
        // A line separator separates; everything else invisible (Hangul
        // fillers, letters that show nothing, included) is skipped, before
        // the Hangul ranges below could read a filler as a letter.
        Some(Invisible::LineBreak) => return Class::Sep,
        Some(_) => return Class::Skip,
        None => {}
    }
    if is_cjk(c) {
        return Class::Cjk;
    }
    match get_general_category(c) {
        Gc::UppercaseLetter | Gc::TitlecaseLetter => Class::Upper,
        Gc::LowercaseLetter | Gc::ModifierLetter | Gc::OtherLetter | Gc::SpacingMark => {
            Class::Lower
        }
        Gc::DecimalNumber => Class::Digit,
        // Invisible format characters are the table's, above.
        Gc::NonspacingMark | Gc::EnclosingMark => Class::Skip,
        _ => Class::Sep,
    }
}

/// A letter of a script written without spaces between words (Han, kana,
/// Hangul).
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3005 | 0x3040..=0x309F | 0x30A0..=0x30FA | 0x30FC..=0x30FF | 0x31F0..=0x31FF
        | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F
        | 0xAC00..=0xD7AF | 0x1100..=0x115E | 0x1161..=0x11FF | 0x3131..=0x318F)
}

/// How a value a person typed is read before it is scanned for card numbers
/// and tokens: NFKC (fullwidth and other compatibility forms become ASCII),
/// every decimal digit as its ASCII digit (Arabic-Indic, Devanagari, …),
/// dashes as `-`, other spaces as ` `, and invisible characters (the
/// gateway's one table, [`Invisible`]: zero-width space and joiners, soft
/// hyphen, bidi controls, tags, Hangul fillers, …) removed.
/// ASCII text is returned as it is.
pub fn fold_value(value: &str) -> std::borrow::Cow<'_, str> {
    if value.is_ascii() {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len());
    for c in value.nfkc() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        if Invisible::of(c).is_some() {
            continue;
        }
        match get_general_category(c) {
            Gc::DecimalNumber => out.push(ascii_digit(c)),
            Gc::DashPunctuation => out.push('-'),
            Gc::SpaceSeparator => out.push(' '),
            _ => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The ASCII digit of a decimal digit of any script. Unicode encodes every
/// set of decimal digits as a contiguous run starting at zero, so the value
/// is the distance from the start of the run, modulo ten.
fn ascii_digit(c: char) -> char {
    if c.is_ascii_digit() {
        return c;
    }
    let code = c as u32;
    let mut start = code;
    while start > 0 && code - start < 60 {
        match char::from_u32(start - 1) {
            Some(p) if get_general_category(p) == Gc::DecimalNumber => start -= 1,
            _ => break,
        }
    }
    char::from_digit((code - start) % 10, 10).unwrap_or('0')
}

/// Appends `c` case-folded, without accents on Latin, Greek and Cyrillic
/// letters (`É` → `e`, `ł` → `l`, `ß` → `ss`, `ё` → `е`).
fn push_folded(out: &mut String, c: char) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
        return;
    }
    for lower in c.to_lowercase() {
        match lower {
            'ß' => out.push_str("ss"),
            'ς' => out.push('σ'),
            'ł' => out.push('l'),
            'ø' => out.push('o'),
            'đ' | 'ð' => out.push('d'),
            'ħ' => out.push('h'),
            'ı' => out.push('i'),
            'æ' => out.push_str("ae"),
            'œ' => out.push_str("oe"),
            'þ' => out.push_str("th"),
            l if is_accentable(l) => {
                unicode_normalization::char::decompose_canonical(l, |d| {
                    if !unicode_normalization::char::is_combining_mark(d) {
                        out.push(d);
                    }
                });
            }
            l if unicode_normalization::char::is_combining_mark(l) => {}
            l => out.push(l),
        }
    }
}

fn is_accentable(c: char) -> bool {
    matches!(c as u32, 0x00C0..=0x024F | 0x1E00..=0x1EFF | 0x0370..=0x03FF | 0x0400..=0x04FF)
}

// ---------------------------------------------------------------------------
// Splitting
// ---------------------------------------------------------------------------

/// The word being built.
#[derive(Debug, Clone, Copy)]
struct Open {
    start: usize,
    letters: usize,
    upper: usize,
    /// Digits or `$ @ ! |` seen.
    marks: bool,
    shape: u8,
}

struct Splitter {
    out: Normalised,
    open: Option<Open>,
    clause: u32,
    phrase: u32,
    /// The first word of the current run without separators.
    token_first: usize,
    /// Word ranges to join back into one word (see [`Splitter::end_token`]).
    merges: Vec<std::ops::Range<usize>>,
    /// Line breaks since the last word: one wraps a sentence, two (a blank
    /// line) end it.
    line_breaks: u8,
}

impl Splitter {
    fn push(&mut self, c: char, class: Class) {
        self.line_breaks = 0;
        let mut open = match self.open {
            Some(open) => open,
            None => {
                if !self.out.text.is_empty() {
                    self.out.text.push(' ');
                }
                Open {
                    start: self.out.text.len(),
                    letters: 0,
                    upper: 0,
                    marks: false,
                    shape: 0,
                }
            }
        };
        match class {
            Class::Upper | Class::Lower => {
                open.letters += 1;
                open.upper += usize::from(class == Class::Upper);
                if !c.is_ascii() {
                    open.shape |= shape::NON_ASCII;
                }
                push_folded(&mut self.out.text, c);
            }
            Class::Cjk => {
                open.shape |= shape::CJK;
                push_folded(&mut self.out.text, c);
            }
            Class::Digit => {
                open.marks = true;
                self.out.text.push(ascii_digit(c));
            }
            _ => {
                open.marks = true;
                self.out.text.push(c);
            }
        }
        self.open = Some(open);
    }

    fn close(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        if self.out.text.len() == open.start {
            self.out.text.truncate(open.start.saturating_sub(1));
            return;
        }
        let mut shape = open.shape;
        if open.marks && open.letters > 0 {
            shape |= shape::LEET;
        }
        self.out.words.push(Word {
            start: open.start,
            end: self.out.text.len(),
            clause: self.clause,
            phrase: self.phrase,
            // One capital letter is just sentence case, not an acronym.
            caps: open.letters >= 2 && open.upper == open.letters,
            shape,
        });
    }

    /// At the end of a run without separators: a run that camelCase split
    /// into mostly one- and two-letter pieces was written in alternating
    /// case (`pAsSw0Rd`), not camelCase; it is one word.
    fn end_token(&mut self) {
        self.close();
        let range = self.token_first..self.out.words.len();
        self.token_first = range.end;
        let pieces = &self.out.words[range.clone()];
        let short = pieces.iter().filter(|w| w.end - w.start <= 2).count();
        if pieces.len() >= 3 && short * 3 >= pieces.len() * 2 {
            self.merges.push(range);
        }
    }

    fn is_cjk_open(&self) -> bool {
        self.open.is_some_and(|o| o.shape & shape::CJK != 0)
    }

    /// Sentence punctuation starts a new clause, a comma a new phrase. A dot
    /// inside a token (`github.com`, `user.password`) is a plain separator.
    /// A line break is where text wraps ("Ignore previous⏎instructions"), so
    /// it starts a phrase; a blank line or a paragraph separator a clause.
    fn separator(&mut self, c: char, next: Option<char>) {
        self.end_token();
        let sentence_dot = c == '.' && next.is_none_or(char::is_whitespace);
        let line_break = c == '\n' || c == '\u{2028}' || (c == '\r' && next != Some('\n'));
        if line_break {
            self.line_breaks = self.line_breaks.saturating_add(1);
        }
        let blank_line = line_break && self.line_breaks >= 2;
        if sentence_dot
            || blank_line
            || matches!(c, ';' | '!' | '?' | '。' | '！' | '？' | '\u{2029}')
        {
            self.clause += 1;
            self.phrase += 1;
        } else if line_break || matches!(c, ',' | '、' | '，') {
            self.phrase += 1;
        }
    }
}

fn is_letter(class: Class) -> bool {
    matches!(class, Class::Upper | Class::Lower)
}

/// Is the `$ @ ! |` `c` (followed by `rest`) a letter of the word around it?
fn leet_joins(c: char, rest: &str, open: Option<Open>) -> bool {
    let mut ahead = rest.chars().map(classify);
    let (next, after) = (ahead.next(), ahead.next());
    let has_letter = open.is_some_and(|o| o.letters > 0);
    let next_letter =
        next.is_some_and(is_letter) || (next == Some(Class::Leet) && after.is_some_and(is_letter));
    match c {
        '$' => next_letter || has_letter,
        '@' => next_letter,
        _ => has_letter && (next.is_some_and(is_letter) || next == Some(Class::Digit)),
    }
}

fn split(input: &str) -> Normalised {
    let mut s = Splitter {
        out: Normalised {
            text: String::with_capacity(input.len() + 4),
            words: Vec::with_capacity(input.len() / 5 + 2),
        },
        open: None,
        clause: 0,
        phrase: 0,
        token_first: 0,
        merges: Vec::new(),
        line_breaks: 0,
    };
    // The class of the last letter or digit, for camelCase.
    let mut prev = Class::Sep;
    for (i, c) in input.char_indices() {
        let rest = &input[i + c.len_utf8()..];
        let next = rest.chars().next();
        match classify(c) {
            Class::Skip => {}
            Class::Sep => {
                s.separator(c, next);
                prev = Class::Sep;
            }
            Class::Leet if leet_joins(c, rest, s.open) && !s.is_cjk_open() => {
                s.push(c, Class::Leet);
            }
            Class::Leet => {
                s.separator(c, next);
                prev = Class::Sep;
            }
            Class::Cjk => {
                if s.open.is_some() && !s.is_cjk_open() {
                    s.close();
                }
                s.push(c, Class::Cjk);
                prev = Class::Cjk;
            }
            class => {
                let has_letter = s.open.is_some_and(|o| o.letters > 0);
                if s.is_cjk_open()
                    || (s.open.is_some() && splits_before(prev, class, rest, has_letter))
                {
                    s.close();
                }
                s.push(c, class);
                prev = class;
            }
        }
    }
    s.end_token();
    let mut merges = s.merges;
    merges.extend(spelled_out(&s.out));
    if merges.is_empty() {
        return s.out;
    }
    merges.sort_by_key(|r| r.start);
    join_words(&s.out, &merges)
}

/// Runs of three or more single letters in one phrase (`S-Y-S-T-E-M`,
/// `p a s s w o r d`): a word spelled out.
fn spelled_out(n: &Normalised) -> Vec<std::ops::Range<usize>> {
    let single = |i: usize| {
        let w = &n.words[i];
        w.end - w.start == 1 && n.text.as_bytes()[w.start].is_ascii_alphabetic()
    };
    let mut runs = Vec::new();
    let mut i = 0;
    while i < n.len() {
        let mut j = i;
        while j < n.len() && single(j) && n.same_phrase(i, j) {
            j += 1;
        }
        if j - i >= 3 {
            runs.push(i..j);
        }
        i = j.max(i + 1);
    }
    runs
}

/// `n` with each range of words (sorted, not overlapping) joined into one.
fn join_words(n: &Normalised, ranges: &[std::ops::Range<usize>]) -> Normalised {
    let mut out = Normalised {
        text: String::with_capacity(n.text.len()),
        words: Vec::with_capacity(n.len()),
    };
    let mut i = 0;
    let mut ranges = ranges.iter().peekable();
    while i < n.len() {
        let w = n.words[i];
        match ranges.next_if(|r| r.start == i) {
            Some(r) if r.end > i + 1 => {
                let joined: String = r.clone().map(|j| n.word(j)).collect();
                let shape = r.clone().fold(0, |s, j| s | n.words[j].shape);
                out.push_word(&joined, &Word { caps: false, ..w }, shape);
                i = r.end;
            }
            _ => {
                out.push_word(n.word(i), &w, w.shape);
                i += 1;
            }
        }
    }
    out
}

/// Where camelCase and acronym runs split (`APIKey` → `API|Key`,
/// `userPIN` → `user|PIN`, `cvv2Code` → `cvv2|Code`), keeping plural
/// acronyms whole (`APIs`, `PINs`) and leading digits attached (`2FA`).
fn splits_before(prev: Class, cur: Class, rest: &str, has_letter: bool) -> bool {
    let mut ahead = rest.chars();
    match (prev, cur) {
        (Class::Lower, Class::Upper) => true,
        (Class::Upper, Class::Upper) => match ahead.next() {
            Some('s') => ahead.next().is_some_and(|c| classify(c) == Class::Lower),
            Some(c) => classify(c) == Class::Lower,
            None => false,
        },
        // `cvv2Code`, but not inside a capitalised word (`P4SSW0RD`).
        (Class::Digit, Class::Upper) => {
            has_letter && ahead.next().is_some_and(|c| classify(c) == Class::Lower)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(s: &str) -> Vec<String> {
        let n = Normalised::plain(s);
        (0..n.len()).map(|i| n.word(i).to_owned()).collect()
    }

    #[test]
    fn splits_names_into_words() {
        let cases: &[(&str, &[&str])] = &[
            ("APIKey", &["api", "key"]),
            ("userPIN", &["user", "pin"]),
            ("cardCVV2", &["card", "cvv2"]),
            ("x-api-key", &["x", "api", "key"]),
            ("api.key name", &["api", "key", "name"]),
            ("2FACode", &["2fa", "code"]),
            ("cvv2Code", &["cvv2", "code"]),
            ("listAPIs", &["list", "apis"]),
            ("userPINs", &["user", "pins"]),
            ("ssnLast4", &["ssn", "last4"]),
            ("HTTPServer", &["http", "server"]),
            ("Größe_Schlüssel", &["grosse", "schlussel"]),
            ("  __  ", &[]),
            ("API密钥", &["api", "密钥"]),
            ("パスワード・入力", &["パスワード", "入力"]),
        ];
        for (input, want) in cases {
            assert_eq!(words(input), *want, "{input}");
        }
    }

    #[test]
    fn folds_width_case_accents_and_digits() {
        let cases: &[(&str, &[&str])] = &[
            ("\u{FF30}\u{FF29}\u{FF2E}", &["pin"]),
            ("Contraseña", &["contrasena"]),
            ("HASŁO", &["haslo"]),
            ("Straße", &["strasse"]),
            ("Ёлка", &["елка"]),
            ("\u{0661}\u{0662}\u{0663}", &["123"]),
            ("\u{0967}\u{0968}", &["12"]),
            ("caf\u{E9}_pin", &["cafe", "pin"]),
            ("cafe\u{301}", &["cafe"]),
            ("\u{416}\u{414}", &["\u{436}\u{434}"]),
        ];
        for (input, want) in cases {
            assert_eq!(words(input), *want, "{input:?}");
        }
    }

    /// Every character of the one table, at both ends and the middle of
    /// each of its ranges, inside a word and inside a number.
    #[test]
    fn every_invisible_character_is_skipped_in_words_and_values() {
        for (lo, hi, class) in Invisible::ranges() {
            let mid = char::from_u32((lo as u32 + hi as u32) / 2).unwrap_or(lo);
            for c in [lo, mid, hi] {
                let want: &[&str] = match class {
                    Invisible::LineBreak => &["pa", "ss"],
                    _ => &["pass"],
                };
                assert_eq!(words(&format!("pa{c}ss")), want, "{:?}", c.escape_unicode());
                assert_eq!(
                    fold_value(&format!("41{c}11")),
                    "4111",
                    "{:?}",
                    c.escape_unicode()
                );
            }
        }
        for filler in ['\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}'] {
            assert_eq!(
                classify(filler),
                Class::Skip,
                "{:?}",
                filler.escape_unicode()
            );
        }
    }

    #[test]
    fn invisible_characters_do_not_split_a_word() {
        let cases: &[(&str, &[&str])] = &[
            ("pass\u{200B}word", &["password"]),
            ("pass\u{00AD}word", &["password"]),
            ("pa\u{200D}ss\u{2060}word", &["password"]),
            ("\u{200B}api_key\u{FEFF}", &["api", "key"]),
            ("\u{200B}", &[]),
            ("\u{3164} pin", &["pin"]),
            ("x \u{0301}", &["x"]),
            ("p\u{E0041}in", &["pin"]),
        ];
        for (input, want) in cases {
            assert_eq!(words(input), *want, "{input:?}");
        }
    }

    #[test]
    fn alternating_case_and_spelled_out_words_are_one_word() {
        let cases: &[(&str, &[&str])] = &[
            ("pAsSw0Rd", &["passw0rd"]),
            ("PaSsWoRd", &["password"]),
            ("S-Y-S-T-E-M prompt", &["system", "prompt"]),
            ("p a s s w o r d", &["password"]),
            ("xApiKey", &["x", "api", "key"]),
            ("A, B or C", &["a", "b", "or", "c"]),
            ("iPhone", &["i", "phone"]),
        ];
        for (input, want) in cases {
            assert_eq!(words(input), *want, "{input:?}");
        }
    }

    #[test]
    fn leet_symbols_stay_inside_words_only() {
        let cases: &[(&str, &[&str])] = &[
            ("pa$$word", &["pa$$word"]),
            ("@pi_k3y", &["@pi", "k3y"]),
            ("p@ss", &["p@ss"]),
            ("Hi! Enter it", &["hi", "enter", "it"]),
            ("a | b", &["a", "b"]),
            ("user@example.com", &["user@example", "com"]),
            ("Cost: $5", &["cost", "5"]),
        ];
        for (input, want) in cases {
            assert_eq!(words(input), *want, "{input:?}");
        }
        let n = Normalised::plain("p4ssw0rd pin 2024");
        let leet: Vec<bool> = n.words.iter().map(|w| w.shape & shape::LEET != 0).collect();
        assert_eq!(leet, [true, false, false]);
    }

    #[test]
    fn clauses_and_phrases() {
        let n = Normalised::plain("Use github.com. Then, go! Ok");
        let clauses: Vec<u32> = n.words.iter().map(|w| w.clause).collect();
        assert_eq!(clauses, [0, 0, 0, 1, 1, 2]);
        let phrases: Vec<u32> = n.words.iter().map(|w| w.phrase).collect();
        assert_eq!(phrases, [0, 0, 0, 1, 2, 3]);
        assert_eq!(Normalised::plain("X-Api-KEY").text, "x api key");
        assert_eq!(Normalised::plain("myAPIKey.v2").text, "my api key v2");
        let caps: Vec<bool> = Normalised::plain("Your PIN")
            .words
            .iter()
            .map(|w| w.caps)
            .collect();
        assert_eq!(caps, [false, true]);
    }

    #[test]
    fn values_are_folded_for_scanning() {
        let cases = [
            ("\u{FF14}\u{FF11}\u{FF11}\u{FF11}", "4111"),
            ("\u{0664}\u{0661}\u{0661}\u{0661}", "4111"),
            ("\u{06F4}\u{06F1}", "41"),
            ("41\u{200B}11\u{2060}11", "411111"),
            ("4111\u{2013}1111\u{00A0}1111", "4111-1111 1111"),
            ("\u{FF47}\u{FF48}\u{FF50}\u{FF3F}", "ghp_"),
        ];
        for (input, want) in cases {
            assert_eq!(fold_value(input), want, "{input:?}");
        }
        assert!(matches!(fold_value("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn word_lookup_by_offset() {
        let n = Normalised::plain("ab cd ef");
        assert_eq!(n.word_starting_at(3), Some(1));
        assert_eq!(n.word_starting_at(4), None);
        assert_eq!(n.word_containing(4), Some(1));
        assert_eq!(n.word_containing(2), None);
        assert_eq!(n.word_containing(7), Some(2));
    }

    proptest! {
        #[test]
        fn words_are_lowercase_nonempty_and_spaced(input in "\\PC{0,80}") {
            let n = Normalised::plain(&input);
            let joined: Vec<&str> = (0..n.len()).map(|i| n.word(i)).collect();
            prop_assert_eq!(joined.join(" "), n.text.clone());
            for i in 0..n.len() {
                let w = n.word(i);
                prop_assert!(!w.is_empty());
                prop_assert!(!w.contains(' '));
                prop_assert_eq!(w.to_lowercase(), w);
            }
        }

        #[test]
        fn separators_and_case_do_not_change_words(
            parts in prop::collection::vec("[a-z]{2,8}", 1..5),
            sep in prop::sample::select(vec!["_", "-", " ", ".", "__", " - "]),
        ) {
            let want = parts.join(" ");
            prop_assert_eq!(Normalised::plain(&parts.join(sep)).text, want.clone());
            prop_assert_eq!(Normalised::plain(&parts.join(sep).to_uppercase()).text, want);
        }
    }
}

/// The words of a name, lowercase: split at every character that is not
/// a letter or digit and where lower case turns upper (`getAwsProfile`,
/// `ssh_hosts`, `calendar.write`, `Mail.Send`, `~/.aws/credentials`).
pub(crate) fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        let boundary = !c.is_alphanumeric() || (c.is_uppercase() && previous_lower);
        if boundary && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        if c.is_alphanumeric() {
            current.extend(c.to_lowercase());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

#[cfg(test)]
mod name_word_tests {
    use super::name_words;

    #[test]
    fn a_name_splits_at_separators_and_case_changes() {
        for (name, want) in [
            ("getAwsProfile", vec!["get", "aws", "profile"]),
            ("ssh_hosts", vec!["ssh", "hosts"]),
            ("~/.aws/credentials", vec!["aws", "credentials"]),
            ("Mail.Send", vec!["mail", "send"]),
            ("db-host name", vec!["db", "host", "name"]),
            ("IPAddress", vec!["ipaddress"]),
            ("v2Api", vec!["v2", "api"]),
            ("", vec![]),
        ] {
            assert_eq!(name_words(name), want, "{name}");
        }
    }
}
