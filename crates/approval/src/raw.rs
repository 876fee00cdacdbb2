//! `[[approval]]` as written (in a policy file, or under a route), and its
//! compilation into [`ApprovalRules`]: every value checked up front, each
//! problem pinned to the byte span it was written at (a condition's to the
//! character inside it).

use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use toml::Spanned;

use crate::model::SettingsError;
use crate::rule::{
    ApprovalRule, ApprovalRules, Approver, ApproversWritten, ArgumentCheck, Fallback, HintMatch,
    Remember,
};
pub use crate::rule::{DEFAULT_REMEMBER_FOR, DEFAULT_TIMEOUT};
use crate::when::{Hint, Variable, When};

/// One `[[approval]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawApproval {
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub tools: Vec<Spanned<String>>,
    #[serde(default)]
    pub annotations: Vec<Spanned<String>>,
    #[serde(default)]
    pub verdicts: Vec<Spanned<String>>,
    pub changed_listing: Option<bool>,
    pub first_use: Option<bool>,
    pub when: Option<Spanned<String>>,
    pub remember: Option<Spanned<String>>,
    pub remember_for: Option<Spanned<String>>,
    pub approver: Option<Spanned<String>>,
    #[serde(default)]
    pub approvers: Vec<Spanned<String>>,
    #[serde(default)]
    pub approver_groups: Vec<Spanned<String>>,
    pub fallback: Option<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
    pub reason: Option<Spanned<String>>,
}

/// A key of [`RawApproval`], named by its field (the compiler holds the
/// name to the struct).
macro_rules! key {
    ($f:ident) => {{
        let _ = |r: &RawApproval| {
            let _ = &r.$f;
        };
        stringify!($f)
    }};
}

/// The longest a question may wait.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long a first use's approval holds unless the rule says.
pub const DEFAULT_FIRST_USE_FOR: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest a decision may be remembered.
pub const MAX_REMEMBER_FOR: Duration = Duration::from_secs(365 * 24 * 3600);
/// The longest operator-written reason shown with a question.
pub const MAX_REASON_CHARS: usize = 300;

/// Compiles the `[[approval]]` tables of one file (`field`: where they sit,
/// `approval` or `route[0].approval`; `text`: the whole file, to point
/// inside a condition).
pub fn compile(
    raw: &[Spanned<RawApproval>],
    field: &str,
    text: &str,
) -> Result<Vec<ApprovalRule>, SettingsError> {
    let mut rules: Vec<ApprovalRule> = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let rule = rule(r, &at, i, text)?;
        if rules.iter().any(|o| o.name == rule.name) {
            let span = r.get_ref().name.as_ref().map_or(r.span(), Spanned::span);
            return Err(SettingsError::new(
                span,
                format!("{at}.{}", key!(name)),
                format!("a second approval rule named \"{}\" here", rule.name),
            ));
        }
        rules.push(rule);
    }
    Ok(rules)
}

/// Rules of a chain of files (a policy and the ones it extends), root
/// first: a rule with the name of an earlier one replaces it in place.
pub fn merge(chain: Vec<Vec<ApprovalRule>>) -> ApprovalRules {
    let mut out: Vec<ApprovalRule> = Vec::new();
    for rules in chain {
        for r in rules {
            match out.iter_mut().find(|o| o.name == r.name) {
                Some(slot) => *slot = r,
                None => out.push(r),
            }
        }
    }
    ApprovalRules::new(out)
}

