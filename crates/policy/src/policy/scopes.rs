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

/// Every `scope` parameter of a `WWW-Authenticate` header (RFC 6750 §3):
/// quoted strings or tokens, found by name among the parameters of each
/// challenge in it (never inside another parameter's value). A challenge
/// that names `scope` twice gives both: a client may follow either.
pub fn challenge_scopes(header: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = header.trim_start();
    while !rest.is_empty() {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        // A scheme or a token68 (no `=` before the next space or comma),
        // or a parameter `name=value`.
        let word_end = rest
            .find(|c: char| c == ',' || c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        if rest[word_end..].trim_start().starts_with('=') && word_end > 0 {
            let name = &rest[..word_end];
            let after_eq = rest[word_end..].trim_start()[1..].trim_start();
            let (value, after) = match after_eq.strip_prefix('"') {
                Some(quoted) => match quoted_string(quoted) {
                    Some(v) => v,
                    None => return found,
                },
                None => {
                    let end = after_eq
                        .find(|c: char| c == ',' || c.is_whitespace())
                        .unwrap_or(after_eq.len());
                    (
                        after_eq[..end].trim_end_matches('=').to_owned(),
                        &after_eq[end..],
                    )
                }
            };
            if name.eq_ignore_ascii_case("scope") {
                found.push(value);
            }
            rest = after;
        } else {
            rest = &rest[word_end..];
            // A token68 may end in `=` padding.
            rest = rest.trim_start_matches('=');
        }
    }
    found
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

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&WORDS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_is_read_from_the_challenge_by_its_name() {
        for (challenge, want) in [
            (
                r#"Bearer error="insufficient_scope", scope="calendar.read calendar.write", resource_metadata="https://x/.well-known/oauth-protected-resource""#,
                vec!["calendar.read calendar.write"],
            ),
            (r#"Bearer scope=files.read"#, vec!["files.read"]),
            (
                r#"Bearer realm="a, scope=\"x\"", error="insufficient_scope", Scope="mail.send""#,
                vec!["mail.send"],
            ),
            // Twice in one challenge; a second challenge in the same header.
            (
                r#"Bearer scope="calendar.read", scope="mail.send""#,
                vec!["calendar.read", "mail.send"],
            ),
            (
                r#"Basic realm="x", Bearer error="insufficient_scope", scope="repo:write""#,
                vec!["repo:write"],
            ),
            (r#"Negotiate abc123==, Bearer scope="admin""#, vec!["admin"]),
            (r#"Bearer error_description="scope=admin please""#, vec![]),
            (r#"Bearer error="invalid_token""#, vec![]),
            (r#"Bearer realm="unterminated"#, vec![]),
            ("Bearer", vec![]),
            ("", vec![]),
        ] {
            assert_eq!(challenge_scopes(challenge), want, "{challenge}");
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
