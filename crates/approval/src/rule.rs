//! Compiled approval rules and how one call is matched against them.

use std::time::Duration;

use globset::GlobSet;

use crate::when::{Facts, Hint, When};

portcullis_model::name_table! {
    /// The request-side checks of the arguments whose verdict a rule may
    /// turn into a question (where that check's rule says `ask`).
    ArgumentCheck {
        Secret => "secret", "a secret or credential in an argument";
        PrivatePath => "private_path", "a private path (keys, credentials, browser profiles, …) in an argument";
        ForbiddenHost => "forbidden_host", "a URL to a loopback, private, link-local, metadata or denied host";
        NewHost => "new_host", "a URL to a host the gateway has not seen in this caller's traffic before";
        CrossUpstreamFlow => "cross_upstream_flow", "data one upstream returned, sent to another upstream";
        ShellSyntax => "shell_syntax", "shell command syntax aimed at execution";
    }
}

portcullis_model::name_table! {
    /// How long a person's decision holds.
    Remember {
        Call => "call", "this call only: the next one asks again";
        Session => "session", "the rest of the 2025-11-25 session (a stateless 2026-07-28 client has none: this call only)";
        Caller => "caller", "this caller, for `remember_for`";
    }
}

portcullis_model::name_table! {
    /// Who decides.
    Approver {
        Caller => "caller", "the person at the client that made the call (a form in their client)";
        Approvers => "approvers", "an approver other than the caller, on the gateway's approval page (the client is shown a link)";
    }
}

portcullis_model::name_table! {
    /// What a call gets when its client cannot be asked (it declared no elicitation).
    Fallback {
        Refuse => "refuse", "refused with `approval_unavailable`";
        Approvers => "approvers", "an approver decides on the approval page while the call waits";
        Allow => "allow", "forwarded without a decision (recorded as such)";
    }
}

portcullis_model::name_table! {
    /// What became of one approval question (audit `step`, metric label).
    Step {
        Asked => "asked", "the gateway asked its question";
        Approved => "approved", "the person approved the call; it was forwarded unchanged";
        Declined => "declined", "the person declined (or accepted without ticking `approve`)";
        Cancelled => "cancelled", "the person dismissed the question";
        Expired => "expired", "nobody answered within the rule's `timeout`";
        Unavailable => "unavailable", "the client cannot be asked and the rule names no fallback: refused";
        Remembered => "remembered", "an earlier approval the rule lets be remembered covered the call; not asked";
        FallbackAllowed => "fallback_allowed", "the client cannot be asked and the rule's fallback forwarded the call without a decision";
    }
}

portcullis_model::name_table! {
    /// Why a decision sent to the approval page was not taken (audit
    /// `approval_decision_refused` `why`, metric label): each is an attempt
    /// a security team wants to see, whoever made it.
    RefusedDecision {
        Unauthenticated => "unauthenticated", "no credential of the call's route, or one that was refused (nor the operator's signature)";
        NotApprover => "not_approver", "an authenticated principal the rule names neither by name nor by group";
        TokenMismatch => "token_mismatch", "the form's token is not this approval's (a forged or copied form)";
        Expired => "expired", "the approval's time had run out";
        AlreadyDecided => "already_decided", "the approval had been decided already (a second decision, or a replayed one)";
    }
}

portcullis_model::name_table! {
    /// Why a sign-in to the approval page was refused (audit
    /// `approval_sign_in_refused` `why`, metric label). A session cookie
    /// that is refused counts here too: it is a sign-in that did not hold.
    RefusedSignIn {
        CredentialMissing => "credential_missing", "the sign-in form came without a credential";
        CredentialRefused => "credential_refused", "the credential was refused by the schemes of the approval's route (or the admin signature was)";
        NotApprover => "not_approver", "a valid credential of a principal the approval's rule names neither by name nor by group";
        TokenMismatch => "token_mismatch", "the sign-in or sign-out form's token is not the browser's own (a forged or cross-site form)";
        SessionTampered => "session_tampered", "a session cookie that does not open: altered, forged, or sealed with a `[state]` key no longer held";
        SessionExpired => "session_expired", "a session cookie past its end (`[admin] session_lifetime`)";
    }
}

/// One annotation criterion: a hint listed as true, or (`!readOnlyHint`)
/// not listed as true.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintMatch {
    pub hint: Hint,
    pub listed_true: bool,
}

