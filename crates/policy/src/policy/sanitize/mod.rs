//! Makes the human-facing text of an elicitation safe to show a person.
//!
//! Every string an untrusted upstream wants a person to read (a form's
//! `message`, property `title`/`description`, enum option titles, a url-mode
//! `message`) goes through [`TextPolicy::sanitize`] before it reaches the
//! client. Machine values (`const`, `enum` items) are never altered; they are
//! only checked with [`is_unsafe_machine_value`], and an option whose value is
//! unsafe is refused by the caller.
//!
//! # What happens to a string, in order
//!
//! 1. **Fast path.** One scan looks for anything that could need work: C0/C1
//!    controls other than `\n`/`\t` (ESC and `\r` included), DEL, the bidi,
//!    zero-width and tag characters listed below, `<`, `&`, and the markdown
//!    link sequences `](` and `]:`. If there is none and the string is within
//!    `max_chars`, it is returned as [`Cow::Borrowed`] untouched. (A bare
//!    `javascript:` in prose is not a link in either mode, so it is left as
//!    text; only link syntax around it matters.)
//! 2. **Terminal and invisible characters** (one pass):
//!    * ANSI/terminal escapes are removed whole: CSI (`ESC [` params,
//!      intermediates, final byte), OSC/DCS/SOS/PM/APC strings (`ESC ]`,
//!      `ESC P`, `ESC X`, `ESC ^`, `ESC _`) up to BEL, `ESC \` or U+009C (a
//!      string stops early at any other control character, which is then
//!      handled on its own, so an unterminated OSC cannot swallow the lines
//!      after it), other `ESC x` sequences, and the 8-bit forms (U+009B CSI,
//!      U+009D OSC, U+0090/98/9E/9F). Finding `ansi_escape`.
//!    * C0 controls except `\n` and `\t`, DEL and C1 controls are removed.
//!      **Decision:** `\r\n` becomes `\n` and a lone `\r` becomes `\n` (a lone
//!      CR can make a terminal overwrite a line; as a newline both parts stay
//!      visible). Both count as `control_char`.
//!    * Bidi controls U+202A–U+202E, U+2066–U+2069 and the marks U+200E,
//!      U+200F, U+061C: `bidi`.
//!    * Zero-width / invisible format characters U+200B–U+200D, U+2060–U+2064,
//!      U+206A–U+206F, U+FEFF, U+180E, U+00AD, U+034F, U+FFF9–U+FFFB:
//!      `zero_width`. **Decision:** ZWJ (U+200D) is removed too, so emoji ZWJ
//!      sequences (`👨\u{200D}👩\u{200D}👧`) show as their component emoji; that is acceptable for
//!      a gateway whose rule is "no invisible characters".
//!    * Unicode tag characters U+E0000–U+E007F: `tag_char` (this also turns
//!      subdivision flags such as England's into a plain black flag).
//! 3. **Markup** is made inert by [`HtmlMode`] using ammonia (html5ever) for
//!    all HTML parsing:
//!    * Markdown autolinks `<scheme:…>` / `<user@host>` are kept only for
//!      http, https and mailto (as their text in `Strip`, as an `<a>` in
//!      `SafeSubset`); any other scheme is removed (`dangerous_link`).
//!    * A `<` that no later `>` could close, and a `<!--` that no later `-->`
//!      closes, are escaped before parsing: the HTML parser would otherwise
//!      drop the whole rest of the string as an unterminated tag or comment.
//!      `<script>` and `<style>` content is always dropped.
//!    * Character references are decoded once by the parser; whatever they
//!      decode to (`&#x202E;`, `&#27;`, `&lt;b&gt;`, `&#91;x&#93;(…)`) is
//!      cleaned again by steps 2 and 3.
//!    * `Strip`: the result is plain text. Tags go, their text stays; `<br>`
//!      becomes a newline and block elements (p, div, li, tr, headings, …)
//!      are separated by a newline, table cells by a space. An `<a>` with an
//!      http(s)/mailto `href` whose text differs from the URL becomes
//!      `text (url)`, so a label can never hide where a link goes.
//!    * `SafeSubset`: ammonia keeps b, strong, i, em, code, br, p, ul, ol, li
//!      and a (href only, http/https/mailto only, plus
//!      `rel="noopener noreferrer nofollow"`). ammonia's output is then
//!      minimally escaped: `&gt;` and `&nbsp;` are written as characters, and
//!      `&lt;`/`&amp;` only where the raw character would start a tag or a
//!      character reference, so `5 < 6 and 7 > 3` or `AT&T` stay as written.
//!    * Markdown: inline links and images `[label](url "title")` and reference
//!      definitions `[label]: url`. A link whose URL is not http/https/mailto
//!      (`javascript:`, `data:`, `vbscript:`, `file:`, any other scheme:
//!      `dangerous_link`; relative or fragment URLs: `html`) is reduced to its
//!      label; such reference definitions are removed. Images are always
//!      reduced to their alt text (no remote content, no tracking pixels).
//!      In `Strip` an allowed link becomes `label (url)` (**decision**: the
//!      destination stays visible, which defeats `[paypal.com](https://evil)`;
//!      just `url` when the label is empty or equals it); in `SafeSubset` it is
//!      kept as written. A leftover `](` whose target is not allowed (a
//!      destination too odd for the link grammar) is broken up as `] (`.
//!      Then a CommonMark parser (pulldown-cmark) reads the text as a
//!      renderer would, and the same rules apply to every image, link and
//!      reference definition it finds that the patterns missed (labels
//!      holding brackets, reference-style `![alt][ref]`, a definition in a
//!      block quote or a list item). It reads the text as step 4 will
//!      write it (`&gt;` as `>`, a space after an active `<`), since that
//!      is what a renderer gets: `&gt; [r]: …` is prose, `> [r]: …` a
//!      definition.
//! 4. **Strip output is inert.** A `<` directly followed by an ASCII letter,
//!    `/`, `!` or `?`, or a `&` that would start a character reference, gets a
//!    space inserted after it (`x<y` → `x< y`, `&lt;b&gt;` → `< b>`,
//!    `&amp;amp;` → `& amp;`), so re-reading the text as HTML changes nothing.
//!    **Decision on a lone `<` in prose:** `5 < 6` (a `<` followed by a space,
//!    digit, …) is untouched; `x<y` keeps the `<` visibly (`x< y` in `Strip`,
//!    `x&lt;y` in `SafeSubset`); `a<b and c>d` is, as in any HTML renderer, a
//!    tag and is removed.
//! 5. **Whitespace** is left alone (**decision**: nothing is trimmed or
//!    collapsed; transparent for valid text).
//! 6. **Length.** If the cleaned text has more than `max_chars` chars it is cut
//!    at a char boundary (never inside a tag or a character reference) to
//!    `max_chars` minus the length of [`TRUNCATION_MARKER`], the marker is
//!    appended, and the result is cleaned again (in `SafeSubset` this closes
//!    open tags; the cut point moves back until everything fits). In
//!    `SafeSubset` the count is of the HTML text. When `max_chars` is no
//!    larger than the marker, the output is the marker cut to `max_chars`.
//!
//! # Idempotence
//!
//! `sanitize(sanitize(s).text) == sanitize(s).text` for every `s`, and the
//! second call returns `Cow::Borrowed`. Each step is designed to leave nothing
//! for a later pass to do (the inert-output rule in step 4 and the minimal
//! escaping in `SafeSubset` are what make re-parsing a no-op), and the result
//! is verified: the cleaning is re-applied until it is a fixed point (at most
//! four rounds; ammonia itself is not idempotent for some adversarial DOMs,
//! e.g. elements unwrapped out of tables). If that still does not settle, the
//! plain-text form with `<>&[]` replaced by `‹›＆()` is returned, which is
//! trivially stable. The truncated form is itself a cleaned fixed point within
//! `max_chars`, so the marker survives and never stacks.
//!
//! # Cost
//!
//! The clean path is one byte scan without allocation. ammonia builders and
//! regexes are built once.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

