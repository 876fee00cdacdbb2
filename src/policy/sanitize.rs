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
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};

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
    pub fn as_str(self) -> &'static str {
        match self {
            HtmlMode::Strip => "strip",
            HtmlMode::SafeSubset => "safe_subset",
        }
    }
}

/// The visible marker appended to a truncated string (24 chars).
pub const TRUNCATION_MARKER: &str = "… [truncated by gateway]";
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
}

impl TextFinding {
    /// Every finding, in the order used in [`Sanitized::findings`].
    pub const ALL: [TextFinding; 8] = [
        TextFinding::Html,
        TextFinding::DangerousLink,
        TextFinding::AnsiEscape,
        TextFinding::ControlChar,
        TextFinding::Bidi,
        TextFinding::ZeroWidth,
        TextFinding::TagChar,
        TextFinding::Truncated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TextFinding::Html => "html",
            TextFinding::DangerousLink => "dangerous_link",
            TextFinding::AnsiEscape => "ansi_escape",
            TextFinding::ControlChar => "control_char",
            TextFinding::Bidi => "bidi",
            TextFinding::ZeroWidth => "zero_width",
            TextFinding::TagChar => "tag_char",
            TextFinding::Truncated => "truncated",
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
    if value
        .chars()
        .any(|c| c.is_control() || classify_char(c).is_some())
    {
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

// ---------------------------------------------------------------------------
// Step 2: terminal escapes, controls, invisible characters
// ---------------------------------------------------------------------------

/// The finding for a character that is always removed (ESC, `\r` and the C1
/// introducers get special treatment in [`unicode_clean`] first).
fn classify_char(c: char) -> Option<TextFinding> {
    match c {
        '\t' | '\n' => None,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => Some(TextFinding::ControlChar),
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}' => {
            Some(TextFinding::Bidi)
        }
        '\u{200b}'..='\u{200d}'
        | '\u{2060}'..='\u{2064}'
        | '\u{206a}'..='\u{206f}'
        | '\u{feff}'
        | '\u{180e}'
        | '\u{ad}'
        | '\u{34f}'
        | '\u{fff9}'..='\u{fffb}' => Some(TextFinding::ZeroWidth),
        '\u{e0000}'..='\u{e007f}' => Some(TextFinding::TagChar),
        _ => None,
    }
}

type CharCursor<'a> = std::iter::Peekable<std::str::Chars<'a>>;

fn unicode_clean<'a>(s: &'a str, findings: &mut Findings) -> Cow<'a, str> {
    if !s.chars().any(|c| classify_char(c).is_some()) {
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
            '\r' => {
                findings.add(TextFinding::ControlChar);
                if it.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            _ => match classify_char(c) {
                Some(f) => findings.add(f),
                None => out.push(c),
            },
        }
    }
    Cow::Owned(out)
}

/// After ESC: consumes the rest of the escape sequence.
fn skip_escape(it: &mut CharCursor<'_>) {
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
fn skip_csi(it: &mut CharCursor<'_>) {
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
fn skip_control_string(it: &mut CharCursor<'_>) {
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

// ---------------------------------------------------------------------------
// Step 3: markup
// ---------------------------------------------------------------------------

const SAFE_TAGS: [&str; 11] = [
    "b", "strong", "i", "em", "code", "br", "p", "ul", "ol", "li", "a",
];

/// Tags whose boundaries become a line break in `Strip` mode.
const STRIP_BLOCK_TAGS: [&str; 24] = [
    "p",
    "div",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "tr",
    "table",
    "thead",
    "tbody",
    "tfoot",
    "blockquote",
    "pre",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "article",
    "hr",
];

static SAFE_HTML: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut b = ammonia::Builder::empty();
    b.tags(HashSet::from(SAFE_TAGS))
        .tag_attributes(HashMap::from([("a", HashSet::from(["href"]))]))
        .generic_attributes(HashSet::new())
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean_content_tags(HashSet::from(["script", "style"]))
        .strip_comments(true);
    b
});

/// Used by `Strip`: keeps only the structure the text conversion needs (line
/// breaks, blocks, cells, links with allowed hrefs), never attributes
/// otherwise; the output is walked into plain text by [`strip_html_to_text`].
static STRIP_HTML: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut tags: HashSet<&'static str> = STRIP_BLOCK_TAGS.into_iter().collect();
    tags.extend(["br", "td", "th", "a"]);
    let mut b = ammonia::Builder::empty();
    b.tags(tags)
        .tag_attributes(HashMap::from([("a", HashSet::from(["href"]))]))
        .generic_attributes(HashSet::new())
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(None)
        .clean_content_tags(HashSet::from(["script", "style"]))
        .strip_comments(true);
    b
});

static AUTOLINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*)>",
        r"|<([A-Za-z][A-Za-z0-9.!#$%&'*+/=?^_`{|}~\-]*@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?",
        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?)*)>",
    ))
    .expect("autolink regex")
});

static INLINE_LINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(!?)\[([^\[\]]*)\]\([ \t\n]*",
        r"(?:<([^<>\n]*)>|((?:[^\s()\\]|\\[^\n]|\((?:[^\s()\\]|\\[^\n])*\))*))",
        r#"(?:[ \t\n]+(?:"[^"]*"|'[^']*'|\([^()]*\)))?[ \t\n]*\)"#,
    ))
    .expect("inline link regex")
});

static REF_DEF: LazyLock<Regex> = LazyLock::new(|| {
    // `[label]: dest "optional title"` alone on its line(s), as CommonMark
    // requires; anything else after the destination makes it prose.
    Regex::new(concat!(
        r"(?m)^[ ]{0,3}\[[^\[\]\n]+\]:[ \t]*\n?[ \t]*(<[^<>\n]*>|\S+)",
        r#"(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$"#,
    ))
    .expect("reference definition regex")
});

static LINK_LEFTOVER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\]\([ \t\n]*<?([^\s()<>\[\]]*)").expect("leftover link regex"));

static URL_ATTR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)(?:href|src|action|formaction|data|poster|background|cite|srcset|ping)",
        r#"[ \t\n]*=[ \t\n]*(?:"([^"]*)"|'([^']*)'|([^\s>]+))"#,
    ))
    .expect("url attribute regex")
});

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UrlKind {
    /// http, https, mailto.
    Allowed,
    /// No scheme: relative path, fragment, query.
    Relative,
    /// Any other explicit scheme (javascript, data, vbscript, file, …).
    Forbidden,
}

/// Classifies a link target the way a browser would find its scheme:
/// whitespace and control characters inside are ignored (`java\tscript:`),
/// markdown backslash escapes too (`javascript\:`), case is ignored.
fn url_kind(raw: &str) -> UrlKind {
    let cleaned: String = raw
        .chars()
        .filter(|c| !(c.is_ascii_whitespace() || c.is_control() || *c == '\\'))
        .collect();
    let t = cleaned.trim_start_matches('<');
    let Some(end) = t.find([':', '/', '?', '#']) else {
        return UrlKind::Relative;
    };
    if t.as_bytes()[end] != b':' {
        return UrlKind::Relative;
    }
    let scheme = &t[..end];
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !valid {
        return UrlKind::Relative;
    }
    if ["http", "https", "mailto"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s))
    {
        UrlKind::Allowed
    } else {
        UrlKind::Forbidden
    }
}

fn record_link(findings: &mut Findings, kind: UrlKind) {
    findings.add(if kind == UrlKind::Forbidden {
        TextFinding::DangerousLink
    } else {
        TextFinding::Html
    });
}

/// Markdown autolinks, before the HTML parser sees them as tags.
fn autolinks<'a>(s: &'a str, mode: HtmlMode, findings: &mut Findings) -> Cow<'a, str> {
    if !s.contains('<') {
        return Cow::Borrowed(s);
    }
    let mut kinds = Vec::new();
    let out = AUTOLINK.replace_all(s, |caps: &Captures<'_>| {
        let (target, href) = match (caps.get(1), caps.get(2)) {
            (Some(uri), _) => (uri.as_str(), uri.as_str().to_string()),
            (None, Some(mail)) => (mail.as_str(), format!("mailto:{}", mail.as_str())),
            _ => return caps[0].to_string(),
        };
        let kind = url_kind(&href);
        kinds.push(kind);
        match (kind, mode) {
            (UrlKind::Allowed, HtmlMode::Strip) => target.to_string(),
            (UrlKind::Allowed, HtmlMode::SafeSubset) => format!(
                "<a href=\"{}\">{}</a>",
                href.replace('&', "&amp;").replace('"', "&quot;"),
                target.replace('&', "&amp;")
            ),
            _ => String::new(),
        }
    });
    for kind in kinds {
        record_link(findings, kind);
    }
    out
}

