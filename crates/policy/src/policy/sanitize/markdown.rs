//! Markdown links, images, reference definitions and autolinks (step 3),
//! and the link-scheme classification both markups share.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;

use pulldown_cmark::{Event, LinkType, Parser, Tag, TagEnd};
use regex::{Captures, Regex};

use super::splice::{Edit, Spliced};
use super::{Findings, HtmlMode, TextFinding};

pub(super) static AUTOLINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*)>",
        r"|<([A-Za-z][A-Za-z0-9.!#$%&'*+/=?^_`{|}~\-]*@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?",
        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?)*)>",
    ))
    .expect("autolink regex")
});

pub(super) static INLINE_LINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(!?)\[([^\[\]]*)\]\([ \t\n]*",
        r"(?:<([^<>\n]*)>|((?:[^\s()\\]|\\[^\n]|\((?:[^\s()\\]|\\[^\n])*\))*))",
        r#"(?:[ \t\n]+(?:"[^"]*"|'[^']*'|\([^()]*\)))?[ \t\n]*\)"#,
    ))
    .expect("inline link regex")
});

pub(super) static REF_DEF: LazyLock<Regex> = LazyLock::new(|| {
    // `[label]: dest "optional title"` alone on its line(s), as CommonMark
    // requires; anything else after the destination makes it prose.
    Regex::new(concat!(
        r"(?m)^[ ]{0,3}\[[^\[\]\n]+\]:[ \t]*\n?[ \t]*(<[^<>\n]*>|\S+)",
        r#"(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$"#,
    ))
    .expect("reference definition regex")
});

pub(super) static LINK_LEFTOVER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\]\([ \t\n]*<?([^\s()<>\[\]]*)").expect("leftover link regex"));

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UrlKind {
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
pub(super) fn url_kind(raw: &str) -> UrlKind {
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

pub(super) fn record_link(findings: &mut Findings, kind: UrlKind) {
    findings.add(if kind == UrlKind::Forbidden {
        TextFinding::DangerousLink
    } else {
        TextFinding::Html
    });
}

/// Markdown autolinks, before the HTML parser sees them as tags.
pub(super) fn autolinks<'a>(s: &'a str, mode: HtmlMode, findings: &mut Findings) -> Cow<'a, str> {
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

pub(super) fn strip_link_text(label: &str, dest: &str) -> String {
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
pub(super) fn markdown_pass(s: &str, mode: HtmlMode, findings: &mut Findings) -> Option<String> {
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

/// Markdown links and images: see the module documentation. `finish` is
/// what the mode's last step will rewrite; a renderer reads that form.
pub(super) fn markdown<'a>(
    s: &'a str,
    mode: HtmlMode,
    findings: &mut Findings,
    finish: fn(&str) -> Vec<Edit>,
) -> Cow<'a, str> {
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
    for _ in 0..8 {
        let src = owned.as_deref().unwrap_or(s);
        match commonmark_pass(src, mode, findings, finish) {
            Some(next) => owned = Some(next),
            None => break,
        }
    }
    match owned {
        Some(o) => Cow::Owned(o),
        None => Cow::Borrowed(s),
    }
}

/// An image or link CommonMark reads, while its children are read.
pub(super) struct OpenLink {
    pub(crate) whole: Range<usize>,
    pub(crate) label: Option<Range<usize>>,
    pub(crate) dest: String,
    pub(crate) image: bool,
    /// `<https://…>`: handled before this step, by its own rule.
    pub(crate) autolink: bool,
}

impl OpenLink {
    /// The image or link an event opens, if it opens one.
    pub(super) fn opened(event: &Event<'_>, range: &Range<usize>) -> Option<OpenLink> {
        let (dest, image, autolink) = match event {
            Event::Start(Tag::Image { dest_url, .. }) => (dest_url, true, false),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            }) => (
                dest_url,
                false,
                matches!(link_type, LinkType::Autolink | LinkType::Email),
            ),
            _ => return None,
        };
        Some(OpenLink {
            whole: range.clone(),
            label: None,
            dest: dest.to_string(),
            image,
            autolink,
        })
    }

    /// Every event inside the open images and links widens their labels.
    pub(super) fn widen(stack: &mut [OpenLink], event: &Event<'_>, range: &Range<usize>) {
        if matches!(event, Event::End(_)) {
            return;
        }
        for open in stack {
            let label = open.label.get_or_insert(range.clone());
            label.start = label.start.min(range.start);
            label.end = label.end.max(range.end);
        }
    }
}