mod data;
mod html;
mod markdown;
mod splice;
#[cfg(test)]
mod test_support;
mod unicode;

pub(crate) use data::{data_needs_work, DataPolicy};
use html::{
    has_forbidden_attr_url, lt_is_active, neutralize, neutralize_edits, pre_escape, relax,
    relax_edits, strip_html_to_text, SAFE_HTML,
};
use markdown::{autolinks, markdown};
use unicode::{classify_char, clean_invisible, unicode_clean, Keep};

/// How HTML/markdown in a string is made inert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HtmlMode {
    /// Everything becomes plain text: tags removed (their text content kept),
    /// entities decoded once into plain characters, markdown link/image syntax
    /// reduced to its label (`[label](url)` → `label (url)` for an allowed
    /// URL, `label` otherwise; `![alt](url)` → `alt`), autolinks `<http://…>`
    /// kept as text only if http(s)/mailto.
    Strip,
    /// A small safe subset of HTML survives (b, strong, i, em, code, br, p,
    /// ul, ol, li; a with href only for http/https/mailto, with
    /// `rel="noopener noreferrer nofollow"`), everything else removed by
    /// ammonia; markdown links whose URL is not http/https/mailto are reduced
    /// to their label, markdown images to their alt text.
    SafeSubset,
}

impl HtmlMode {
    /// The config spelling: `"strip"` or `"safe_subset"`.
    #[cfg(test)]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HtmlMode::Strip => "strip",
            HtmlMode::SafeSubset => "safe_subset",
        }
    }
}