/// Escapes a `<` that nothing later could close, and a `<!--` that no later
/// `-->`/`--!>` closes: html5ever drops an unterminated tag or comment
/// together with the rest of the input.
fn pre_escape(s: &str) -> Cow<'_, str> {
    let last_gt = s.rfind('>');
    let last_comment_end = match (s.rfind("-->"), s.rfind("--!>")) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let needs = |i: usize| {
        last_gt.is_none_or(|g| g < i)
            || (s[i..].starts_with("<!--") && last_comment_end.is_none_or(|e| e < i + 2))
    };
    if !s.match_indices('<').any(|(i, _)| needs(i)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut last = 0;
    for (i, _) in s.match_indices('<') {
        if needs(i) {
            out.push_str(&s[last..i]);
            out.push_str("&lt;");
            last = i + 1;
        }
    }
    out.push_str(&s[last..]);
    Cow::Owned(out)
}

/// Is there a URL-carrying attribute with a forbidden scheme? (Only used to
/// explain a change ammonia made; ammonia does the removing.)
fn has_forbidden_attr_url(s: &str) -> bool {
    if !s.contains('=') {
        return false;
    }
    URL_ATTR.captures_iter(s).any(|caps| {
        let value = caps
            .get(1)
            .or_else(|| caps.get(2))
            .or_else(|| caps.get(3))
            .map_or("", |m| m.as_str());
        if value.contains('&') {
            url_kind(&strip_html_to_text(value)) == UrlKind::Forbidden
        } else {
            url_kind(value) == UrlKind::Forbidden
        }
    })
}

/// Decodes the only references html5ever's serializer writes.
fn decode_serialized(s: &str) -> Cow<'_, str> {
    if !s.contains('&') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let (ch, len) = if rest.starts_with("&amp;") {
            ('&', 5)
        } else if rest.starts_with("&lt;") {
            ('<', 4)
        } else if rest.starts_with("&gt;") {
            ('>', 4)
        } else if rest.starts_with("&quot;") {
            ('"', 6)
        } else if rest.starts_with("&nbsp;") {
            ('\u{a0}', 6)
        } else {
            ('&', 1)
        };
        out.push(ch);
        rest = &rest[len..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// End (exclusive) of the tag starting at `start` (a `<`), quote-aware.
fn tag_end(s: &str, start: usize) -> usize {
    let bytes = s.as_bytes();
    let mut quote = None;
    let mut i = start + 1;
    while i < bytes.len() {
        let c = bytes[i];
        i += 1;
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c == b'>' => return i,
            None => {}
        }
    }
    bytes.len()
}

