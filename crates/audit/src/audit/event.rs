//! The audit events: typed, holding names, ids and enums only, and the one
//! place they become a JSON line.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::model::{Asked, Reason, ReasonSet, Refusal, RequestShape};
use crate::mrtr::answers::AnswerReport;
use crate::mrtr::seal::SealedState;
use crate::policy::inspect::{Action, Report, Rule, Verdict};

pub use crate::model::RequestKind;

/// Longest name (key, field name, host, principal, …) written, in characters.
pub const MAX_NAME_CHARS: usize = 128;
/// Longest list written (requests, fields of one form, answers, keys); an
/// event with a longer list is written with the first `MAX_LIST_ITEMS` and
/// `"truncated": true`.
pub const MAX_LIST_ITEMS: usize = 64;

/// Characters never written: controls (C0, DEL, C1, so no line breaks or
/// terminal escapes) and invisible formatting characters that could make a
/// line read differently from what it says (the one table, `model::Invisible`).
pub fn is_hidden(c: char) -> bool {
    c.is_control() || crate::model::Invisible::of(c).is_some()
}

/// `s` without hidden characters, clipped to [`MAX_NAME_CHARS`]; borrowed
/// when nothing had to change.
pub(crate) fn clean(s: &str) -> Cow<'_, str> {
    let mut n = 0;
    let untouched = s.chars().all(|c| {
        n += 1;
        n <= MAX_NAME_CHARS && !is_hidden(c)
    });
    if untouched {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(
            s.chars()
                .filter(|c| !is_hidden(*c))
                .take(MAX_NAME_CHARS)
                .collect(),
        )
    }
}

/// A *name* taken from a schema or a message's structure: an input request
/// key, a form field name, a URL host, a rule or finding name. Never a value
/// a user typed, a message, or a requestState: nothing in this module puts
/// one there, and callers must not either.
///
/// Built only through [`Name::new`] (or `From`), which removes control and
/// invisible formatting characters and clips to [`MAX_NAME_CHARS`], so a
/// name cannot break a line, fake another event or grow without bound.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Name(Box<str>);

impl Name {
    pub fn new(s: &str) -> Name {
        Name(clean(s).into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::new(s)
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Name {
        Name::new(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        let cleaned = match clean(&s) {
            Cow::Borrowed(_) => None,
            Cow::Owned(c) => Some(c),
        };
        Name(cleaned.unwrap_or(s).into_boxed_str())
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

fn names<'a>(it: impl IntoIterator<Item = &'a String>) -> Vec<Name> {
    it.into_iter().map(Name::from).collect()
}

/// One input request, by key: its kind, a form's field names, a URL's host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputRequestSummary {
    pub key: Name,
    pub kind: RequestKind,
    /// Form mode only: the field names, in schema order.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "capped_opt")]
    pub fields: Option<Vec<Name>>,
    /// URL mode only: the host the user is sent to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) url_host: Option<Name>,
}

impl InputRequestSummary {
    /// From what the policy recorded as asked (after any stripping).
    pub fn from_asked(key: &str, asked: &Asked) -> InputRequestSummary {
        Self::from_shape(&RequestShape::of_asked(key, asked))
    }

    /// From a question's names as the policy read them.
    pub(crate) fn from_shape(shape: &RequestShape) -> InputRequestSummary {
        InputRequestSummary {
            key: Name::new(&shape.key),
            kind: shape.kind,
            fields: shape.fields.as_ref().map(|f| {
                f.iter()
                    .take(MAX_LIST_ITEMS + 1)
                    .map(|n| Name::new(n))
                    .collect()
            }),
            url_host: shape.url_host.as_deref().map(Name::new),
        }
    }

    fn truncated(&self) -> bool {
        self.fields
            .as_ref()
            .is_some_and(|f| f.len() > MAX_LIST_ITEMS)
    }
}

/// A field of one input request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldRef {
    pub(crate) key: Name,
    pub(crate) field: Name,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerAction {
    Accept,
    Decline,
    Cancel,
}

impl AnswerAction {
    pub(crate) fn parse(s: &str) -> Option<AnswerAction> {
        match s {
            "accept" => Some(AnswerAction::Accept),
            "decline" => Some(AnswerAction::Decline),
            "cancel" => Some(AnswerAction::Cancel),
            _ => None,
        }
    }
}

/// How an answer (or all of a retry's answers) fared against what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    Ok,
    /// Did not fit the schema that was asked (`invalid_answer`).
    Invalid,
    /// A secret-looking value in an ordinary field (`secret_in_answer`).
    SecretRefused,
}

/// One answer of a retry: names only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerSummary {
    pub(crate) key: Name,
    /// `null` for sampling/roots answers and for an answer refused before
    /// its action was read.
    pub(crate) action: Option<AnswerAction>,
    /// The form field names answered (accepted forms only).
    #[serde(serialize_with = "capped")]
    pub(crate) fields: Vec<Name>,
    pub(crate) outcome: Validation,
    /// Where validation failed, when it did in one field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) problem_field: Option<Name>,
}

/// How an MRTR operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationOutcome {
    /// The upstream gave its final result after the user answered.
    Complete,
    /// The gateway refused a question or an answer.
    Refused,
    /// The final result followed answers that were all declined.
    Declined,
    /// The final result followed an answer that was cancelled.
    Cancelled,
    /// The operation or its round's state expired.
    Expired,
    /// The upstream asked more rounds than allowed.
    RoundLimit,
    /// The upstream failed or went away.
    Error,
}