fn rule(
    spanned: &Spanned<RawApproval>,
    at: &str,
    index: usize,
    text: &str,
) -> Result<ApprovalRule, SettingsError> {
    let r = spanned.get_ref();
    let err = |v: &Spanned<String>, key: &str, msg: String| {
        SettingsError::new(v.span(), format!("{at}.{key}"), msg)
    };
    let name = match &r.name {
        None => format!("approval-{}", index + 1),
        Some(n) if valid_name(n.get_ref()) => n.get_ref().clone(),
        Some(n) => {
            return Err(err(
                n,
                key!(name),
                "use 1 to 64 of a-z, 0-9, '-' and '_'".into(),
            ))
        }
    };
    let tools = tool_names(&r.tools, at, key!(tools))?;
    let annotations = r
        .annotations
        .iter()
        .map(|a| hint(a).ok_or_else(|| err(a, key!(annotations), hint_help(a.get_ref()))))
        .collect::<Result<Vec<_>, _>>()?;
    let verdicts = r
        .verdicts
        .iter()
        .map(|v| {
            choose(v, ArgumentCheck::ALL, ArgumentCheck::as_str).ok_or_else(|| {
                err(
                    v,
                    key!(verdicts),
                    one_of(v, ArgumentCheck::ALL, ArgumentCheck::as_str),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let changed_listing = r.changed_listing.unwrap_or(false);
    let first_use = r.first_use.unwrap_or(false);
    let when = match &r.when {
        None => None,
        Some(w) => Some(condition(
            w,
            &format!("{at}.{}", key!(when)),
            text,
            Variable::ALL,
        )?),
    };
    if tools.is_none()
        && annotations.is_empty()
        && verdicts.is_empty()
        && !changed_listing
        && !first_use
        && when.is_none()
    {
        return Err(SettingsError::new(
            spanned.span(),
            at,
            "an approval rule names what it asks about: tools, annotations, verdicts, changed_listing, first_use or when (tools = [\"*\"] for every call)",
        ));
    }
    let remember = pick(
        &r.remember,
        at,
        key!(remember),
        Remember::ALL,
        Remember::as_str,
    )?
    .unwrap_or(Remember::Call);
    let remembers_caller = first_use || remember == Remember::Caller;
    let remember_for = match &r.remember_for {
        Some(v) if !remembers_caller => {
            return Err(err(v, key!(remember_for), "only a decision remembered for the caller (remember = \"caller\", or first_use) has a duration".into()))
        }
        Some(v) => duration(v, at, key!(remember_for), MAX_REMEMBER_FOR)?,
        None if first_use => DEFAULT_FIRST_USE_FOR,
        None => DEFAULT_REMEMBER_FOR,
    };
    let approver = pick(
        &r.approver,
        at,
        key!(approver),
        Approver::ALL,
        Approver::as_str,
    )?
    .unwrap_or(Approver::Caller);
    let fallback = pick(
        &r.fallback,
        at,
        key!(fallback),
        Fallback::ALL,
        Fallback::as_str,
    )?
    .unwrap_or(Fallback::Refuse);
    let approvers = globs(&r.approvers, at, key!(approvers))?;
    let approver_groups = globs(&r.approver_groups, at, key!(approver_groups))?;
    let needs_approvers = approver == Approver::Approvers || fallback == Fallback::Approvers;
    if needs_approvers && approvers.is_none() && approver_groups.is_none() {
        return Err(SettingsError::new(
            spanned.span(),
            at,
            "an approver other than the caller is named: approvers = [\"<principal>\", …] and/or approver_groups = [\"<group>\", …]",
        ));
    }
    if !needs_approvers {
        if let Some(v) = r.approvers.first().or(r.approver_groups.first()) {
            return Err(err(
                v,
                key!(approvers),
                "approvers decide only where approver or fallback is \"approvers\"".into(),
            ));
        }
    }
    let timeout = match &r.timeout {
        Some(v) => duration(v, at, key!(timeout), MAX_TIMEOUT)?,
        None => DEFAULT_TIMEOUT,
    };
    let reason = match &r.reason {
        None => None,
        Some(v) => {
            let t = v.get_ref().trim();
            if t.is_empty()
                || t.chars().count() > MAX_REASON_CHARS
                || t.chars().any(char::is_control)
            {
                return Err(err(
                    v,
                    key!(reason),
                    format!("one line of 1 to {MAX_REASON_CHARS} characters"),
                ));
            }
            Some(t.to_owned())
        }
    };
    Ok(ApprovalRule {
        name,
        tools,
        annotations,
        verdicts,
        changed_listing,
        first_use,
        when,
        remember,
        remember_for,
        approver,
        approver_groups,
        approvers_written: ApproversWritten {
            names: r.approvers.iter().map(|g| g.get_ref().clone()).collect(),
            groups: r
                .approver_groups
                .iter()
                .map(|g| g.get_ref().clone())
                .collect(),
        },
        fallback,
        timeout,
        reason,
    })
}

/// A `when` condition, with a compile error pinned to its character in
/// the file.
pub fn condition(
    raw: &Spanned<String>,
    field: &str,
    text: &str,
    allowed: &[Variable],
) -> Result<When, SettingsError> {
    When::compile(raw.get_ref(), allowed).map_err(|e| {
        let token = text.get(raw.span()).unwrap_or_default();
        let inside = offset_in_token(token, raw.get_ref(), e.line, e.column).unwrap_or(0);
        let start = raw.span().start + inside;
        SettingsError::new(
            start..start + 1,
            field,
            format!(
                "{} (at {}:{} of the condition)",
                e.message, e.line, e.column
            ),
        )
    })
}

/// Where character (`line`, `column`) of a string's value is in the TOML
/// token that wrote it: exact when the token holds the value as is (a
/// literal string, or a basic one without escapes), else its start.
pub fn offset_in_token(token: &str, value: &str, line: usize, column: usize) -> Option<usize> {
    let open = ["'''", "\"\"\"", "'", "\""]
        .into_iter()
        .find(|d| token.starts_with(d))?;
    let mut body = &token[open.len()..];
    let mut skipped = open.len();
    if open.len() == 3 {
        // A newline right after the opening delimiter is not part of the value.
        for nl in ["\r\n", "\n"] {
            if let Some(rest) = body.strip_prefix(nl) {
                skipped += nl.len();
                body = rest;
                break;
            }
        }
    }
    if !body.starts_with(value) {
        return Some(0);
    }
    let mut offset = 0;
    for (i, l) in value.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            let col: usize = l
                .chars()
                .take(column.saturating_sub(1))
                .map(char::len_utf8)
                .sum();
            return Some(skipped + offset + col);
        }
        offset += l.len();
    }
    Some(skipped)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn globs(list: &[Spanned<String>], at: &str, key: &str) -> Result<Option<GlobSet>, SettingsError> {
    if list.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for g in list {
        let glob = Glob::new(g.get_ref()).map_err(|e| {
            SettingsError::new(g.span(), format!("{at}.{key}"), format!("not a glob: {e}"))
        })?;
        b.add(glob);
    }
    b.build()
        .map(Some)
        .map_err(|e| SettingsError::new(list[0].span(), format!("{at}.{key}"), e.to_string()))
}

/// Tool names: exact ones apart, the glob patterns as one set.
fn tool_names(
    list: &[Spanned<String>],
    at: &str,
    key: &str,
) -> Result<Option<crate::rule::ToolNames>, SettingsError> {
    if list.is_empty() {
        return Ok(None);
    }
    let is_glob = |s: &str| s.contains(['*', '?', '[', ']', '{', '}', '\\']);
    let (patterns, exact): (Vec<_>, Vec<_>) =
        list.iter().cloned().partition(|s| is_glob(s.get_ref()));
    Ok(Some(crate::rule::ToolNames {
        exact: exact
            .into_iter()
            .map(|s| s.into_inner().into_boxed_str())
            .collect(),
        globs: globs(&patterns, at, key)?,
    }))
}

fn hint(raw: &Spanned<String>) -> Option<HintMatch> {
    let written = raw.get_ref().as_str();
    let (listed_true, name) = match written.strip_prefix('!') {
        Some(rest) => (false, rest),
        None => (true, written),
    };
    let hint = Hint::ALL.iter().copied().find(|h| h.as_str() == name)?;
    Some(HintMatch { hint, listed_true })
}

fn hint_help(written: &str) -> String {
    let names: Vec<&str> = Hint::ALL.iter().map(|h| h.as_str()).collect();
    format!(
        "\"{written}\" is not a tool annotation; use {} (a hint listed as true), or one of them after '!' (not listed as true: \"!readOnlyHint\")",
        names.join(", ")
    )
}

fn choose<T: Copy>(raw: &Spanned<String>, all: &[T], name: fn(T) -> &'static str) -> Option<T> {
    all.iter().copied().find(|v| name(*v) == raw.get_ref())
}

fn one_of<T: Copy>(raw: &Spanned<String>, all: &[T], name: fn(T) -> &'static str) -> String {
    let names: Vec<String> = all.iter().map(|v| format!("\"{}\"", name(*v))).collect();
    format!("\"{}\" is not one of {}", raw.get_ref(), names.join(", "))
}

fn pick<T: Copy>(
    raw: &Option<Spanned<String>>,
    at: &str,
    key: &str,
    all: &[T],
    name: fn(T) -> &'static str,
) -> Result<Option<T>, SettingsError> {
    let Some(v) = raw else { return Ok(None) };
    choose(v, all, name)
        .map(Some)
        .ok_or_else(|| SettingsError::new(v.span(), format!("{at}.{key}"), one_of(v, all, name)))
}

fn duration(
    raw: &Spanned<String>,
    at: &str,
    key: &str,
    max: Duration,
) -> Result<Duration, SettingsError> {
    let field = format!("{at}.{key}");
    let d = humantime::parse_duration(raw.get_ref()).map_err(|e| {
        SettingsError::new(
            raw.span(),
            &field,
            format!("a duration such as \"5m\" or \"8h\": {e}"),
        )
    })?;
    if d.is_zero() || d > max {
        return Err(SettingsError::new(
            raw.span(),
            field,
            format!(
                "more than zero and at most {}",
                humantime::format_duration(max)
            ),
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests;