/// The visible marker appended to a truncated string (24 chars).
pub(crate) const TRUNCATION_MARKER: &str = "… [truncated by gateway]";
const MARKER_CHARS: usize = 24;

/// How human-facing text is cleaned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TextPolicy {
    pub html: HtmlMode,
    /// Longest allowed output, in chars (not bytes), marker included.
    pub max_chars: usize,
}

/// Why a string changed (for the provenance annotation and audit; never
/// carries the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextFinding {
    Html,
    DangerousLink,
    AnsiEscape,
    ControlChar,
    Bidi,
    ZeroWidth,
    TagChar,
    Truncated,
    /// An image, link or element of data pointing at a host not allowed
    /// (`data.rs`).
    ExternalLink,
}

impl TextFinding {
    /// Every finding, in the order used in [`Sanitized::findings`].
    pub(crate) const ALL: [TextFinding; 9] = [
        TextFinding::Html,
        TextFinding::DangerousLink,
        TextFinding::AnsiEscape,
        TextFinding::ControlChar,
        TextFinding::Bidi,
        TextFinding::ZeroWidth,
        TextFinding::TagChar,
        TextFinding::Truncated,
        TextFinding::ExternalLink,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TextFinding::Html => "html",
            TextFinding::DangerousLink => "dangerous_link",
            TextFinding::AnsiEscape => "ansi_escape",
            TextFinding::ControlChar => "control_char",
            TextFinding::Bidi => "bidi",
            TextFinding::ZeroWidth => "zero_width",
            TextFinding::TagChar => "tag_char",
            TextFinding::Truncated => "truncated",
            TextFinding::ExternalLink => "external_link",
        }
    }
}

/// The result of [`TextPolicy::sanitize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sanitized<'a> {
    /// `Cow::Borrowed` exactly when the text is unchanged.
    pub text: Cow<'a, str>,
    /// Deduplicated, in the order of [`TextFinding::ALL`]; empty exactly when
    /// the text is unchanged.
    pub findings: Vec<TextFinding>,
}

impl Sanitized<'_> {
    /// True when the sanitizer changed the text.
    pub fn is_changed(&self) -> bool {
        matches!(self.text, Cow::Owned(_))
    }
}

impl TextPolicy {
    pub fn new(html: HtmlMode, max_chars: usize) -> Self {
        TextPolicy { html, max_chars }
    }

