//! Phase: approve. A call an `[[approval]]` rule asks about waits for a
//! person's decision before it goes upstream (issue 38). The rules are the
//! route's (`[[route.approval]]`), then the upstream policy's, and the
//! first that matches asks. A call meets no rule in the common case: with
//! no rules at all nothing is built, and a rule's cheap criteria (tool
//! globs, listed hints, verdicts) are read before its condition.

pub(crate) mod answer;
pub(crate) mod ask;
pub mod pending;
pub(crate) mod push;
mod second;
mod shared;
mod steps;

pub(crate) use ask::held_listing_approved;
pub use ask::{applies, check, Approve, Called};
pub use pending::PendingApprovals;
pub use portcullis_approval::{RefusedDecision, RefusedSignIn};
pub use push::Question;
pub(crate) use push::Waiting;
pub use second::{refused_decision, refused_sign_in};
pub(crate) use shared::holder;
pub use shared::Decision;

use crate::approval::{ApprovalRule, ApprovalRules, Because, Circumstances, Facts};

/// Where the rule that asks was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written<'a> {
    /// `[[route.approval]]`.
    Route,
    /// `[[approval]]` of the named upstream policy.
    Policy(&'a str),
    /// No rule: an `[arguments]` rule set to `ask` found something
    /// ([`ApprovalRule::for_arguments`]).
    Arguments,
}

/// The rule that asks about a call, and why.
#[derive(Debug)]
pub struct Asking<'r> {
    pub rule: &'r ApprovalRule,
    pub because: Because,
    pub(crate) written: Written<'r>,
}

/// The two sets of rules a call on a route to an upstream meets.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'r> {
    pub route: &'r ApprovalRules,
    pub policy: &'r ApprovalRules,
    pub policy_name: &'r str,
}

impl<'r> Rules<'r> {
    /// No rule could ask: nothing about the call needs gathering.
    pub(crate) fn are_empty(&self) -> bool {
        self.route.is_empty() && self.policy.is_empty()
    }

    /// Whether some rule's condition reads the arguments (they are parsed
    /// for the rules only then).
    pub(crate) fn read_arguments(&self) -> bool {
        self.route.iter().chain(self.policy.iter()).any(|r| {
            r.when
                .as_ref()
                .is_some_and(|w| w.reads(crate::approval::Variable::Arguments))
        })
    }

    /// Whether some rule reads the tool's listed hints (the listing is
    /// looked up, or fetched, for the rules only then).
    pub(crate) fn read_annotations(&self) -> bool {
        self.route.iter().chain(self.policy.iter()).any(|r| {
            !r.annotations.is_empty()
                || r.when
                    .as_ref()
                    .is_some_and(|w| w.reads(crate::approval::Variable::Annotations))
        })
    }

    /// Whether some rule asks about a held changed listing instead of its
    /// refusal (the `unchanged` phase then lets the call on to be asked about).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "only the unit tests call it: the unchanged phase reads the rules itself"
        )
    )]
    pub(crate) fn ask_about_changed_listings(&self) -> bool {
        self.route.any_changed_listing() || self.policy.any_changed_listing()
    }

    /// The first rule about changed listings that asks about a call to a
    /// held tool (no other rule may let it on).
    pub(crate) fn asking_about_change(
        &self,
        facts: &Facts<'_>,
        c: &Circumstances<'_>,
    ) -> Option<Asking<'r>> {
        let route = self.route.iter().map(|r| (r, Written::Route));
        let policy = self
            .policy
            .iter()
            .map(|r| (r, Written::Policy(self.policy_name)));
        route
            .chain(policy)
            .filter(|(r, _)| r.changed_listing)
            .find_map(|(rule, written)| {
                rule.matches(facts, c).map(|because| Asking {
                    rule,
                    because,
                    written,
                })
            })
    }

    /// The first rule that asks about this call; with none, the gateway's
    /// own question when an `[arguments]` rule set to `ask` found something.
    pub(crate) fn asking(&self, facts: &Facts<'_>, c: &Circumstances<'_>) -> Option<Asking<'r>> {
        let for_arguments = || {
            c.ask_verdicts.first().map(|found| Asking {
                rule: ApprovalRule::for_arguments(),
                because: Because::Verdict(*found),
                written: Written::Arguments,
            })
        };
        if self.are_empty() {
            return for_arguments();
        }
        if let Some((rule, because)) = self.route.first_match(facts, c) {
            return Some(Asking {
                rule,
                because,
                written: Written::Route,
            });
        }
        self.policy
            .first_match(facts, c)
            .map(|(rule, because)| Asking {
                rule,
                because,
                written: Written::Policy(self.policy_name),
            })
            .or_else(for_arguments)
    }
}

#[cfg(test)]
mod tests;
