//! The files a config is made of, and whether they changed: modification
//! times and sizes, taken when the config is loaded (so a file replaced the
//! moment after start is noticed), compared by the watcher thread.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::config::GatewayConfig;

type Stamp = Option<(SystemTime, u64)>;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct FileWatch {
    files: Vec<(PathBuf, Stamp)>,
}

fn stamp(p: &Path) -> Stamp {
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// How deep a watched directory is walked: policy directories hold
/// `presets/` and `data/` one level down.
const MAX_DIR_DEPTH: usize = 4;

/// A path and, for a directory, everything under it (sorted per directory):
/// the stamp taken at load and every later look see the same set, so a file
/// in a subdirectory is never "new" on the first look.
fn expand(p: &Path) -> Vec<PathBuf> {
    let mut out = vec![p.to_owned()];
    walk(p, 0, &mut out);
    out
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth >= MAX_DIR_DEPTH || !dir.is_dir() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut inner: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    inner.sort();
    for path in inner {
        out.push(path.clone());
        walk(&path, depth + 1, out);
    }
}

impl FileWatch {
    /// The stamps of every file `config` was read from, now.
    pub fn of(config: &GatewayConfig) -> FileWatch {
        Self::of_paths(config.files().map(Path::to_path_buf))
    }

    fn of_paths(paths: impl Iterator<Item = PathBuf>) -> FileWatch {
        let mut files: Vec<(PathBuf, Stamp)> = Vec::new();
        for p in paths.flat_map(|p| expand(&p)) {
            if !files.iter().any(|(q, _)| *q == p) {
                let s = stamp(&p);
                files.push((p, s));
            }
        }
        FileWatch { files }
    }

    /// The files whose stamp differs now (or that appeared in a watched
    /// directory).
    pub fn changed(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|(p, s)| stamp(p) != *s)
            .map(|(p, _)| p.clone())
            .collect();
        for (p, _) in &self.files {
            if p.is_dir() {
                for inner in expand(p).into_iter().skip(1) {
                    if !self.files.iter().any(|(q, _)| *q == inner) && !out.contains(&inner) {
                        out.push(inner);
                    }
                }
            }
        }
        out
    }

    /// Take the current stamps of `paths` as seen (after a reload attempt,
    /// successful or not, so one bad edit is reported once).
    pub fn accept(&mut self, paths: &[PathBuf]) {
        for p in paths {
            let s = stamp(p);
            match self.files.iter_mut().find(|(q, _)| q == p) {
                Some(entry) => entry.1 = s,
                None => self.files.push((p.clone(), s)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A policy directory with `presets/` and `data/` inside: nothing is
    /// "changed" until something is, at any depth.
    #[test]
    fn subdirectories_are_watched_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("policies");
        std::fs::create_dir_all(root.join("presets")).unwrap();
        std::fs::create_dir_all(root.join("data")).unwrap();
        std::fs::write(root.join("team.toml"), "a").unwrap();
        std::fs::write(root.join("presets/untrusted.toml"), "b").unwrap();
        std::fs::write(root.join("data/names.txt"), "c").unwrap();
        let watch = FileWatch::of_paths([root.clone()].into_iter());
        assert_eq!(watch.changed(), Vec::<PathBuf>::new());
        std::fs::write(root.join("data/more.txt"), "d").unwrap();
        std::fs::write(root.join("presets/untrusted.toml"), "bigger").unwrap();
        let mut changed = watch.changed();
        changed.sort();
        // The directory a file was added to changed too.
        assert_eq!(
            changed,
            [
                root.join("data"),
                root.join("data/more.txt"),
                root.join("presets/untrusted.toml")
            ]
        );
    }
}
