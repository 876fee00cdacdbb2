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

/// A path and, for a directory, the files in it (sorted).
fn expand(p: &Path) -> Vec<PathBuf> {
    let mut out = vec![p.to_owned()];
    if p.is_dir() {
        if let Ok(entries) = std::fs::read_dir(p) {
            let mut inner: Vec<PathBuf> =
                entries.filter_map(Result::ok).map(|e| e.path()).collect();
            inner.sort();
            out.extend(inner);
        }
    }
    out
}

impl FileWatch {
    /// The stamps of every file `config` was read from, now.
    pub fn of(config: &GatewayConfig) -> FileWatch {
        let files = config
            .files()
            .flat_map(expand)
            .map(|p| {
                let s = stamp(&p);
                (p, s)
            })
            .collect();
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
                    if !self.files.iter().any(|(q, _)| *q == inner) {
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
