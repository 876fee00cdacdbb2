//! Turning byte spans of the config file into `file:line:column` errors, and
//! the value readers every section shares.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use crate::model::{ConfigError, SettingsError};

pub(super) struct Locator<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
}

impl Locator<'_> {
    pub(super) fn at(
        &self,
        span: Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        let start = span.start.min(self.text.len());
        let before = &self.text[..start];
        let line = before.matches('\n').count() + 1;
        let column = before.rfind('\n').map_or(start, |nl| start - nl - 1) + 1;
        ConfigError {
            file: self.file.to_owned(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// A section reader's error, located.
    pub(super) fn settings(&self, e: SettingsError) -> ConfigError {
        self.at(e.span, e.field, e.message)
    }

    pub(super) fn duration(
        &self,
        raw: &Option<Spanned<String>>,
        field: &str,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        let Some(raw) = raw else { return Ok(default) };
        let d = humantime::parse_duration(raw.get_ref().trim()).map_err(|e| {
            self.at(
                raw.span(),
                field,
                format!("not a duration ({e}); write e.g. \"500ms\", \"10s\", \"5m\""),
            )
        })?;
        if d.is_zero() {
            return Err(self.at(raw.span(), field, "must be greater than zero"));
        }
        Ok(d)
    }

    pub(super) fn positive(
        &self,
        raw: &Option<Spanned<i64>>,
        field: &str,
        default: usize,
    ) -> Result<usize, ConfigError> {
        let Some(raw) = raw else { return Ok(default) };
        usize::try_from(*raw.get_ref())
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| self.at(raw.span(), field, "must be a positive whole number"))
    }

    /// A count that may be zero.
    pub(super) fn whole(
        &self,
        raw: &Option<Spanned<i64>>,
        field: &str,
        default: usize,
    ) -> Result<usize, ConfigError> {
        let Some(raw) = raw else { return Ok(default) };
        usize::try_from(*raw.get_ref())
            .map_err(|_| self.at(raw.span(), field, "must be a whole number, 0 or more"))
    }
}

/// A path from the config, relative to the config file's folder.
pub(super) fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    }
}
