//! Every TOML example of the book (docs/src) and README.md is one a reader can
//! paste: a complete config passes `portcullis check` as written; a snippet that
//! is not complete says so with a marker on the line before its fence, and is held
//! to what it can be held to.
//!
//! Markers (an HTML comment, invisible in the rendered page):
//! - none, or `<!-- toml: example NAME -->`: a complete gateway config. It is
//!   checked in a folder of its own, with `tests/interop/node_modules/.bin` first
//!   on `PATH` (where the test command installs the npm servers the text tells the
//!   reader to install; a sandbox of a program installed there gets that folder in
//!   `read_only`, as the stdio guide tells a reader whose npm installs outside
//!   `/usr`) and every environment variable it names set;
//!   `<!-- toml: example NAME, folders a b -->` also makes the folders the text
//!   tells the reader to make, beside the config.
//! - `<!-- toml: fragment of NAME -->`: part of a config; NAME is a complete
//!   example of the book, and every key of the fragment is a key of the config file.
//! - `<!-- toml: policy -->`: a policy file (or the start of one), checked by
//!   `portcullis check` as the policy of an upstream.

use std::path::{Path, PathBuf};
use std::process::Command;

use portcullis::model::Shape;

const BIN: &str = env!("CARGO_BIN_EXE_portcullis");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Debug, PartialEq)]
enum Kind {
    Complete { folders: Vec<String> },
    Fragment { of: String },
    Policy,
}

#[derive(Debug)]
struct Example {
    /// `file:line` of the fence.
    place: String,
    name: Option<String>,
    kind: Kind,
    text: String,
}

fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![Path::new(ROOT).join("README.md")];
    walk(&Path::new(ROOT).join("docs/src"), &mut out);
    out
}

/// The marker on the line before a fence, if any.
fn marker(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix("<!-- toml:")?
        .strip_suffix("-->")
        .map(str::trim)
}

fn kind_of(marker: Option<&str>, place: &str) -> (Option<String>, Kind) {
    let Some(m) = marker else {
        return (None, Kind::Complete { folders: vec![] });
    };
    if m == "policy" {
        return (None, Kind::Policy);
    }
    if let Some(of) = m.strip_prefix("fragment of ") {
        return (
            None,
            Kind::Fragment {
                of: of.trim().to_owned(),
            },
        );
    }
    if let Some(rest) = m.strip_prefix("example ") {
        let (name, folders) = match rest.split_once(", folders ") {
            Some((n, f)) => (n, f.split_whitespace().map(str::to_owned).collect()),
            None => (rest, vec![]),
        };
        return (Some(name.trim().to_owned()), Kind::Complete { folders });
    }
    panic!("{place}: unknown marker <!-- toml: {m} -->");
}

fn examples() -> Vec<Example> {
    let mut out = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let rel = page.strip_prefix(ROOT).unwrap().display().to_string();
        let mut i = 0;
        while i < lines.len() {
            let fence = lines[i].trim_start();
            if !fence.starts_with("```") {
                i += 1;
                continue;
            }
            let start = i;
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                i += 1;
            }
            if fence.trim_end() == "```toml" {
                let place = format!("{rel}:{}", start + 1);
                let before = start.checked_sub(1).map(|b| lines[b]);
                let (name, kind) = kind_of(before.and_then(marker), &place);
                out.push(Example {
                    place,
                    name,
                    kind,
                    text: lines[start + 1..i].join("\n") + "\n",
                });
            }
            i += 1;
        }
    }
    out
}

