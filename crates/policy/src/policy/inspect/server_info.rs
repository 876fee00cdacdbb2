//! Rule: a server's description of itself is shown to people — the
//! `serverInfo` of an `initialize` result and, under 2026-07-28, the
//! `_meta["io.modelcontextprotocol/serverInfo"]` a server may put on any
//! result ("intended for display"). Its title and description get the text
//! rules of what a server lists (it describes, where a form asks: only
//! invisible characters removed, never cut), its
//! icons the icon rule, and its `websiteUrl`, a link a client
//! shows, the checks of an icon URL (one that fails is removed). Its
//! `name` says whom the client is talking to and cannot be cleaned without
//! changing that: one with markup, controls or invisible characters, or
//! longer than [`MAX_SERVER_NAME_BYTES`], is refused (`invalid_name`); its
//! words are scanned like the rest.

use serde_json::{Map, Value};

use super::Rule;
use super::{Checked, Run};
use crate::model::Reason;
use crate::policy::icon_rules::IconAction;
use crate::policy::injection::TextContext;
use crate::policy::intent::Place;
use crate::policy::sanitize::is_unsafe_machine_value;

/// The longest server name the gateway passes.
pub(crate) const MAX_SERVER_NAME_BYTES: usize = 256;

/// Where a 2026-07-28 result carries the server's identity.
pub(crate) const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

impl Run<'_> {
    /// An `Implementation` object: cleaned in place.
    pub(super) fn check_server_info(&mut self, info: &mut Value) -> Checked<()> {
        const TEXT: [(&str, Place); 2] = [
            ("title", Place::ServerIdentity),
            ("description", Place::ServerIdentity),
        ];
        let Value::Object(info) = info else {
            return Ok(());
        };
        if let Some(Value::String(name)) = info.get("name") {
            self.check_server_name(name)?;
        }
        for part in ["title", "description"] {
            let slot = info.get_mut(part);
            self.clean_in("server", None, part, slot, usize::MAX, TextContext::Listing)?;
        }
        self.judge_members("server", info, &TEXT)?;
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

    fn check_server_name(&mut self, name: &str) -> Checked<()> {
        if self.spend("server", None, name.len())? {
            self.scan_injection("server", None, "name", name, TextContext::Listing)?;
        }
        let why = if name.len() > MAX_SERVER_NAME_BYTES {
            "is longer than 256 bytes"
        } else if is_unsafe_machine_value(name) {
            "has markup, controls or invisible characters"
        } else {
            self.pass(Rule::Name, Some("server"), None, "name");
            return Ok(());
        };
        let message = format!(
            "{} sent a server name that {why}",
            self.subject.upstream_name
        );
        self.violation(
            Reason::InvalidName,
            Rule::Name,
            Some("server"),
            None,
            message,
        )
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
                self.pass(Rule::WebsiteUrl, Some("server"), None, "websiteUrl");
                return;
            }
            Some(Err(why)) => why.as_str(),
            None => "not_a_string",
        };
        if self.removal(Rule::WebsiteUrl, "server", format!("websiteUrl: {why}")) {
            info.remove("websiteUrl");
        }
    }
}