impl OperationOutcome {
    /// The outcome of an operation ended by a refusal with `reason`.
    pub fn from_reason(reason: Reason) -> OperationOutcome {
        if reason.is_in(ReasonSet::Rounds) {
            OperationOutcome::RoundLimit
        } else if reason.is_in(ReasonSet::Expires) {
            OperationOutcome::Expired
        } else if reason.is_in(ReasonSet::Fails) {
            OperationOutcome::Error
        } else {
            OperationOutcome::Refused
        }
    }

    /// The outcome of an operation whose final result followed a retry
    /// with these answers: complete when anything was accepted (or nothing
    /// was an elicitation), else cancelled when anything was cancelled,
    /// else declined.
    pub fn after_answers(answers: &AnswerReport) -> OperationOutcome {
        let actions = || answers.actions.iter().map(|(_, a)| AnswerAction::parse(a));
        if answers.actions.is_empty() || actions().any(|a| a == Some(AnswerAction::Accept)) {
            OperationOutcome::Complete
        } else if actions().any(|a| a == Some(AnswerAction::Cancel)) {
            OperationOutcome::Cancelled
        } else {
            OperationOutcome::Declined
        }
    }
}

/// One step of an MRTR operation. Every member is a name, an id, an enum, a
/// number or a flag: see the module documentation for why no value a user
/// typed can be put in one. Build them with the constructors, which read
/// only names out of protocol data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AuditEvent {
    /// An upstream answered with `input_required`.
    InputRequiredReceived {
        #[serde(serialize_with = "capped")]
        requests: Vec<InputRequestSummary>,
        /// Whether the upstream sent a `requestState` (never its contents).
        upstream_state: bool,
    },
    /// One policy decision on the `input_required`.
    PolicyVerdict {
        rule: Rule,
        /// What the rule did (`policy::inspect::Action`'s names).
        action: Action,
        key: Option<Name>,
        field: Option<Name>,
        /// A rule or finding name (`payment_card in name`, `message: bidi`,
        /// an injection rule's name) or a URL host.
        detail: Option<Name>,
    },
    /// The `input_required` went to the client, as it was after policy.
    Delivered {
        #[serde(serialize_with = "capped")]
        requests: Vec<InputRequestSummary>,
        /// Fields removed from forms (secret-asking, `strip` policy).
        #[serde(serialize_with = "capped")]
        stripped: Vec<FieldRef>,
        /// Whether human-facing text was rewritten to make it safe.
        sanitised: bool,
    },
    /// The gateway refused: the client got an error with this reason.
    Refused {
        #[serde(serialize_with = "reason_str")]
        reason: Reason,
        rule: Option<Name>,
        key: Option<Name>,
        field: Option<Name>,
    },
    /// A client's retry with answers arrived and was checked.
    RetryReceived {
        outcome: Validation,
        #[serde(serialize_with = "capped")]
        answers: Vec<AnswerSummary>,
        /// Keys answered that were never asked (removed).
        #[serde(serialize_with = "capped")]
        dropped_keys: Vec<Name>,
        /// Keys whose `content` was removed (decline/cancel, URL mode).
        #[serde(serialize_with = "capped")]
        dropped_content_keys: Vec<Name>,
    },
    /// The checked retry went upstream.
    Forwarded {
        #[serde(serialize_with = "capped")]
        keys: Vec<Name>,
        /// Whether the upstream's own `requestState` was put back.
        upstream_state: bool,
    },
    /// A listed item's definition differs from the one pinned for it (a
    /// rug pull), written once per new definition; or an operator accepted
    /// a held one (`action: "accepted"`). Digests, never text.
    ListingChanged {
        /// tool | prompt | resource | resource_template
        kind: &'static str,
        /// The item's name (a resource's URI, a template's URI template).
        item: Name,
        /// removed | flagged | allowed | monitor | accepted
        action: &'static str,
        /// The new definition's digest (SHA-256 of its canonical JSON, hex).
        listed: Option<Name>,
    },
    /// The gateway's own approval question (`[[approval]]`): asked, and
    /// what became of it. Who asked is the event's principal; who decided
    /// is named here (the caller, or an approver on the approval page).
    /// The arguments are named by their digest, never their values.
    Approval {
        step: crate::approval::Step,
        rule: Name,
        tool: Name,
        /// Why the rule asked (`tool`, `annotation:destructiveHint`,
        /// `verdict:private_path`, `changed_listing`, `first_use`,
        /// `condition`, `condition_failed`).
        because: Name,
        /// SHA-256 of the call's canonical params, hex (the digest sealed
        /// states bind arguments with).
        arguments_digest: Name,
        decided_by: Option<Name>,
        /// How long an approval is kept: session | caller (absent: this call).
        remembered: Option<crate::approval::Remember>,
    },
    /// A decision sent to the approval page and not taken: who tried
    /// (`scheme:name`, `admin`, or absent when unauthenticated) and why.
    /// The event's principal is the caller whose call waits.
    ApprovalDecisionRefused {
        rule: Name,
        tool: Name,
        arguments_digest: Name,
        attempted_by: Option<Name>,
        why: crate::approval::RefusedDecision,
    },
    /// A sign-in to the approval page refused, or a session cookie that
    /// did not hold, for an approval: who tried (`scheme:name`, `admin`,
    /// or absent when unknown) and why. Never the credential, the cookie
    /// or the form's token. The event's principal is the caller whose
    /// call waits.
    ApprovalSignInRefused {
        rule: Name,
        tool: Name,
        arguments_digest: Name,
        attempted_by: Option<Name>,
        why: crate::approval::RefusedSignIn,
    },
    /// `config_weakened`: a security control a new config holds less
    /// strongly than the running one (tied to no request; written with
    /// [`super::AuditSink::emit_unbound`]). Config paths, ids, setting
    /// names, host patterns and rule names only: never a secret.
    ConfigWeakened {
        /// The control's config path (`arguments.secrets`, `upstream.url`).
        control: Name,
        /// The route (its path), for a route's control.
        route: Option<Name>,
        /// The listener (its name), for a listener's control.
        #[serde(skip_serializing_if = "Option::is_none")]
        listener: Option<Name>,
        from: Name,
        to: Name,
        outcome: super::config_event::ReloadOutcome,
    },
    /// The operation is over.
    OperationEnd {
        outcome: OperationOutcome,
        rounds: u32,
        duration_ms: u64,
        #[serde(serialize_with = "reason_opt")]
        reason: Option<Reason>,
    },
}

