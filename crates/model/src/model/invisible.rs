//! The one table of characters a person does not see as written: controls,
//! bidi controls, zero-width and other invisible format characters, joiners,
//! Unicode tags, Hangul fillers, line separators and variation selectors.
//! Every part of the gateway that removes, skips, refuses or escapes such a
//! character reads this table (the text sanitiser, the detectors' word
//! reading and value folding, the URL and name checks, the audit trail,
//! `explain`, refusal messages), each choosing the classes it acts on, so a
//! character added here reaches all of them.
//!
//! Where it comes from (Unicode 15.0; the test below reads the Unicode
//! Character Database and fails when the table and these sources differ):
//!
//! - every `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt):
//!   what a renderer shows nothing for, the Hangul fillers U+115F, U+1160,
//!   U+3164 and U+FFA0 and the code points Unicode reserves for more
//!   such characters included;
//! - every format character (general category `Cf`) but the
//!   `Prepended_Concatenation_Mark`s (PropList.txt: Arabic and Kaithi number
//!   signs, which show as a sign spanning the digits after them);
//! - every control (`Cc`) but `\t` and `\n`;
//! - the line and paragraph separators (`Zl`, `Zp`).

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
    /// marks, shorthand and Egyptian hieroglyph format controls,
    /// musical-symbol formatting, the Khmer inherent vowels, the Mongolian
    /// vowel separator.
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
    /// Code points Unicode has not assigned yet but already declares
    /// default-ignorable: whatever is assigned there will show nothing.
    Reserved,
}

/// Each range, inclusive, with its class, in order. Controls are not
/// listed (they are `char::is_control`, the `Cc` category).
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
    ('\u{2065}', '\u{2065}', Invisible::Reserved),
    ('\u{2066}', '\u{2069}', Invisible::Bidi),
    ('\u{206A}', '\u{206F}', Invisible::ZeroWidth),
    ('\u{3164}', '\u{3164}', Invisible::Filler),
    ('\u{FE00}', '\u{FE0F}', Invisible::VariationSelector),
    ('\u{FEFF}', '\u{FEFF}', Invisible::ZeroWidth),
    ('\u{FFA0}', '\u{FFA0}', Invisible::Filler),
    ('\u{FFF0}', '\u{FFF8}', Invisible::Reserved),
    ('\u{FFF9}', '\u{FFFB}', Invisible::ZeroWidth),
    ('\u{13430}', '\u{1343F}', Invisible::ZeroWidth),
    ('\u{1BCA0}', '\u{1BCA3}', Invisible::ZeroWidth),
    ('\u{1D173}', '\u{1D17A}', Invisible::ZeroWidth),
    ('\u{E0000}', '\u{E007F}', Invisible::Tag),
    ('\u{E0080}', '\u{E00FF}', Invisible::Reserved),
    ('\u{E0100}', '\u{E01EF}', Invisible::VariationSelector),
    ('\u{E01F0}', '\u{E0FFF}', Invisible::Reserved),
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
        let i = TABLE.partition_point(|&(_, hi, _)| hi < c);
        TABLE
            .get(i)
            .filter(|&&(lo, _, _)| lo <= c)
            .map(|&(_, _, class)| class)
    }

    /// Every range of the table, inclusive, with its class (controls, which
    /// are `char::is_control`, not included): for tests that try each.
    pub fn ranges() -> impl Iterator<Item = (char, char, Invisible)> {
        TABLE.iter().copied()
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

    /// The Unicode Character Database, as Debian's `unicode-data` package
    /// installs it (`scripts/test` installs it; `PORTCULLIS_UNICODE_DIR`
    /// points elsewhere). The property comes from these files, not from a
    /// list typed here.
    fn ucd(file: &str) -> String {
        let dir = std::env::var("PORTCULLIS_UNICODE_DIR")
            .unwrap_or_else(|_| "/usr/share/unicode".to_owned());
        let path = std::path::Path::new(&dir).join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; install Debian's unicode-data (apt-get install unicode-data, as scripts/test does)",
                path.display()
            )
        })
    }

    /// The code points a UCD property file gives `property`.
    fn with_property(text: &str, property: &str) -> Vec<char> {
        let mut out = Vec::new();
        for line in text.lines() {
            let data = line.split('#').next().unwrap_or("");
            let mut cols = data.split(';').map(str::trim);
            let (Some(range), Some(prop)) = (cols.next(), cols.next()) else {
                continue;
            };
            if prop != property {
                continue;
            }
            let (lo, hi) = range.split_once("..").unwrap_or((range, range));
            let lo = u32::from_str_radix(lo, 16).expect("a code point");
            let hi = u32::from_str_radix(hi, 16).expect("a code point");
            out.extend((lo..=hi).filter_map(char::from_u32));
        }
        out
    }

    /// The code points UnicodeData.txt gives general category `gc` (none of
    /// the categories asked for here is given as a First/Last range).
    fn in_category(text: &str, gc: &str) -> Vec<char> {
        text.lines()
            .filter_map(|line| {
                let mut cols = line.split(';');
                let cp = cols.next()?;
                (cols.nth(1)? == gc).then_some(())?;
                char::from_u32(u32::from_str_radix(cp, 16).ok()?)
            })
            .collect()
    }

    #[test]
    fn the_table_is_what_the_unicode_character_database_says() {
        let derived = ucd("DerivedCoreProperties.txt");
        let props = ucd("PropList.txt");
        let data = ucd("UnicodeData.txt");
        let ignorable = with_property(&derived, "Default_Ignorable_Code_Point");
        assert!(ignorable.len() > 4000, "{} ignorable", ignorable.len());
        let hidden = |c: char| Invisible::of(c).is_some();
        for filler in ['\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}'] {
            assert!(ignorable.contains(&filler), "the UCD lost {filler:?}");
            assert_eq!(Invisible::of(filler), Some(Invisible::Filler));
        }
        let missing: Vec<String> = ignorable
            .iter()
            .filter(|c| !hidden(**c))
            .map(|c| format!("U+{:04X}", *c as u32))
            .collect();
        assert!(
            missing.is_empty(),
            "Default_Ignorable_Code_Point not in the table: {missing:?}"
        );
        let shown = with_property(&props, "Prepended_Concatenation_Mark");
        assert!(!shown.is_empty());
        let mut from: Vec<char> = ignorable;
        for c in in_category(&data, "Cf") {
            assert_eq!(hidden(c), !shown.contains(&c), "U+{:04X} (Cf)", c as u32);
            from.push(c);
        }
        for c in in_category(&data, "Cc") {
            assert_eq!(
                hidden(c),
                !matches!(c, '\t' | '\n'),
                "U+{:04X} (Cc)",
                c as u32
            );
            from.push(c);
        }
        for gc in ["Zl", "Zp"] {
            for c in in_category(&data, gc) {
                assert_eq!(
                    Invisible::of(c),
                    Some(Invisible::LineBreak),
                    "U+{:04X}",
                    c as u32
                );
                from.push(c);
            }
        }
        // Nothing else: every character of the table comes from one of them.
        let extra: Vec<String> = Invisible::ranges()
            .flat_map(|(lo, hi, _)| lo..=hi)
            .filter(|c| !from.contains(c))
            .map(|c| format!("U+{:04X}", c as u32))
            .collect();
        assert!(
            extra.is_empty(),
            "in the table, in none of its sources: {extra:?}"
        );
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