/// `Strip`: HTML to plain text, through ammonia. The result is not yet inert
/// (decoded `&lt;b&gt;` is `<b>`); [`neutralize`] does that last.
fn strip_html_to_text(src: &str) -> String {
    let pre = pre_escape(src);
    let serialized = STRIP_HTML.clean(&pre).to_string();
    let mut out = String::with_capacity(serialized.len());
    let mut pending: Option<char> = None;
    let mut link: Option<(String, usize)> = None;
    let mut i = 0;
    while i < serialized.len() {
        if serialized.as_bytes()[i] == b'<' {
            let end = tag_end(&serialized, i);
            let tag = serialized[i + 1..end].trim_end_matches('>');
            let closing = tag.starts_with('/');
            let name: &str = tag
                .trim_start_matches('/')
                .split(|c: char| c.is_ascii_whitespace() || c == '/')
                .next()
                .unwrap_or("");
            match name {
                "br" => {
                    out.push('\n');
                    pending = None;
                }
                "td" | "th" if closing && pending.is_none() => pending = Some(' '),
                "a" => {
                    if closing {
                        if let Some((href, start)) = link.take() {
                            let label = out[start..].trim();
                            let bare = href.strip_prefix("mailto:").unwrap_or(&href);
                            if href.is_empty() || label == href || label == bare {
                                // nothing hidden
                            } else if label.is_empty() {
                                out.push_str(&href);
                            } else {
                                out.push_str(" (");
                                out.push_str(&href);
                                out.push(')');
                            }
                        }
                    } else {
                        let href = tag
                            .split_once("href=\"")
                            .and_then(|(_, rest)| rest.split_once('"'))
                            .map(|(v, _)| decode_serialized(v).into_owned())
                            .unwrap_or_default();
                        link = Some((href, out.len()));
                    }
                }
                _ if STRIP_BLOCK_TAGS.contains(&name) => pending = Some('\n'),
                _ => {}
            }
            i = end;
        } else {
            let end = serialized[i..]
                .find('<')
                .map_or(serialized.len(), |j| i + j);
            let text = decode_serialized(&serialized[i..end]);
            if let (Some(p), Some(first)) = (pending.take(), text.chars().next()) {
                if let Some(last) = out.chars().next_back() {
                    if !last.is_whitespace() && !first.is_whitespace() {
                        out.push(p);
                    } else if p == '\n' && last != '\n' && first != '\n' {
                        out.push('\n');
                    }
                }
            }
            out.push_str(&text);
            i = end;
        }
    }
    out
}

/// The 106 references html5ever decodes even without a `;`.
const LEGACY_ENTITIES: [&str; 106] = [
    "AElig", "AMP", "Aacute", "Acirc", "Agrave", "Aring", "Atilde", "Auml", "COPY", "Ccedil",
    "ETH", "Eacute", "Ecirc", "Egrave", "Euml", "GT", "Iacute", "Icirc", "Igrave", "Iuml", "LT",
    "Ntilde", "Oacute", "Ocirc", "Ograve", "Oslash", "Otilde", "Ouml", "QUOT", "REG", "THORN",
    "Uacute", "Ucirc", "Ugrave", "Uuml", "Yacute", "aacute", "acirc", "acute", "aelig", "agrave",
    "amp", "aring", "atilde", "auml", "brvbar", "ccedil", "cedil", "cent", "copy", "curren", "deg",
    "divide", "eacute", "ecirc", "egrave", "eth", "euml", "frac12", "frac14", "frac34", "gt",
    "iacute", "icirc", "iexcl", "igrave", "iquest", "iuml", "laquo", "lt", "macr", "micro",
    "middot", "nbsp", "not", "ntilde", "oacute", "ocirc", "ograve", "ordf", "ordm", "oslash",
    "otilde", "ouml", "para", "plusmn", "pound", "quot", "raquo", "reg", "sect", "shy", "sup1",
    "sup2", "sup3", "szlig", "thorn", "times", "uacute", "ucirc", "ugrave", "uml", "uuml",
    "yacute", "yen", "yuml",
];

/// Would a `&` followed by `rest` start a character reference in HTML text?
/// Errs on the side of "yes" (`&name;` counts even for unknown names); "no"
/// is exact, which is what idempotence needs.
fn amp_is_active(rest: &str) -> bool {
    let b = rest.as_bytes();
    match b.first() {
        Some(b'#') => match b.get(1) {
            Some(d) if d.is_ascii_digit() => true,
            Some(b'x' | b'X') => b.get(2).is_some_and(|h| h.is_ascii_hexdigit()),
            _ => false,
        },
        Some(c) if c.is_ascii_alphabetic() => {
            let run = b.iter().take_while(|c| c.is_ascii_alphanumeric()).count();
            b.get(run) == Some(&b';')
                || LEGACY_ENTITIES
                    .iter()
                    .any(|name| rest[..run].starts_with(name))
        }
        _ => false,
    }
}

/// Would a `<` followed by `rest` start markup (a tag, end tag, comment,
/// doctype or processing instruction)?
fn lt_is_active(rest: &str) -> bool {
    rest.as_bytes()
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b'/' | b'!' | b'?'))
}