impl HintMatch {
    /// Whether a tool with these listed hints meets the criterion; with no
    /// listing known, it may: a rule about risky tools asks.
    fn met(self, listed: Option<crate::when::Annotations>) -> bool {
        match listed {
            None => true,
            Some(a) => (a.get(self.hint) == Some(true)) == self.listed_true,
        }
    }

    pub fn as_written(self) -> String {
        match self.listed_true {
            true => self.hint.as_str().to_owned(),
            false => format!("!{}", self.hint.as_str()),
        }
    }
}

/// One `[[approval]]` rule, compiled.
#[derive(Debug)]
pub struct ApprovalRule {
    /// Its name in audit events, metrics and `explain` (given, or
    /// `approval-N` by its place).
    pub name: String,
    /// Tool names (globs), matched against the name the client used and
    /// the upstream's own; `None`: any tool.
    pub tools: Option<ToolNames>,
    /// Any of these (empty: not a criterion).
    pub annotations: Vec<HintMatch>,
    /// Any of these verdicts, where their rule says `ask`.
    pub verdicts: Vec<ArgumentCheck>,
    /// A call to a tool whose changed definition is held is asked about
    /// instead of refused.
    pub changed_listing: bool,
    /// Asked once per caller and tool: an approval is remembered.
    pub first_use: bool,
    pub when: Option<When>,
    pub remember: Remember,
    /// How long a decision remembered for the caller holds.
    pub remember_for: Duration,
    pub approver: Approver,
    /// Groups (globs) who may decide on the approval page.
    pub approver_groups: Option<GlobSet>,
    /// The principals and groups who may decide, as written: the
    /// principals are matched with the config's auth schemes at hand (a
    /// `scheme:name` glob), and another replica builds the same sets from
    /// them when its page shows an approval held here.
    pub approvers_written: ApproversWritten,
    pub fallback: Fallback,
    /// How long the question waits for its answer.
    pub timeout: Duration,
    /// A sentence from the operator shown with the question.
    pub reason: Option<String>,
}

/// A rule's `approvers` and `approver_groups` globs as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApproversWritten {
    pub names: Vec<String>,
    pub groups: Vec<String>,
}

impl ApproversWritten {
    /// The groups' set, built again (`None` for an empty list, or one that
    /// no longer builds).
    pub fn groups(&self) -> Option<GlobSet> {
        set_of(&self.groups)
    }
}

fn set_of(globs: &[String]) -> Option<GlobSet> {
    if globs.is_empty() {
        return None;
    }
    let mut b = globset::GlobSetBuilder::new();
    for g in globs {
        b.add(globset::Glob::new(g).ok()?);
    }
    b.build().ok()
}

/// The tools a rule names: names written without glob characters are
/// compared as they are (most rules name tools exactly, and a glob match
/// costs far more than a comparison); the rest are one glob set.
#[derive(Debug)]
pub struct ToolNames {
    pub exact: Vec<Box<str>>,
    pub globs: Option<GlobSet>,
}

impl ToolNames {
    pub fn is_match(&self, name: &str) -> bool {
        self.exact.iter().any(|e| **e == *name)
            || self.globs.as_ref().is_some_and(|g| g.is_match(name))
    }
}

/// What matching needs besides the call's facts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Circumstances<'a> {
    /// The verdicts of the request-side checks whose rule said `ask`.
    pub ask_verdicts: &'a [ArgumentCheck],
}

/// Why a rule matched (for audit, metrics and `explain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Because {
    Tool,
    Annotation(HintMatch),
    Verdict(ArgumentCheck),
    ChangedListing,
    FirstUse,
    /// Only the condition: it held.
    Condition,
    /// The condition could not be evaluated: asking is the safe side.
    ConditionFailed(String),
}

impl Because {
    /// A stable label: `tool`, `annotation:destructiveHint`,
    /// `verdict:private_path`, `changed_listing`, `first_use`, `condition`,
    /// `condition_failed`.
    pub fn label(&self) -> String {
        match self {
            Because::Tool => "tool".into(),
            Because::Annotation(h) => format!("annotation:{}", h.as_written()),
            Because::Verdict(v) => format!("verdict:{}", v.as_str()),
            Because::ChangedListing => "changed_listing".into(),
            Because::FirstUse => "first_use".into(),
            Because::Condition => "condition".into(),
            Because::ConditionFailed(_) => "condition_failed".into(),
        }
    }
}

