//! Phase: permit. Tool permissions, separate from elicitation (as MCP hosts do): which
//! principals may call which tools, prompts and resources of a route. Judged
//! from the checked body, never from headers alone; list results are
//! filtered to what the caller may call.

use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};
use portcullis_approval::{Facts, When};

use crate::identify::{Principal, PrincipalGlobs};
use serde_json::Value;

use crate::model::{McpMethod, TargetKind};

/// One allow or deny rule.
#[derive(Debug, Clone)]
pub struct PermissionRule {
    principals: PrincipalGlobs,
    groups: GlobSet,
    any_principal: bool,
    tools: GlobSet,
    prompts: GlobSet,
    resources: GlobSet,
    /// OAuth scopes the caller's token must carry for the rule to cover it.
    scopes: Vec<String>,
    /// A condition on the call (`when`, CEL) the rule covers only while it holds.
    when: Option<Arc<When>>,
    /// The lists as written (`tools=[book_*] groups=[staff]`), what two
    /// configs compare a rule by.
    lists: String,
}

/// Which way a rule's condition falls when it cannot be judged: a deny
/// rule refuses, an allow rule does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Allow,
    Deny,
}

/// Globs for one list of a rule.
pub(crate) fn glob_set(patterns: &[&str]) -> Result<GlobSet, globset::Error> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(Glob::new(p)?);
    }
    b.build()
}

impl PermissionRule {
    /// `schemes`: the config's auth scheme names, what a `scheme:name`
    /// glob in `principals` may be qualified by ([`PrincipalGlobs`]).
    pub fn new(
        principals: &[&str],
        groups: &[&str],
        tools: &[&str],
        prompts: &[&str],
        resources: &[&str],
        schemes: &[&str],
    ) -> Result<Self, globset::Error> {
        let named = [
            ("principals", principals),
            ("groups", groups),
            ("tools", tools),
            ("prompts", prompts),
            ("resources", resources),
        ];
        let lists = named
            .iter()
            .filter(|(_, l)| !l.is_empty())
            .map(|(name, l)| format!("{name}=[{}]", l.join(", ")))
            .collect::<Vec<_>>()
            .join(" ");
        Ok(PermissionRule {
            lists,
            any_principal: principals.is_empty() && groups.is_empty(),
            principals: PrincipalGlobs::new(principals, schemes)?,
            groups: glob_set(groups)?,
            tools: glob_set(tools)?,
            prompts: glob_set(prompts)?,
            resources: glob_set(resources)?,
            scopes: Vec::new(),
            when: None,
        })
    }

    /// The rule as written: its lists, scopes and condition (names and
    /// globs of the config; what a reload compares a rule by).
    pub fn written(&self) -> String {
        let mut out = self.lists.clone();
        if !self.scopes.is_empty() {
            out.push_str(&format!(" scopes=[{}]", self.scopes.join(", ")));
        }
        if let Some(w) = &self.when {
            out.push_str(&format!(" when={}", w.source()));
        }
        out
    }

    /// The rule covers a call only while `when` holds.
    pub fn with_when(mut self, when: When) -> Self {
        self.when = Some(Arc::new(when));
        self
    }

    /// Whether the rule's condition holds for `call`. Without a call (a
    /// list being filtered) a conditional rule may or may not apply: an
    /// allow rule keeps the item listed, a deny rule does not remove it;
    /// the call itself is judged in full.
    fn holds(&self, call: Option<&Facts<'_>>, side: Side) -> bool {
        let Some(when) = &self.when else { return true };
        let Some(facts) = call else {
            return side == Side::Allow;
        };
        match when.holds(facts) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(condition = when.source(), error = %e, "a permission rule's condition could not be evaluated");
                side == Side::Deny
            }
        }
    }

    /// The rule covers only callers whose OAuth token carries all of `scopes`.
    pub fn with_scopes(mut self, scopes: Vec<String>) -> Self {
        self.scopes = scopes;
        self
    }

    fn covers(&self, who: &Principal) -> bool {
        self.names_caller(who) && who.has_scopes(&self.scopes)
    }

    /// The caller is one the rule names (its scopes aside).
    fn names_caller(&self, who: &Principal) -> bool {
        self.any_principal
            || self.principals.names(who)
            || who.groups.iter().any(|g| self.groups.is_match(g))
    }

    fn names(&self, kind: TargetKind, name: &str) -> bool {
        match kind {
            TargetKind::Tool => self.tools.is_match(name),
            TargetKind::Prompt => self.prompts.is_match(name),
            TargetKind::Resource => self.resources.is_match(name),
        }
    }
}

