//! An upstream's OAuth scope challenge read against the call it answers.
//! Where a route forwards the client's `Authorization`, an upstream that
//! wants more answers 401 or 403 with `WWW-Authenticate: Bearer
//! error="insufficient_scope", scope="…"`, and the client asks its
//! authorization server (and the person) for those scopes. A tool that only
//! reads asking for scopes that write, delete, send or administer asks for
//! far more than its job: granted once, they stay with the token for every
//! later call. The words are `data/scopes/words.toml`.

use std::sync::LazyLock;

use serde::Deserialize;

use portcullis_approval::Annotations;

use super::config::{Mode, Policy, Setting};
use super::detect::name_words;
use super::inspect::{Action, Rule, Verdict};
use crate::model::{printable_name, Reason, Refusal};

#[derive(Deserialize, Default)]
struct WordsFile {
    reads: Vec<String>,
    grants: Vec<String>,
}

static WORDS: LazyLock<WordsFile> =
    LazyLock::new(|| toml::from_str(data_file!("scopes/words.toml")).unwrap_or_default());

/// The `scope` parameter of a `WWW-Authenticate` challenge (RFC 6750
/// §3): a quoted string or a token, found by its name among the
/// challenge's parameters (never inside another parameter's value).
pub fn challenge_scope(challenge: &str) -> Option<String> {
    let mut rest = challenge.trim_start();
    // The scheme comes first (`Bearer`); the parameters follow it.
    let scheme_end = rest.find(char::is_whitespace)?;
    rest = &rest[scheme_end..];
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        if rest.is_empty() {
            return None;
        }
        let eq = rest.find('=')?;
        let name = rest[..eq].trim();
        rest = rest[eq + 1..].trim_start();
        let (value, after) = if let Some(quoted) = rest.strip_prefix('"') {
            let (value, after) = quoted_string(quoted)?;
            (value, after)
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            (rest[..end].trim().to_owned(), &rest[end..])
        };
        if name.eq_ignore_ascii_case("scope") {
            return Some(value);
        }
        rest = after;
    }
}

/// A quoted string's value (backslash escapes undone) and what follows
/// its closing quote.
fn quoted_string(s: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => value.push(chars.next()?.1),
            '"' => return Some((value, &s[i + 1..])),
            c => value.push(c),
        }
    }
    None
}

/// Whether the tool only reads: listed `readOnlyHint: true`, or, with no
/// hint saying otherwise, named by a reading verb first.
pub fn reads_only(tool: &str, hints: Option<Annotations>) -> bool {
    let hints = hints.unwrap_or_default();
    if let Some(read_only) = hints.read_only {
        return read_only;
    }
    if hints.destructive == Some(true) {
        return false;
    }
    name_words(tool)
        .first()
        .is_some_and(|w| WORDS.reads.iter().any(|r| r == w))
}

/// Whether a scope grants more than reading.
pub fn grants_more_than_reading(scope: &str) -> bool {
    scope == "*"
        || name_words(scope)
            .iter()
            .any(|w| WORDS.grants.iter().any(|g| g == w))
}

/// The scopes of `scope` (space-separated) that ask for more than the
/// tool's job, when the tool only reads; none otherwise.
pub fn excessive<'s>(tool: &str, hints: Option<Annotations>, scope: &'s str) -> Vec<&'s str> {
    if !reads_only(tool, hints) {
        return Vec::new();
    }
    scope
        .split_ascii_whitespace()
        .filter(|s| grants_more_than_reading(s))
        .collect()
}

/// What the rule made of a challenge that asks too much: the verdict to
/// record, and the refusal that answers instead when it enforces.
#[derive(Debug)]
pub struct Judged {
    pub verdict: Verdict,
    pub refusal: Option<Refusal>,
}

/// The call's tool, its listed hints, and the challenge's `scope`, under
/// `[authorization] excessive_scopes`: `None` when the rule is off or the
/// scopes fit the tool.
pub fn judge(
    policy: &Policy,
    upstream_name: &str,
    tool: &str,
    hints: Option<Annotations>,
    scope: &str,
) -> Option<Judged> {
    if policy.excessive_scopes == Setting::Off {
        return None;
    }
    let excessive = excessive(tool, hints, scope).len();
    if excessive == 0 {
        return None;
    }
    let asked = scope.split_ascii_whitespace().count();
    let enforcing = policy.excessive_scopes == Setting::Enforce && policy.mode == Mode::Enforce;
    let verdict = Verdict {
        rule: Rule::ExcessiveScope,
        action: if enforcing {
            Action::Block
        } else {
            Action::Monitor
        },
        key: None,
        field: None,
        detail: Some(format!("{excessive} of {asked}")),
    };
    let refusal = enforcing.then(|| {
        let message = format!(
            "{upstream_name} asked, for the tool \"{}\" that only reads, to be granted {excessive} OAuth scope(s) that write, delete, send or administer; the gateway does not pass that request for authorization on",
            printable_name(tool)
        );
        Refusal::new(Reason::ExcessiveScope, message)
            .with_data("scopes", asked.into())
            .with_data("excessive", excessive.into())
    });
    Some(Judged { verdict, refusal })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_is_read_from_the_challenge_by_its_name() {
        for (challenge, want) in [
            (
                r#"Bearer error="insufficient_scope", scope="calendar.read calendar.write", resource_metadata="https://x/.well-known/oauth-protected-resource""#,
                Some("calendar.read calendar.write"),
            ),
            (r#"Bearer scope=files.read"#, Some("files.read")),
            (
                r#"Bearer realm="a, scope=\"x\"", error="insufficient_scope", Scope="mail.send""#,
                Some("mail.send"),
            ),
            (r#"Bearer error="invalid_token""#, None),
            (r#"Bearer realm="unterminated"#, None),
            ("Bearer", None),
        ] {
            assert_eq!(challenge_scope(challenge).as_deref(), want, "{challenge}");
        }
    }

    #[test]
    fn a_reading_tool_asking_to_write_asks_too_much() {
        let all = "calendar.read calendar.write calendar.delete contacts.read mail.send";
        assert_eq!(
            excessive("get_calendar", None, all),
            ["calendar.write", "calendar.delete", "mail.send"]
        );
        assert!(excessive("get_calendar", None, "calendar.read").is_empty());
        assert!(excessive(
            "get_calendar",
            None,
            "https://www.googleapis.com/auth/calendar.readonly"
        )
        .is_empty());
        for (tool, scope) in [
            ("listIssues", "repo:write"),
            ("search-docs", "Files.ReadWrite"),
            ("fetch_page", "admin"),
            ("readMail", "Mail.Send"),
            ("get_user", "user:impersonate"),
            ("list_buckets", "*"),
        ] {
            assert_eq!(excessive(tool, None, scope), [scope], "{tool} {scope}");
        }
    }

    #[test]
    fn a_tool_that_writes_may_ask_to_write() {
        for tool in [
            "create_event",
            "send_mail",
            "deleteRepo",
            "update-page",
            "sync",
        ] {
            assert!(
                excessive(tool, None, "calendar.write mail.send").is_empty(),
                "{tool}"
            );
        }
        // The listed hints decide over the name.
        let writes = Annotations {
            read_only: Some(false),
            ..Annotations::default()
        };
        assert!(excessive("get_or_create_label", Some(writes), "labels.write").is_empty());
        let reads = Annotations {
            read_only: Some(true),
            ..Annotations::default()
        };
        assert_eq!(
            excessive("calendar", Some(reads), "calendar.write"),
            ["calendar.write"]
        );
    }
}