    /// Cleans one human-facing string. See the module documentation.
    pub fn sanitize<'a>(&self, input: &'a str) -> Sanitized<'a> {
        let work = needs_work(input);
        if !work && fits(input, self.max_chars) {
            return unchanged(input);
        }
        let mut findings = Findings::default();
        let cleaned: Cow<'_, str> = if work {
            match stabilize(self.html, input, &mut findings) {
                Some(s) => Cow::Owned(s),
                None => Cow::Borrowed(input),
            }
        } else {
            Cow::Borrowed(input)
        };
        let out = if fits(&cleaned, self.max_chars) {
            cleaned
        } else {
            findings.add(TextFinding::Truncated);
            Cow::Owned(self.truncate(&cleaned))
        };
        if *out == *input {
            return unchanged(input);
        }
        if findings.is_empty() {
            // Every step records why it changed something; keep the promise
            // "changed ⇒ at least one finding" even for an unforeseen path.
            findings.add(TextFinding::Html);
        }
        Sanitized {
            text: Cow::Owned(out.into_owned()),
            findings: findings.to_vec(),
        }
    }

    /// Cuts a cleaned, stable, too-long string down to `max_chars` with the
    /// marker; the result is itself a cleaned fixed point.
    fn truncate(&self, text: &str) -> String {
        let max = self.max_chars;
        if max <= MARKER_CHARS {
            return TRUNCATION_MARKER.chars().take(max).collect();
        }
        let budget = max - MARKER_CHARS;
        let mut keep = budget;
        for _ in 0..8 {
            let prefix = safe_prefix(text, keep);
            let candidate = format!("{prefix}{TRUNCATION_MARKER}");
            let mut scratch = Findings::default();
            let settled = stabilize(self.html, &candidate, &mut scratch).unwrap_or(candidate);
            let len = settled.chars().count();
            if len <= max
                && settled.matches(TRUNCATION_MARKER).count()
                    > prefix.matches(TRUNCATION_MARKER).count()
            {
                return settled;
            }
            // Base the next try on what was actually kept (the cut may have
            // moved back out of a tag or reference).
            let kept = prefix.chars().count();
            if kept == 0 {
                break;
            }
            keep = if len > max {
                kept.saturating_sub(len - max)
            } else {
                kept / 2
            };
        }
        // Could not settle (adversarial): inert plain text, which is stable.
        let mut scratch = Findings::default();
        let plain = inert_chars(&strip_pipeline(
            &unicode_clean(text, &mut scratch),
            &mut scratch,
        ));
        let mut out: String = plain.chars().take(budget).collect();
        out.push_str(TRUNCATION_MARKER);
        out
    }
}

fn unchanged(input: &str) -> Sanitized<'_> {
    Sanitized {
        text: Cow::Borrowed(input),
        findings: Vec::new(),
    }
}

fn fits(s: &str, max: usize) -> bool {
    s.len() <= max || s.chars().count() <= max
}

/// True when an enum machine value (`const`, `enum` item) contains anything
/// the sanitizer would change or that is unsafe to show/act on: control chars
/// (**including** `\n`, `\t` and `\r`, which the sanitizer keeps in prose but
/// which have no place in a machine value), ANSI/OSC, bidi, zero-width, tag
/// chars, HTML tags/markup (`<b>`, `x<y`, `&lt;`, markdown link syntax: all
/// that `Strip` would rewrite), and `javascript:`/`data:`/`vbscript:` schemes
/// (case-insensitive, where a URL scheme could start: not in `metadata:`).
/// `5 < 6`, `>=10`, `AT&T` are safe. Machine values are never altered by the
/// gateway; an option whose value is unsafe is refused instead.
pub fn is_unsafe_machine_value(value: &str) -> bool {
    if has_hidden_characters(value) {
        return true;
    }
    if has_forbidden_scheme(value) {
        return true;
    }
    if needs_work(value) {
        let strict = TextPolicy::new(HtmlMode::Strip, usize::MAX);
        if strict.sanitize(value).is_changed() {
            return true;
        }
    }
    false
}

