//! Terminal escapes, control characters and invisible characters (step 2
//! of the pipeline, see the parent module).

use std::borrow::Cow;

use super::{Findings, TextFinding};
use crate::model::{is_joining, Invisible};

/// The finding for a character that is always removed from shown text
/// (the gateway's one table, [`Invisible`]; ESC, `\r` and the C1
/// introducers get special treatment in [`unicode_clean`] first).
pub(super) fn classify_char(c: char) -> Option<TextFinding> {
    Invisible::of(c)
        .filter(|class| class.is_removed_from_text())
        .map(finding)
}

fn finding(class: Invisible) -> TextFinding {
    match class {
        Invisible::Control => TextFinding::ControlChar,
        Invisible::Bidi => TextFinding::Bidi,
        Invisible::Tag => TextFinding::TagChar,
        _ => TextFinding::ZeroWidth,
    }
}

pub(super) type CharCursor<'a> = std::iter::Peekable<std::str::Chars<'a>>;

pub(super) fn unicode_clean<'a>(s: &'a str, findings: &mut Findings) -> Cow<'a, str> {
    clean_invisible(s, findings, Keep::NOTHING)
}

/// What [`clean_invisible`] leaves in place besides visible text.
#[derive(Debug, Clone, Copy)]
pub(super) struct Keep {
    /// A joiner between letters or symbols of a script that needs it
    /// ([`is_joining`]).
    pub(crate) joiners: bool,
    /// `\r\n` as written (a lone `\r` still becomes `\n`).
    pub(crate) crlf: bool,
}

impl Keep {
    pub(crate) const NOTHING: Keep = Keep {
        joiners: false,
        crlf: false,
    };
}

/// [`unicode_clean`], keeping what `keep` says.
pub(super) fn clean_invisible<'a>(s: &'a str, findings: &mut Findings, keep: Keep) -> Cow<'a, str> {
    let kept = |prev: Option<char>, c: char, next: Option<char>| match c {
        '\r' => keep.crlf && next == Some('\n'),
        _ => keep.joiners && Invisible::of(c) == Some(Invisible::Joiner) && is_joining(prev, next),
    };
    let mut prev = None;
    let mut it = s.chars().peekable();
    let clean = loop {
        let Some(c) = it.next() else { break true };
        if classify_char(c).is_some() && !kept(prev, c, it.peek().copied()) {
            break false;
        }
        prev = Some(c);
    };
    if clean {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\u{1b}' => {
                findings.add(TextFinding::AnsiEscape);
                skip_escape(&mut it);
            }
            '\u{9b}' => {
                findings.add(TextFinding::AnsiEscape);
                skip_csi(&mut it);
            }
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => {
                findings.add(TextFinding::AnsiEscape);
                skip_control_string(&mut it);
            }
            '\r' if keep.crlf && it.peek() == Some(&'\n') => out.push('\r'),
            '\r' => {
                findings.add(TextFinding::ControlChar);
                if it.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            _ => match classify_char(c) {
                Some(_) if kept(out.chars().next_back(), c, it.peek().copied()) => out.push(c),
                Some(f) => findings.add(f),
                None => out.push(c),
            },
        }
    }
    Cow::Owned(out)
}

/// After ESC: consumes the rest of the escape sequence.
pub(super) fn skip_escape(it: &mut CharCursor<'_>) {
    match it.peek().copied() {
        Some('[') => {
            it.next();
            skip_csi(it);
        }
        Some(']' | 'P' | 'X' | '^' | '_') => {
            it.next();
            skip_control_string(it);
        }
        Some('\u{20}'..='\u{2f}') => {
            while matches!(it.peek(), Some('\u{20}'..='\u{2f}')) {
                it.next();
            }
            if matches!(it.peek(), Some('\u{30}'..='\u{7e}')) {
                it.next();
            }
        }
        Some('\u{30}'..='\u{7e}') => {
            it.next();
        }
        _ => {}
    }
}

/// After CSI: parameter bytes, intermediate bytes, one final byte (ECMA-48).
pub(super) fn skip_csi(it: &mut CharCursor<'_>) {
    while matches!(it.peek(), Some('\u{30}'..='\u{3f}')) {
        it.next();
    }
    while matches!(it.peek(), Some('\u{20}'..='\u{2f}')) {
        it.next();
    }
    if matches!(it.peek(), Some('\u{40}'..='\u{7e}')) {
        it.next();
    }
}

