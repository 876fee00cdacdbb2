//! The MCP method table: every method name the gateway knows, with what the
//! phases need of it (where its target lives, whether it may be answered
//! with `input_required`, which list it returns, its metric label). The one
//! place that knows method names; everything else asks it.

/// What a method's target names, for permissions and `Mcp-Name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetKind {
    Tool,
    Prompt,
    Resource,
}

impl TargetKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            TargetKind::Tool => "tool",
            TargetKind::Prompt => "prompt",
            TargetKind::Resource => "resource",
        }
    }
}

/// Where a method's target lives in `params`, and whether the spec makes the
/// `Mcp-Name` header mandatory for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetMember {
    pub member: &'static str,
    pub header_required: bool,
    /// Permissions apply to the target (tools, prompts, resources).
    pub kind: Option<TargetKind>,
}

/// A list method's result: the member holding the items, and each item's
/// member that permissions judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListMember {
    pub kind: TargetKind,
    pub items: &'static str,
    pub name: &'static str,
}

/// Writes [`McpMethod`] and its lookups from one table.
macro_rules! method_table {
    ($( $variant:ident => $name:literal; )*) => {
        /// Every MCP method name of 2026-07-28 and 2025-11-25; anything else
        /// is [`McpMethod::Other`] (forwarded where allowed, counted as `other`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum McpMethod {
            $( $variant, )*
            Other,
        }

        impl McpMethod {
            pub const KNOWN: &'static [McpMethod] = &[$( McpMethod::$variant, )*];

            pub fn parse(name: &str) -> McpMethod {
                match name { $( $name => McpMethod::$variant, )* _ => McpMethod::Other }
            }

            /// The wire name; `other` for an unknown method (also its metric label).
            pub const fn as_str(self) -> &'static str {
                match self { $( McpMethod::$variant => $name, )* McpMethod::Other => "other" }
            }
        }
    };
}

method_table! {
    Ping => "ping";
    Initialize => "initialize";
    Initialized => "notifications/initialized";
    ServerDiscover => "server/discover";
    ToolsList => "tools/list";
    ToolsCall => "tools/call";
    PromptsList => "prompts/list";
    PromptsGet => "prompts/get";
    ResourcesList => "resources/list";
    ResourcesTemplatesList => "resources/templates/list";
    ResourcesRead => "resources/read";
    ResourcesSubscribe => "resources/subscribe";
    ResourcesUnsubscribe => "resources/unsubscribe";
    SubscriptionsListen => "subscriptions/listen";
    CompletionComplete => "completion/complete";
    LoggingSetLevel => "logging/setLevel";
    TasksGet => "tasks/get";
    TasksUpdate => "tasks/update";
    TasksResult => "tasks/result";
    TasksList => "tasks/list";
    TasksCancel => "tasks/cancel";
    Cancelled => "notifications/cancelled";
    Progress => "notifications/progress";
    RootsListChanged => "notifications/roots/list_changed";
    LogMessage => "notifications/message";
    ResourcesUpdated => "notifications/resources/updated";
    ResourcesListChanged => "notifications/resources/list_changed";
    ToolsListChanged => "notifications/tools/list_changed";
    PromptsListChanged => "notifications/prompts/list_changed";
    SubscriptionsAcknowledged => "notifications/subscriptions/acknowledged";
    ElicitationComplete => "notifications/elicitation/complete";
    TasksStatus => "notifications/tasks/status";
    ElicitationCreate => "elicitation/create";
    SamplingCreateMessage => "sampling/createMessage";
    RootsList => "roots/list";
}

impl McpMethod {
    /// Where the target lives, for methods that have one.
    pub const fn target(self) -> Option<TargetMember> {
        let (member, header_required, kind) = match self {
            McpMethod::ToolsCall => ("name", true, Some(TargetKind::Tool)),
            McpMethod::PromptsGet => ("name", true, Some(TargetKind::Prompt)),
            McpMethod::ResourcesRead => ("uri", true, Some(TargetKind::Resource)),
            McpMethod::ResourcesSubscribe | McpMethod::ResourcesUnsubscribe => {
                ("uri", false, Some(TargetKind::Resource))
            }
            // The Tasks extension (2026-07-28) makes `Mcp-Name` = taskId
            // mandatory; 2025-11-25's `tasks/result` has no such header.
            McpMethod::TasksGet | McpMethod::TasksUpdate | McpMethod::TasksCancel => {
                ("taskId", true, None)
            }
            McpMethod::TasksResult => ("taskId", false, None),
            _ => return None,
        };
        Some(TargetMember {
            member,
            header_required,
            kind,
        })
    }

    /// A client request whose arguments the argument rules read (the
    /// tool's, the prompt's, the resource's URI, a completion's).
    pub const fn sends_arguments(self) -> bool {
        matches!(
            self,
            McpMethod::ToolsCall
                | McpMethod::PromptsGet
                | McpMethod::ResourcesRead
                | McpMethod::CompletionComplete
        )
    }

