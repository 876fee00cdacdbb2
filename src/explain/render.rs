//! The explanation as text for a person: the checks grouped by input
//! request and field, the decision, then what the client would receive.
//! Text from the message is printed escaped (a hostile upstream's terminal
//! escapes and bidi controls must not reach the reviewer's terminal).

use std::fmt::Write;

use serde_json::Value;

use super::{Check, Explanation};

/// Text from the message, with control and invisible characters escaped.
fn shown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if crate::audit::is_hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

fn group_name(key: Option<&str>, field: Option<&str>, top: &str, keys: &str) -> String {
    match (key, field) {
        (None, _) => top.into(),
        (Some(k), None) => format!("{keys} \"{}\"", shown(k)),
        (Some(k), Some(f)) => format!("{keys} \"{}\", field \"{}\"", shown(k), shown(f)),
    }
}

/// Checks grouped by (key, field), groups in the order they first appear.
fn grouped<'a>(checks: &'a [Check], top: &str, keys: &str) -> Vec<(String, Vec<&'a Check>)> {
    let mut groups: Vec<(String, Vec<&Check>)> = Vec::new();
    for c in checks {
        let name = group_name(c.key.as_deref(), c.field.as_deref(), top, keys);
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, list)) => list.push(c),
            None => groups.push((name, vec![c])),
        }
    }
    groups
}

fn write_checks(out: &mut String, checks: &[Check], top: &str, keys: &str) {
    for (name, list) in grouped(checks, top, keys) {
        let _ = writeln!(out, "  {name}");
        for c in list {
            let detail = c.detail.as_deref().map(shown).unwrap_or_default();
            let _ = writeln!(out, "    {:<11} {:<18} {detail}", c.action, c.rule);
        }
    }
}

/// A JSON value indented under a heading; the gateway's sealed state is
/// shortened (it is long and opaque).
fn write_json(out: &mut String, value: &Value) {
    let mut v = value.clone();
    if let Some(Value::String(s)) = v.pointer_mut("/result/requestState") {
        if s.starts_with(crate::mrtr::seal::STATE_PREFIX) {
            *s = format!(
                "{}… ({} characters, sealed by the gateway)",
                &s[..12.min(s.len())],
                s.len()
            );
        }
    }
    let text = serde_json::to_string_pretty(&v).unwrap_or_default();
    for line in text.lines() {
        let _ = writeln!(out, "  {line}");
    }
}

pub(super) fn text(e: &Explanation) -> String {
    let mut out = String::new();
    let u = &e.upstream;
    let _ = writeln!(
        out,
        "upstream {} (\"{}\"), policy \"{}\" ({})",
        u.id,
        shown(&u.name),
        u.policy,
        u.mode
    );
    let _ = writeln!(out, "message: {}\n", e.message);
    let _ = writeln!(out, "checks, in the order they ran:");
    if e.checks.is_empty() {
        let _ = writeln!(out, "  (no policy rule applies to this message)");
    }
    let top = if e.retry.is_some() {
        "the retry"
    } else if e.keys_name == "argument" {
        "the call"
    } else {
        "the whole message"
    };
    write_checks(&mut out, &e.checks, top, e.keys_name);
    if !e.every_rule.is_empty() {
        let _ = writeln!(
            out,
            "\nthe policy stops at its first refusal; had it only monitored, every rule would say:"
        );
        write_checks(&mut out, &e.every_rule, top, e.keys_name);
    }
    let code = u8::from(e.refused());
    let _ = writeln!(
        out,
        "\ndecision: {} (exit {code})",
        e.decision.to_uppercase()
    );
    if let Some(r) = &e.refusal {
        let _ = writeln!(out, "  {} ({}): {}", r.reason, r.code, shown(&r.message));
    }
    if let Some(retry) = &e.retry {
        write_retry(&mut out, retry);
    }
    if !e.changed_arguments.is_empty() {
        let paths: Vec<String> = e.changed_arguments.iter().map(|p| shown(p)).collect();
        let _ = writeln!(
            out,
            "
arguments redacted or removed before the upstream gets the call: {}",
            paths.join(", ")
        );
    }
    if !e.sanitised.is_empty() {
        let _ = writeln!(out, "\ntext the gateway rewrote:");
        for t in &e.sanitised {
            let _ = writeln!(out, "  {} › {}", shown(&t.key), t.at);
            let _ = writeln!(out, "    before: {}", shown(&t.before));
            let _ = writeln!(out, "    after:  {}", shown(&t.after));
        }
    }
    if !e.stripped.is_empty() {
        let _ = writeln!(out, "\nfields removed from forms:");
        for f in &e.stripped {
            let _ = writeln!(out, "  {} › {}", shown(&f.key), shown(&f.field));
        }
    }
    if let Some(p) = &e.provenance {
        let _ = writeln!(
            out,
            "\nprovenance the client receives (_meta[\"dev.portcullis/provenance\"]):"
        );
        write_json(&mut out, p);
    }
    if let Some(c) = &e.client_receives {
        let _ = writeln!(out, "\nthe client receives:");
        write_json(&mut out, c);
    }
    out
}

fn write_retry(out: &mut String, r: &super::retry::RetryOut) {
    if let Some(s) = &r.state {
        let _ = writeln!(
            out,
            "\nthe gateway's state: operation {}, round {}, issued to {} for {} {} on upstream {}; expires in {} s; upstream state inside: {}",
            s.operation,
            s.round,
            shown(&s.issued_to),
            s.method,
            shown(s.target.as_deref().unwrap_or("")),
            s.upstream,
            s.expires_in_seconds,
            if s.upstream_state { "yes" } else { "no" }
        );
        for a in &s.asked {
            let fields: Vec<String> = a
                .fields
                .iter()
                .flatten()
                .map(|f| shown(f.as_str()))
                .collect();
            let kind = serde_json::to_value(a.kind).unwrap_or_default();
            let _ = writeln!(
                out,
                "  asked \"{}\": {} {}",
                shown(a.key.as_str()),
                kind.as_str().unwrap_or_default(),
                fields.join(", ")
            );
        }
    } else {
        let _ = writeln!(out, "\nthe state does not open with this config's keys");
    }
    if let Some(note) = r.note {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(out, "checked as: {}", shown(&r.principal));
    for a in &r.answers {
        let fields: Vec<String> = a.fields.iter().map(|f| shown(f)).collect();
        let _ = writeln!(
            out,
            "  answer \"{}\": {} {}",
            shown(&a.key),
            a.action,
            fields.join(", ")
        );
    }
    if !r.forwarded.is_empty() {
        let keys: Vec<String> = r.forwarded.iter().map(|k| shown(k)).collect();
        let _ = writeln!(out, "forwarded upstream: {}", keys.join(", "));
    }
    for (what, list) in [
        ("never asked, removed", &r.dropped_keys),
        ("content removed", &r.dropped_content),
    ] {
        if !list.is_empty() {
            let keys: Vec<String> = list.iter().map(|k| shown(k)).collect();
            let _ = writeln!(out, "{what}: {}", keys.join(", "));
        }
    }
}
