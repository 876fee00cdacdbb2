//! Reading the file into its raw types, collecting every mistake serde
//! would stop at. An unknown key or a value of the wrong kind is reported
//! with its full path (`upstream[0].reponse_timeout`), then blanked out
//! with spaces (so every later line and column stays where it was) and the
//! file is read again. A syntax error or a missing key ends the reading:
//! nothing can be read past it without guessing.

use std::ops::Range;

use serde::de::DeserializeOwned;
use toml_edit::{ImDocument, InlineTable, Item, Table, Value};

use super::check;
use super::locate::Locator;
use super::words;
use crate::model::{ConfigError, Shape};

/// The most mistakes reported from one file.
const MAX_MISTAKES: usize = 64;

/// What reading the file gave.
pub(super) struct Read<T> {
    /// The raw config, once every removable mistake was blanked out.
    pub(crate) raw: Option<T>,
    pub(crate) errors: Vec<ConfigError>,
    /// Paths blanked out because of a mistake: later complaints about
    /// them (a missing listener after a `[listener]` typo) are consequences.
    pub(crate) removed: Vec<String>,
    /// False when a whole section had to be left out to read on: the
    /// raw config then lacks it, so it is not validated further.
    pub(crate) complete: bool,
}

/// Where a key and its value sit, and what removing them blanks.
#[derive(Debug)]
struct Entry {
    path: String,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
    /// Empty: it cannot be removed without renumbering its neighbours
    /// (an element of an array of tables).
    blank: Vec<Range<usize>>,
}

/// Read the file into `T`, whose shape (`Shape::of::<T>()`) is `shape`.
pub(super) fn read<T: DeserializeOwned>(loc: &Locator<'_>, shape: &Shape) -> Read<T> {
    let mut out = Read {
        raw: None,
        errors: Vec::new(),
        removed: Vec::new(),
        complete: true,
    };
    let doc = match ImDocument::parse(loc.text) {
        Ok(d) => d,
        Err(e) => {
            let problem = words::syntax(e.message());
            let span = e.span().unwrap_or(0..0);
            out.errors
                .push(loc.at(span, "(syntax)", problem.explain("")));
            return out;
        }
    };
    let mut entries = Vec::new();
    walk_table(doc.as_table(), "", loc.text, &mut entries);
    let mut text = loc.text.as_bytes().to_vec();
    let mut problems = check::check(doc.as_table(), shape);
    problems.truncate(MAX_MISTAKES);
    for p in &problems {
        out.errors
            .push(loc.at(p.span.clone(), &p.path, p.what.explain(last(&p.path))));
        if !p.what.removable() {
            // Read on without it: serde stops at it, and its section goes.
            continue;
        }
        let own = entries
            .iter()
            .find(|e| e.path == p.path)
            .map(|e| e.blank.as_slice())
            .filter(|b| !b.is_empty());
        if let Some(blank) = own {
            if let Some(meant) = p.what.meant() {
                out.removed.push(sibling(&p.path, meant));
            }
            out.removed.push(p.path.clone());
            for r in blank {
                blank_out(&mut text, r.clone());
            }
        }
    }
    // What serde still stops at (a required key blanked above or never
    // given, a value its own reader refuses) takes its whole section out;
    // its words are shown as serde said them unless a problem already
    // said above is in that section.
    let mut seen: Vec<Range<usize>> = Vec::new();
    while out.errors.len() < MAX_MISTAKES {
        let Ok(current) = std::str::from_utf8(&text) else {
            break;
        };
        let e = match toml::from_str::<T>(current) {
            Ok(raw) => {
                out.raw = Some(raw);
                break;
            }
            Err(e) => e,
        };
        let span = e.span().unwrap_or(0..0);
        let path = locate(&entries, &span).map_or_else(String::new, |e| e.path.clone());
        let top = top_level(&path).to_owned();
        let said = problems
            .iter()
            .any(|p| top.is_empty() || top_level(&p.path) == top);
        if !said {
            let field = if path.is_empty() { "(file)" } else { &path };
            out.errors
                .push(loc.at(span.clone(), field, e.message().trim_end()));
        }
        if seen.contains(&span) {
            break;
        }
        seen.push(span);
        let Some(section) = entries.iter().find(|e| e.path == top) else {
            break;
        };
        if section.blank.is_empty() {
            break;
        }
        out.complete = false;
        out.removed.push(top);
        for r in &section.blank {
            blank_out(&mut text, r.clone());
        }
    }
    out
}