/// The permissions of one route. With no rules at all, everything is
/// allowed; with allow rules, only what one of them names; a deny rule
/// always wins.
#[derive(Debug, Clone, Default)]
pub struct Permissions {
    pub allow: Vec<PermissionRule>,
    pub deny: Vec<PermissionRule>,
}

impl Permissions {
    pub(crate) fn is_open(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// Whether some rule reads the call's arguments (they are parsed for
    /// the rules only then).
    pub fn reads_arguments(&self) -> bool {
        self.allow.iter().chain(&self.deny).any(|r| {
            r.when
                .as_ref()
                .is_some_and(|w| w.reads(portcullis_approval::Variable::Arguments))
        })
    }

    pub fn permits(&self, who: &Principal, kind: TargetKind, name: &str) -> bool {
        self.judge(who, kind, name, None)
    }

    /// As [`Permissions::permits`], for a call whose conditions are judged
    /// on `call` (`None`: a list, see [`PermissionRule`]'s conditions).
    fn judge(
        &self,
        who: &Principal,
        kind: TargetKind,
        name: &str,
        call: Option<&Facts<'_>>,
    ) -> bool {
        if self
            .deny
            .iter()
            .any(|r| r.covers(who) && r.names(kind, name) && r.holds(call, Side::Deny))
        {
            return false;
        }
        self.allow.is_empty()
            || self
                .allow
                .iter()
                .any(|r| r.covers(who) && r.names(kind, name) && r.holds(call, Side::Allow))
    }

    /// For a target [`Permissions::permits`] refuses: the scopes the
    /// caller's token lacks for an allow rule that names the caller and the
    /// target and that no deny rule overrides (step-up: with them, the
    /// request would be permitted). `None` when scopes would not help.
    pub fn missing_scopes(
        &self,
        who: &Principal,
        kind: TargetKind,
        name: &str,
        prefix: Option<&str>,
        call: Option<&Facts<'_>>,
    ) -> Option<Vec<String>> {
        let exposed;
        let name = match prefix {
            None => name,
            Some(p) => {
                exposed = crate::model::expose(kind, p, name);
                exposed.as_str()
            }
        };
        if self
            .deny
            .iter()
            .any(|r| r.covers(who) && r.names(kind, name) && r.holds(call, Side::Deny))
        {
            return None;
        }
        self.allow
            .iter()
            .filter(|r| r.names_caller(who) && r.names(kind, name) && r.holds(call, Side::Allow))
            .map(|r| {
                r.scopes
                    .iter()
                    .filter(|s| !who.scopes().contains(s))
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .filter(|missing| !missing.is_empty())
            .min_by_key(Vec::len)
    }

    /// As [`Permissions::permits`], for an upstream's own `name` that a
    /// federated route exposes under `prefix`: the rules name what the
    /// client sees.
    /// `call`: the facts a rule's condition reads, for a call; `None` for
    /// a list.
    pub fn permits_in(
        &self,
        who: &Principal,
        kind: TargetKind,
        name: &str,
        prefix: Option<&str>,
        call: Option<&Facts<'_>>,
    ) -> bool {
        match prefix {
            None => self.judge(who, kind, name, call),
            Some(p) => self.judge(who, kind, &crate::model::expose(kind, p, name), call),
        }
    }

    /// Keeps only the items of a list result (already strictly parsed)
    /// that the caller may use; `true` when some were removed.
    /// `prefix`: the upstream's, when a federated route exposes its names.
    pub fn filter_list(
        &self,
        who: &Principal,
        method: McpMethod,
        result: &mut Value,
        prefix: Option<&str>,
    ) -> bool {
        let Some(list) = method.list() else {
            return false;
        };
        if self.is_open() {
            return false;
        }
        let Some(items) = result.get_mut(list.items).and_then(Value::as_array_mut) else {
            return false;
        };
        let before = items.len();
        // What an OAuth caller could use after a step-up stays listed: calling
        // it is how the client learns which scope to ask for (403
        // insufficient_scope); without a token, no scope can be had.
        let may_step_up = who.grant.is_some();
        items.retain(|item| {
            item.get(list.name)
                .and_then(Value::as_str)
                .is_some_and(|n| {
                    self.permits_in(who, list.kind, n, prefix, None)
                        || (may_step_up
                            && self
                                .missing_scopes(who, list.kind, n, prefix, None)
                                .is_some())
                })
        });
        items.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identify::AuthMethod;
    use std::sync::Arc;

    fn who(name: &str, groups: &[&str]) -> Principal {
        Principal {
            name: Arc::from(name),
            groups: groups
                .iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .into(),
            method: AuthMethod::ApiKey,
            scheme: Arc::from("keys"),
            grant: None,
        }
    }

    #[test]
    fn allow_lists_restrict_and_deny_wins() {
        let p = Permissions {
            allow: vec![
                PermissionRule::new(&[], &["staff"], &["book_*", "get_room"], &["*"], &[], &[])
                    .unwrap(),
                PermissionRule::new(&["admin"], &[], &["*"], &[], &["file:///*"], &[]).unwrap(),
            ],
            deny: vec![
                PermissionRule::new(&[], &["contractors"], &["book_*"], &[], &[], &[]).unwrap(),
            ],
        };
        let staff = who("bob", &["staff"]);
        assert!(p.permits(&staff, TargetKind::Tool, "book_room"));
        assert!(!p.permits(&staff, TargetKind::Tool, "delete_room"));
        assert!(!p.permits(&staff, TargetKind::Resource, "file:///etc/passwd"));
        assert!(p.permits(
            &who("admin", &[]),
            TargetKind::Resource,
            "file:///etc/passwd"
        ));
        assert!(!p.permits(
            &who("carol", &["staff", "contractors"]),
            TargetKind::Tool,
            "book_room"
        ));
        assert!(!p.permits(&Principal::anonymous(), TargetKind::Tool, "get_room"));
        assert!(Permissions::default().permits(
            &Principal::anonymous(),
            TargetKind::Tool,
            "anything"
        ));
    }

    #[test]
    fn scopes_narrow_a_rule_and_name_the_step_up() {
        use crate::identify::Grant;
        let p = Permissions {
            allow: vec![
                PermissionRule::new(&[], &[], &["admin_*"], &[], &[], &[])
                    .unwrap()
                    .with_scopes(vec!["mcp:admin".into()]),
                PermissionRule::new(&[], &[], &["get_*"], &[], &[], &[]).unwrap(),
            ],
            deny: vec![PermissionRule::new(&["mallory"], &[], &["*"], &[], &[], &[]).unwrap()],
        };
        let with = |name: &str, scopes: &[&str]| Principal {
            grant: Some(Arc::new(Grant {
                client_id: None,
                scopes: scopes.iter().map(|s| s.to_string()).collect(),
            })),
            ..who(name, &[])
        };
        let user = with("alice", &["mcp:tools"]);
        assert!(p.permits(&user, TargetKind::Tool, "get_room"));
        assert!(!p.permits(&user, TargetKind::Tool, "admin_reset"));
        assert_eq!(
            p.missing_scopes(&user, TargetKind::Tool, "admin_reset", None, None),
            Some(vec!["mcp:admin".to_string()])
        );
        let admin = with("alice", &["mcp:tools", "mcp:admin"]);
        assert!(p.permits(&admin, TargetKind::Tool, "admin_reset"));
        // Scopes would not help: no rule names the tool, or a deny rule wins.
        assert_eq!(
            p.missing_scopes(&user, TargetKind::Tool, "drop_db", None, None),
            None
        );
        let denied = with("mallory", &[]);
        assert_eq!(
            p.missing_scopes(&denied, TargetKind::Tool, "admin_reset", None, None),
            None
        );
        // A caller without any token has no scopes at all.
        assert!(!p.permits(&who("bob", &[]), TargetKind::Tool, "admin_reset"));
        // Lists keep what a step-up would open to an OAuth caller, and only that.
        let mut list = serde_json::json!({"tools": [{"name": "get_room"}, {"name": "admin_reset"}, {"name": "drop_db"}]});
        assert!(p.filter_list(&user, McpMethod::ToolsList, &mut list, None));
        assert_eq!(list["tools"].as_array().unwrap().len(), 2);
        assert_eq!(list["tools"][1]["name"], "admin_reset");
        let mut keyed =
            serde_json::json!({"tools": [{"name": "get_room"}, {"name": "admin_reset"}]});
        assert!(p.filter_list(&who("bob", &[]), McpMethod::ToolsList, &mut keyed, None));
        assert_eq!(keyed["tools"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn conditions_narrow_rules_for_calls_and_not_for_lists() {
        use portcullis_approval::CallerFacts;
        let when =
            |src: &str| When::compile(src, portcullis_approval::when::PERMIT_VARIABLES).unwrap();
        let p = Permissions {
            allow: vec![PermissionRule::new(&[], &[], &["book_*"], &[], &[], &[])
                .unwrap()
                .with_when(when("arguments.nights <= 14"))],
            deny: vec![PermissionRule::new(&[], &[], &["*"], &[], &[], &[])
                .unwrap()
                .with_when(when(
                    "caller.principal == 'mallory' || arguments.room == 'vault'",
                ))],
        };
        assert!(p.reads_arguments());
        let facts = |principal: &'static str, args: &'static serde_json::Value| Facts {
            caller: CallerFacts {
                principal,
                ..Default::default()
            },
            tool: "book_room",
            upstream_tool: "book_room",
            arguments: Some(args),
            ..Default::default()
        };
        let who = Principal::anonymous();
        let ok = Box::leak(Box::new(serde_json::json!({"nights": 3, "room": "a"})));
        let long = Box::leak(Box::new(serde_json::json!({"nights": 30, "room": "a"})));
        let vault = Box::leak(Box::new(serde_json::json!({"nights": 1, "room": "vault"})));
        let odd = Box::leak(Box::new(serde_json::json!({"nights": "many"})));
        let at = |f: &Facts<'_>| p.permits_in(&who, TargetKind::Tool, "book_room", None, Some(f));
        assert!(at(&facts("alice", ok)));
        assert!(
            !at(&facts("alice", long)),
            "the allow rule's condition fails"
        );
        assert!(
            !at(&facts("alice", vault)),
            "the deny rule's condition holds"
        );
        assert!(!at(&facts("mallory", ok)));
        assert!(
            !at(&facts("alice", odd)),
            "cannot be judged: the deny side wins"
        );
        // A list keeps what a call might be allowed.
        let mut list = serde_json::json!({"tools": [{"name": "book_room"}, {"name": "drop"}]});
        assert!(p.filter_list(&who, McpMethod::ToolsList, &mut list, None));
        assert_eq!(list["tools"].as_array().unwrap().len(), 1);
        assert!(!Permissions::default().reads_arguments());
    }

    #[test]
    fn lists_are_filtered() {
        let p = Permissions {
            allow: vec![PermissionRule::new(&[], &[], &["get_*"], &[], &[], &[]).unwrap()],
            deny: vec![],
        };
        let who = Principal::anonymous();
        let mut result: Value = serde_json::from_str(
            r#"{"resultType":"complete","tools":[{"name":"get_room"},{"name":"book_room"}],"ttlMs":0}"#,
        )
        .unwrap();
        assert!(p.filter_list(&who, McpMethod::ToolsList, &mut result, None));
        assert_eq!(result["tools"].as_array().unwrap().len(), 1);
        assert_eq!(result["tools"][0]["name"], "get_room");
        let mut allowed = serde_json::json!({"tools":[{"name":"get_x"}]});
        assert!(!p.filter_list(&who, McpMethod::ToolsList, &mut allowed, None));
        // Not a list this filter knows: nothing is removed.
        assert!(!p.filter_list(&who, McpMethod::ToolsCall, &mut result, None));
    }
}
