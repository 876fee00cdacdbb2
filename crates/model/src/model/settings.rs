//! The error every settings reader returns: what is wrong with which field,
//! at which byte span of the file. The config loader turns the span into
//! `file:line:column`. Every section reader (`[[auth]]`, `[audit]`,
//! `[rate_limits]`, …) reports with this one type.

use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SettingsError {
    pub span: Range<usize>,
    pub field: String,
    pub message: String,
}

impl SettingsError {
    pub fn new(span: Range<usize>, field: impl Into<String>, message: impl Into<String>) -> Self {
        SettingsError {
            span,
            field: field.into(),
            message: message.into(),
        }
    }

    /// A problem with a spanned value, pinned to it.
    pub fn at<T>(
        value: &toml::Spanned<T>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        SettingsError::new(value.span(), field, message)
    }
}

/// A problem in a config or policy file, pinned to a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {field}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub field: String,
    pub message: String,
}

/// A TOML parser's syntax message, never empty: some errors (a control
/// character in a comment, say) come without one, and every error must say
/// what is wrong.
pub fn toml_syntax_message(message: &str) -> String {
    match message.trim() {
        "" => "not valid TOML here (a control character or an unexpected character)".to_owned(),
        m => m.to_owned(),
    }
}