/// The top-level section a path is in (`upstream[0].url` → `upstream`).
fn top_level(path: &str) -> &str {
    let end = path.find(['.', '[']).unwrap_or(path.len());
    &path[..end]
}

/// `path` with its last name replaced by `name`.
fn sibling(path: &str, name: &str) -> String {
    match path.rfind('.') {
        Some(dot) => format!("{}.{name}", &path[..dot]),
        None => name.to_owned(),
    }
}

/// The last name of a path (`upstream[0].http2` → `http2`).
fn last(path: &str) -> &str {
    let tail = path.rsplit('.').next().unwrap_or(path);
    tail.split('[').next().unwrap_or(tail)
}

/// The entry a span of the reader's error points at: a key exactly, else
/// a value exactly (the deepest), else the smallest value around it.
fn locate<'a>(entries: &'a [Entry], span: &Range<usize>) -> Option<&'a Entry> {
    if let Some(e) = entries.iter().find(|e| e.key.as_ref() == Some(span)) {
        return Some(e);
    }
    if let Some(e) = entries
        .iter()
        .filter(|e| e.value.as_ref() == Some(span))
        .max_by_key(|e| e.path.len())
    {
        return Some(e);
    }
    entries
        .iter()
        .filter(|e| {
            e.value
                .as_ref()
                .is_some_and(|v| v.start <= span.start && span.end <= v.end)
        })
        .min_by_key(|e| e.value.as_ref().map_or(usize::MAX, Range::len))
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The whole lines `span` touches (without the final newline).
fn lines(text: &str, span: &Range<usize>) -> Range<usize> {
    let bytes = text.as_bytes();
    let start = span.start.min(bytes.len());
    let last = span.end.saturating_sub(1).max(start).min(bytes.len());
    let line_start = bytes[..start]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let line_end = bytes[last..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(bytes.len(), |i| last + i);
    line_start..line_end
}

fn union(a: Option<Range<usize>>, b: Option<Range<usize>>) -> Option<Range<usize>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.start.min(b.start)..a.end.max(b.end)),
        (a, b) => a.or(b),
    }
}

fn walk_table(table: &Table, path: &str, text: &str, out: &mut Vec<Entry>) -> Vec<Range<usize>> {
    let mut blank = Vec::new();
    for (k, item) in table.iter() {
        let key = table.key(k).and_then(|k| k.span());
        blank.extend(walk_item(item, join(path, k), key, text, out));
    }
    blank
}

/// Index one item; returns what removing it blanks.
fn walk_item(
    item: &Item,
    path: String,
    key: Option<Range<usize>>,
    text: &str,
    out: &mut Vec<Entry>,
) -> Vec<Range<usize>> {
    let (value, blank) = match item {
        Item::None => return Vec::new(),
        Item::Value(v) => {
            let whole = union(key.clone(), v.span());
            let blank: Vec<_> = whole.iter().map(|w| lines(text, w)).collect();
            walk_value(v, &path, &blank, text, out);
            (v.span(), blank)
        }
        Item::Table(t) => {
            let mut blank: Vec<_> = t.span().iter().map(|s| lines(text, s)).collect();
            blank.extend(key.iter().map(|k| lines(text, k)));
            blank.extend(walk_table(t, &path, text, out));
            (t.span(), blank)
        }
        Item::ArrayOfTables(a) => {
            let mut blank = Vec::new();
            for (i, t) in a.iter().enumerate() {
                let element = format!("{path}[{i}]");
                let mut own: Vec<_> = t.span().iter().map(|s| lines(text, s)).collect();
                own.extend(walk_table(t, &element, text, out));
                out.push(Entry {
                    path: element,
                    key: None,
                    value: t.span(),
                    blank: Vec::new(),
                });
                blank.extend(own);
            }
            (a.span(), blank)
        }
    };
    out.push(Entry {
        path,
        key,
        value,
        blank: blank.clone(),
    });
    blank
}

