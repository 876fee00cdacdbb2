//! Why bytes are not one unambiguous JSON value, in words that never quote
//! the input: serde's own messages can carry a string from the body
//! (`invalid type: string "..."`), and refusals are logged.

use std::fmt;

/// What kind of problem a body has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JsonErrorKind {
    /// A member given twice in one object (parsers disagree on which wins).
    DuplicateMember { member: String },
    /// Nested deeper than [`super::MAX_DEPTH`] levels.
    TooDeep,
    /// Not JSON: bad syntax, an invalid escape or lone surrogate, bad UTF-8.
    Syntax,
    /// The JSON ends too early.
    Eof,
    /// Valid JSON, but a member has the wrong type.
    WrongType,
    /// Nothing but white space.
    Empty,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct JsonError {
    pub(crate) kind: JsonErrorKind,
    pub(crate) line: usize,
    pub(crate) column: usize,
}

impl JsonError {
    pub(crate) fn at(kind: JsonErrorKind, line: usize, column: usize) -> JsonError {
        JsonError { kind, line, column }
    }

    pub fn is_duplicate(&self) -> bool {
        matches!(self.kind, JsonErrorKind::DuplicateMember { .. })
    }

    /// Classify a serde_json error; `duplicate` is what the strict visitors
    /// recorded before failing.
    pub(crate) fn from_serde(e: &serde_json::Error, duplicate: Option<String>) -> JsonError {
        use serde_json::error::Category;
        let kind = match (duplicate, e.classify()) {
            (Some(member), _) => JsonErrorKind::DuplicateMember { member },
            (None, Category::Eof) => JsonErrorKind::Eof,
            (None, Category::Data) => JsonErrorKind::WrongType,
            (None, Category::Syntax | Category::Io) => JsonErrorKind::Syntax,
        };
        JsonError::at(kind, e.line(), e.column())
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            JsonErrorKind::DuplicateMember { member } => write!(f, "duplicate member `{member}`")?,
            JsonErrorKind::TooDeep => {
                return write!(f, "nesting is deeper than {} levels", super::MAX_DEPTH)
            }
            JsonErrorKind::Syntax => f.write_str("invalid JSON syntax")?,
            JsonErrorKind::Eof => f.write_str("the JSON ends too early")?,
            JsonErrorKind::WrongType => f.write_str("a member has the wrong type")?,
            JsonErrorKind::Empty => return f.write_str("the body is empty"),
        }
        write!(f, " at line {} column {}", self.line, self.column)
    }
}
