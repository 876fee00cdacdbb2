//! Rule: the icons a server names for itself and for what it lists are
//! fetched and drawn by the client unasked, so each one is held to the
//! icon policy (`policy::icon_rules`); one that fails is removed when
//! enforcing and recorded either way (rule `icons`, its reason as detail).

use serde_json::{Map, Value};

use super::Rule;
use super::{Checked, Run};
use crate::policy::icon_rules::{IconAction, IconRefusal};

impl Run<'_> {
    /// Check the `icons` member of `owner` (a listed item, `serverInfo`).
    pub(super) fn check_icons(&mut self, key: &str, owner: &mut Map<String, Value>) -> Checked<()> {
        if self.policy.icons.action == IconAction::Allow {
            return Ok(());
        }
        let Some(icons) = owner.get_mut("icons") else {
            return Ok(());
        };
        let Value::Array(list) = icons else {
            if self.icon_refused(key, None, IconRefusal::NotAnIcon) {
                owner.remove("icons");
            }
            return Ok(());
        };
        let mut keep = Vec::with_capacity(list.len());
        for (i, icon) in list.iter().enumerate() {
            if !self.spend(key, None, 0)? {
                break;
            }
            match self.icon_verdict(icon) {
                Ok(()) => {
                    if self.tracing {
                        self.pass(Rule::Icons, Some(key), None, &format!("icons[{i}]"));
                    }
                    keep.push(true);
                }
                Err(why) => keep.push(!self.icon_refused(key, Some(i), why)),
            }
        }
        if keep.contains(&false) {
            let mut keep = keep.into_iter();
            // Icons left unread (the budget ran out while monitoring) stay.
            list.retain(|_| keep.next().unwrap_or(true));
        }
        Ok(())
    }

    fn icon_verdict(&self, icon: &Value) -> Result<(), IconRefusal> {
        let Some(src) = icon.get("src").and_then(Value::as_str) else {
            return Err(IconRefusal::NotAnIcon);
        };
        let mime_type = match icon.get("mimeType") {
            None => None,
            Some(Value::String(m)) => Some(m.as_str()),
            Some(_) => return Err(IconRefusal::NotAnIcon),
        };
        self.policy.icons.check(src, mime_type)
    }

    /// Never the icon's source: a URL may carry a token. `true` when the
    /// icon is to be removed.
    fn icon_refused(&mut self, key: &str, index: Option<usize>, why: IconRefusal) -> bool {
        let detail = match index {
            Some(i) => format!("icons[{i}]: {}", why.as_str()),
            None => format!("icons: {}", why.as_str()),
        };
        self.removal(Rule::Icons, key, detail)
    }
}