/// Index what is inside a value: list elements (removed with their list)
/// and inline-table members (removed one by one).
fn walk_value(
    value: &Value,
    path: &str,
    parent_blank: &[Range<usize>],
    text: &str,
    out: &mut Vec<Entry>,
) {
    match value {
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let element = format!("{path}[{i}]");
                walk_value(v, &element, parent_blank, text, out);
                out.push(Entry {
                    path: element,
                    key: None,
                    value: v.span(),
                    blank: parent_blank.to_vec(),
                });
            }
        }
        Value::InlineTable(t) => walk_inline(t, path, text, out),
        _ => {}
    }
}

fn walk_inline(table: &InlineTable, path: &str, text: &str, out: &mut Vec<Entry>) {
    for (k, v) in table.iter() {
        let member = join(path, k);
        let key = table.key(k).and_then(|k| k.span());
        let blank: Vec<_> = union(key.clone(), v.span())
            .map(|m| with_comma(text, m))
            .into_iter()
            .collect();
        walk_value(v, &member, &blank, text, out);
        out.push(Entry {
            path: member,
            key,
            value: v.span(),
            blank,
        });
    }
}

/// An inline-table member with the comma that separates it from the next
/// (or the previous) member, so what is left is still valid TOML.
fn with_comma(text: &str, member: Range<usize>) -> Range<usize> {
    let bytes = text.as_bytes();
    let mut end = member.end;
    while end < bytes.len() && (bytes[end] == b' ' || bytes[end] == b'\t') {
        end += 1;
    }
    if bytes.get(end) == Some(&b',') {
        return member.start..end + 1;
    }
    let mut start = member.start;
    while start > 0 && (bytes[start - 1] == b' ' || bytes[start - 1] == b'\t') {
        start -= 1;
    }
    if start > 0 && bytes[start - 1] == b',' {
        return start - 1..member.end;
    }
    member
}