/// Text a model reads that a person can also see as written (what a server
/// lists, its instructions and its description of itself): only what no
/// one sees is removed — terminal escapes whole, controls, bidi controls,
/// zero-width and other invisible format characters, tags, Hangul fillers,
/// and a joiner that joins nothing ([`crate::model::is_joining`]). Markup,
/// entities, links and length stay exactly as the server wrote them: a
/// description that says `<select>` or `&timestamp=` means it.
pub(crate) fn strip_invisible(input: &str) -> Sanitized<'_> {
    let mut findings = Findings::default();
    let keep = Keep {
        joiners: true,
        crlf: false,
    };
    let text = clean_invisible(input, &mut findings, keep);
    Sanitized {
        findings: findings.to_vec(),
        text,
    }
}

/// Control, bidi, zero-width, tag or other characters a person does not
/// see as written.
pub(crate) fn has_hidden_characters(value: &str) -> bool {
    value
        .chars()
        .any(|c| c.is_control() || classify_char(c).is_some())
}

fn has_forbidden_scheme(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    ["javascript:", "vbscript:", "data:"].iter().any(|scheme| {
        lower.match_indices(scheme).any(|(i, _)| {
            lower[..i]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        })
    })
}

// ---------------------------------------------------------------------------
// Findings set
// ---------------------------------------------------------------------------

#[derive(Debug, Default, Clone, Copy)]
struct Findings(u16);

impl Findings {
    fn add(&mut self, f: TextFinding) {
        self.0 |= 1 << (f as u16);
    }
    fn merge(&mut self, other: Findings) {
        self.0 |= other.0;
    }
    fn is_empty(self) -> bool {
        self.0 == 0
    }
    fn to_vec(self) -> Vec<TextFinding> {
        TextFinding::ALL
            .into_iter()
            .filter(|f| self.0 & (1 << (*f as u16)) != 0)
            .collect()
    }
}

// ---------------------------------------------------------------------------
// Fixed-point driver
// ---------------------------------------------------------------------------

/// Applies [`transform`] until the result is a fixed point. `None` when the
/// input already is one.
fn stabilize(mode: HtmlMode, input: &str, findings: &mut Findings) -> Option<String> {
    let mut cur = transform(mode, input, findings)?;
    for _ in 0..3 {
        let mut extra = Findings::default();
        match transform(mode, &cur, &mut extra) {
            None => return Some(cur),
            Some(next) => {
                findings.merge(extra);
                cur = next;
            }
        }
    }
    findings.add(TextFinding::Html);
    let mut scratch = Findings::default();
    let plain = strip_pipeline(&unicode_clean(&cur, &mut scratch), &mut scratch);
    Some(inert_chars(&plain))
}

/// Last resort: plain text without any character that markup could use.
fn inert_chars(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '<' => '‹',
            '>' => '›',
            '&' => '＆',
            '[' => '(',
            ']' => ')',
            c => c,
        })
        .collect()
}

/// One cleaning pass. `None` when nothing changed.
fn transform(mode: HtmlMode, input: &str, findings: &mut Findings) -> Option<String> {
    if !needs_work(input) {
        return None;
    }
    let cleaned = unicode_clean(input, findings);
    let out = match mode {
        HtmlMode::Strip => strip_pipeline(&cleaned, findings),
        HtmlMode::SafeSubset => safe_pipeline(&cleaned, findings),
    };
    (out != input).then_some(out)
}

/// Could this string need any work at all? (The fast path.)
fn needs_work(s: &str) -> bool {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            match b {
                b'\t' | b'\n' => {}
                0..=0x1f | 0x7f | b'<' | b'&' => return true,
                b']' if matches!(bytes.get(i + 1), Some(b'(' | b':')) => return true,
                _ => {}
            }
            i += 1;
        } else {
            let c = s[i..].chars().next().unwrap_or_default();
            if classify_char(c).is_some() {
                return true;
            }
            i += c.len_utf8().max(1);
        }
    }
    false
}

