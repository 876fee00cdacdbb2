//! Rule: a server's description of itself is shown to people — the
//! `serverInfo` of an `initialize` result and, under 2026-07-28, the
//! `_meta["io.modelcontextprotocol/serverInfo"]` a server may put on any
//! result ("intended for display"). Its title and description get the text
//! rules of what a server lists (it describes, where a form asks), its
//! icons the icon rule, and its `websiteUrl`, a link a client
//! shows, the checks of an icon URL (one that fails is removed).

use serde_json::{Map, Value};

use super::{Checked, Run};
use crate::policy::icon_rules::IconAction;
use crate::policy::injection::TextContext;

/// Where a 2026-07-28 result carries the server's identity.
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

impl Run<'_> {
    /// An `Implementation` object: cleaned in place.
    pub(super) fn check_server_info(&mut self, info: &mut Value) -> Checked<()> {
        let Value::Object(info) = info else {
            return Ok(());
        };
        let limits = self.policy.limits;
        let parts = [
            ("title", limits.max_title_chars),
            ("description", limits.max_description_chars),
        ];
        for (part, max) in parts {
            let slot = info.get_mut(part);
            self.clean_in("server", None, part, slot, max, TextContext::Listing)?;
        }
        self.check_icons("server", info)?;
        self.check_website(info);
        Ok(())
    }

    /// The identity under a result's `_meta`, if it has one.
    pub(super) fn check_meta_server_info(&mut self, result: &mut Value) -> Checked<()> {
        match result
            .get_mut("_meta")
            .and_then(|m| m.get_mut(SERVER_INFO_KEY))
        {
            Some(info) => self.check_server_info(info),
            None => Ok(()),
        }
    }

    fn check_website(&mut self, info: &mut Map<String, Value>) {
        let Some(url) = info.get("websiteUrl") else {
            return;
        };
        if self.policy.icons.action == IconAction::Allow {
            return;
        }
        let why = match url.as_str().map(|u| self.policy.icons.url.check(u)) {
            Some(Ok(_)) => {
                self.pass("website_url", Some("server"), None, "websiteUrl");
                return;
            }
            Some(Err(why)) => why.as_str(),
            None => "not_a_string",
        };
        if self.removal("website_url", "server", format!("websiteUrl: {why}")) {
            info.remove("websiteUrl");
        }
    }
}
