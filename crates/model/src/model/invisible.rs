//! The one table of characters a person does not see as written: controls,
//! bidi controls, zero-width and other invisible format characters, joiners,
//! Unicode tags, Hangul fillers, line separators and variation selectors.
//! Every part of the gateway that removes, skips, refuses or escapes such a
//! character reads this table (the text sanitiser, the detectors' word
//! reading, the URL checks, the audit trail, `explain`), each choosing the
//! classes it acts on, so a character added here reaches all of them.

/// What kind of invisible character one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Invisible {
    /// C0 controls other than `\t` and `\n`, DEL and C1 controls.
    Control,
    /// Bidi embeddings, overrides, isolates and marks: they reorder what is
    /// shown without showing themselves.
    Bidi,
    /// Zero-width spaces, word joiners, invisible operators, the BOM, the
    /// soft hyphen, the combining grapheme joiner, interlinear annotation
    /// marks, shorthand format controls, musical-symbol formatting, the
    /// Mongolian vowel separator.
    ZeroWidth,
    /// ZWNJ and ZWJ: invisible, but part of how Arabic, Persian, Indic
    /// scripts and emoji sequences are written ([`is_joining`]).
    Joiner,
    /// Unicode tag characters (U+E0000–U+E007F): ASCII spelled invisibly.
    Tag,
    /// Hangul fillers: letters that show nothing.
    Filler,
    /// The line and paragraph separators U+2028 and U+2029.
    LineBreak,
    /// Variation selectors: they choose a glyph's form (emoji presentation)
    /// and show nothing of their own.
    VariationSelector,
}

/// Each range, inclusive, with its class. Controls are not listed (they are
/// `char::is_control`); the first range that holds a character decides.
const TABLE: &[(char, char, Invisible)] = &[
    ('\u{00AD}', '\u{00AD}', Invisible::ZeroWidth),
    ('\u{034F}', '\u{034F}', Invisible::ZeroWidth),
    ('\u{061C}', '\u{061C}', Invisible::Bidi),
    ('\u{115F}', '\u{1160}', Invisible::Filler),
    ('\u{17B4}', '\u{17B5}', Invisible::ZeroWidth),
    ('\u{180B}', '\u{180D}', Invisible::VariationSelector),
    ('\u{180E}', '\u{180E}', Invisible::ZeroWidth),
    ('\u{180F}', '\u{180F}', Invisible::VariationSelector),
    ('\u{200B}', '\u{200B}', Invisible::ZeroWidth),
    ('\u{200C}', '\u{200D}', Invisible::Joiner),
    ('\u{200E}', '\u{200F}', Invisible::Bidi),
    ('\u{2028}', '\u{2029}', Invisible::LineBreak),
    ('\u{202A}', '\u{202E}', Invisible::Bidi),
    ('\u{2060}', '\u{2064}', Invisible::ZeroWidth),
    ('\u{2066}', '\u{2069}', Invisible::Bidi),
    ('\u{206A}', '\u{206F}', Invisible::ZeroWidth),
    ('\u{3164}', '\u{3164}', Invisible::Filler),
    ('\u{FE00}', '\u{FE0F}', Invisible::VariationSelector),
    ('\u{FEFF}', '\u{FEFF}', Invisible::ZeroWidth),
    ('\u{FFA0}', '\u{FFA0}', Invisible::Filler),
    ('\u{FFF0}', '\u{FFFB}', Invisible::ZeroWidth),
    ('\u{1BCA0}', '\u{1BCA3}', Invisible::ZeroWidth),
    ('\u{1D173}', '\u{1D17A}', Invisible::ZeroWidth),
    ('\u{E0000}', '\u{E007F}', Invisible::Tag),
    ('\u{E0100}', '\u{E01EF}', Invisible::VariationSelector),
];

impl Invisible {
    /// The class of `c`, if it is invisible. `\t` and `\n` are not.
    pub fn of(c: char) -> Option<Invisible> {
        if c.is_ascii() {
            return (c.is_ascii_control() && !matches!(c, '\t' | '\n'))
                .then_some(Invisible::Control);
        }
        if c.is_control() {
            return Some(Invisible::Control);
        }
        if c < '\u{00AD}' {
            return None;
        }
        TABLE
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&c))
            .map(|&(_, _, class)| class)
    }

    /// What a text that is shown (a form, a description) never keeps:
    /// everything but line separators and variation selectors, which
    /// render as a line break and an emoji's form.
    pub fn is_removed_from_text(self) -> bool {
        !matches!(self, Invisible::LineBreak | Invisible::VariationSelector)
    }
}

/// Whether a joiner at `before · joiner · after` joins letters or symbols
/// of a script that needs it (Arabic, Persian, Indic scripts, emoji
/// sequences): both neighbours are non-ASCII letters, marks or symbols. A
/// joiner next to ASCII, a space or the text's edge only hides something.
pub fn is_joining(before: Option<char>, after: Option<char>) -> bool {
    let joins = |c: Option<char>| {
        c.is_some_and(|c| {
            !c.is_ascii() && !c.is_whitespace() && !c.is_control() && Invisible::of(c).is_none()
        }) || c.is_some_and(|c| Invisible::of(c) == Some(Invisible::VariationSelector))
    };
    joins(before) && joins(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_ordered_and_disjoint() {
        for pair in TABLE.windows(2) {
            assert!(
                pair[0].1 < pair[1].0,
                "{:?} overlaps {:?}",
                pair[0],
                pair[1]
            );
        }
        for (lo, hi, _) in TABLE {
            assert!(lo <= hi);
        }
    }

    #[test]
    fn every_class_is_read() {
        let cases = [
            ('\u{1B}', Some(Invisible::Control)),
            ('\r', Some(Invisible::Control)),
            ('\u{85}', Some(Invisible::Control)),
            ('\t', None),
            ('\n', None),
            ('a', None),
            ('é', None),
            ('\u{202E}', Some(Invisible::Bidi)),
            ('\u{200B}', Some(Invisible::ZeroWidth)),
            ('\u{00AD}', Some(Invisible::ZeroWidth)),
            ('\u{200D}', Some(Invisible::Joiner)),
            ('\u{E0041}', Some(Invisible::Tag)),
            ('\u{3164}', Some(Invisible::Filler)),
            ('\u{2028}', Some(Invisible::LineBreak)),
            ('\u{FE0F}', Some(Invisible::VariationSelector)),
            ('\u{E0101}', Some(Invisible::VariationSelector)),
        ];
        for (c, want) in cases {
            assert_eq!(
                Invisible::of(c),
                want,
                "{:?}",
                c.escape_unicode().to_string()
            );
        }
    }

    #[test]
    fn joiners_join_only_between_letters_or_symbols_of_scripts_that_need_them() {
        // Persian "می‌خواهم", Hindi "क्‍ष", an emoji family, a flag-less heart.
        assert!(is_joining(Some('ی'), Some('خ')));
        assert!(is_joining(Some('्'), Some('ष')));
        assert!(is_joining(Some('👨'), Some('👩')));
        assert!(is_joining(Some('\u{FE0F}'), Some('🔥')));
        for (b, a) in [
            (Some('a'), Some('b')),
            (Some('p'), Some('\u{0430}')),
            (None, Some('ی')),
            (Some('ی'), None),
            (Some(' '), Some('ی')),
            (Some('\u{200B}'), Some('ی')),
        ] {
            assert!(!is_joining(b, a), "{b:?} {a:?}");
        }
    }
}