/// `Strip`, last step: a space after every `<`/`&` that would start markup.
fn neutralize<'a>(s: &'a str, findings: &mut Findings) -> Cow<'a, str> {
    let active = |i: usize, c: char| match c {
        '<' => lt_is_active(&s[i + 1..]),
        '&' => amp_is_active(&s[i + 1..]),
        _ => false,
    };
    if !s
        .match_indices(['<', '&'])
        .any(|(i, m)| active(i, m.chars().next().unwrap_or(' ')))
    {
        return Cow::Borrowed(s);
    }
    findings.add(TextFinding::Html);
    let mut out = String::with_capacity(s.len() + 8);
    let mut last = 0;
    for (i, m) in s.match_indices(['<', '&']) {
        if active(i, m.chars().next().unwrap_or(' ')) {
            out.push_str(&s[last..=i]);
            out.push(' ');
            last = i + 1;
        }
    }
    out.push_str(&s[last..]);
    Cow::Owned(out)
}

/// `SafeSubset`, last step: ammonia's serialization with `&gt;` and `&nbsp;`
/// as characters and `&lt;`/`&amp;` only where needed. Tags are copied as is.
fn relax(s: &str) -> Cow<'_, str> {
    if !s.contains('&') {
        return Cow::Borrowed(s);
    }
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match bytes[i] {
            b'<' => {
                let end = tag_end(s, i);
                out.push_str(&s[i..end]);
                i = end;
            }
            b'&' => {
                let rest = &s[i..];
                if rest.starts_with("&gt;") {
                    out.push('>');
                    i += 4;
                } else if rest.starts_with("&nbsp;") {
                    out.push('\u{a0}');
                    i += 6;
                } else if rest.starts_with("&lt;") {
                    out.push_str(if lt_is_active(&s[i + 4..]) {
                        "&lt;"
                    } else {
                        "<"
                    });
                    i += 4;
                } else if rest.starts_with("&amp;") {
                    out.push_str(if amp_is_active(&s[i + 5..]) {
                        "&amp;"
                    } else {
                        "&"
                    });
                    i += 5;
                } else {
                    out.push('&');
                    i += 1;
                }
            }
            _ => {
                let end = s[i..].find(['<', '&']).map_or(s.len(), |j| i + j);
                out.push_str(&s[i..end]);
                i = end;
            }
        }
    }
    if out == s {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(out)
    }
}

fn strip_link_text(label: &str, dest: &str) -> String {
    let label_t = label.trim();
    let bare = dest.strip_prefix("mailto:").unwrap_or(dest);
    if label_t.is_empty() {
        dest.to_string()
    } else if label_t == dest || label_t == bare {
        label.to_string()
    } else {
        format!("{label} ({dest})")
    }
}

/// One pass over markdown link syntax. `None` when nothing changed.
fn markdown_pass(s: &str, mode: HtmlMode, findings: &mut Findings) -> Option<String> {
    let mut kinds = Vec::new();
    let defs = REF_DEF.replace_all(s, |caps: &Captures<'_>| {
        let kind = url_kind(&caps[1]);
        if kind == UrlKind::Allowed {
            caps[0].to_string()
        } else {
            kinds.push(kind);
            String::new()
        }
    });
    let inline = INLINE_LINK.replace_all(&defs, |caps: &Captures<'_>| {
        let image = !caps[1].is_empty();
        let label = &caps[2];
        let dest = caps
            .get(3)
            .or_else(|| caps.get(4))
            .map_or("", |m| m.as_str());
        let kind = url_kind(dest);
        if image {
            kinds.push(kind);
            return label.to_string();
        }
        match (kind, mode) {
            (UrlKind::Allowed, HtmlMode::SafeSubset) => caps[0].to_string(),
            (UrlKind::Allowed, HtmlMode::Strip) => {
                kinds.push(kind);
                strip_link_text(label, dest.trim())
            }
            _ => {
                kinds.push(kind);
                label.to_string()
            }
        }
    });
    if kinds.is_empty() {
        return None;
    }
    for kind in kinds {
        record_link(findings, kind);
    }
    Some(inline.into_owned())
}