impl AuditEvent {
    /// The `event` member.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            AuditEvent::InputRequiredReceived { .. } => "input_required_received",
            AuditEvent::PolicyVerdict { .. } => "policy_verdict",
            AuditEvent::Delivered { .. } => "delivered",
            AuditEvent::Refused { .. } => "refused",
            AuditEvent::RetryReceived { .. } => "retry_received",
            AuditEvent::Forwarded { .. } => "forwarded",
            AuditEvent::ListingChanged { .. } => "listing_changed",
            AuditEvent::Approval { .. } => "approval",
            AuditEvent::ApprovalDecisionRefused { .. } => "approval_decision_refused",
            AuditEvent::ApprovalSignInRefused { .. } => "approval_sign_in_refused",
            AuditEvent::ConfigWeakened { .. } => "config_weakened",
            AuditEvent::OperationEnd { .. } => "operation_end",
        }
    }

    /// `input_required_received`: the questions as the upstream sent them
    /// (names only, as the policy read them), and whether it sent a
    /// requestState (never its contents).
    pub fn received(report: &Report) -> AuditEvent {
        AuditEvent::InputRequiredReceived {
            requests: report
                .received
                .iter()
                .take(MAX_LIST_ITEMS + 1)
                .map(InputRequestSummary::from_shape)
                .collect(),
            upstream_state: report.request_state.is_some(),
        }
    }

    pub fn verdict(v: &Verdict) -> AuditEvent {
        AuditEvent::PolicyVerdict {
            rule: v.rule,
            action: v.action,
            key: v.key.as_ref().map(Name::from),
            field: v.field.as_ref().map(Name::from),
            detail: v.detail.as_ref().map(Name::from),
        }
    }

    /// One `policy_verdict` per verdict of the inspection, in order.
    pub fn verdicts(report: &Report) -> impl Iterator<Item = AuditEvent> + '_ {
        report.verdicts.iter().map(AuditEvent::verdict)
    }

    /// `delivered` from the inspection of a result that passed: what was
    /// asked after stripping, the stripped fields, whether text changed.
    pub fn delivered(report: &Report) -> AuditEvent {
        AuditEvent::Delivered {
            requests: report
                .asked
                .iter()
                .map(|(k, a)| InputRequestSummary::from_asked(k, a))
                .collect(),
            stripped: report
                .stripped()
                .map(|(key, field)| FieldRef {
                    key: Name::new(key),
                    field: Name::new(field),
                })
                .collect(),
            sanitised: report.sanitised(),
        }
    }

    /// `refused` from the refusal sent to the client (its `rule`, `key` and
    /// `field` data members when present; never its message).
    pub fn refused(refusal: &Refusal) -> AuditEvent {
        AuditEvent::Refused {
            reason: refusal.reason,
            rule: refusal_data(refusal, "rule"),
            key: refusal_data(refusal, "key"),
            field: refusal_data(refusal, "field"),
        }
    }

    /// `retry_received` for answers that passed their checks.
    pub fn retry_ok(answers: &AnswerReport) -> AuditEvent {
        let fields_of = |key: &str| {
            answers
                .fields_answered
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, f)| f.iter().take(MAX_LIST_ITEMS + 1).map(Name::from).collect())
                .unwrap_or_default()
        };
        AuditEvent::RetryReceived {
            outcome: Validation::Ok,
            answers: answers
                .actions
                .iter()
                .take(MAX_LIST_ITEMS + 1)
                .map(|(key, action)| AnswerSummary {
                    key: Name::new(key),
                    action: AnswerAction::parse(action),
                    fields: fields_of(key),
                    outcome: Validation::Ok,
                    problem_field: None,
                })
                .collect(),
            dropped_keys: names(answers.dropped_keys.iter().take(MAX_LIST_ITEMS + 1)),
            dropped_content_keys: names(answers.dropped_content.iter().take(MAX_LIST_ITEMS + 1)),
        }
    }

    /// `retry_received` for answers refused with `invalid_answer` or
    /// `secret_in_answer`: the key and field named in the refusal.
    pub fn retry_refused(refusal: &Refusal) -> AuditEvent {
        let outcome = match refusal.reason {
            Reason::SecretInAnswer => Validation::SecretRefused,
            _ => Validation::Invalid,
        };
        let answers = refusal_data(refusal, "key")
            .map(|key| AnswerSummary {
                key,
                action: None,
                fields: Vec::new(),
                outcome,
                problem_field: refusal_data(refusal, "field"),
            })
            .into_iter()
            .collect();
        AuditEvent::RetryReceived {
            outcome,
            answers,
            dropped_keys: Vec::new(),
            dropped_content_keys: Vec::new(),
        }
    }

    /// `forwarded`: the answer keys sent upstream and whether the
    /// upstream's own requestState was put back.
    pub fn forwarded(answers: &AnswerReport, prior: &SealedState) -> AuditEvent {
        AuditEvent::Forwarded {
            keys: names(answers.kept.iter().take(MAX_LIST_ITEMS + 1)),
            upstream_state: prior.upstream_state.is_some(),
        }
    }

    pub fn operation_end(
        outcome: OperationOutcome,
        rounds: u32,
        duration: Duration,
        reason: Option<Reason>,
    ) -> AuditEvent {
        AuditEvent::OperationEnd {
            outcome,
            rounds,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            reason,
        }
    }

    /// `listing_changed`: an item's kind and name, what was done, and the
    /// digest of its listed definition (never its text).
    pub fn listing_changed(
        kind: &'static str,
        item: &str,
        action: &'static str,
        listed: Option<&str>,
    ) -> AuditEvent {
        AuditEvent::ListingChanged {
            kind,
            item: Name::new(item),
            action,
            listed: listed.map(Name::new),
        }
    }

    /// `approval`: one step of the gateway's own question about a call.
    pub fn approval(
        step: crate::approval::Step,
        rule: &str,
        tool: &str,
        because: &str,
        arguments_digest: &str,
        decided_by: Option<&str>,
        remembered: Option<crate::approval::Remember>,
    ) -> AuditEvent {
        AuditEvent::Approval {
            step,
            rule: Name::new(rule),
            tool: Name::new(tool),
            because: Name::new(because),
            arguments_digest: Name::new(arguments_digest),
            decided_by: decided_by.map(Name::new),
            remembered,
        }
    }

    /// `approval_decision_refused`: a page decision not taken.
    pub fn approval_decision_refused(
        rule: &str,
        tool: &str,
        arguments_digest: &str,
        attempted_by: Option<&str>,
        why: crate::approval::RefusedDecision,
    ) -> AuditEvent {
        AuditEvent::ApprovalDecisionRefused {
            rule: Name::new(rule),
            tool: Name::new(tool),
            arguments_digest: Name::new(arguments_digest),
            attempted_by: attempted_by.map(Name::new),
            why,
        }
    }

    /// `approval_sign_in_refused`: a sign-in to the approval page refused.
    pub fn approval_sign_in_refused(
        rule: &str,
        tool: &str,
        arguments_digest: &str,
        attempted_by: Option<&str>,
        why: crate::approval::RefusedSignIn,
    ) -> AuditEvent {
        AuditEvent::ApprovalSignInRefused {
            rule: Name::new(rule),
            tool: Name::new(tool),
            arguments_digest: Name::new(arguments_digest),
            attempted_by: attempted_by.map(Name::new),
            why,
        }
    }

    /// Whether some list is longer than [`MAX_LIST_ITEMS`] and will be cut.
    pub(crate) fn truncated(&self) -> bool {
        let over = |n: usize| n > MAX_LIST_ITEMS;
        match self {
            AuditEvent::InputRequiredReceived { requests, .. } => {
                over(requests.len()) || requests.iter().any(InputRequestSummary::truncated)
            }
            AuditEvent::Delivered {
                requests, stripped, ..
            } => {
                over(requests.len())
                    || over(stripped.len())
                    || requests.iter().any(InputRequestSummary::truncated)
            }
            AuditEvent::RetryReceived {
                answers,
                dropped_keys,
                dropped_content_keys,
                ..
            } => {
                over(answers.len())
                    || over(dropped_keys.len())
                    || over(dropped_content_keys.len())
                    || answers.iter().any(|a| over(a.fields.len()))
            }
            AuditEvent::Forwarded { keys, .. } => over(keys.len()),
            AuditEvent::PolicyVerdict { .. }
            | AuditEvent::Refused { .. }
            | AuditEvent::ListingChanged { .. }
            | AuditEvent::Approval { .. }
            | AuditEvent::ApprovalDecisionRefused { .. }
            | AuditEvent::ApprovalSignInRefused { .. }
            | AuditEvent::ConfigWeakened { .. }
            | AuditEvent::OperationEnd { .. } => false,
        }
    }
}

fn refusal_data(refusal: &Refusal, member: &str) -> Option<Name> {
    refusal.extra.as_ref()?.get(member)?.as_str().map(Name::new)
}

fn capped<S: Serializer, T: Serialize>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().take(MAX_LIST_ITEMS))
}

fn capped_opt<S: Serializer, T: Serialize>(v: &Option<Vec<T>>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => capped(v, s),
        None => s.serialize_none(),
    }
}

fn reason_str<S: Serializer>(r: &Reason, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(r.as_str())
}

fn reason_opt<S: Serializer>(r: &Option<Reason>, s: S) -> Result<S::Ok, S::Error> {
    match r {
        Some(r) => s.serialize_str(r.as_str()),
        None => s.serialize_none(),
    }
}