fn strip_pipeline(s: &str, findings: &mut Findings) -> String {
    let linked = autolinks(s, HtmlMode::Strip, findings);
    let text: Cow<'_, str> = if linked.contains(['<', '&']) {
        let t = strip_html_to_text(&linked);
        if t != *linked {
            findings.add(TextFinding::Html);
            if has_forbidden_attr_url(&linked) {
                findings.add(TextFinding::DangerousLink);
            }
        }
        Cow::Owned(t)
    } else {
        linked
    };
    let text = unicode_clean(&text, findings);
    // Character references may have spelled an autolink (`&lt;https://…&gt;`).
    let text = autolinks(&text, HtmlMode::Strip, findings);
    let text = markdown(&text, HtmlMode::Strip, findings, neutralize_edits);
    neutralize(&text, findings).into_owned()
}

fn safe_pipeline(s: &str, findings: &mut Findings) -> String {
    let linked = autolinks(s, HtmlMode::SafeSubset, findings);
    if !linked.contains(['<', '&']) {
        return markdown(&linked, HtmlMode::SafeSubset, findings, relax_edits).into_owned();
    }
    let serialized = SAFE_HTML.clean(&pre_escape(&linked)).to_string();
    let serialized = unicode_clean(&serialized, findings);
    if *relax(&serialized) != *linked {
        findings.add(TextFinding::Html);
        if has_forbidden_attr_url(&linked) {
            findings.add(TextFinding::DangerousLink);
        }
    }
    let text = markdown(&serialized, HtmlMode::SafeSubset, findings, relax_edits);
    relax(&text).into_owned()
}

// ---------------------------------------------------------------------------
// Step 6 helper
// ---------------------------------------------------------------------------

/// The first `keep` chars of `s`, moved back so the cut is not inside a tag
/// or a character reference.
fn safe_prefix(s: &str, keep: usize) -> &str {
    let end = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
    let mut p = &s[..end];
    if let Some(lt) = p.rfind('<') {
        if lt_is_active(&p[lt + 1..]) && !p[lt..].contains('>') {
            p = &p[..lt];
        }
    }
    // Inside one of the references the HTML serializer writes? (A cut
    // through an inert `&word` leaves it inert.)
    if let Some(amp) = p.rfind('&') {
        let partial = &p[amp + 1..];
        if ["amp;", "lt;", "gt;", "quot;", "nbsp;"]
            .iter()
            .any(|e| e.starts_with(partial))
        {
            p = &p[..amp];
        }
    }
    p
}