/// Markdown links and images: see the module documentation.
fn markdown<'a>(s: &'a str, mode: HtmlMode, findings: &mut Findings) -> Cow<'a, str> {
    if !s.contains("](") && !s.contains("]:") {
        return Cow::Borrowed(s);
    }
    let mut owned: Option<String> = None;
    for _ in 0..8 {
        let src = owned.as_deref().unwrap_or(s);
        match markdown_pass(src, mode, findings) {
            Some(next) => owned = Some(next),
            None => break,
        }
    }
    let src = owned.as_deref().unwrap_or(s);
    if src.contains("](") {
        let mut kinds = Vec::new();
        let fixed = LINK_LEFTOVER.replace_all(src, |caps: &Captures<'_>| {
            let kind = url_kind(&caps[1]);
            if kind == UrlKind::Allowed {
                caps[0].to_string()
            } else {
                kinds.push(kind);
                format!("] {}", &caps[0][1..])
            }
        });
        if !kinds.is_empty() {
            for kind in kinds {
                record_link(findings, kind);
            }
            owned = Some(fixed.into_owned());
        }
    }
    match owned {
        Some(o) => Cow::Owned(o),
        None => Cow::Borrowed(s),
    }
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
    let text = markdown(&text, HtmlMode::Strip, findings);
    neutralize(&text, findings).into_owned()
}

