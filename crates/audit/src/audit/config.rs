//! `[audit]`: the raw serde table (as written, with spans) and its
//! validation into [`AuditSettings`]. Validation opens nothing and spawns
//! nothing, so `portcullis check` can run it; it only looks at whether the
//! file's directory exists.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::otlp_config::{OtlpLogSettings, RawAuditOtlp, TracesCollector};

const SECTION: &str = "audit";

/// 100 MiB.
pub(super) const DEFAULT_MAX_FILE_BYTES: u64 = 100 * 1024 * 1024;
pub(super) const DEFAULT_MAX_FILES: u32 = 5;
/// Smaller files would rotate on almost every event.
pub(super) const MIN_MAX_FILE_BYTES: u64 = 1024;
pub(super) const MAX_MAX_FILES: u32 = 1000;

/// The `[audit]` table exactly as written.
///
/// ```toml
/// [audit]
/// sink = "file"                              # stdout (default) | file | off
/// path = "/var/log/portcullis/audit.jsonl"   # sink = "file" only; relative to the config file
/// max_file_bytes = 104857600                 # rotate before the file would exceed this
/// max_files = 5                              # keep audit.jsonl.1 .. audit.jsonl.5
///
/// [audit.otlp]                               # also as OpenTelemetry log records (absent: not)
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAudit {
    pub(crate) sink: Option<Spanned<String>>,
    pub(crate) path: Option<Spanned<String>>,
    pub(crate) max_file_bytes: Option<Spanned<i64>>,
    pub(crate) max_files: Option<Spanned<i64>>,
    pub(crate) otlp: Option<Spanned<RawAuditOtlp>>,
}

/// A problem in `[audit]`, pinned to the byte span of the offending value
/// so that the config loader can print `file:line:column` (the one
/// settings error).
pub type AuditConfigError = crate::model::SettingsError;

fn err(span: Range<usize>, name: &str, message: impl Into<String>) -> AuditConfigError {
    AuditConfigError {
        span,
        field: format!("{SECTION}.{name}"),
        message: message.into(),
    }
}

/// Where audit events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditTarget {
    Off,
    Stdout,
    File(FileSettings),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSettings {
    /// Absolute, or relative to the working directory when the config was
    /// given relative to it.
    pub(crate) path: PathBuf,
    /// The file is rotated before a line would take it over this size (a
    /// single line larger than this still gets written, alone in its file).
    pub(crate) max_file_bytes: u64,
    /// Rotated files kept: `path.1` (newest) .. `path.N` (oldest).
    pub(crate) max_files: u32,
}

/// The validated `[audit]` table. Comparable, so that a reload can keep the
/// running sink when nothing changed (two sinks must never rotate one file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSettings {
    pub(crate) target: AuditTarget,
    /// Also export every event as an OpenTelemetry log record.
    pub(crate) otlp: Option<OtlpLogSettings>,
}

impl Default for AuditSettings {
    /// No `[audit]` table: events go to stdout (logs go to stderr).
    fn default() -> Self {
        AuditSettings {
            target: AuditTarget::Stdout,
            otlp: None,
        }
    }
}

impl AuditSettings {
    /// Validate `[audit]`; `base` is the directory relative paths are
    /// resolved against (the config file's); `traces` is `[tracing]`'s
    /// collector, where `[audit.otlp]` sends records unless it names one.
    pub fn from_raw(
        raw: Option<&Spanned<RawAudit>>,
        base: &Path,
        traces: Option<TracesCollector<'_>>,
    ) -> Result<AuditSettings, AuditConfigError> {
        let Some(spanned) = raw else {
            return Ok(AuditSettings::default());
        };
        let otlp = spanned
            .get_ref()
            .otlp
            .as_ref()
            .map(|o| OtlpLogSettings::from_raw(o, traces))
            .transpose()?;
        Ok(AuditSettings {
            target: target(spanned, base)?,
            otlp,
        })
    }

    /// Where log records go besides the trail, when `[audit.otlp]` is set.
    pub fn otlp(&self) -> Option<&OtlpLogSettings> {
        self.otlp.as_ref()
    }
}

/// `sink` and the file's settings.
fn target(spanned: &Spanned<RawAudit>, base: &Path) -> Result<AuditTarget, AuditConfigError> {
    let table_span = spanned.span();
    let raw = spanned.get_ref();
    let sink = match &raw.sink {
        None => "stdout",
        Some(s) => match s.get_ref().as_str() {
            v @ ("stdout" | "file" | "off") => v,
            other => {
                return Err(err(
                    s.span(),
                    "sink",
                    format!(
                        "unknown sink \"{}\"; use \"stdout\", \"file\" or \"off\"",
                        other.escape_debug()
                    ),
                ))
            }
        },
    };
    if sink != "file" {
        let file_only = [
            ("path", raw.path.as_ref().map(Spanned::span)),
            (
                "max_file_bytes",
                raw.max_file_bytes.as_ref().map(Spanned::span),
            ),
            ("max_files", raw.max_files.as_ref().map(Spanned::span)),
        ];
        if let Some((name, Some(span))) = file_only.into_iter().find(|(_, s)| s.is_some()) {
            return Err(err(
                span,
                name,
                format!("only applies to sink = \"file\" (this sink is \"{sink}\")"),
            ));
        }
        return Ok(if sink == "off" {
            AuditTarget::Off
        } else {
            AuditTarget::Stdout
        });
    }

    let Some(raw_path) = &raw.path else {
        let span = raw.sink.as_ref().map_or(table_span, Spanned::span);
        return Err(err(
            span,
            "path",
            "sink = \"file\" needs a path, e.g. path = \"/var/log/portcullis/audit.jsonl\"",
        ));
    };
    let path = check_path(raw_path, base)?;

    let max_file_bytes = match &raw.max_file_bytes {
        None => DEFAULT_MAX_FILE_BYTES,
        Some(v) => u64::try_from(*v.get_ref())
            .ok()
            .filter(|n| *n >= MIN_MAX_FILE_BYTES)
            .ok_or_else(|| {
                err(
                    v.span(),
                    "max_file_bytes",
                    format!("must be a whole number of bytes, at least {MIN_MAX_FILE_BYTES}"),
                )
            })?,
    };
    let max_files = match &raw.max_files {
        None => DEFAULT_MAX_FILES,
        Some(v) => u32::try_from(*v.get_ref())
            .ok()
            .filter(|n| (1..=MAX_MAX_FILES).contains(n))
            .ok_or_else(|| {
                err(
                    v.span(),
                    "max_files",
                    format!("must be between 1 and {MAX_MAX_FILES} (rotated files kept)"),
                )
            })?,
    };
    Ok(AuditTarget::File(FileSettings {
        path,
        max_file_bytes,
        max_files,
    }))
}

fn check_path(raw: &Spanned<String>, base: &Path) -> Result<PathBuf, AuditConfigError> {
    let text = raw.get_ref();
    if text.trim().is_empty() {
        return Err(err(raw.span(), "path", "must not be empty"));
    }
    if text.ends_with('/') || text.ends_with(std::path::MAIN_SEPARATOR) {
        return Err(err(
            raw.span(),
            "path",
            "names a directory; give a file name",
        ));
    }
    let p = Path::new(text);
    let path = if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    };
    if path.is_dir() {
        return Err(err(raw.span(), "path", "is a directory; give a file name"));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(err(
            raw.span(),
            "path",
            format!(
                "the directory {} does not exist (the gateway does not create it)",
                dir.display()
            ),
        ));
    }
    Ok(path)
}
