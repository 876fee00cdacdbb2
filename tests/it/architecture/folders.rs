//! Inside every module folder, the folder's files and subfolders depend on
//! each other in at most pairs: no circle of three or more members (what
//! `modgraph.py --deep` reports). A folder's `mod.rs` is the folder itself,
//! not a member; `crate::…`, `super::…`, `self::…` paths and a module's own
//! children named bare are the edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use super::{code_of, crate_sources, sources};

/// Circles of this many members or more are refused.
const LARGEST_ALLOWED_CIRCLE: usize = 2;

type ModPath = Vec<String>;

/// One file: the module it is, whether it is its folder's own (`mod.rs`,
/// `lib.rs`, `main.rs`) and the module paths its code names.
struct File {
    module: ModPath,
    own: bool,
    names: BTreeSet<ModPath>,
}

static CRATE_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)").unwrap()
});
static SUPER_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b((?:super::)+)((?:[a-z_][a-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)").unwrap()
});
static SELF_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bself::((?:[a-z_][a-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)").unwrap()
});
static GROUP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b((?:crate|super|self)(?:::[a-z_][a-z0-9_]*)*)::\{([^}]*)\}").unwrap()
});
static GROUP_ITEM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|,)\s*([A-Za-z_][A-Za-z0-9_]*)").unwrap());
static CHILD_MOD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;").unwrap()
});

fn segments(path: &str) -> impl Iterator<Item = String> + '_ {
    path.split("::").map(str::to_owned)
}

/// `here` with `up` levels removed (never below the crate root).
fn ancestor(here: &[String], up: usize) -> ModPath {
    here[..here.len().saturating_sub(up)].to_vec()
}

fn names_in(code: &str, here: &[String]) -> BTreeSet<ModPath> {
    let mut out = BTreeSet::new();
    for c in CRATE_PATH.captures_iter(code) {
        out.insert(segments(&c[1]).collect());
    }
    for c in SUPER_PATH.captures_iter(code) {
        let up = c[1].matches("super::").count();
        let mut path = ancestor(here, up);
        path.extend(segments(&c[2]));
        out.insert(path);
    }
    for c in SELF_PATH.captures_iter(code) {
        let mut path = here.to_vec();
        path.extend(segments(&c[1]));
        out.insert(path);
    }
    for c in CHILD_MOD.captures_iter(code) {
        let child = &c[1];
        let named_bare = Regex::new(&format!(r"(?:^|[^:\w]){child}::")).unwrap();
        if named_bare.is_match(code) {
            let mut path = here.to_vec();
            path.push(child.to_owned());
            out.insert(path);
        }
    }
    for c in GROUP.captures_iter(code) {
        let prefix: Vec<&str> = c[1].split("::").collect();
        let mut base = match prefix[0] {
            "crate" => Vec::new(),
            "self" => here.to_vec(),
            _ => ancestor(here, prefix.iter().filter(|p| **p == "super").count()),
        };
        base.extend(
            prefix[1..]
                .iter()
                .filter(|p| **p != "super")
                .map(|p| (*p).to_owned()),
        );
        for item in GROUP_ITEM.captures_iter(&c[2]) {
            let mut path = base.clone();
            path.push(item[1].to_owned());
            out.insert(path);
        }
    }
    out
}

fn files_of(src: &Path) -> Vec<(PathBuf, File)> {
    let mut paths = Vec::new();
    sources(src, &mut paths);
    let mut out = Vec::new();
    for path in paths {
        let Some(code) = code_of(&path, &std::fs::read_to_string(&path).unwrap()) else {
            continue;
        };
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let mut module: ModPath = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = module.last().cloned().unwrap_or_default();
        let own = last == "mod" || (module.len() == 1 && (last == "lib" || last == "main"));
        if own {
            module.pop();
        }
        let names = names_in(&code, &module);
        out.push((path, File { module, own, names }));
    }
    out
}

/// Members of `folder` that reach each other, as groups of more than one.
fn circles(
    members: &BTreeSet<String>,
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(at) = todo.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        members.iter().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for m in members {
        let circle: Vec<String> = members
            .iter()
            .filter(|o| *o == m || (reached[m].contains(*o) && reached[*o].contains(m)))
            .cloned()
            .collect();
        if circle.len() > 1 && !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

/// Every circle of every module folder of one crate, with the folder.
fn folder_circles(src: &Path) -> Vec<(String, Vec<String>)> {
    let files = files_of(src);
    let mut folders: BTreeSet<ModPath> = BTreeSet::new();
    for (_, f) in &files {
        // A file's ancestors are folders; a folder's own `mod.rs` makes it one too.
        for i in 0..f.module.len() + usize::from(f.own) {
            folders.insert(f.module[..i].to_vec());
        }
    }
    let mut out = Vec::new();
    for folder in folders {
        let depth = folder.len();
        let member_of =
            |m: &ModPath| (m.len() > depth && m[..depth] == folder[..]).then(|| m[depth].clone());
        let members: BTreeSet<String> = files
            .iter()
            .filter_map(|(_, f)| member_of(&f.module))
            .collect();
        if members.len() < 2 {
            continue;
        }
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (_, f) in &files {
            let Some(from) = member_of(&f.module) else {
                continue;
            };
            for name in &f.names {
                if let Some(to) = member_of(name).filter(|t| members.contains(t) && *t != from) {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
        for circle in circles(&members, &edges) {
            out.push((folder.join("/"), circle));
        }
    }
    out
}

#[test]
fn no_module_folder_has_a_circle_of_three_or_more() {
    let mut found = Vec::new();
    for src in crate_sources() {
        for (folder, circle) in folder_circles(&src) {
            if circle.len() > LARGEST_ALLOWED_CIRCLE {
                found.push(format!("{}/{folder}: {}", src.display(), circle.join(" ")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "circles inside module folders: {found:#?}"
    );
}

#[test]
fn the_folder_check_sees_a_circle_when_there_is_one() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("phases")).unwrap();
    let write = |path: &str, code: &str| std::fs::write(src.join(path), code).unwrap();
    write("lib.rs", "mod phases;\n");
    write("phases/mod.rs", "mod a;\nmod b;\nmod c;\n");
    write("phases/a.rs", "use super::b::B;\n");
    write("phases/b.rs", "use crate::phases::c::C;\n");
    write("phases/c.rs", "use super::{a::A};\n");
    assert_eq!(
        folder_circles(src),
        [(
            "phases".to_owned(),
            ["a", "b", "c"].map(String::from).to_vec()
        )]
    );
    write("phases/c.rs", "pub struct C;\n");
    assert!(folder_circles(src).is_empty());
}
