//! The facts of one call, as the approval rules and the allow/deny rules'
//! conditions read them, borrowed from what the phases already hold.

use std::sync::OnceLock;

use serde_json::Value;

use super::CallerFacts;
use crate::identify::Principal;

/// Who is calling, as a condition sees it.
pub(crate) fn caller(p: &Principal) -> CallerFacts<'_> {
    CallerFacts {
        principal: &p.name,
        method: p.method.as_str(),
        groups: &p.groups,
        scopes: p.grant.as_ref().map_or(&[][..], |g| &g.scopes[..]),
        client: p.grant.as_ref().and_then(|g| g.client_id.as_deref()),
        claims: None,
    }
}

/// A call's `params.arguments`, read from its params once, the first
/// time a rule needs them (most calls meet no rule that reads them).
#[derive(Default)]
pub(crate) struct Arguments(OnceLock<Value>);

impl Arguments {
    /// The arguments in `params` (JSON text already strictly parsed by the
    /// request phase); an object, `{}` when there are none.
    pub(crate) fn get(&self, params: Option<&str>) -> &Value {
        self.0.get_or_init(|| {
            params
                .and_then(|t| crate::json::parse_value(t.as_bytes()).ok())
                .and_then(|mut p| p.get_mut("arguments").map(Value::take))
                .filter(Value::is_object)
                .unwrap_or_else(|| Value::Object(Default::default()))
        })
    }
}
