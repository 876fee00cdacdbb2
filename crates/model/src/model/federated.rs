//! How a federated route exposes its upstreams' names, and how it carries
//! each method: to every upstream (merged) or to the one a name leads to.
//! One table, read by the config check, the permissions and the pipeline.

use super::{McpMethod, TargetKind};

/// Between an upstream's prefix and a tool or prompt name. A prefix never
/// contains it, so the first one splits an exposed name.
pub const NAME_SEPARATOR: char = '_';

/// Between an upstream's prefix and a resource URI or URI template: the
/// exposed URI keeps a valid scheme (`gh+file:///x`) and the upstream gets
/// its own URI back byte for byte.
pub const URI_SEPARATOR: char = '+';

/// A prefix: a lower-case letter, then up to 31 of a-z, 0-9 and '-' (valid
/// in a tool name and in a URI scheme, and free of both separators); or
/// empty: that upstream's names are exposed as they are.
pub fn valid_prefix(prefix: &str) -> bool {
    if prefix.is_empty() {
        return true;
    }
    let mut bytes = prefix.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && prefix.len() <= 32
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// What separates an upstream's prefix from a name of `kind`.
pub const fn separator(kind: TargetKind) -> char {
    match kind {
        TargetKind::Tool | TargetKind::Prompt => NAME_SEPARATOR,
        TargetKind::Resource => URI_SEPARATOR,
    }
}

/// The name a client sees for an upstream's `name` of `kind` (the name
/// itself under an empty prefix).
pub fn expose(kind: TargetKind, prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        return name.to_owned();
    }
    let mut out = String::with_capacity(prefix.len() + 1 + name.len());
    out.push_str(prefix);
    out.push(separator(kind));
    out.push_str(name);
    out
}

/// An exposed name split at its first separator into a prefix and the
/// upstream's own name (`None` when it has no separator). Which upstream
/// an exposed name belongs to also depends on whether one has an empty
/// prefix: the route decides (`Federated::owner`).
pub fn split(kind: TargetKind, exposed: &str) -> Option<(&str, &str)> {
    exposed.split_once(separator(kind))
}

/// How a federated route carries a client message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carriage {
    /// Asked of every upstream; the lists are merged (`items` holds them,
    /// each named by its `name` member).
    List {
        items: &'static str,
        name: &'static str,
        kind: TargetKind,
    },
    /// Asked of every upstream; answered as one server.
    Describe,
    /// Every upstream's stream of notifications, merged
    /// (`subscriptions/listen`; each gets its own resource subscriptions).
    Listen,
    /// Asked of every upstream; answered once all have (`ping`,
    /// `logging/setLevel`, a client's notification).
    Everyone,
    /// To the upstream the target's prefix names (`params.name`, `params.uri`).
    Target(TargetKind),
    /// To the upstream `params.ref` names (`completion/complete`).
    Reference,
    /// To the upstream whose state the request brings back (a task, an
    /// answer to a pushed request).
    State,
}

impl McpMethod {
    /// How a federated route carries this method.
    pub const fn carriage(self) -> Carriage {
        use McpMethod as M;
        match self {
            M::ToolsList => Carriage::List {
                items: "tools",
                name: "name",
                kind: TargetKind::Tool,
            },
            M::PromptsList => Carriage::List {
                items: "prompts",
                name: "name",
                kind: TargetKind::Prompt,
            },
            M::ResourcesList => Carriage::List {
                items: "resources",
                name: "uri",
                kind: TargetKind::Resource,
            },
            M::ResourcesTemplatesList => Carriage::List {
                items: "resourceTemplates",
                name: "uriTemplate",
                kind: TargetKind::Resource,
            },
            M::Initialize | M::ServerDiscover => Carriage::Describe,
            M::ToolsCall => Carriage::Target(TargetKind::Tool),
            M::PromptsGet => Carriage::Target(TargetKind::Prompt),
            M::ResourcesRead | M::ResourcesSubscribe | M::ResourcesUnsubscribe => {
                Carriage::Target(TargetKind::Resource)
            }
            M::CompletionComplete => Carriage::Reference,
            M::SubscriptionsListen => Carriage::Listen,
            M::TasksGet | M::TasksUpdate | M::TasksCancel | M::TasksResult => Carriage::State,
            _ => Carriage::Everyone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_names_split_back() {
        for kind in [TargetKind::Tool, TargetKind::Prompt, TargetKind::Resource] {
            for name in ["a", "read_file", "a+b_c", "file:///x_y+z", ""] {
                let exposed = expose(kind, "gh-2", name);
                assert_eq!(split(kind, &exposed), Some(("gh-2", name)));
            }
        }
        assert_eq!(split(TargetKind::Tool, "plain"), None);
    }

    #[test]
    fn prefixes() {
        assert_eq!(expose(TargetKind::Tool, "", "a_b"), "a_b");
        for ok in ["", "gh", "a", "files-2", "abcdefghijabcdefghijabcdefghijab"] {
            assert!(valid_prefix(ok), "{ok}");
        }
        for bad in [
            "GH",
            "2gh",
            "g_h",
            "g+h",
            "g.h",
            "abcdefghijabcdefghijabcdefghijabc",
            "é",
        ] {
            assert!(!valid_prefix(bad), "{bad}");
        }
    }
}