/// How long a question waits for its answer unless the rule says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a decision remembered for the caller holds unless the rule says.
pub const DEFAULT_REMEMBER_FOR: Duration = Duration::from_secs(8 * 3600);

/// The name of the question an `[arguments]` rule set to `ask` gets when
/// no `[[approval]]` rule names its verdict.
pub const ARGUMENTS_RULE: &str = "arguments";

static FOR_ARGUMENTS: std::sync::LazyLock<ApprovalRule> =
    std::sync::LazyLock::new(|| ApprovalRule {
        name: ARGUMENTS_RULE.to_owned(),
        tools: None,
        annotations: Vec::new(),
        verdicts: ArgumentCheck::ALL.to_vec(),
        changed_listing: false,
        first_use: false,
        when: None,
        remember: Remember::Call,
        remember_for: DEFAULT_REMEMBER_FOR,
        approver: Approver::Caller,
        approver_groups: None,
        approvers_written: ApproversWritten::default(),
        fallback: Fallback::Refuse,
        timeout: DEFAULT_TIMEOUT,
        reason: None,
    });

impl ApprovalRule {
    /// The question for an `[arguments]` rule set to `ask` that no
    /// `[[approval]]` rule names: this call only, asked of the caller,
    /// refused when the client cannot be asked.
    pub fn for_arguments() -> &'static ApprovalRule {
        &FOR_ARGUMENTS
    }

    /// Whether the rule asks about this call, and the first criterion that
    /// made it. Cheap criteria first; the condition last.
    pub fn matches(&self, facts: &Facts<'_>, c: &Circumstances<'_>) -> Option<Because> {
        let mut because = None;
        if let Some(tools) = &self.tools {
            if !(tools.is_match(facts.tool) || tools.is_match(facts.upstream_tool)) {
                return None;
            }
            because = Some(Because::Tool);
        }
        if !self.annotations.is_empty() {
            let met = self.annotations.iter().find(|h| h.met(facts.annotations))?;
            because = Some(Because::Annotation(*met));
        }
        if !self.verdicts.is_empty() {
            let found = self.verdicts.iter().find(|v| c.ask_verdicts.contains(v))?;
            because = Some(Because::Verdict(*found));
        }
        if self.changed_listing {
            if !facts.listing_changed {
                return None;
            }
            because = Some(Because::ChangedListing);
        }
        if self.first_use && because.is_none() {
            because = Some(Because::FirstUse);
        }
        if let Some(when) = &self.when {
            match when.holds(facts) {
                Ok(false) => return None,
                Ok(true) => because = because.or(Some(Because::Condition)),
                Err(e) => because = Some(Because::ConditionFailed(e.0)),
            }
        }
        because
    }

    /// How long a decision of this rule may be remembered: `None` when it
    /// is not (this call only).
    pub fn remembered(&self) -> Option<Remember> {
        match (self.first_use, self.remember) {
            (true, _) => Some(Remember::Caller),
            (false, Remember::Call) => None,
            (false, r) => Some(r),
        }
    }
}

/// The rules of one route or one upstream policy, in the order written.
#[derive(Debug, Default)]
pub struct ApprovalRules {
    rules: Vec<ApprovalRule>,
}

impl ApprovalRules {
    pub fn new(rules: Vec<ApprovalRule>) -> ApprovalRules {
        ApprovalRules { rules }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &ApprovalRule> {
        self.rules.iter()
    }

    /// The first rule that asks about this call.
    pub fn first_match(
        &self,
        facts: &Facts<'_>,
        c: &Circumstances<'_>,
    ) -> Option<(&ApprovalRule, Because)> {
        self.rules
            .iter()
            .find_map(|r| r.matches(facts, c).map(|b| (r, b)))
    }

    /// Whether some rule turns a held changed listing into a question (the
    /// `unchanged` phase then asks instead of refusing).
    pub fn any_changed_listing(&self) -> bool {
        self.rules.iter().any(|r| r.changed_listing)
    }
}

#[cfg(test)]
impl ApprovalRules {
    pub(crate) fn rules_for_test(self) -> Vec<ApprovalRule> {
        self.rules
    }
}