/// After OSC/DCS/SOS/PM/APC: up to BEL, `ESC \` or U+009C. Any other control
/// character ends the string without being consumed.
pub(super) fn skip_control_string(it: &mut CharCursor<'_>) {
    while let Some(&c) = it.peek() {
        match c {
            '\u{7}' | '\u{9c}' => {
                it.next();
                return;
            }
            '\u{1b}' => {
                let mut ahead = it.clone();
                ahead.next();
                if ahead.peek() == Some(&'\\') {
                    it.next();
                    it.next();
                }
                return;
            }
            c if c.is_control() => return,
            _ => {
                it.next();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::sanitize::test_support::*;
    use crate::policy::sanitize::TextFinding;

    #[test]
    fn ansi_escapes() {
        for p in [STRIP, SAFE] {
            let out = p.sanitize("\x1b[31mred\x1b[0m");
            assert_eq!(out.text, "red");
            assert_eq!(out.findings, vec![TextFinding::AnsiEscape]);
            // OSC 8 hyperlink, ST and BEL terminated
            assert_eq!(
                p.sanitize("\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ here")
                    .text,
                "click here"
            );
            assert_eq!(
                p.sanitize("\x1b]8;;https://e.example\x07click\x1b]8;;\x07")
                    .text,
                "click"
            );
            assert_eq!(p.sanitize("\x1b]0;title\x07x").text, "x");
            assert_eq!(p.sanitize("a\x1b[2Jb\x1b[1;31;42mc").text, "abc");
            assert_eq!(p.sanitize("8-bit \u{9b}31mred\u{9b}0m").text, "8-bit red");
            assert_eq!(p.sanitize("\u{9d}8;;http://x\u{9c}lnk").text, "lnk");
            assert_eq!(p.sanitize("\x1bcreset\x1b(Bdone\x1b").text, "resetdone");
            // an unterminated OSC stops at the newline
            assert_eq!(p.sanitize("\x1b]0;title\nvisible").text, "\nvisible");
            // entity-encoded ESC is still an escape
            assert_eq!(p.sanitize("&#27;[31mred").text, "red");
        }
    }

    /// Every character of the one table (both ends and the middle of each
    /// range) between two letters: removed from shown text, and a name
    /// holding it has hidden characters, unless its class is one shown text
    /// keeps (line separators, variation selectors).
    #[test]
    fn every_invisible_character_is_removed_as_its_class_says() {
        use crate::model::Invisible;
        use crate::policy::sanitize::has_hidden_characters;
        for (lo, hi, class) in Invisible::ranges() {
            let mid = char::from_u32((lo as u32 + hi as u32) / 2).unwrap_or(lo);
            for c in [lo, mid, hi] {
                let text = format!("a{c}b");
                let removed = class.is_removed_from_text();
                assert_eq!(
                    has_hidden_characters(&text),
                    removed,
                    "{:?}",
                    c.escape_unicode()
                );
                if removed {
                    for p in [STRIP, SAFE] {
                        assert_eq!(p.sanitize(&text).text, "ab", "{:?}", c.escape_unicode());
                    }
                }
            }
        }
    }

    #[test]
    fn control_chars() {
        for p in [STRIP, SAFE] {
            let out = p.sanitize("a\u{0}b\u{7}c\u{7f}d\u{85}e\u{8}f");
            assert_eq!(out.text, "abcdef");
            assert_eq!(out.findings, vec![TextFinding::ControlChar]);
            assert_eq!(p.sanitize("one\r\ntwo\rthree").text, "one\ntwo\nthree");
            assert_eq!(
                p.sanitize("tab\tand\nnewline\u{c}").text,
                "tab\tand\nnewline"
            );
        }
    }

    #[test]
    fn bidi() {
        for p in [STRIP, SAFE] {
            let out = p.sanitize("\u{202E}evil");
            assert_eq!(out.text, "evil");
            assert_eq!(out.findings, vec![TextFinding::Bidi]);
            assert_eq!(
                p.sanitize("a\u{2066}b\u{2069}c\u{200F}d\u{61C}e\u{202A}")
                    .text,
                "abcde"
            );
            // decoded from a character reference
            let out = p.sanitize("&#x202E;evil");
            assert_eq!(out.text, "evil");
            assert!(out.findings.contains(&TextFinding::Bidi));
        }
    }

    #[test]
    fn zero_width() {
        for p in [STRIP, SAFE] {
            let out = p.sanitize("pay\u{200B}pal");
            assert_eq!(out.text, "paypal");
            assert_eq!(out.findings, vec![TextFinding::ZeroWidth]);
            assert_eq!(
                p.sanitize("a\u{200C}b\u{2060}c\u{FEFF}d\u{AD}e\u{34F}f\u{180E}g")
                    .text,
                "abcdefg"
            );
            // ZWJ emoji sequences fall apart into their components (documented)
            assert_eq!(p.sanitize("👨\u{200D}👩\u{200D}👧").text, "👨👩👧");
        }
    }

    #[test]
    fn tag_chars() {
        for p in [STRIP, SAFE] {
            let out = p.sanitize("hi\u{E0041}\u{E0042}");
            assert_eq!(out.text, "hi");
            assert_eq!(out.findings, vec![TextFinding::TagChar]);
            assert_eq!(p.sanitize("\u{E0001}x\u{E007F}").text, "x");
        }
    }
}