/// Replace every byte of `range` but line ends with a space.
fn blank_out(text: &mut [u8], range: Range<usize>) {
    let end = range.end.min(text.len());
    for b in &mut text[range.start.min(end)..end] {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        #[serde(default)]
        listener: Vec<toml::Spanned<Listener>>,
        limits: Option<Limits>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Listener {
        address: String,
        tls: Option<Tls>,
        http2: Option<bool>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Tls {
        cert: String,
        key: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Limits {
        max: Option<i64>,
    }

    fn read_text(text: &str) -> Read<Doc> {
        read(
            &Locator {
                file: "t.toml",
                text,
            },
            &Shape::of::<Doc>(),
        )
    }

    fn said(r: &Read<Doc>) -> Vec<(usize, String)> {
        r.errors.iter().map(|e| (e.line, e.field.clone())).collect()
    }

    #[test]
    fn every_unknown_key_and_wrong_kind_is_found_with_its_path() {
        let text = "[[listener]]\naddress = \"a\"\nadress = \"b\"\n\n[[listener]]\naddress = \"c\"\ntls = { cert = \"x\", kez = \"y\" }\nhttp2 = \"yes\"\n\n[limitz]\nmax = 1\n[limits]\nmax = 1.5\n";
        let r = read_text(text);
        assert_eq!(
            said(&r),
            vec![
                (3, "listener[0].adress".to_owned()),
                (7, "listener[1].tls.kez".to_owned()),
                (8, "listener[1].http2".to_owned()),
                (10, "limitz".to_owned()),
                (13, "limits.max".to_owned()),
            ]
        );
        assert!(r.raw.is_some(), "read once every mistake was blanked");
        assert!(r.errors[0].message.contains("did you mean `address`"));
    }

    #[test]
    fn a_misspelt_required_key_is_said_once() {
        let r = read_text("[[listener]]\nadress = \"a\"\n");
        assert_eq!(said(&r), vec![(2, "listener[0].adress".to_owned())]);
    }

    #[test]
    fn a_missing_key_leaves_its_section_out_and_reading_goes_on() {
        let r = read_text("[[listener]]\ntls = { cert = \"x\" }\n[limitz]\n");
        assert_eq!(
            said(&r),
            vec![
                (1, "listener[0].address".to_owned()),
                (3, "limitz".to_owned())
            ]
        );
        assert!(r.raw.is_some() && !r.complete);
    }

    #[test]
    fn reading_stops_at_syntax() {
        // A wrong kind in a required key is said once, not again as missing.
        let r = read_text("[[listener]]\naddress = 5\n");
        assert_eq!(said(&r), vec![(2, "listener[0].address".to_owned())]);
        let r = read_text("[[listener]]\naddress = 127.0.0.1:80\n");
        assert_eq!(said(&r), vec![(2, "(syntax)".to_owned())]);
        assert!(r.errors[0].message.contains("in quotes"), "{}", r.errors[0]);
    }

    #[test]
    fn every_missing_key_is_found_at_its_table() {
        let r =
            read_text("[[listener]]\nhttp2 = true\ntls = { key = \"k\" }\n[limits]\nmax = \"5\"\n");
        assert_eq!(
            said(&r),
            vec![
                (1, "listener[0].address".to_owned()),
                (3, "listener[0].tls.cert".to_owned()),
                (5, "limits.max".to_owned()),
            ]
        );
        assert!(
            r.errors[2].message.contains("without quotes"),
            "{}",
            r.errors[2]
        );
        assert!(r.raw.is_some() && !r.complete);
        assert!(r.removed.contains(&"listener".to_owned()));
    }

    #[test]
    fn every_kind_of_value_is_checked_against_its_key() {
        // Each key given each kind of value it does not take.
        let values = [
            ("text", "\"a\""),
            ("number", "5"),
            ("number", "1.5"),
            ("true", "true"),
            ("list", "[1]"),
            ("table", "{ x = 1 }"),
            ("date", "1979-05-27T07:32:00Z"),
        ];
        let keys = [
            ("address", "listener[0].address", ["text"].as_slice()),
            ("http2", "listener[0].http2", &["true"]),
        ];
        for (key, path, fits) in keys {
            for (kind, value) in values {
                let before = if key == "address" {
                    "# first"
                } else {
                    "address = \"a\""
                };
                let r = read_text(&format!("[[listener]]\n{before}\n{key} = {value}\n"));
                let wrong: Vec<_> = r.errors.iter().filter(|e| e.field == path).collect();
                if fits.contains(&kind) {
                    assert!(r.errors.is_empty(), "{key} = {value}: {:?}", r.errors);
                } else {
                    assert_eq!(wrong.len(), 1, "{key} = {value}: {:?}", r.errors);
                    assert!(wrong[0].message.starts_with("expected "), "{}", wrong[0]);
                    assert_eq!(wrong[0].line, 3, "{}", wrong[0]);
                }
            }
        }
        let r = read_text("[limits]\nmax = 2\n[limits.deeper]\n");
        assert_eq!(said(&r), vec![(3, "limits.deeper".to_owned())]);
        let r = read_text("listener = { address = \"a\" }\n");
        assert!(
            r.errors[0].message.contains("double brackets"),
            "{}",
            r.errors[0]
        );
    }

    #[test]
    fn blanking_keeps_lines_and_columns() {
        let mut text = b"a = { b = 1, c = 2 }\n".to_vec();
        let member = with_comma("a = { b = 1, c = 2 }\n", 6..11);
        blank_out(&mut text, member);
        assert_eq!(
            std::str::from_utf8(&text).unwrap(),
            "a = {        c = 2 }\n"
        );
        let last = with_comma("a = { b = 1, c = 2 }\n", 13..18);
        assert_eq!(last, 11..18);
    }
}
