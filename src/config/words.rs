//! What the TOML reader says, in words a person understands.
//!
//! The `toml` crate reports a mistake only as text (serde's standard
//! phrases and the parser's own). This is the one place that reads that
//! text: [`classify`] turns it into a [`TomlProblem`] once, and everything
//! after decides on the type. [`TomlProblem::explain`] words it for people,
//! with a "did you mean" for a misspelt key.

/// One mistake the TOML reader stopped at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TomlProblem {
    /// A key the config does not have here; `expected` are the keys it has.
    UnknownKey { key: String, expected: Vec<String> },
    /// A value of the wrong kind (`found`, `expected` in serde's words).
    WrongType { found: String, expected: String },
    /// A key that must be given is not.
    MissingKey { key: String },
    /// The file is not valid TOML (the parser's message).
    Syntax { message: String },
    /// Anything else a section reader said.
    Other { message: String },
}

/// The names between backticks in `text`.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The first backticked name in `text`.
fn first_backticked(text: &str) -> String {
    backticked(text).into_iter().next().unwrap_or_default()
}

/// Read a deserialisation message of the `toml` crate.
pub(super) fn classify(message: &str) -> TomlProblem {
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (key, expected) = rest.split_once(", expected").unwrap_or((rest, ""));
        return TomlProblem::UnknownKey {
            key: first_backticked(key),
            expected: backticked(expected),
        };
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return TomlProblem::MissingKey {
            key: first_backticked(rest),
        };
    }
    let typed = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "));
    if let Some((found, expected)) = typed.and_then(|t| t.rsplit_once(", expected ")) {
        return TomlProblem::WrongType {
            found: found.to_owned(),
            expected: expected.to_owned(),
        };
    }
    TomlProblem::Other {
        message: message.to_owned(),
    }
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

/// serde's name of an expected kind, as a person would say it.
fn kind_in_words(expected: &str) -> String {
    match expected {
        "a string" => "text in quotes".into(),
        "a boolean" => "true or false".into(),
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "usize" | "isize" => {
            "a whole number".into()
        }
        "f32" | "f64" => "a number".into(),
        "a sequence" => "a list such as [\"a\", \"b\"]".into(),
        "a map" => "a table".into(),
        e if e.starts_with("struct ") => "a table".into(),
        other => other.to_owned(),
    }
}

/// serde's description of a value found, as a person would say it.
fn found_in_words(found: &str) -> String {
    let value = || first_backticked(found);
    if let Some(s) = found.strip_prefix("string ") {
        return format!("the text {s}");
    }
    if found.starts_with("integer") || found.starts_with("floating point") {
        return format!("the number {}", value());
    }
    if found.starts_with("boolean") {
        return value();
    }
    match found {
        "map" => "a table".into(),
        "sequence" => "a list".into(),
        other => other.to_owned(),
    }
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
            TomlProblem::Other { message } => message.clone(),
        }
    }
}

fn wrong_type(key: &str, found: &str, expected: &str) -> String {
    let want = kind_in_words(expected);
    let got = found_in_words(found);
    let hint = match (expected, found) {
        ("a sequence", "map") => {
            format!(" (write [[{key}]] with double brackets: there may be several)")
        }
        ("a boolean", f) if f == "string \"true\"" || f == "string \"false\"" => {
            " (write true or false without quotes)".into()
        }
        ("a string", f) if f.starts_with("integer") || f.starts_with("floating") => {
            " (put it in quotes)".into()
        }
        (e, f) if f.starts_with("string") && kind_in_words(e) == "a whole number" => {
            " (write the number without quotes)".into()
        }
        _ => String::new(),
    };
    format!("expected {want}, found {got}{hint}")
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
        let p = classify(
            "unknown field `reponse_timeout`, expected one of `id`, `response_timeout`, `http2`",
        );
        assert_eq!(
            p,
            TomlProblem::UnknownKey {
                key: "reponse_timeout".into(),
                expected: known(&["id", "response_timeout", "http2"]),
            }
        );
        assert_eq!(
            p.explain("reponse_timeout"),
            "unknown key `reponse_timeout`; did you mean `response_timeout`?"
        );
        let far = classify("unknown field `colour`, expected `cert` or `key`");
        assert_eq!(
            far.explain("colour"),
            "unknown key `colour`; the keys here are cert, key"
        );
        assert_eq!(
            did_you_mean("adress", &known(&["address", "tls"])),
            Some("address")
        );
        assert_eq!(did_you_mean("x", &known(&["address"])), None);
    }

    #[test]
    fn wrong_kinds_are_said_plainly() {
        let e = |m: &str, key: &str| classify(m).explain(key);
        assert_eq!(
            e("invalid type: integer `5`, expected a string", "address"),
            "expected text in quotes, found the number 5 (put it in quotes)"
        );
        assert_eq!(
            e("invalid type: string \"true\", expected a boolean", "http2"),
            "expected true or false, found the text \"true\" (write true or false without quotes)"
        );
        assert_eq!(
            e("invalid type: map, expected a sequence", "listener"),
            "expected a list such as [\"a\", \"b\"], found a table (write [[listener]] with double brackets: there may be several)"
        );
        assert_eq!(
            e("missing field `address`", "x"),
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
