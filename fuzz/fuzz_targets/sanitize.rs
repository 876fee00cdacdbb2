//! The text sanitiser. Input: a mode byte, two bytes of `max_chars`, then
//! the text (lossy UTF-8, so every input is explored).
//!
//! Properties: the output fits `max_chars`; sanitising it again changes
//! nothing (and borrows); "changed" and "has findings" agree; no control
//! (but `\n`, `\t`), ANSI, bidi, zero-width or tag character survives, not
//! even behind a numeric character reference; `strip` output is inert when
//! read as HTML (an HTML parser reads back exactly the same text); in
//! `safe_subset` only the allowed tags remain; no markdown image remains,
//! and no link (HTML or markdown) whose scheme, as a markdown renderer and
//! then a browser read it, is other than http, https or mailto (a relative
//! link has none).
//! A value `is_unsafe_machine_value` lets through has no control character
//! and is left alone by the sanitiser.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use portcullis::policy::sanitize::{is_unsafe_machine_value, HtmlMode, TextPolicy};
use portcullis_fuzz::forbidden::{class_of, decode_numeric_refs, first_forbidden};
use pulldown_cmark::{Event, LinkType, Parser, Tag};
use regex::Regex;

fuzz_target!(|data: &[u8]| {
    let [mode, hi, lo, text @ ..] = data else {
        return;
    };
    let text = String::from_utf8_lossy(text);
    let html = if mode & 1 == 0 {
        HtmlMode::Strip
    } else {
        HtmlMode::SafeSubset
    };
    let max_chars = match u16::from_be_bytes([*hi, *lo]) {
        0xffff => usize::MAX,
        n => usize::from(n),
    };
    let policy = TextPolicy { html, max_chars };
    let out = policy.sanitize(&text);
    let cleaned: &str = &out.text;

    assert!(
        cleaned.chars().count() <= max_chars,
        "longer than max_chars"
    );
    assert_eq!(out.is_changed(), !out.findings.is_empty());
    assert_eq!(out.is_changed(), cleaned != text, "changed iff different");
    let again = policy.sanitize(cleaned);
    assert!(
        !again.is_changed(),
        "not idempotent: {cleaned:?} became {:?}",
        again.text
    );

    if let Some((i, c, why)) = first_forbidden(cleaned) {
        panic!("a {why} ({c:?} at byte {i}) survived");
    }
    if let Some((_, c, why)) = first_forbidden(&decode_numeric_refs(cleaned)) {
        panic!("a character reference to a {why} ({c:?}) survived");
    }
    match html {
        HtmlMode::Strip => strip_is_inert(cleaned),
        HtmlMode::SafeSubset => only_safe_tags(cleaned),
    }
    markdown_is_safe(cleaned, html);

    if !is_unsafe_machine_value(&text) {
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() || class_of(c).is_some()),
            "a machine value with a control or invisible character passed"
        );
        let strict = TextPolicy::new(HtmlMode::Strip, usize::MAX);
        assert!(
            !strict.sanitize(&text).is_changed(),
            "a machine value the sanitiser would change passed"
        );
    }
});

/// An HTML parser reads `text` back as exactly `text`: no tag, comment or
/// character reference is left in it.
fn strip_is_inert(text: &str) {
    let reparsed = ammonia::Builder::empty().clean(text).to_string();
    let read_back = reparsed
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    assert_eq!(read_back, text, "strip output is not inert as HTML");
}

static TAG_START: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"<[A-Za-z/!?]").unwrap());
static ALLOWED_TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^(?:</?(?:b|strong|i|em|code|br|p|ul|ol|li|a)>|<br ?/?>|<a(?: (?:href|rel)="[^"<>]*")+>)"#)
        .unwrap()
});
static HREF: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"href="([^"]*)""#).unwrap());

fn only_safe_tags(text: &str) {
    for m in TAG_START.find_iter(text) {
        let tag = ALLOWED_TAG
            .find(&text[m.start()..])
            .unwrap_or_else(|| panic!("a tag outside the safe subset: {:?}", &text[m.start()..]));
        for href in HREF.captures_iter(tag.as_str()) {
            let url = decode_numeric_refs(&href[1].replace("&amp;", "&"));
            assert!(allowed_scheme(&url), "a link to {url:?}");
        }
    }
}

/// The scheme a browser finds in `url` (the WHATWG URL parser skips
/// leading C0 controls and spaces and removes tabs and newlines) is none (a
/// relative link) or http, https or mailto.
fn allowed_scheme(url: &str) -> bool {
    let url: String = url
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let Some(end) = url.find([':', '/', '?', '#']) else {
        return true;
    };
    let scheme = &url[..end];
    let is_scheme = url[end..].starts_with(':')
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    !is_scheme
        || ["http", "https", "mailto"]
            .iter()
            .any(|s| scheme.eq_ignore_ascii_case(s))
}

/// Read the output as CommonMark (pulldown-cmark, not the sanitiser's own
/// link grammar): no link or image to a forbidden scheme, no image at all,
/// no link but an autolink in `strip` (it became `label (url)`).
fn markdown_is_safe(text: &str, html: HtmlMode) {
    for event in Parser::new(text) {
        let Event::Start(tag) = event else { continue };
        let (link_type, dest_url, image) = match tag {
            Tag::Image {
                link_type,
                dest_url,
                ..
            } => (link_type, dest_url, true),
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => (link_type, dest_url, false),
            _ => continue,
        };
        assert!(
            allowed_scheme(&dest_url),
            "a markdown link to {dest_url:?} in {text:?}"
        );
        assert!(
            !image,
            "a markdown image of {dest_url:?} survived in {text:?}"
        );
        let autolink = matches!(link_type, LinkType::Autolink | LinkType::Email);
        assert!(
            html == HtmlMode::SafeSubset || autolink,
            "a markdown link to {dest_url:?} survived strip in {text:?}"
        );
    }
}
