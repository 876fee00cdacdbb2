//! Several byte tests over the same text as one automaton pass: each test
//! is a group of regexes, the pass says which groups matched. The tests a
//! response's raw JSON gets before the gateway decides to parse it were
//! five passes over the same bytes (`inspect::prescan` builds the groups);
//! a plain result now costs this one.

use regex::bytes::{RegexSet, RegexSetBuilder};

/// Groups of regexes, one bit each, tested in one pass.
#[derive(Debug)]
pub(crate) struct CueSet {
    set: RegexSet,
    /// The group bit of each regex of `set`.
    bit_of: Vec<u8>,
    /// Bits reported on every text (a test that cannot be decided here).
    always: u8,
}

/// Big enough for the built-in tables with room for a policy's own rules;
/// a set that does not fit is not built and every test runs on its own.
const SIZE_LIMIT: usize = 64 << 20;

impl CueSet {
    /// One set of `groups` (bit, regexes); `always` bits are reported on
    /// every text. `None` when a regex does not compile in the set.
    pub(crate) fn build(
        groups: impl IntoIterator<Item = (u8, Vec<String>)>,
        always: u8,
    ) -> Option<CueSet> {
        let mut patterns = Vec::new();
        let mut bit_of = Vec::new();
        for (bit, regexes) in groups {
            for re in regexes {
                patterns.push(re);
                bit_of.push(bit);
            }
        }
        let set = RegexSetBuilder::new(&patterns)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(SIZE_LIMIT)
            .build()
            .ok()?;
        Some(CueSet {
            set,
            bit_of,
            always,
        })
    }

    /// The bits of the groups with a regex that matches somewhere in `text`.
    pub(crate) fn found(&self, text: &[u8]) -> u8 {
        let mut bits = self.always;
        if !self.set.is_match(text) {
            return bits;
        }
        for i in self.set.matches(text).iter() {
            bits |= self.bit_of.get(i).copied().unwrap_or(u8::MAX);
        }
        bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_group_is_found_as_its_own_regexes_find_it() {
        let groups = || {
            vec![
                (1, vec![r"(?i-u)token".to_string(), r"\bkey\b".to_string()]),
                (2, vec![r"(?i)ignore (?:all )?previous".to_string()]),
                (4, vec![r"[A-Za-z0-9+/]{12,}".to_string()]),
            ]
        };
        let Some(set) = CueSet::build(groups(), 0) else {
            panic!("the set compiles");
        };
        for text in [
            "",
            "plain text",
            "a TOKEN here",
            "monkey",
            "the key",
            "Ignore all previous",
            "ignore previous and the key",
            "QUJDREVGR0hJSktM",
            "abc/def+ghi",
        ] {
            let mut want = 0;
            for (bit, regexes) in groups() {
                if regexes.iter().any(|r| {
                    regex::bytes::Regex::new(r).is_ok_and(|re| re.is_match(text.as_bytes()))
                }) {
                    want |= bit;
                }
            }
            assert_eq!(set.found(text.as_bytes()), want, "{text}");
        }
        let always = CueSet::build(groups(), 8).map(|s| s.found(b"plain"));
        assert_eq!(always, Some(8));
    }

    #[test]
    fn a_regex_that_does_not_compile_builds_no_set() {
        assert!(CueSet::build([(1, vec!["(".to_string()])], 0).is_none());
    }
}
