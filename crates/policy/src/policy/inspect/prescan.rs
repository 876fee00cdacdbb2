//! One pass over a result's (or an error's) raw JSON that feeds every
//! byte test the response checks make before they decide to parse it: the
//! list members' names (`whole.rs`), the credential words
//! (`arguments/results.rs`), the gateway's reserved `_meta` words, the
//! escapes and the markup the data rules act on (`content.rs`). Each test
//! used to be its own scan of the same bytes; every test reads its answer
//! from [`RawScan`]. The answers are the same as each test's own scan: a
//! case-sensitive word counts only where it is written exactly.
//!
//! With a policy's [`CueSet`] (`content::scan_raw`), the same pass also
//! runs the secret table, the confident cues and the policy's injection
//! rules over the raw JSON ([`Cue`]): a plain result costs one regex pass,
//! an ASCII check, a search for a backslash and the disguise scan.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::whole::list_members;
use crate::policy::detect::{CueSet, DISGUISED};

/// What a message's raw JSON holds, as far as the byte tests ask.
#[derive(Debug, Clone, Copy)]
pub struct RawScan<'a> {
    raw: &'a str,
    non_ascii: bool,
    /// The [`Class`]es found, one bit each.
    found: u8,
    /// The [`Cue`]s found, one bit each, when the scan had a policy's
    /// [`CueSet`] (`content::scan_raw`); `None`: each test makes its own
    /// pass.
    cues: Option<u8>,
}

/// A test of the response checks folded into the scan's one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cue {
    /// Any of the [`Class`] words: the word classes are worth finding.
    Words = 0,
    /// A secret the scanner's table may find (`arguments/results.rs`).
    Secret = 1,
    /// What text that steers the model with certainty needs
    /// (`content.rs`, `[content] injection = "confident"`).
    Confident = 2,
    /// What a policy's injection rules may match in one of the strings.
    Injection = 3,
    /// The injection cue cannot be read off the raw JSON: its strings are
    /// not written as they read, or they look disguised, or a rule is
    /// anchored to the ends of its text.
    InjectionUndecided = 4,
    /// A letter next to a digit or `$ @ ! |`, or a word spelled out letter
    /// by letter: normalising may change more than case (the injection
    /// cue is then undecided).
    Disguised = 5,
}

impl Cue {
    pub(crate) const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The regexes of the [`Cue::Disguised`] group.
pub(crate) fn disguise_cues() -> Vec<String> {
    vec![DISGUISED.to_string()]
}

/// The regexes of the [`Cue::Words`] group: the words, any case.
pub(crate) fn word_cues() -> Vec<String> {
    match WORDS.as_ref() {
        Some(words) => words
            .of
            .iter()
            .map(|(w, ..)| format!("(?i-u){}", regex::escape(w)))
            .collect(),
        // No automaton: every class is reported, so the group must match.
        None => vec![String::new()],
    }
}

/// A class of the words the tests look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A `\u` escape: it can spell any character (so any word).
    UnicodeEscape = 0,
    /// An escaped control character the data rules remove or change.
    ControlEscape = 1,
    /// `<`, `](`, `]:`: the markup an image, a link or an element needs.
    Markup = 2,
    /// A list member's name (`tools`, …), as written.
    ListMember = 3,
    /// A word a credential-named member or assignment is written with.
    Credential = 4,
    /// A key the gateway reads in `_meta`: its namespace, the identity.
    Reserved = 5,
}

/// Words a credential-named member or assignment is written with, in raw
/// JSON of any case.
const CREDENTIAL_WORDS: [&str; 9] = [
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "credential",
    "auth",
    "private",
    "seed",
];

/// The words a key the gateway reads in `_meta` holds as written (its own
/// namespace, `provenance.rs`; the server identity, `server_info.rs`), in
/// any case.
const RESERVED_WORDS: [&str; 2] = ["portcullis", "serverinfo"];