/// `portcullis check` on a config written into a folder of its own.
fn check(config: &str, folders: &[String], files: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    for f in folders {
        std::fs::create_dir_all(dir.path().join(f)).unwrap();
    }
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let path = dir.path().join("gateway.toml");
    let npm_bin = Path::new(ROOT).join("tests/interop/node_modules/.bin");
    std::fs::write(&path, installed_elsewhere(config, &npm_bin)).unwrap();
    let search = std::env::join_paths(std::iter::once(npm_bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("check")
        .arg("--config")
        .arg(&path)
        .current_dir(dir.path())
        .env("PATH", search);
    for var in variables(config) {
        cmd.env(var, "example-value");
    }
    let out = cmd.output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

/// `config` as a reader whose npm installs into `npm_bin`'s folder (not under
/// `/usr`) makes it: what the stdio guide tells them, that folder in the
/// `read_only` of every sandbox whose program is installed there.
fn installed_elsewhere(config: &str, npm_bin: &Path) -> String {
    let Ok(mut value) = config.parse::<toml::Table>() else {
        return config.to_owned();
    };
    let Some(toml::Value::Array(upstreams)) = value.get_mut("upstream") else {
        return config.to_owned();
    };
    let mut changed = false;
    for up in upstreams.iter_mut().filter_map(toml::Value::as_table_mut) {
        let program = up
            .get("command")
            .and_then(|c| c.get(0))
            .and_then(toml::Value::as_str)
            .map(str::to_owned);
        let there = program.is_some_and(|p| !p.contains('/') && npm_bin.join(p).exists());
        let Some(sandbox) = up.get_mut("sandbox").and_then(toml::Value::as_table_mut) else {
            continue;
        };
        if there {
            let folder = npm_bin.parent().unwrap().display().to_string();
            let listed = sandbox
                .entry("read_only")
                .or_insert_with(|| toml::Value::Array(vec![]));
            if let Some(list) = listed.as_array_mut() {
                list.push(toml::Value::String(folder));
                changed = true;
            }
        }
    }
    if changed {
        toml::to_string(&value).unwrap()
    } else {
        config.to_owned()
    }
}

/// The environment variables a config names (`env_from`, `*_env` keys): the
/// text tells the reader to set them.
fn variables(config: &str) -> Vec<String> {
    fn walk(v: &toml::Value, out: &mut Vec<String>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    match (k.as_str(), v) {
                        ("env_from", toml::Value::Array(a)) => {
                            out.extend(a.iter().filter_map(|x| x.as_str().map(str::to_owned)))
                        }
                        (k, toml::Value::String(s)) if k.ends_with("_env") => out.push(s.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            toml::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = config.parse::<toml::Value>() {
        walk(&v, &mut out);
    }
    out
}

/// Every key of `value` that `shape` does not have, as dotted paths.
fn unknown_keys(value: &toml::Value, shape: &Shape, path: &str, out: &mut Vec<String>) {
    let mut shape = shape;
    while let Shape::List(inner) = shape {
        shape = inner;
    }
    match value {
        toml::Value::Table(t) => {
            if matches!(shape, Shape::Map(_) | Shape::Any) {
                return;
            }
            for (k, v) in t {
                let here = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match shape.field(k) {
                    Some(f) => unknown_keys(v, &f.shape, &here, out),
                    None => out.push(here),
                }
            }
        }
        toml::Value::Array(a) => a.iter().for_each(|x| unknown_keys(x, shape, path, out)),
        _ => {}
    }
}

#[test]
fn every_toml_example_of_the_book_and_readme_is_complete_or_a_named_fragment() {
    let all = examples();
    assert!(all.len() >= 10, "{all:?}");
    let complete: Vec<&str> = all
        .iter()
        .filter(|e| matches!(e.kind, Kind::Complete { .. }))
        .filter_map(|e| e.name.as_deref())
        .collect();
    let mut problems = Vec::new();
    for e in &all {
        match &e.kind {
            Kind::Complete { folders } => {
                let (ok, said) = check(&e.text, folders, &[]);
                if !ok {
                    problems.push(format!("{}: `portcullis check` fails:\n{said}", e.place));
                }
            }
            Kind::Fragment { of } => {
                if !complete.contains(&of.as_str()) {
                    problems.push(format!(
                        "{}: a fragment of \"{of}\", which no complete example is named",
                        e.place
                    ));
                }
                match e.text.parse::<toml::Value>() {
                    Ok(v) => {
                        let mut unknown = Vec::new();
                        unknown_keys(&v, portcullis::config::file_shape(), "", &mut unknown);
                        if !unknown.is_empty() {
                            problems.push(format!(
                                "{}: keys the config file does not have: {unknown:?}",
                                e.place
                            ));
                        }
                    }
                    Err(err) => problems.push(format!("{}: not TOML: {err}", e.place)),
                }
            }
            Kind::Policy => {
                let config = "[[listener]]\naddress = \"127.0.0.1:8080\"\n\n[policies]\ndir = \"policies\"\n\n\
                              [[upstream]]\nid = \"up\"\nname = \"Up\"\nurl = \"http://127.0.0.1:9100/mcp\"\npolicy = \"example\"\n\n\
                              [[route]]\npath = \"/mcp\"\nupstream = \"up\"\n";
                let (ok, said) = check(config, &[], &[("policies/example.toml", &e.text)]);
                if !ok {
                    problems.push(format!(
                        "{}: as a policy file, `portcullis check` fails:\n{said}",
                        e.place
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// The check above can fail: a config without a listener fails `check`, a
/// misspelt key of a fragment is found, and a marker's folders are read.
#[test]
fn the_example_check_finds_what_a_reader_would_trip_on() {
    let (ok, said) = check(
        "[[upstream]]\nid = \"a\"\nname = \"A\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
        &[],
        &[],
    );
    assert!(!ok, "{said}");
    let mut unknown = Vec::new();
    let v: toml::Value = "[limits]\nmax_conections = 1\n".parse().unwrap();
    unknown_keys(&v, portcullis::config::file_shape(), "", &mut unknown);
    assert_eq!(unknown, ["limits.max_conections"]);
    assert_eq!(
        kind_of(Some("example stdio, folders data logs"), "x").1,
        Kind::Complete {
            folders: vec!["data".into(), "logs".into()]
        }
    );
}
