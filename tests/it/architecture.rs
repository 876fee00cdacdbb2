//! The workspace's shape, as ARCHITECTURE.md promises it: in every crate (the
//! gateway, the layer crates under crates/, the demo server) top-level modules
//! depend on each other without a cycle, no source file holds more than 600
//! lines of code (tests aside), no module folder holds a circle of three or
//! more of its files (`architecture/folders.rs`), ARCHITECTURE.md names every module; the
//! gateway built without its `demo` feature links no demo server.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod folders;

const MAX_CODE_LINES: usize = 600;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file without its test code: everything from the first `#[cfg(test)]`
/// that opens a module, and files that are test modules themselves.
fn code_of(path: &Path, text: &str) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    if name == "tests.rs" || path.components().any(|c| c.as_os_str() == "tests") {
        return None;
    }
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            match lines.peek() {
                // `#[cfg(test)] mod tests;` declares a file; the rest is code.
                Some(next) if next.trim_end().ends_with(';') => {
                    lines.next();
                    continue;
                }
                _ => break,
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    Some(out)
}

fn code_lines(code: &str) -> usize {
    code.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

/// `crate::name` references outside comments.
fn references(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                for part in group.split('}').next().unwrap_or("").split(',') {
                    let name: String = part
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        out.insert(name);
                    }
                }
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn module_of(src: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_owned()
}

type Edges = BTreeMap<String, BTreeSet<String>>;
/// Each file and its code lines.
type Sizes = Vec<(PathBuf, usize)>;

/// The `src/` folder of every crate of the workspace: this package, crates/*, demo.
fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![
        root.join("src"),
        root.join("demo/src"),
        root.join("bench/upstream/src"),
    ];
    let mut layers: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .collect();
    layers.sort();
    out.extend(layers);
    for src in &out {
        assert!(src.is_dir(), "{} is not a folder", src.display());
    }
    out
}

/// One crate's module graph and the code lines of each of its files.
fn graph_of(src: &Path) -> (Edges, Sizes) {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut sizes = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let Some(code) = code_of(&f, &text) else {
            continue;
        };
        sizes.push((f.clone(), code_lines(&code)));
        let m = module_of(src, &f);
        let deps = edges.entry(m.clone()).or_default();
        for r in references(&code) {
            if r != m && r != "main" && r != "lib" {
                deps.insert(r);
            }
        }
    }
    (edges, sizes)
}

/// Every crate's graph, with the files of all of them.
fn graphs() -> (Vec<(PathBuf, Edges)>, Sizes) {
    let mut all = Vec::new();
    let mut sizes = Vec::new();
    for src in crate_sources() {
        let (edges, s) = graph_of(&src);
        all.push((src, edges));
        sizes.extend(s);
    }
    (all, sizes)
}

/// A cycle through `start`, if there is one.
fn cycle_from(edges: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        edges: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in edges.get(at).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(edges, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    walk(edges, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn top_level_modules_form_no_cycle() {
    let (crates, _) = graphs();
    assert!(crates.len() >= 6, "{crates:?}");
    for (src, edges) in &crates {
        for m in edges.keys() {
            if let Some(cycle) = cycle_from(edges, m) {
                panic!(
                    "module cycle in {}: {} -> {m}",
                    src.display(),
                    cycle.join(" -> ")
                );
            }
        }
    }
}

#[test]
fn no_source_file_is_too_long() {
    let (_, sizes) = graphs();
    assert!(
        sizes.iter().any(|(f, _)| f.ends_with("policy/mod.rs")),
        "the layer crates' files are measured too"
    );
    let long: Vec<String> = sizes
        .iter()
        .filter(|(_, n)| *n > MAX_CODE_LINES)
        .map(|(f, n)| format!("{} ({n} code lines)", f.display()))
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_CODE_LINES} code lines: {long:?}"
    );
}

#[test]
fn architecture_md_names_every_module() {
    let (crates, _) = graphs();
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/ARCHITECTURE.md")).unwrap();
    let modules: BTreeSet<&String> = crates.iter().flat_map(|(_, e)| e.keys()).collect();
    for m in modules.into_iter().filter(|m| *m != "lib") {
        assert!(
            doc.contains(&format!("`{m}`"))
                || doc.contains(&format!("{m}/"))
                || doc.contains(&format!("{m}.rs")),
            "ARCHITECTURE.md does not mention module {m}"
        );
    }
}

#[test]
fn the_checker_sees_a_cycle_when_there_is_one() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    edges.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle_from(&edges, "a").unwrap(), ["a", "b", "c"]);
    edges.get_mut("c").unwrap().clear();
    assert!(cycle_from(&edges, "a").is_none());
    assert_eq!(
        references(
            "use crate::{json, model::Reason};\nlet x = crate::policy::f(); // crate::audit"
        ),
        ["json", "model", "policy"].map(String::from).into()
    );
}

/// The production build (`--no-default-features`, as deploy/Dockerfile builds it) links
/// no demo server: none of the demo's crates is in its dependency tree, while the
/// default build (for `portcullis demo`) has them. `cargo tree` reads Cargo.lock only.
#[test]
fn the_gateway_without_the_demo_feature_links_no_demo_server() {
    let tree = |features: &[&str]| {
        let out = std::process::Command::new(env!("CARGO"))
            .args([
                "tree",
                "--locked",
                "--offline",
                "-p",
                "portcullis",
                "-e",
                "normal",
            ])
            .args(["--prefix", "none", "--format", "{p}"])
            .args(features)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let names: BTreeSet<String> = text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .collect();
        names
    };
    let demo_crates = ["portcullis-demo", "rmcp", "axum", "chrono"];
    let production = tree(&["--no-default-features"]);
    assert!(production.contains("portcullis-policy"), "{production:?}");
    for name in demo_crates {
        assert!(
            !production.contains(name),
            "{name} is linked without the demo feature"
        );
    }
    let default = tree(&[]);
    for name in demo_crates {
        assert!(
            default.contains(name),
            "{name} missing from the default build"
        );
    }
}

/// Every crate's normal dependencies are used by its own code, not only by
/// its tests (those are dev-dependencies): a dependency of the gateway is
/// in the production image, and in its audit.
#[test]
fn every_normal_dependency_is_used_outside_the_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut unused = Vec::new();
    for member in [
        ".",
        "crates/model",
        "crates/approval",
        "crates/policy",
        "crates/mrtr",
        "crates/access",
        "crates/audit",
        "crates/config",
        "crates/dataplane",
        "crates/pipeline",
        "demo",
    ] {
        let dir = root.join(member);
        let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let mut files = Vec::new();
        sources(&dir.join("src"), &mut files);
        let code: String = files
            .iter()
            .filter_map(|f| code_of(f, &std::fs::read_to_string(f).unwrap()))
            .collect();
        let deps = manifest.get("dependencies").and_then(toml::Value::as_table);
        for name in deps.into_iter().flat_map(|t| t.keys()) {
            let ident = name.replace('-', "_");
            if !code.contains(&format!("{ident}::")) && !code.contains(&format!("use {ident}")) {
                unused.push(format!("{member}: {name}"));
            }
        }
    }
    assert!(
        unused.is_empty(),
        "used only by tests (make them dev-dependencies): {unused:?}"
    );
}