/// What a renderer reads, by a CommonMark parser rather than the patterns
/// above: labels holding brackets (`![a [b]](…)`) and reference-style
/// images and links (`![a][r]` with `[r]: …`) escape the patterns. The
/// parser reads the text as `finish` will leave it (a definition behind
/// `&gt;` is inside a block quote once that is written `>`), and only
/// locates; the text outside each rewritten element is kept byte for byte,
/// and a label is kept as its source text. Nested elements are rewritten
/// on the next pass. `None` when nothing changed.
fn commonmark_pass(
    s: &str,
    mode: HtmlMode,
    findings: &mut Findings,
    finish: fn(&str) -> Vec<Edit>,
) -> Option<String> {
    let view = Spliced::new(s, &finish(s));
    let mut stack: Vec<OpenLink> = Vec::new();
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut kinds = Vec::new();
    let mut events = Parser::new(&view.text).into_offset_iter();
    for (event, range) in events.by_ref() {
        let range = view.source_range(range);
        OpenLink::widen(&mut stack, &event, &range);
        if let Some(open) = OpenLink::opened(&event, &range) {
            stack.push(open);
        } else if let Event::End(TagEnd::Image | TagEnd::Link) = event {
            let Some(open) = stack.pop() else { continue };
            if let Some(edit) = rewrite(s, &open, mode, &mut kinds) {
                edits.push(edit);
            }
        }
    }
    // Definitions the pattern missed (in a block quote or a list item): the
    // same rule, as the parser found them.
    for (_, def) in events.reference_definitions().iter() {
        let kind = url_kind(&def.dest);
        if kind != UrlKind::Allowed {
            kinds.push(kind);
            edits.push((view.source_range(def.span.clone()), String::new()));
        }
    }
    if edits.is_empty() {
        return None;
    }
    for kind in kinds {
        record_link(findings, kind);
    }
    Some(apply_outermost(s, edits))
}

/// The replacement of one element, `None` when it stays.
fn rewrite(
    s: &str,
    open: &OpenLink,
    mode: HtmlMode,
    kinds: &mut Vec<UrlKind>,
) -> Option<(Range<usize>, String)> {
    if open.autolink {
        return None;
    }
    let label = open.label.clone().map_or("", |r| &s[r]);
    let kind = url_kind(&open.dest);
    let text = match (open.image, kind, mode) {
        (false, UrlKind::Allowed, HtmlMode::SafeSubset) => return None,
        (false, UrlKind::Allowed, HtmlMode::Strip) => strip_link_text(label, open.dest.trim()),
        _ => label.to_owned(),
    };
    kinds.push(kind);
    Some((open.whole.clone(), text))
}

/// Applies the edits no other edit contains (inner ones wait for the next pass).
pub(super) fn apply_outermost(s: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| (r.start, std::cmp::Reverse(r.end)));
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    for (range, text) in edits {
        if range.start < at {
            continue;
        }
        out.push_str(&s[at..range.start]);
        out.push_str(&text);
        at = range.end;
    }
    out.push_str(&s[at..]);
    out
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&AUTOLINK);
    LazyLock::force(&INLINE_LINK);
    LazyLock::force(&REF_DEF);
    LazyLock::force(&LINK_LEFTOVER);
}

#[cfg(test)]
mod tests {
    use crate::policy::sanitize::test_support::*;
    use crate::policy::sanitize::TextFinding;

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

    /// What CommonMark reads in `text`: (images, links that are not autolinks).
    fn rendered(text: &str) -> (usize, usize) {
        use pulldown_cmark::{Event, LinkType, Parser, Tag};
        let mut counts = (0, 0);
        for event in Parser::new(text) {
            match event {
                Event::Start(Tag::Image { .. }) => counts.0 += 1,
                Event::Start(Tag::Link { link_type, .. })
                    if !matches!(link_type, LinkType::Autolink | LinkType::Email) =>
                {
                    counts.1 += 1
                }
                _ => {}
            }
        }
        counts
    }

    /// Found by the `sanitize` fuzz target: labels holding brackets and
    /// reference-style images escaped the link patterns. Every label shape
    /// × destination × reference style, read back by a CommonMark parser.
    #[test]
    fn no_image_survives_and_strip_leaves_no_link_whatever_the_label() {
        let labels = ["a", "a [b] c", "[b]", "a [b [c]] d", "*a* `b`", "a\\]b", ""];
        let dests = [
            "https://t.example/p.gif",
            "<https://t.example/p q.gif>",
            "javascript:alert(1)",
            "x.png",
        ];
        let mut cases = Vec::new();
        for label in labels {
            for dest in dests {
                for bang in ["!", ""] {
                    cases.push(format!("{bang}[{label}]({dest})"));
                    cases.push(format!("see {bang}[{label}][r] here\n\n[r]: {dest}"));
                    cases.push(format!("{bang}[{label}][]\n\n[{label}]: {dest}"));
                    cases.push(format!("{bang}[{label}]\n\n[{label}]: {dest}"));
                    cases.push(format!("[x {bang}[{label}]({dest}) y](https://o.example)"));
                }
            }
        }
        for case in &cases {
            let s = STRIP.sanitize(case);
            assert_eq!(rendered(&s.text), (0, 0), "strip {case:?} → {:?}", s.text);
            assert_stable(STRIP, case);
            let s = SAFE.sanitize(case);
            assert_eq!(rendered(&s.text).0, 0, "safe {case:?} → {:?}", s.text);
            assert_stable(SAFE, case);
        }
        assert_eq!(strip("![a [b] c](https://t.example/p.gif)"), "a [b] c");
        assert_eq!(
            strip("[a [b] c](https://x.example)"),
            "a [b] c (https://x.example)"
        );
        assert_eq!(
            strip("go [there][r]\n\n[r]: https://x.example"),
            "go there (https://x.example)\n\n[r]: https://x.example"
        );
        let kept = "[docs [v2]](https://example.com)";
        assert!(!SAFE.sanitize(kept).is_changed(), "an allowed link stays");
    }