    /// The methods a 2026-07-28 server may answer with `input_required`.
    pub const fn allows_input_required(self) -> bool {
        matches!(
            self,
            McpMethod::ToolsCall | McpMethod::PromptsGet | McpMethod::ResourcesRead
        )
    }

    /// A request about one task of the Tasks extension: its `requestState`
    /// is the gateway's own, as on an MRTR retry.
    pub const fn is_task_request(self) -> bool {
        matches!(
            self,
            McpMethod::TasksGet | McpMethod::TasksUpdate | McpMethod::TasksCancel
        )
    }

    /// Any method of a task's lifecycle, 2025-11-25's experimental ones
    /// (`tasks/result`, `tasks/list`) included.
    pub const fn is_tasks_method(self) -> bool {
        self.is_task_request() || matches!(self, McpMethod::TasksResult | McpMethod::TasksList)
    }

    /// The member of a list result whose items a server offers to the model
    /// (their titles and descriptions go into its context).
    pub const fn catalogue(self) -> Option<&'static str> {
        match self {
            McpMethod::ToolsList => Some("tools"),
            McpMethod::PromptsList => Some("prompts"),
            McpMethod::ResourcesList => Some("resources"),
            McpMethod::ResourcesTemplatesList => Some("resourceTemplates"),
            _ => None,
        }
    }

    /// A request whose result is the server's description of itself
    /// (instructions, `serverInfo`), which the text rules read.
    pub const fn describes_server(self) -> bool {
        matches!(self, McpMethod::Initialize | McpMethod::ServerDiscover)
    }

    /// A list whose items permissions filter.
    pub const fn list(self) -> Option<ListMember> {
        let (kind, items, name) = match self {
            McpMethod::ToolsList => (TargetKind::Tool, "tools", "name"),
            McpMethod::PromptsList => (TargetKind::Prompt, "prompts", "name"),
            McpMethod::ResourcesList => (TargetKind::Resource, "resources", "uri"),
            _ => return None,
        };
        Some(ListMember { kind, items, name })
    }

    /// A server-to-client request that asks the client (and a person or a
    /// model behind it) for something: policed like an MRTR input request.
    pub const fn is_input_request(self) -> bool {
        matches!(
            self,
            McpMethod::ElicitationCreate | McpMethod::SamplingCreateMessage | McpMethod::RootsList
        )
    }

    /// Notifications a server may send on a request's event stream under
    /// 2026-07-28: about that request only.
    pub const fn is_request_stream_notification(self) -> bool {
        matches!(
            self,
            McpMethod::Progress | McpMethod::LogMessage | McpMethod::Cancelled
        )
    }

    /// Notifications of 2025-11-25 that 2026-07-28 no longer has: a
    /// server may send them on a session's streams only, never on a
    /// `subscriptions/listen` stream.
    pub const fn is_sessions_only(self) -> bool {
        matches!(self, McpMethod::ElicitationComplete)
    }

    /// Notifications a server may send to a client at all (on a
    /// `subscriptions/listen` stream, or a 2025-11-25 session's streams;
    /// see [`Self::is_sessions_only`]).
    pub const fn is_server_notification(self) -> bool {
        matches!(
            self,
            McpMethod::Progress
                | McpMethod::LogMessage
                | McpMethod::Cancelled
                | McpMethod::ResourcesUpdated
                | McpMethod::ResourcesListChanged
                | McpMethod::ToolsListChanged
                | McpMethod::PromptsListChanged
                | McpMethod::SubscriptionsAcknowledged
                | McpMethod::ElicitationComplete
                | McpMethod::TasksStatus
        )
    }
}

impl std::fmt::Display for McpMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_other() {
        for m in McpMethod::KNOWN {
            assert_eq!(McpMethod::parse(m.as_str()), *m);
        }
        assert_eq!(McpMethod::parse("tools/cal"), McpMethod::Other);
        assert_eq!(McpMethod::parse("other"), McpMethod::Other);
    }

    #[test]
    fn only_the_three_mrtr_methods_allow_input_required() {
        let allowed: Vec<_> = McpMethod::KNOWN
            .iter()
            .filter(|m| m.allows_input_required())
            .map(|m| m.as_str())
            .collect();
        assert_eq!(allowed, ["tools/call", "prompts/get", "resources/read"]);
    }

    #[test]
    fn targets_and_lists() {
        assert_eq!(McpMethod::ToolsCall.target().unwrap().member, "name");
        assert!(McpMethod::ResourcesRead.target().unwrap().header_required);
        assert!(
            !McpMethod::ResourcesSubscribe
                .target()
                .unwrap()
                .header_required
        );
        assert!(McpMethod::ToolsList.target().is_none());
        assert_eq!(McpMethod::ToolsList.list().unwrap().items, "tools");
        for m in [
            McpMethod::ToolsList,
            McpMethod::PromptsList,
            McpMethod::ResourcesList,
        ] {
            assert_eq!(m.catalogue(), m.list().map(|l| l.items), "{m}");
        }
        assert_eq!(
            McpMethod::ResourcesTemplatesList.catalogue(),
            Some("resourceTemplates")
        );
        assert_eq!(McpMethod::ToolsCall.catalogue(), None);
    }
}
