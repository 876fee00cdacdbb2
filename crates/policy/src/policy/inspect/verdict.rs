//! What one check decided: the rule that ran and what it did, as two
//! tables. Each name is written once, in its row; the audit trail
//! (`policy_verdict`), the metrics (`rule`, `action` labels), the provenance
//! under `_meta`, `explain` and the book's list all read it from here, so
//! a name cannot drift between them. The names are a public contract
//! (dashboards and audit queries match on them): add rows, never rename.

portcullis_model::name_table! {
    /// The rule a verdict comes from.
    Rule {
        Parse => "parse", "one strict reading of the inspected JSON (no member twice, depth within 128)";
        Protocol => "protocol", "what the protocol allows there: the shape of `input_required` and its requests, a task, a notification";
        Limit => "limit", "a policy limit (`data.limit` names it): sizes, counts, the text budget";
        ClientCapability => "client_capability", "a kind of question the client declared at `initialize`";
        Schema => "schema", "a form schema inside the spec's flat subset";
        SecretField => "secret_field", "a form field that asks for a secret";
        TextSafety => "text_safety", "human-facing text made safe: markup, invisible characters, links, length";
        UrlMode => "url_mode", "URL-mode elicitation and its URL";
        Deprecated => "deprecated", "sampling and roots requests, and sampling's `includeContext`";
        PromptInjection => "prompt_injection", "text that tries to instruct the model or the person (`detail`: the injection rule)";
        Icons => "icons", "an icon's source (`detail`: `icons[i]: <why>`)";
        WebsiteUrl => "website_url", "a server's `websiteUrl`";
        Name => "name", "a server's name (`serverInfo.name`), a listed tool's name (the spec's characters)";
        ListingIntent => "listing_intent", "what a listed item, a server's instructions or identity asks the model to do (`detail`: intent and cue)";
        Provenance => "provenance", "`_meta` keys in the gateway's own namespace sent by the upstream (removed)";
        Arguments => "arguments", "a call's arguments against the definition the gateway listed: the item listed at all, the `inputSchema` or a prompt's arguments, undeclared properties (`detail`: the keyword)";
        ArgumentSecret => "argument_secret", "a credential in an argument value (`detail`: its kind)";
        PrivatePath => "private_path", "a private file named in an argument (`detail`: its class)";
        Address => "address", "a URL or host in an argument that leads inside (`detail`: its class)";
        Shell => "shell", "shell syntax aimed at execution in an argument (`detail`: the construct)";
        CrossUpstreamFlow => "cross_upstream_flow", "a secret or private value another upstream returned to this caller, sent in an argument (`detail`: that upstream's id)";
        ResultSecret => "result_secret", "a credential in what a server returns (`detail`: its kind)";
        ExcessiveScope => "excessive_scope", "an upstream's OAuth scope challenge asking a tool that only reads for scopes that write, delete, send or administer (`detail`: how many of the scopes asked)";
        ServerIdentity => "server_identity", "what a server says about itself against what the gateway pinned (`detail`: the part)";
    }
}

portcullis_model::name_table! {
    /// What a rule did.
    Action {
        Pass => "pass", "found nothing (only in `explain`'s trace)";
        Block => "block", "refused the message";
        Monitor => "monitor", "would have acted, but the policy only monitors";
        Allow => "allow", "let through what the rule would otherwise refuse, as the policy says";
        Strip => "strip", "removed a form field";
        Sanitize => "sanitize", "rewrote text to make it safe";
        Flag => "flag", "delivered and recorded";
        Remove => "remove", "removed a part (an icon, a link, a listed item, a member)";
        Redact => "redact", "replaced a value, or the secret in it, with `[redacted]`";
        Ask => "ask", "held the call for a person's decision (the gateway's approval question)";
    }
}

impl Action {
    /// Whether the message delivered differs from the upstream's because
    /// of it (text made safe, an icon removed).
    pub(crate) const fn rewrites(self) -> bool {
        matches!(self, Action::Sanitize | Action::Remove | Action::Redact)
    }
}

/// The book's list of verdict rules and actions (`docs/src/reference/audit.md`),
/// generated from the two tables above (a test keeps the page equal to it).
pub fn markdown_table() -> String {
    let mut out = String::from("| `rule` | what it checks |\n|---|---|\n");
    for r in Rule::ALL {
        out.push_str(&format!("| `{}` | {} |\n", r.as_str(), r.what()));
    }
    out.push_str("\n| `action` | what the rule did |\n|---|---|\n");
    for a in Action::ALL {
        out.push_str(&format!("| `{}` | {} |\n", a.as_str(), a.what()));
    }
    out
}

/// One thing the gateway decided, for provenance, metrics and audit. Never
/// carries a value a user typed (there is none in a question).
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub rule: Rule,
    pub action: Action,
    pub key: Option<String>,
    pub field: Option<String>,
    pub detail: Option<String>,
}

impl Verdict {
    /// Whether the message delivered differs from the upstream's because
    /// of it (text made safe, an icon removed).
    pub(crate) fn rewrites(&self) -> bool {
        self.action.rewrites()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_snake_case_and_read_back() {
        let mut seen = HashSet::new();
        for s in Rule::ALL.iter().map(|r| r.as_str()) {
            assert!(seen.insert(s), "duplicate rule {s}");
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{s}");
            assert_eq!(Rule::parse(s).map(Rule::as_str), Some(s));
        }
        let mut seen = HashSet::new();
        for s in Action::ALL.iter().map(|a| a.as_str()) {
            assert!(seen.insert(s), "duplicate action {s}");
            assert!(s.chars().all(|c| c.is_ascii_lowercase()), "{s}");
            assert_eq!(Action::parse(s).map(Action::as_str), Some(s));
        }
    }

    /// The names dashboards and audit queries already match on: a row may
    /// be added, none of these renamed or dropped.
    #[test]
    fn every_shipped_name_is_still_read() {
        let rules = [
            "parse",
            "protocol",
            "limit",
            "client_capability",
            "schema",
            "secret_field",
            "text_safety",
            "url_mode",
            "deprecated",
            "prompt_injection",
            "icons",
            "website_url",
            "name",
            "listing_intent",
            "provenance",
        ];
        for r in rules {
            assert!(Rule::parse(r).is_some(), "rule {r} was renamed or dropped");
        }
        let actions = [
            "pass", "block", "monitor", "allow", "strip", "sanitize", "flag", "remove",
        ];
        for a in actions {
            assert!(
                Action::parse(a).is_some(),
                "action {a} was renamed or dropped"
            );
        }
    }

    #[test]
    fn the_wire_name_is_the_table_name() {
        for r in Rule::ALL {
            assert_eq!(serde_json::to_value(r).ok(), Some(r.as_str().into()));
            assert_eq!(r.to_string(), r.as_str());
        }
        for a in Action::ALL {
            assert_eq!(serde_json::to_value(a).ok(), Some(a.as_str().into()));
        }
    }
}
