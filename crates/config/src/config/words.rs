//! Config mistakes in words a person understands.
//!
//! The mistakes come typed: [`super::check`] finds unknown and missing keys
//! and values of the wrong kind by holding the document against the type's
//! shape, and [`TomlProblem::explain`] words them, with a "did you mean"
//! for a misspelt key. An error serde still gives after that is said as
//! serde said it (never read for meaning). The TOML parser reports a
//! syntax error only as text; [`syntax`] words the parser's messages for
//! people, and anything it does not know is shown as the parser said it.

use crate::model::Shape;

/// One mistake found in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TomlProblem {
    /// A key the config does not have here; `expected` are the keys it has.
    UnknownKey { key: String, expected: Vec<String> },
    /// A value of the wrong kind.
    WrongType { found: Found, expected: Kind },
    /// A key that must be given is not.
    MissingKey { key: String },
    /// The file is not valid TOML (the parser's message).
    Syntax { message: String },
}

/// The kind of value a key takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    Bool,
    Integer,
    Number,
    Text,
    List,
    Table,
    Choice(Vec<String>),
    Any,
}

impl Kind {
    pub(super) fn of(shape: &Shape) -> Kind {
        match shape {
            Shape::Bool => Kind::Bool,
            Shape::Integer => Kind::Integer,
            Shape::Float => Kind::Number,
            Shape::Text => Kind::Text,
            Shape::List(_) => Kind::List,
            Shape::Table(_) | Shape::Map(_) => Kind::Table,
            Shape::Choice(names) => Kind::Choice(names.iter().map(|n| (*n).to_owned()).collect()),
            Shape::Any => Kind::Any,
        }
    }

    fn in_words(&self) -> String {
        match self {
            Kind::Bool => "true or false".into(),
            Kind::Integer => "a whole number".into(),
            Kind::Number => "a number".into(),
            Kind::Text => "text in quotes".into(),
            Kind::List => "a list such as [\"a\", \"b\"]".into(),
            Kind::Table => "a table".into(),
            Kind::Choice(names) => format!("one of {}", names.join(", ")),
            Kind::Any => "another value".into(),
        }
    }
}

/// The kind of value written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Found {
    Text(String),
    /// A number as written.
    Number(String),
    Bool(bool),
    Datetime,
    List,
    Table,
}

impl Found {
    fn in_words(&self) -> String {
        match self {
            Found::Text(s) => format!("the text {s:?}"),
            Found::Number(n) => format!("the number {n}"),
            Found::Bool(b) => b.to_string(),
            Found::Datetime => "a date and time".into(),
            Found::List => "a list".into(),
            Found::Table => "a table".into(),
        }
    }
}

/// The names between backticks in `text`.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Read a syntax error of the TOML parser.
pub(super) fn syntax(message: &str) -> TomlProblem {
    TomlProblem::Syntax {
        message: message.to_owned(),
    }
}

