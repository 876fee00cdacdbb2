//! Every problem of one config file, found in one run: sections that do
//! not depend on each other are all read, each problem pinned to its
//! `file:line:column` and full field path.

use std::fmt;

use crate::model::ConfigError;

/// The problems found in a config file: never empty, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(Vec<ConfigError>);

impl ConfigErrors {
    pub fn one(e: ConfigError) -> ConfigErrors {
        ConfigErrors(vec![e])
    }

    /// The first problem in the file.
    pub fn first(&self) -> &ConfigError {
        &self.0[0]
    }
}

impl std::ops::Deref for ConfigErrors {
    type Target = [ConfigError];

    fn deref(&self) -> &[ConfigError] {
        &self.0
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors::one(e)
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// One problem per line.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects problems while the sections are read. A section that fails
/// yields its fallback so the next can still be checked; the config is
/// only built when nothing was found.
#[derive(Debug, Default)]
pub(super) struct Problems {
    found: Vec<ConfigError>,
    /// Paths whose mistakes were already said (see `read::Read::removed`).
    removed: Vec<String>,
}

impl Problems {
    pub(super) fn new(found: Vec<ConfigError>, removed: Vec<String>) -> Problems {
        Problems { found, removed }
    }

    pub(super) fn push(&mut self, e: ConfigError) {
        let consequence = self.removed.iter().any(|r| {
            e.field == *r
                || e.field
                    .strip_prefix(r.as_str())
                    .is_some_and(|rest| rest.starts_with(['.', '[']))
        });
        if !consequence {
            self.found.push(e);
        }
    }

    /// The value, or `None` with its problem recorded.
    pub(super) fn take<T>(&mut self, r: Result<T, ConfigError>) -> Option<T> {
        r.map_err(|e| self.push(e)).ok()
    }

    /// The value, or `fallback` with its problem recorded.
    pub(super) fn or<T>(&mut self, r: Result<T, ConfigError>, fallback: T) -> T {
        self.take(r).unwrap_or(fallback)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// `value` when nothing was found, else every problem in file order.
    pub(super) fn finish<T>(self, value: impl FnOnce() -> Option<T>) -> Result<T, ConfigErrors> {
        let mut found = self.found;
        if found.is_empty() {
            if let Some(v) = value() {
                return Ok(v);
            }
            found.push(ConfigError {
                file: String::new(),
                line: 0,
                column: 0,
                field: "(config)".into(),
                message: "the config could not be built".into(),
            });
        }
        found.sort_by_key(|e| (e.line, e.column));
        found.dedup();
        Err(ConfigErrors(found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: usize, field: &str) -> ConfigError {
        ConfigError {
            file: "f".into(),
            line,
            column: 1,
            field: field.into(),
            message: "m".into(),
        }
    }

    #[test]
    fn problems_come_in_file_order_without_consequences_of_removed_keys() {
        let mut p = Problems::new(vec![at(9, "limits.max")], vec!["listener".into()]);
        p.push(at(2, "upstream[0].url"));
        p.push(at(1, "listener"));
        p.push(at(1, "listener[0].address"));
        p.push(at(3, "listeners"));
        let e = p.finish(|| Some(())).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["upstream[0].url", "listeners", "limits.max"]);
        assert_eq!(e.to_string().lines().count(), 3);
    }
}