fn safe_pipeline(s: &str, findings: &mut Findings) -> String {
    let linked = autolinks(s, HtmlMode::SafeSubset, findings);
    if !linked.contains(['<', '&']) {
        return markdown(&linked, HtmlMode::SafeSubset, findings).into_owned();
    }
    let serialized = SAFE_HTML.clean(&pre_escape(&linked)).to_string();
    let serialized = unicode_clean(&serialized, findings);
    if *relax(&serialized) != *linked {
        findings.add(TextFinding::Html);
        if has_forbidden_attr_url(&linked) {
            findings.add(TextFinding::DangerousLink);
        }
    }
    let text = markdown(&serialized, HtmlMode::SafeSubset, findings);
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STRIP: TextPolicy = TextPolicy {
        html: HtmlMode::Strip,
        max_chars: 10_000,
    };
    const SAFE: TextPolicy = TextPolicy {
        html: HtmlMode::SafeSubset,
        max_chars: 10_000,
    };

    fn strip(s: &str) -> String {
        STRIP.sanitize(s).text.into_owned()
    }
    fn safe(s: &str) -> String {
        SAFE.sanitize(s).text.into_owned()
    }
    fn findings(p: TextPolicy, s: &str) -> Vec<TextFinding> {
        p.sanitize(s).findings
    }
    fn assert_stable(p: TextPolicy, s: &str) {
        let once = p.sanitize(s).text.into_owned();
        let twice = p.sanitize(&once);
        assert!(
            !twice.is_changed(),
            "not idempotent for {s:?}: {once:?} -> {:?}",
            twice.text
        );
    }

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
                "truncated"
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
    fn html_finding_script_and_img() {
        for p in [STRIP, SAFE] {
            let out = p.sanitize("<script>alert(1)</script>Hi");
            assert_eq!(out.text, "Hi");
            assert_eq!(out.findings, vec![TextFinding::Html]);
            let out = p.sanitize("<img src=x onerror=alert(1)>");
            assert_eq!(out.text, "");
            assert_eq!(out.findings, vec![TextFinding::Html]);
            assert_eq!(p.sanitize("a<style>body{}</style>b").text, "ab");
            assert_eq!(p.sanitize("see <!-- hidden --> this").text, "see  this");
        }
        assert_eq!(strip("<b>bold</b> and <i>it</i>"), "bold and it");
        assert_eq!(
            safe("<b>bold</b> and <i>it</i>"),
            "<b>bold</b> and <i>it</i>"
        );
        assert!(!SAFE.sanitize("<b>bold</b> <em>x</em>").is_changed());
        assert_eq!(safe("<div onclick=x()>t</div><u>u</u>"), "tu");
        assert_eq!(safe("<B>x</B>"), "<b>x</b>");
    }

    #[test]
    fn dangerous_link_in_html() {
        let out = STRIP.sanitize(r#"<a href="javascript:alert(1)">click</a>"#);
        assert_eq!(out.text, "click");
        assert_eq!(
            out.findings,
            vec![TextFinding::Html, TextFinding::DangerousLink]
        );
        let out = SAFE.sanitize(r#"<a href="javascript:alert(1)">click</a>"#);
        assert_eq!(
            out.text,
            r#"<a rel="noopener noreferrer nofollow">click</a>"#
        );
        assert_eq!(
            out.findings,
            vec![TextFinding::Html, TextFinding::DangerousLink]
        );
        // entity-obfuscated scheme
        let out = SAFE.sanitize(r#"<a href="jav&#x09;ascript:alert(1)">x</a>"#);
        assert_eq!(out.text, r#"<a rel="noopener noreferrer nofollow">x</a>"#);
        assert!(out.findings.contains(&TextFinding::DangerousLink));
        for p in [STRIP, SAFE] {
            assert_eq!(
                p.sanitize(r#"<a href="data:text/html,x">d</a>"#)
                    .findings
                    .len(),
                2
            );
        }
    }

    #[test]
    fn safe_subset_links() {
        assert_eq!(
            safe(r#"<a href="https://example.com" onclick="x()">docs</a>"#),
            r#"<a href="https://example.com" rel="noopener noreferrer nofollow">docs</a>"#
        );
        assert_stable(SAFE, r#"<a href="https://example.com">docs</a>"#);
        // relative hrefs are dropped
        assert_eq!(
            safe(r#"<a href="/settings">s</a>"#),
            r#"<a rel="noopener noreferrer nofollow">s</a>"#
        );
        assert_eq!(
            strip(r#"<a href="https://example.com/a?b=1&amp;c=2">docs</a>"#),
            "docs (https://example.com/a?b=1&c=2)"
        );
        assert_eq!(
            strip(r#"<a href="https://example.com">https://example.com</a>"#),
            "https://example.com"
        );
    }

    #[test]
    fn markdown_links() {
        for p in [STRIP, SAFE] {
            let out = p.sanitize("[click](javascript:alert(1))");
            assert_eq!(out.text, "click");
            assert_eq!(out.findings, vec![TextFinding::DangerousLink]);
            assert_eq!(p.sanitize("[x](JavaScript:alert(1)) y").text, "x y");
            assert_eq!(p.sanitize("[x](<vbscript:msgbox>)").text, "x");
            assert_eq!(
                p.sanitize("[x](data:text/html;base64,AAAA \"t\")").text,
                "x"
            );
            assert_eq!(p.sanitize("[x](javascript\\:alert(1))").text, "x");
            assert_eq!(p.sanitize("[x](file:///etc/passwd)").text, "x");
            assert_eq!(p.sanitize("[x](#frag)").text, "x");
            assert_eq!(
                p.sanitize("![pixel](https://t.example/p.gif)").text,
                "pixel"
            );
            assert_eq!(
                p.sanitize("![a](javascript:x)").findings,
                vec![TextFinding::DangerousLink]
            );
            // entity-encoded scheme separator
            assert_eq!(p.sanitize("[x](javascript&#58;alert(1))").text, "x");
            // nested parens too deep for the link grammar
            let out = p.sanitize("[x](javascript:a(b(c)))");
            assert!(!out.text.contains("]("), "{:?}", out.text);
            assert!(out.findings.contains(&TextFinding::DangerousLink));
            // reference definitions
            assert_eq!(
                p.sanitize("[go][1]\n[1]: javascript:alert(1)").text,
                "[go][1]\n"
            );
            assert!(!p.sanitize("[go][1]\n[1]: https://example.com").is_changed());
            assert_eq!(p.sanitize("[1]: data:x 'title'\nnext").text, "\nnext");
            assert!(!p.sanitize("[1]: see the appendix").is_changed());
        }
        assert_eq!(
            strip("[docs](https://example.com)"),
            "docs (https://example.com)"
        );
        assert_eq!(
            strip("[https://example.com](https://example.com)"),
            "https://example.com"
        );
        assert_eq!(strip("[](https://example.com)"), "https://example.com");
        assert_eq!(
            strip("[paypal.com](https://evil.example)"),
            "paypal.com (https://evil.example)"
        );
        assert_eq!(
            strip("[a](https://x.example \"title\")"),
            "a (https://x.example)"
        );
        assert_eq!(
            findings(STRIP, "[docs](https://example.com)"),
            vec![TextFinding::Html]
        );
        let s = "[docs](https://example.com)";
        assert!(!SAFE.sanitize(s).is_changed());
        assert_eq!(strip("[[a](javascript:1)](javascript:2)"), "a");
        assert_eq!(
            strip("[![img](x.png)](https://y.example)"),
            "img (https://y.example)"
        );
    }

    #[test]
    fn autolinks_kept_only_for_web_and_mail() {
        assert_eq!(
            strip("see <https://example.com/a>"),
            "see https://example.com/a"
        );
        assert_eq!(strip("mail <ops@example.com>"), "mail ops@example.com");
        assert_eq!(
            safe("see <https://example.com/a>"),
            r#"see <a href="https://example.com/a" rel="noopener noreferrer nofollow">https://example.com/a</a>"#
        );
        for p in [STRIP, SAFE] {
            let out = p.sanitize("x <javascript:alert(1)> y");
            assert_eq!(out.text, "x  y");
            assert_eq!(out.findings, vec![TextFinding::DangerousLink]);
            assert_stable(p, "see <https://example.com/a?b&c>");
        }
    }

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
    fn strip_is_plain_text() {
        assert_eq!(strip("&lt;b&gt;bold&lt;/b&gt;"), "< b>bold< /b>");
        assert_stable(STRIP, "&lt;b&gt;bold&lt;/b&gt;");
        assert_eq!(strip("AT&amp;T"), "AT&T");
        assert_eq!(strip("&amp;amp; &amp;lt;"), "& amp; & lt;");
        assert_eq!(strip("&copy; 2024 &euro;5"), "© 2024 €5");
        assert_eq!(strip("<p>first</p><p>second</p>"), "first\nsecond");
        assert_eq!(strip("line<br>break"), "line\nbreak");
        assert_eq!(strip("Pick:<ul><li>A</li><li>B</li></ul>"), "Pick:\nA\nB");
        assert_eq!(strip("<table><tr><td>a</td><td>b</td></tr></table>"), "a b");
        assert_eq!(strip("a&nbsp;b"), "a\u{a0}b");
        // unterminated constructs keep the text they would have swallowed
        assert_eq!(strip("if x<y then z"), "if x< y then z");
        assert_eq!(strip("cost <!-- not closed"), "cost < !-- not closed");
        assert_eq!(strip("<b>bold <i"), "bold < i");
        // a `<` with a later `>` is a tag, as in any renderer
        assert_eq!(strip("a<b and c>d"), "ad");
        assert_eq!(strip("&#91;x&#93;(javascript:alert(1))"), "x");
        assert_eq!(strip("&lt;https://e.example&gt;"), "https://e.example");
    }

    #[test]
    fn safe_subset_minimal_escaping() {
        assert_eq!(safe("5 < 6 & <b>7</b> > 3"), "5 < 6 & <b>7</b> > 3");
        assert_eq!(safe("if x<y then"), "if x&lt;y then");
        assert_eq!(safe("&lt;b&gt; is a tag"), "&lt;b> is a tag");
        assert_eq!(safe("AT&amp;T"), "AT&T");
        assert_eq!(safe("&amp;amp;"), "&amp;amp;");
        assert_eq!(safe("<p>unclosed"), "<p>unclosed</p>");
        for s in [
            "if x<y then",
            "&lt;b&gt;",
            "<ul><li>a<li>b</ul>",
            "<li><table><td><li>x</table>",
            "<a href=https://a.example><table><td><a href=https://b.example>z</table>",
            "<p><code>x</code></p><br/>",
        ] {
            assert_stable(SAFE, s);
            assert_stable(STRIP, s);
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

        #[test]
        fn amp_classifier_agrees_with_html5ever(tail in "[A-Za-z0-9#;x]{0,8}[ .]?") {
            // "inert" must be exact: html5ever leaves the text alone.
            let text = format!("&{tail}");
            if !amp_is_active(&tail) {
                prop_assert_eq!(strip_html_to_text(&text), text);
            }
        }
    }
}