    /// Every link a renderer reads in `text` points at http, https, mailto
    /// or nowhere (relative).
    fn links_allowed(text: &str) -> bool {
        use pulldown_cmark::{Event, Parser, Tag};
        Parser::new(text).all(|event| match event {
            Event::Start(Tag::Link { dest_url, .. }) => {
                super::url_kind(&dest_url) != super::UrlKind::Forbidden
            }
            _ => true,
        })
    }

    /// Found by the `sanitize` fuzz target: the markdown step read the text
    /// before the mode's last step rewrote it. In `SafeSubset` a `>` came
    /// back from `&gt;` after the parser had seen a paragraph, so a
    /// reference definition in a block quote (and the image using it)
    /// appeared only in the output; in `Strip` a space after `<` undid a
    /// raw HTML tag that had hidden an image. Containers × what separates
    /// the marker from the definition × label spellings × image and link
    /// forms, with a `&` or a tag elsewhere so the HTML path is taken.
    #[test]
    fn no_image_survives_a_definition_in_any_container() {
        let containers = ["", "> ", ">", "> > ", "  >>", "- ", "1. ", "> - ", "* > > "];
        let separators = ["", "\0", "\u{200B}", "\r", "\t", "\u{1b}[0m"];
        // (as the image names it, as the definition names it)
        let labels = [
            ("r", "r"),
            ("R", "r"),
            ("a  b", "A\t B"),
            ("straße", "STRASSE"),
            ("a\u{a0}b", "a b"),
            ("a&b", "A&amp;B"),
        ];
        let dests = ["https://t.example/p.gif", "< javascript:alert(1)>"];
        let prefixes = ["Q&A\n\n", ""];
        let mut cases = Vec::new();
        for container in containers {
            for sep in separators {
                for (name, def) in labels {
                    for dest in dests {
                        let definition = format!("{container}{sep}[{def}]: {dest}");
                        for prefix in prefixes {
                            for bang in ["!", ""] {
                                cases.push(format!("{prefix}{bang}[x][{name}]\n\n{definition}"));
                                cases.push(format!("{prefix}{definition}\n\n{bang}[{name}]"));
                                cases.push(format!(
                                    "{prefix}{definition}\n{container}{bang}[{name}][]"
                                ));
                            }
                        }
                        let escaped = definition.replace('>', "&gt;").replace('<', "&lt;");
                        cases.push(format!("![x][{name}]\n\n{escaped}"));
                    }
                }
            }
        }
        // A raw tag (spelled as references) hiding an image from the parser.
        cases.push("![a&lt;b c=\"][r]\"&gt;\n\n[r]: https://t.example/p.gif".into());
        cases.push("![a&lt;b c=\"](https://t.example/p.gif)\"&gt;".into());
        let mut failed = Vec::new();
        for case in &cases {
            let strip = STRIP.sanitize(case).text;
            if rendered(&strip) != (0, 0) {
                failed.push(format!("strip {case:?} → {strip:?}"));
            }
            let safe = SAFE.sanitize(case).text;
            if rendered(&safe).0 != 0 || !links_allowed(&safe) {
                failed.push(format!("safe {case:?} → {safe:?}"));
            }
            assert_stable(STRIP, case);
            assert_stable(SAFE, case);
        }
        assert!(
            failed.is_empty(),
            "{} of {} cases:\n{}",
            failed.len(),
            cases.len() * 2,
            failed.join("\n")
        );
        assert_eq!(
            safe("Q&A\n\n![x][r]\n\n> [r]: https://t.example/p.gif"),
            "Q&A\n\nx\n\n> [r]: https://t.example/p.gif"
        );
    }

    /// The pattern finds a definition only at the start of a line; the
    /// parser finds one in a block quote or a list item too.
    #[test]
    fn definitions_in_containers_go_as_at_the_top() {
        for container in ["> ", "> > ", "- ", "1. ", "> - "] {
            for dest in ["javascript:alert(1)", "data:x", "x.png"] {
                let case = format!("{container}[r]: {dest}\n\nmore");
                for p in [STRIP, SAFE] {
                    let out = p.sanitize(&case);
                    assert!(!out.text.contains(dest), "{case:?} → {:?}", out.text);
                    assert!(out.text.ends_with("more"), "{case:?} → {:?}", out.text);
                    assert_stable(p, &case);
                }
            }
            let kept = format!("{container}[r]: https://x.example");
            assert!(!SAFE.sanitize(&kept).is_changed(), "{kept:?}");
        }
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
}
