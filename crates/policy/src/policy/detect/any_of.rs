//! Whether any of a set of regexes matches, asked of one regex: the union
//! of the patterns, each in a group of its own. The regex engine searches
//! one regex with its literal prefilters; a `RegexSet` asked the same
//! question runs every pattern's automaton at once and costs several times
//! as much on a short message (four times on a small tool result). The set
//! still names which patterns matched.

use regex::Regex;

/// Either the union or, when it cannot be built, the set.
#[derive(Debug, Clone)]
pub(crate) struct AnyOf {
    union: Option<Regex>,
}

impl AnyOf {
    /// The union of `patterns`, or none: a pattern that may hold a
    /// comment (`#` under the `x` flag would read the groups after it as
    /// comment), a capture name used twice, a union over the size limit.
    /// Each pattern keeps its own flags inside its group.
    pub(crate) fn new<'p>(patterns: impl IntoIterator<Item = &'p str>) -> Self {
        let patterns: Vec<&str> = patterns.into_iter().collect();
        let union = match patterns.iter().any(|p| p.contains('#')) || patterns.is_empty() {
            true => None,
            false => {
                let groups: Vec<String> = patterns.iter().map(|p| format!("(?:{p})")).collect();
                Regex::new(&groups.join("|")).ok()
            }
        };
        AnyOf { union }
    }

    /// Whether any pattern matches `text`: the union's answer, or `set`'s
    /// (the same patterns) when there is no union.
    pub(crate) fn is_match(&self, set: &regex::RegexSet, text: &str) -> bool {
        match &self.union {
            Some(re) => re.is_match(text),
            None => set.is_match(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_union_answers_as_the_set_does() {
        let patterns = [
            r"(?i)ignore\s+previous",
            r"^starts",
            r"ends$",
            r"(?x) a \s b ",
            r"\bword\b",
            r"[0-9]{4,}",
        ];
        let set = regex::RegexSet::new(patterns).unwrap();
        let any = AnyOf::new(patterns);
        assert!(any.union.is_some());
        for text in [
            "",
            "IGNORE  previous",
            "x starts",
            "starts here",
            "it ends",
            "ends not",
            "a b",
            "ab",
            "a word.",
            "swordfish",
            "123",
            "12345",
        ] {
            assert_eq!(any.is_match(&set, text), set.is_match(text), "{text:?}");
        }
    }

    #[test]
    fn patterns_the_union_cannot_hold_are_left_to_the_set() {
        assert!(AnyOf::new([r"(?x)a # b", "c"]).union.is_none());
        assert!(AnyOf::new([r"(?P<n>a)", r"(?P<n>b)"]).union.is_none());
        assert!(AnyOf::new([]).union.is_none());
    }
}