/// Every word with its class and whether its case matters. The automaton
/// matches ASCII letters in any case; a case-sensitive word is confirmed
/// against the bytes.
struct Words {
    /// Any word at all, in any case: the quick test most results end at
    /// (the regex engine's search costs about half the automaton's).
    any: regex::bytes::Regex,
    automaton: AhoCorasick,
    /// Per pattern: the word, its class, whether its case matters.
    of: Vec<(&'static str, Class, bool)>,
}

/// `None` (the automaton could not be built): every test answers `true`.
static WORDS: LazyLock<Option<Words>> = LazyLock::new(|| {
    let exact = |class| move |w: &'static str| (w, class, true);
    let any_case = |class| move |w: &'static str| (w, class, false);
    let of: Vec<(&'static str, Class, bool)> = std::iter::once(("\\u", Class::UnicodeEscape, true))
        .chain(["\\r", "\\b", "\\f"].map(exact(Class::ControlEscape)))
        .chain(["<", "](", "]:"].map(exact(Class::Markup)))
        .chain(list_members().map(exact(Class::ListMember)))
        .chain(CREDENTIAL_WORDS.map(any_case(Class::Credential)))
        .chain(RESERVED_WORDS.map(any_case(Class::Reserved)))
        .collect();
    let automaton = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .kind(Some(AhoCorasickKind::DFA))
        .build(of.iter().map(|(w, ..)| w))
        .ok()?;
    let alternatives: Vec<String> = of.iter().map(|(w, ..)| regex::escape(w)).collect();
    let any = regex::bytes::Regex::new(&format!("(?i-u){}", alternatives.join("|"))).ok()?;
    Some(Words { any, automaton, of })
});

/// Every class at once.
const ALL: u8 = (1 << 6) - 1;

impl<'a> RawScan<'a> {
    /// Scan `raw` once.
    pub fn of(raw: &'a str) -> Self {
        let found = match WORDS.as_ref() {
            Some(words) => words.classes(raw),
            None => ALL,
        };
        RawScan {
            raw,
            non_ascii: !raw.is_ascii(),
            found,
            cues: None,
        }
    }

    /// Scan `raw` once with a policy's cue set: one automaton pass answers
    /// every test of a plain result.
    pub(crate) fn with_cues(raw: &'a str, set: &CueSet) -> Self {
        let non_ascii = !raw.is_ascii();
        let mut cues = set.found(raw.as_bytes());
        let found = match (cues & Cue::Words.bit() != 0, WORDS.as_ref()) {
            (false, _) => 0,
            (true, Some(words)) => words.classes_found(raw),
            (true, None) => ALL,
        };
        let undecided = Cue::Injection.bit() | Cue::InjectionUndecided.bit();
        if cues & undecided == 0
            && (non_ascii
                || cues & Cue::Disguised.bit() != 0
                || memchr::memchr(b'\\', raw.as_bytes()).is_some())
        {
            cues |= Cue::InjectionUndecided.bit();
        }
        RawScan {
            raw,
            non_ascii,
            found,
            cues: Some(cues),
        }
    }

    /// What the scan's one pass says of `cue`: `None` when it had no cue
    /// set, or cannot say (the injection cue of text not written as it
    /// reads, or where a regex matched: the strings are read to be sure).
    pub fn cue(&self, cue: Cue) -> Option<bool> {
        let cues = self.cues?;
        match cue {
            Cue::Injection => {
                let unsure = Cue::Injection.bit() | Cue::InjectionUndecided.bit();
                (cues & unsure == 0).then_some(false)
            }
            _ => Some(cues & cue.bit() != 0),
        }
    }

    /// The raw JSON scanned.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// Anything but plain ASCII (the rules read such text folded).
    pub fn non_ascii(&self) -> bool {
        self.non_ascii
    }

    fn has(&self, class: Class) -> bool {
        self.found & (1 << class as u8) != 0
    }

    /// A `\u` escape.
    pub fn unicode_escape(&self) -> bool {
        self.has(Class::UnicodeEscape)
    }

    /// A `\u` escape (it can spell any character) or one of the escapes
    /// of a control character the data rules remove or change (`\r`, `\b`,
    /// `\f`).
    pub fn escaped_control(&self) -> bool {
        self.unicode_escape() || self.has(Class::ControlEscape)
    }

    /// `<`, `](`, `]:` (a `\/` escape is only a slash).
    pub fn markup(&self) -> bool {
        self.has(Class::Markup)
    }

    /// A list member's name (`tools`, `prompts`, `resources`,
    /// `resourceTemplates`), as written or through an escape.
    pub fn may_name_list_member(&self) -> bool {
        self.unicode_escape() || self.has(Class::ListMember)
    }

    /// A credential word in any case (`pass`, `token`, `key`, …).
    pub fn credential_word(&self) -> bool {
        self.has(Class::Credential)
    }

    /// `portcullis` or `serverinfo`, in any case.
    pub fn reserved_word(&self) -> bool {
        self.has(Class::Reserved)
    }
}

impl Words {
    /// The classes of every word in `raw`: none when the quick search
    /// finds no word (most results); otherwise one overlapping pass of the
    /// automaton (a word inside another is found too).
    fn classes(&self, raw: &str) -> u8 {
        if !self.any.is_match(raw.as_bytes()) {
            return 0;
        }
        self.classes_found(raw)
    }

    /// The classes of every word in `raw`, known to hold one.
    fn classes_found(&self, raw: &str) -> u8 {
        let mut found = 0u8;
        for m in self.automaton.find_overlapping_iter(raw) {
            let Some(&(word, class, exact)) = self.of.get(m.pattern().as_usize()) else {
                continue;
            };
            let bit = 1 << class as u8;
            if found & bit != 0 {
                continue;
            }
            if !exact || raw.get(m.start()..m.end()) == Some(word) {
                found |= bit;
                if found == ALL {
                    break;
                }
            }
        }
        found
    }
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&WORDS);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each test as its own scan did it before the one pass (the oracle).
    fn separate(raw: &str) -> [bool; 6] {
        let b = raw.as_bytes();
        let after = |c: u8, next: &[u8]| {
            memchr::memchr_iter(c, b).any(|i| b.get(i + 1).is_some_and(|n| next.contains(n)))
        };
        let lower = raw.to_ascii_lowercase();
        [
            raw.contains("\\u"),
            after(b'\\', b"rbf"),
            raw.contains('<') || after(b']', b"(:"),
            list_members().any(|m| raw.contains(m)),
            CREDENTIAL_WORDS.iter().any(|w| lower.contains(w)),
            RESERVED_WORDS.iter().any(|w| lower.contains(w)),
        ]
    }

    fn one_pass(raw: &str) -> [bool; 6] {
        let s = RawScan::of(raw);
        [
            s.unicode_escape(),
            s.has(Class::ControlEscape),
            s.markup(),
            s.has(Class::ListMember),
            s.credential_word(),
            s.reserved_word(),
        ]
    }

    #[test]
    fn the_one_pass_answers_as_each_scan_did() {
        let pieces = [
            "",
            "plain text, 24 seats",
            "Tools",
            "tools",
            "resourceTemplates",
            "ResourceTemplates",
            "resource",
            "prompts",
            "PROMPTS",
            "TOKEN",
            "apiKey",
            "passes",
            "s_e_e_d",
            "\\\\u0041",
            "\\U0041",
            "\\u0041",
            "line\\r\\n",
            "\\B\\F\\R",
            "\\n\\t\\/\\\"",
            "a <b>",
            "[x](y)",
            "[x]: y",
            "[x] (y)",
            "Portcullis",
            "io.SERVERINFO",
            "serverInf",
            "portcullistokens",
        ];
        for a in pieces {
            for b in pieces {
                let raw = format!(r#"{{"k":"{a}","{b}":[1,"{a}{b}"]}}"#);
                assert_eq!(one_pass(&raw), separate(&raw), "{raw}");
            }
        }
    }

    /// The scan reads bytes as written: a word spelled by an escape or
    /// hidden among characters that are not ASCII is not found as a word,
    /// so what makes such text parsed is the escape and the non-ASCII flag
    /// every test checks first.
    #[test]
    fn a_word_behind_an_escape_or_a_disguise_is_flagged_by_its_class() {
        for raw in [
            r#"{"text":"\u0070ortcullis \u0074ools"}"#,
            r#"{"text":"\u003cimg src=x\u003e"}"#,
        ] {
            let s = RawScan::of(raw);
            assert!(s.unicode_escape() && s.may_name_list_member(), "{raw}");
            assert!(!s.reserved_word() && !s.markup(), "{raw}");
        }
        for raw in [
            "{\"text\":\"ｔｏｋｅｎ ｐｏｒｔｃｕｌｌｉｓ\"}",
            "{\"text\":\"to\u{200b}ken port\u{ad}cullis\"}",
            "{\"text\":\"ѕесrеt\"}",
        ] {
            let s = RawScan::of(raw);
            assert!(s.non_ascii(), "{raw}");
            assert!(!s.credential_word() && !s.reserved_word(), "{raw}");
        }
    }
}