/// The closest known key to a misspelt one, when it is close enough to be
/// what was meant.
pub(super) fn did_you_mean<'a>(key: &str, known: &'a [String]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(key, k), k))
        .filter(|(d, k)| *d <= (k.len().max(key.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

impl TomlProblem {
    /// Whether blanking the key out and reading again can find more
    /// mistakes (a missing key or a syntax error cannot be worked around).
    pub(super) fn removable(&self) -> bool {
        matches!(
            self,
            TomlProblem::UnknownKey { .. } | TomlProblem::WrongType { .. }
        )
    }

    /// The key a misspelt one most likely meant.
    pub(super) fn meant(&self) -> Option<&str> {
        match self {
            TomlProblem::UnknownKey { key, expected } => did_you_mean(key, expected),
            _ => None,
        }
    }

    /// The problem in words. `key` is the last name of the field's path.
    pub(super) fn explain(&self, key: &str) -> String {
        match self {
            TomlProblem::UnknownKey { key, expected } => match did_you_mean(key, expected) {
                Some(k) => format!("unknown key `{key}`; did you mean `{k}`?"),
                None if expected.is_empty() => format!("unknown key `{key}`; nothing goes here"),
                None => format!(
                    "unknown key `{key}`; the keys here are {}",
                    expected.join(", ")
                ),
            },
            TomlProblem::MissingKey { key } => format!("`{key}` is required here"),
            TomlProblem::WrongType { found, expected } => wrong_type(key, found, expected),
            TomlProblem::Syntax { message } => syntax_in_words(message),
        }
    }
}

fn wrong_type(key: &str, found: &Found, expected: &Kind) -> String {
    let hint = match (expected, found) {
        (Kind::List, Found::Table) => {
            format!(" (write [[{key}]] with double brackets: there may be several)")
        }
        (Kind::Bool, Found::Text(t)) if t == "true" || t == "false" => {
            " (write true or false without quotes)".into()
        }
        (Kind::Text, Found::Number(_)) => " (put it in quotes)".into(),
        (Kind::Integer, Found::Text(_)) => " (write the number without quotes)".into(),
        _ => String::new(),
    };
    format!(
        "expected {}, found {}{hint}",
        expected.in_words(),
        found.in_words()
    )
}

/// A parser message (first line: what; second: `expected …`) in words.
fn syntax_in_words(message: &str) -> String {
    let mut lines = message.lines();
    let what = lines.next().unwrap_or_default();
    let detail = lines.next().unwrap_or_default();
    let duplicate = |text: &str| {
        let names = backticked(text);
        match names.as_slice() {
            [k, t] => Some(format!("`{k}` is given twice in [{t}]; keep one")),
            [k] => Some(format!("`{k}` is given twice; keep one")),
            _ => None,
        }
    };
    if let Some(d) = [what, detail]
        .into_iter()
        .find(|l| l.starts_with("duplicate key"))
        .and_then(duplicate)
    {
        return d;
    }
    let words = match what {
        "invalid string" => "a value is missing or is not in quotes: text is written in quotes (address = \"127.0.0.1:8080\"), numbers and true/false without",
        "invalid basic string" | "invalid literal string" => "this text is not closed: add the closing quote before the end of the line",
        "invalid multiline basic string" | "invalid multiline literal string" => "this text is not closed: add the closing \"\"\" or '''",
        "expected `.`, `=`" => "expected `=` after the key: write key = value",
        "expected newline, `#`" => "unexpected characters after the value: one key = value per line, and text in quotes (e.g. timeout = \"10s\", address = \"127.0.0.1:8080\")",
        "invalid table header" => "this table header is not closed: write [name] or [[name]]",
        "invalid array" => "this list is not closed, or two commas follow each other: write [\"a\", \"b\"]",
        "invalid inline table" => "this inline table is not closed, or ends with a comma: write { key = \"value\", other = 1 } on one line",
        "invalid escape sequence" => "`\\` starts an escape inside \"…\": write \\\\ for a backslash, or use '…' quotes for paths and patterns",
        "invalid key" | "invalid unquoted key" => "a key is missing or has characters a bare key cannot have (A-Z a-z 0-9 _ -); put other keys in quotes",
        "" => "this is not valid TOML here (a control character, or another character TOML does not allow)",
        _ => return format!("this is not valid TOML ({})", what.trim_end_matches('.')),
    };
    words.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn unknown_keys_get_a_suggestion_when_one_is_close() {
        let p = TomlProblem::UnknownKey {
            key: "reponse_timeout".into(),
            expected: known(&["id", "response_timeout", "http2"]),
        };
        assert_eq!(p.meant(), Some("response_timeout"));
        assert_eq!(
            p.explain("reponse_timeout"),
            "unknown key `reponse_timeout`; did you mean `response_timeout`?"
        );
        let far = TomlProblem::UnknownKey {
            key: "colour".into(),
            expected: known(&["cert", "key"]),
        };
        assert_eq!(
            far.explain("colour"),
            "unknown key `colour`; the keys here are cert, key"
        );
        let none = TomlProblem::UnknownKey {
            key: "x".into(),
            expected: Vec::new(),
        };
        assert_eq!(none.explain("x"), "unknown key `x`; nothing goes here");
        assert_eq!(
            did_you_mean("adress", &known(&["address", "tls"])),
            Some("address")
        );
        assert_eq!(did_you_mean("x", &known(&["address"])), None);
    }

    #[test]
    fn wrong_kinds_are_said_plainly() {
        let e = |found: Found, expected: Kind, key: &str| {
            TomlProblem::WrongType { found, expected }.explain(key)
        };
        assert_eq!(
            e(Found::Number("5".into()), Kind::Text, "address"),
            "expected text in quotes, found the number 5 (put it in quotes)"
        );
        assert_eq!(
            e(Found::Text("true".into()), Kind::Bool, "http2"),
            "expected true or false, found the text \"true\" (write true or false without quotes)"
        );
        assert_eq!(
            e(Found::Text("yes".into()), Kind::Bool, "http2"),
            "expected true or false, found the text \"yes\""
        );
        assert_eq!(
            e(Found::Table, Kind::List, "listener"),
            "expected a list such as [\"a\", \"b\"], found a table (write [[listener]] with double brackets: there may be several)"
        );
        assert_eq!(
            e(Found::Text("5".into()), Kind::Integer, "max"),
            "expected a whole number, found the text \"5\" (write the number without quotes)"
        );
        assert_eq!(
            e(Found::Number("1.5".into()), Kind::Integer, "max"),
            "expected a whole number, found the number 1.5"
        );
        assert_eq!(
            e(Found::Bool(true), Kind::Table, "limits"),
            "expected a table, found true"
        );
        assert_eq!(
            TomlProblem::MissingKey {
                key: "address".into()
            }
            .explain("x"),
            "`address` is required here"
        );
    }

    #[test]
    fn syntax_errors_are_said_plainly() {
        for (raw, words) in [
            ("invalid string\nexpected `\"`, `'`", "not in quotes"),
            (
                "duplicate key `address` in table `listener`",
                "`address` is given twice in [listener]",
            ),
            (
                "invalid table header\nduplicate key `x` in document root",
                "`x` is given twice",
            ),
            ("expected newline, `#`", "one key = value per line"),
            (
                "invalid table header\nexpected `.`, `]]`",
                "table header is not closed",
            ),
            ("something new", "not valid TOML (something new)"),
        ] {
            let said = syntax(raw).explain("");
            assert!(said.contains(words), "{raw:?} → {said}");
            assert!(!said.contains("expected `"), "{said}");
        }
    }
}
