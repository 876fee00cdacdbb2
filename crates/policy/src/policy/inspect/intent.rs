//! Rule: what a server lists and says about itself is judged by what it
//! asks the model to do (`policy::intent`), one item at a time. An item
//! whose text works against the user (reaching outside the tool's job for
//! data, sending it elsewhere, redirecting other tools or servers, hiding
//! something from the user, running commands, overriding instructions)
//! gets `[listing] on_violation`: removed from the list (the rest is
//! delivered), the list refused, or flagged. An item that promotes itself
//! gets `[listing] promotion` (flagged by default: honest servers steer
//! models toward their own tools too). A server's `instructions` and the
//! text of its identity are judged the same way, each as one item: the
//! member is removed, never rewritten.

use serde_json::{Map, Value};

use super::listing::ItemText;
use super::{Action, Rule};
use super::{Checked, Run};
use crate::model::Reason;
use crate::policy::config::{ListingAction, PromotionAction};
use crate::policy::intent::{tool_like, Finding, Listed, Place};

/// The verdict's rule name.
const RULE: Rule = Rule::ListingIntent;

impl Run<'_> {
    /// Judge every item of one list read by `check_listing` (`items`: the
    /// list's member, `tools`, `resources`, …): `keep[i]` is cleared for
    /// each item that is not to be delivered.
    pub(super) fn judge_listed(
        &mut self,
        items: &str,
        keys: &[String],
        read: &[ItemText],
        keep: &mut [bool],
    ) -> Checked<()> {
        let listed: Vec<Vec<Listed<'_>>> = read.iter().map(as_listed).collect();
        let mut names: Vec<&str> = read
            .iter()
            .filter_map(|t| t.iter().find(|(p, _)| *p == Place::Name))
            .map(|(_, name)| name.as_str())
            .collect();
        // Resources, templates and prompts name their server's tools, which
        // come in another list the gateway does not hold here: as in
        // `instructions`, every tool-like name in them counts as the
        // server's own (an instruction about another server's tool still
        // needs what makes it one: an address, a secret, concealment).
        if items != "tools" {
            names.extend(read.iter().flatten().flat_map(|(_, text)| tool_like(text)));
        }
        let findings = self.policy.listing.intent.judge_list(&listed, &names);
        self.split_fragments(keys, read);
        for ((key, found), kept) in keys.iter().zip(&findings).zip(keep.iter_mut()) {
            if *kept {
                *kept = self.act_on(key, found)?;
            }
        }
        Ok(())
    }

    /// Judge the text of some members of `map` as one item (`instructions`;
    /// a server identity's title and description): removed from `map` when
    /// the item is not to be delivered.
    pub(super) fn judge_members(
        &mut self,
        key: &str,
        map: &mut Map<String, Value>,
        members: &[(&str, Place)],
    ) -> Checked<()> {
        let texts: ItemText = members
            .iter()
            .filter_map(|(m, place)| Some((*place, map.get(*m)?.as_str()?.to_owned())))
            .collect();
        if texts.is_empty() {
            return Ok(());
        }
        // A server's instructions name its own tools, which the gateway does
        // not know when it reads them (initialize comes before any list):
        // every tool-like name in them counts as the server's own.
        let own: Vec<&str> = texts.iter().flat_map(|(_, text)| tool_like(text)).collect();
        let findings = self
            .policy
            .listing
            .intent
            .judge_list(&[as_listed(&texts)], &own);
        let found = findings.first().map_or(&[][..], Vec::as_slice);
        if !self.act_on(key, found)? {
            for (m, _) in members {
                map.remove(*m);
            }
        }
        Ok(())
    }

    /// Judge text that cannot lose a part (a prompt's messages) as one item:
    /// refused when it works against the user, whatever `on_violation`
    /// says about list items (only `flag` delivers it, recorded).
    pub(super) fn judge_whole(&mut self, key: &str, texts: &ItemText) -> Checked<()> {
        if texts.is_empty() {
            return Ok(());
        }
        let findings = self
            .policy
            .listing
            .intent
            .judge_list(&[as_listed(texts)], &[]);
        let found = findings.first().map_or(&[][..], Vec::as_slice);
        let against: Vec<&Finding> = found
            .iter()
            .filter(|f| f.intent.works_against_user())
            .collect();
        if against.is_empty() {
            self.pass(RULE, Some(key), None, "what the text asks the model to do");
            return Ok(());
        }
        let detail = describe(&against);
        if self.policy.listing.on_violation == ListingAction::Flag {
            self.count(&against, Action::Flag);
            self.note(RULE, Action::Flag, Some(key), None, Some(detail));
            return Ok(());
        }
        self.count(
            &against,
            if self.enforcing() {
                Action::Block
            } else {
                Action::Monitor
            },
        );
        let message = format!(
            "{} sent a {key} with text that works against the user ({detail})",
            self.subject.upstream_name
        );
        self.violation(Reason::PromptInjection, RULE, Some(key), None, message)
            .map_err(|e| e.with_data("intent", against[0].intent.as_str().into()))
    }

    /// What the findings on one item make of it: whether it stays.
    fn act_on(&mut self, key: &str, found: &[Finding]) -> Checked<bool> {
        let listing = self.policy.listing;
        let against: Vec<&Finding> = found
            .iter()
            .filter(|f| f.intent.works_against_user())
            .collect();
        if !against.is_empty() {
            let detail = describe(&against);
            let action = match (listing.on_violation, self.enforcing()) {
                (ListingAction::Flag, _) => Action::Flag,
                (_, false) => Action::Monitor,
                (ListingAction::Remove, true) => Action::Remove,
                (ListingAction::Refuse, true) => Action::Block,
            };
            self.count(&against, action);
            return match listing.on_violation {
                ListingAction::Remove => Ok(!self.removal(RULE, key, detail)),
                ListingAction::Flag => {
                    self.note(RULE, Action::Flag, Some(key), None, Some(detail));
                    Ok(true)
                }
                ListingAction::Refuse => {
                    let message = format!(
                        "{} listed \"{key}\" with text that works against the user ({detail})",
                        self.subject.upstream_name
                    );
                    self.violation(Reason::PromptInjection, RULE, Some(key), None, message)
                        .map_err(|e| e.with_data("intent", against[0].intent.as_str().into()))?;
                    Ok(true)
                }
            };
        }
        let promoting: Vec<&Finding> = found.iter().collect();
        if promoting.is_empty() {
            self.pass(RULE, Some(key), None, "what the text asks the model to do");
            return Ok(true);
        }
        let detail = describe(&promoting);
        let action = match (listing.promotion, self.enforcing()) {
            (PromotionAction::Off, _) => return Ok(true),
            (PromotionAction::Flag, _) => Action::Flag,
            (PromotionAction::Remove, true) => Action::Remove,
            (PromotionAction::Remove, false) => Action::Monitor,
        };
        self.count(&promoting, action);
        match listing.promotion {
            PromotionAction::Off => Ok(true),
            PromotionAction::Flag => {
                self.note(RULE, Action::Flag, Some(key), None, Some(detail));
                Ok(true)
            }
            PromotionAction::Remove => Ok(!self.removal(RULE, key, detail)),
        }
    }
}

impl Run<'_> {
    fn count(&mut self, found: &[&Finding], action: Action) {
        let intents = found.iter().map(|f| (f.intent, action));
        self.report.intents.extend(intents);
    }
}

fn as_listed(texts: &ItemText) -> Vec<Listed<'_>> {
    texts
        .iter()
        .map(|(place, text)| Listed {
            place: *place,
            text,
        })
        .collect()
}

/// `intent (cue), …`: what was found, never the text.
fn describe(found: &[&Finding]) -> String {
    let parts: Vec<String> = found
        .iter()
        .map(|f| format!("{} ({})", f.intent.as_str(), f.cue))
        .collect();
    parts.join(", ")
}
