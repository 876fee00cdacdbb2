//! Rule: a URL-mode elicitation sends the person only where the policy
//! allows (https, no userinfo, no IP literals or confusable hosts unless
//! allowed, host lists); the host is recorded for the provenance.

use serde_json::{Map, Value};

use super::Action as Did;
use super::Rule;
use super::{Checked, Run};
use crate::model::{printable_name, Asked, Reason};
use crate::policy::config::Action;
use crate::policy::injection::TextContext;

impl Run<'_> {
    pub(super) fn check_url_mode(
        &mut self,
        key: &str,
        params: &mut Map<String, Value>,
    ) -> Checked<()> {
        if let Some(k) = params.keys().find(|k| {
            !matches!(
                k.as_str(),
                "mode" | "message" | "url" | "elicitationId" | "_meta"
            )
        }) {
            let message = format!(
                "member \"{}\" is not part of a URL elicitation",
                printable_name(k)
            );
            return Err(self.malformed(Some(key), message));
        }
        let (Some(Value::String(url)), Some(Value::String(_))) =
            (params.get("url"), params.get("message"))
        else {
            return Err(self.malformed(Some(key), "a URL elicitation needs url and message"));
        };
        let url = url.clone();
        if self.policy.url_mode == Action::Block {
            let message = format!(
                "{}'s policy does not allow URL-mode elicitation",
                self.subject.upstream_name
            );
            self.violation(
                Reason::UrlModeNotAllowed,
                Rule::UrlMode,
                Some(key),
                None,
                message,
            )?;
        }
        match self.policy.url.check(&url) {
            Ok(checked) => {
                self.note(
                    Rule::UrlMode,
                    Did::Allow,
                    Some(key),
                    None,
                    Some(checked.host.clone()),
                );
                self.report
                    .asked
                    .push((key.to_owned(), Asked::Url { host: checked.host }));
            }
            Err(why) => {
                let message = format!(
                    "{} asks to send the user to a URL the gateway does not allow: {}",
                    self.subject.upstream_name,
                    why.explain()
                );
                self.violation(
                    Reason::UrlNotAllowed,
                    Rule::UrlMode,
                    Some(key),
                    None,
                    message,
                )
                .map_err(|e| e.with_data("urlReason", why.as_str().into()))?;
                self.report.asked.push((
                    key.to_owned(),
                    Asked::Url {
                        host: String::new(),
                    },
                ));
            }
        }
        let max = self.policy.limits.max_message_chars;
        self.clean_in(
            key,
            None,
            "message",
            params.get_mut("message"),
            max,
            TextContext::UrlMode,
        )
    }
}