/// Build the shipped tables of this module's parts now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    data::warm();
    html::warm();
    markdown::warm();
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn finding_names() {
        let names: Vec<&str> = TextFinding::ALL.iter().map(|f| f.as_str()).collect();
        assert_eq!(
            names,
            [
                "html",
                "dangerous_link",
                "ansi_escape",
                "control_char",
                "bidi",
                "zero_width",
                "tag_char",
                "truncated",
                "external_link"
            ]
        );
        assert_eq!(HtmlMode::Strip.as_str(), "strip");
        assert_eq!(HtmlMode::SafeSubset.as_str(), "safe_subset");
    }

    #[test]
    fn benign_strings_are_borrowed() {
        for s in [
            "",
            "Please choose a meeting room",
            "Café déjà vu, naïve façade, Ærøskøbing",
            "会議室を選んでください。",
            "Привет, мир",
            "👍 ok 🎉 🇫🇷 ✅",
            "5 < 6 and 7 > 3",
            "x <= y, a -> b, <3",
            "AT&T, Q&A, R&D, Tom & Jerry",
            "multi\nline\twith tabs",
            "[1] see footnote [2]",
            "call foo(bar) [x] later",
            "the javascript: scheme is mentioned here",
            "a > b",
        ] {
            for p in [STRIP, SAFE] {
                let out = p.sanitize(s);
                assert!(
                    matches!(out.text, Cow::Borrowed(_)),
                    "{s:?} in {:?}",
                    p.html
                );
                assert_eq!(out.text, s);
                assert!(out.findings.is_empty());
            }
        }
    }

    #[test]
    fn truncation() {
        let p = TextPolicy::new(HtmlMode::Strip, 40);
        let long = "abcdefghij".repeat(10);
        let out = p.sanitize(&long);
        assert_eq!(out.findings, vec![TextFinding::Truncated]);
        assert_eq!(out.text.chars().count(), 40);
        assert_eq!(out.text, format!("{}{TRUNCATION_MARKER}", &long[..16]));
        // no stacking, and a string exactly at the limit passes
        assert!(!p.sanitize(&out.text).is_changed());
        assert!(!p.sanitize(&long[..40]).is_changed());
        // counts chars, not bytes
        let cjk = "会".repeat(40);
        assert!(!p.sanitize(&cjk).is_changed());
        let cjk41 = "会".repeat(41);
        let out = p.sanitize(&cjk41);
        assert_eq!(out.text.chars().count(), 40);
        // tiny limits
        assert_eq!(
            TextPolicy::new(HtmlMode::Strip, 10).sanitize(&long).text,
            "… [truncat"
        );
        assert_eq!(TextPolicy::new(HtmlMode::Strip, 0).sanitize("x").text, "");

        // SafeSubset never cuts inside a tag and closes what is open
        let p = TextPolicy::new(HtmlMode::SafeSubset, 60);
        let html = format!(
            "<b>{}</b> <a href=\"https://example.com/\">x</a>",
            "word ".repeat(20)
        );
        let out = p.sanitize(&html);
        assert!(out.text.chars().count() <= 60, "{}", out.text);
        assert!(out.text.contains(TRUNCATION_MARKER));
        assert!(
            out.text.starts_with("<b>") && out.text.ends_with("</b>"),
            "{}",
            out.text
        );
        assert!(!p.sanitize(&out.text).is_changed());
        let amp = format!("{}&amp;amp;", "x".repeat(33));
        for p in [
            TextPolicy::new(HtmlMode::SafeSubset, 60),
            TextPolicy::new(HtmlMode::Strip, 60),
        ] {
            for s in [&amp, &format!("{}&lt;b&gt;", "y".repeat(34))] {
                let once = p.sanitize(s).text.into_owned();
                assert!(once.chars().count() <= 60);
                assert_stable(p, s);
            }
        }
    }

    #[test]
    fn machine_values() {
        for v in [
            "atrium",
            "studio-b",
            "2024-01-01",
            "a b",
            "<18",
            ">=10",
            "AT&T",
            "metadata:x",
            "x_y.z",
        ] {
            assert!(!is_unsafe_machine_value(v), "{v:?}");
        }
        for v in [
            "<b>x</b>",
            "x\u{202E}",
            "\x1b[2J",
            "javascript:alert(1)",
            "JAVASCRIPT:x",
            " data:text/html,x",
            "vbscript:x",
            "a\u{200B}b",
            "x\u{E0001}",
            "a\nb",
            "x<y",
            "&lt;",
            "[a](b)",
            "\u{9b}1m",
        ] {
            assert!(is_unsafe_machine_value(v), "{v:?}");
        }
    }

    #[test]
    fn findings_are_ordered_and_deduplicated() {
        let out = STRIP
            .sanitize("\u{200B}<b>x</b>\u{202E}\x1b[1m\u{200B}[a](javascript:x)\u{E0041}\u{7}");
        assert_eq!(out.text, "xa");
        assert_eq!(
            out.findings,
            vec![
                TextFinding::Html,
                TextFinding::DangerousLink,
                TextFinding::AnsiEscape,
                TextFinding::ControlChar,
                TextFinding::Bidi,
                TextFinding::ZeroWidth,
                TextFinding::TagChar,
            ]
        );
    }

    const FRAGMENTS: &[&str] = &[
        "<",
        ">",
        "&",
        ";",
        "&amp;",
        "&amp",
        "&lt;",
        "&gt;",
        "&#",
        "&#x",
        "&#x202E;",
        "&#27;",
        "&#91;",
        "&nbsp;",
        "&not",
        "<a href=",
        "<a href=\"https://e.example\">",
        "</a>",
        "<b>",
        "</b>",
        "<p>",
        "<li>",
        "<ul>",
        "<table><td>",
        "<br>",
        "<script>",
        "</script>",
        "<!--",
        "-->",
        "<!",
        "</",
        "<?",
        "javascript:",
        "data:",
        "https://e.example",
        "mailto:a@b.c",
        "<https://e.example>",
        "<javascript:x>",
        "\x1b[",
        "\x1b]8;;",
        "\x1b\\",
        "\x1b",
        "\u{9b}",
        "\u{9d}",
        "\u{7}",
        "\r",
        "\r\n",
        "\n",
        "\t",
        " ",
        "\u{202E}",
        "\u{2066}",
        "\u{200B}",
        "\u{200D}",
        "\u{FEFF}",
        "\u{AD}",
        "\u{E0041}",
        "\u{E007F}",
        "](",
        "[x](",
        "[",
        "]",
        "(",
        ")",
        "![",
        "]:",
        "\"",
        "'",
        "\\",
        "…",
        TRUNCATION_MARKER,
        "会",
        "é",
        "👍",
    ];

    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => any::<char>().prop_map(String::from),
            2 => "[a-zA-Z0-9 ]{1,6}",
            5 => prop::sample::select(FRAGMENTS).prop_map(str::to_string),
        ]
    }

    fn text_input() -> impl Strategy<Value = String> {
        prop::collection::vec(fragment(), 0..40).prop_map(|v| v.concat())
    }

    fn check_output(out: &str, mode: HtmlMode) {
        for c in out.chars() {
            assert!(
                c == '\n' || c == '\t' || !c.is_control(),
                "control {c:?} in {out:?}"
            );
            assert!(classify_char(c).is_none(), "{c:?} in {out:?}");
        }
        if mode == HtmlMode::Strip {
            let b = out.as_bytes();
            for (i, _) in out.match_indices('<') {
                assert!(
                    !b.get(i + 1)
                        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b'/' | b'!')),
                    "markup left in {out:?}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn sanitize_is_idempotent_and_clean(s in text_input(), max in 10usize..200) {
            for mode in [HtmlMode::Strip, HtmlMode::SafeSubset] {
                let p = TextPolicy::new(mode, max);
                let once = p.sanitize(&s);
                prop_assert_eq!(once.is_changed(), once.text != s.as_str());
                prop_assert_eq!(once.findings.is_empty(), !once.is_changed());
                prop_assert!(once.text.chars().count() <= max);
                check_output(&once.text, mode);
                let twice = p.sanitize(&once.text);
                prop_assert_eq!(&twice.text, &once.text, "mode {:?}", mode);
                prop_assert!(!twice.is_changed());
                prop_assert!(twice.findings.is_empty());
            }
        }

        #[test]
        fn unlimited_sanitize_is_idempotent(s in text_input()) {
            for mode in [HtmlMode::Strip, HtmlMode::SafeSubset] {
                let p = TextPolicy::new(mode, usize::MAX);
                let once = p.sanitize(&s);
                check_output(&once.text, mode);
                prop_assert!(!p.sanitize(&once.text).is_changed(), "{:?}: {:?}", mode, once.text);
            }
        }

        #[test]
        fn arbitrary_unicode_is_idempotent(s in any::<String>(), max in 10usize..200) {
            for mode in [HtmlMode::Strip, HtmlMode::SafeSubset] {
                let p = TextPolicy::new(mode, max);
                let once = p.sanitize(&s);
                check_output(&once.text, mode);
                prop_assert!(!p.sanitize(&once.text).is_changed());
            }
        }
    }
}
