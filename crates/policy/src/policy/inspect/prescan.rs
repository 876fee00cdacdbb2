//! One pass over a result's (or an error's) raw JSON that feeds every
//! byte test the response checks make before they decide to parse it: the
//! list members' names (`whole.rs`), the credential words
//! (`arguments/results.rs`), the gateway's reserved `_meta` words, the
//! escapes and the markup the data rules act on (`content.rs`). Each test
//! used to be its own scan of the same bytes; a plain result now costs one
//! automaton pass and one ASCII check, and every test reads its answer
//! from [`RawScan`]. The answers are the same as each test's own scan: a
//! case-sensitive word counts only where it is written exactly.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::whole::list_members;

/// What a message's raw JSON holds, as far as the byte tests ask.
#[derive(Debug, Clone, Copy)]
pub struct RawScan<'a> {
    raw: &'a str,
    non_ascii: bool,
    /// The [`Class`]es found, one bit each.
    found: u8,
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
