//! Pending approvals across replicas sharing Redis (`[state]
//! single_use_backend = "redis"`): the replica holding a call waiting for
//! an approver keeps the approval's page facts in Redis
//! (`portcullis:approval:<id>`, sealed, expiring with the approval), so any
//! replica's page lists and shows it; a decision taken on another replica
//! is handed to the holder through the relay, which checks it there once
//! (its token, single use, expiry) and wakes the waiting call.
//!
//! Handing the decision on, rather than having the holder watch the key:
//! the relay already names the holder by the instance id in the approval's
//! id, says at once when nobody listens there (the holder is gone: the page
//! says the call is lost), and brings back the holder's own verdict — taken,
//! already decided, not this approval's token — for the page to show. A
//! watched key would need polling or Redis keyspace events (off by default)
//! and would tell the approver nothing.
//!
//! The facts are what the page shows (the gateway's words, the arguments as
//! the approval form shows them: shortened, secrets masked) and what
//! another replica needs to authenticate an approver: the rule's approver
//! globs as written and the route's scheme names. They go when the holder
//! lets the approval go (`PendingApprovals::forget`), or at their expiry
//! when the holder died; a decision then is refused, and they go too.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::pending::{
    facts_key as key, Deciders, Outcome, Pending, PendingApprovals, Undecided, Verdict,
    FACTS_PREFIX as KEY_PREFIX,
};
use crate::approval::ApproversWritten;
use crate::audit::AuditContext;
use crate::model::{Clock, Reason, Refusal};
use crate::pipeline::ctx::RequestCtx;
use crate::pipeline::relay::{holder_of, Hand, Holder, Relay, RelayError, Reply};
use crate::pipeline::Gateway;

/// How long a page on another replica waits for the holder's word.
const DECISION_WAIT: Duration = Duration::from_secs(5);

/// A pending approval as another replica's page needs it.
#[derive(Serialize, Deserialize)]
pub(super) struct Facts {
    /// The approval these facts are of: a record copied under another
    /// approval's key is refused (the key is not sealed, the facts are).
    id: String,
    rule: String,
    because: String,
    tool: String,
    server: String,
    message: String,
    caller: String,
    caller_key: String,
    digest: String,
    csrf: String,
    remember: Option<String>,
    expires_ms: u64,
    upstream: String,
    approvers: ApproversWritten,
    schemes: Vec<String>,
    resource: Option<String>,
    audit: Audited,
}

/// The waiting call's audit context, as far as another replica records
/// an attempt on its approval under it.
#[derive(Serialize, Deserialize)]
struct Audited {
    request_id: String,
    upstream_id: String,
    upstream_name: String,
    principal: String,
    auth_scheme: Option<String>,
    method: String,
    target: Option<String>,
}

impl Facts {
    pub(super) fn of(p: &Pending, approvers: &ApproversWritten) -> Facts {
        let d = &p.deciders;
        let schemes = d
            .schemes
            .iter()
            .filter_map(|s| d.auth.name(*s))
            .map(str::to_owned);
        Facts {
            id: String::new(),
            rule: p.rule.clone(),
            because: p.because.clone(),
            tool: p.tool.clone(),
            server: p.server.clone(),
            message: p.message.clone(),
            caller: p.caller.clone(),
            caller_key: p.caller_key.clone(),
            digest: p.digest.clone(),
            csrf: p.csrf.clone(),
            remember: p.remember.clone(),
            expires_ms: p.expires_ms,
            upstream: p.upstream.clone(),
            approvers: approvers.clone(),
            schemes: schemes.collect(),
            resource: d.resource.clone(),
            audit: Audited {
                request_id: p.audit.request_id.clone(),
                upstream_id: p.audit.upstream_id.clone(),
                upstream_name: p.audit.upstream_name.clone(),
                principal: p.audit.principal.clone(),
                auth_scheme: p.audit.auth_scheme.clone(),
                method: p.audit.method.clone(),
                target: p.audit.target.clone(),
            },
        }
    }

    /// The approval as this replica's page shows and checks it, with this
    /// replica's sign-in schemes.
    fn pending(self, gateway: &Gateway) -> Pending {
        let auth = gateway.config.auth.clone();
        let approvers = Deciders::approvers(&self.approvers.names, &auth);
        let approver_groups = self.approvers.groups();
        let schemes = self.schemes.iter().filter_map(|n| auth.lookup(n)).collect();
        Pending {
            rule: self.rule,
            because: self.because,
            tool: self.tool,
            server: self.server,
            message: self.message,
            caller: self.caller,
            caller_key: self.caller_key,
            digest: self.digest,
            deciders: Deciders {
                approvers,
                approver_groups,
                auth,
                schemes,
                resource: self.resource,
            },
            csrf: self.csrf,
            remember: self.remember,
            expires_ms: self.expires_ms,
            upstream: self.upstream,
            audit: AuditContext {
                request_id: self.audit.request_id,
                upstream_id: self.audit.upstream_id,
                upstream_name: self.audit.upstream_name,
                principal: self.audit.principal,
                auth_scheme: self.audit.auth_scheme,
                method: self.audit.method,
                target: self.audit.target,
                ..AuditContext::default()
            },
        }
    }
}

/// Tell the other replicas about the approval `id` this one holds (a
/// failure is logged: the approval is then decided on this replica's page).
pub(super) async fn publish(gateway: &Gateway, id: &str, mut facts: Facts) {
    let Some(relay) = &gateway.relay else { return };
    facts.id = id.to_owned();
    // Listening before the link is out: a decision may come from another replica.
    gateway.relay_listen().await;
    let left = facts.expires_ms.saturating_sub(gateway.clock.now_millis());
    if relay
        .put_fact(&key(id), &facts, Duration::from_millis(left))
        .await
        .is_err()
    {
        tracing::warn!(rule = %facts.rule, "approval page: the shared store is unreachable; this approval is shown only on this replica's page");
    }
}

fn forget(gateway: &Gateway, id: &str) {
    gateway.pending.forget(id);
}

/// Another replica's approval `id`, from its facts.
async fn remote(gateway: &Gateway, id: &str) -> Option<Pending> {
    let relay = gateway.relay.as_ref()?;
    if gateway.pending.holds(id) {
        return None;
    }
    let facts: Facts = relay.fact(&key(id)).await.ok()??;
    (facts.id == id).then(|| facts.pending(gateway))
}

impl Gateway {
    /// The approval `id` while it can be decided: held here, or (behind
    /// replicas) by another replica.
    pub async fn approval(&self, id: &str, now_ms: u64) -> Result<Arc<Pending>, Undecided> {
        match self.pending.get(id, now_ms) {
            Err(Undecided::NotFound) => {}
            held => return held,
        }
        let p = remote(self, id).await.ok_or(Undecided::NotFound)?;
        match p.expires_ms > now_ms {
            true => Ok(Arc::new(p)),
            false => Err(Undecided::Expired),
        }
    }

    /// The approval `id` whatever its state (to record an attempt on it).
    pub async fn approval_known(&self, id: &str) -> Option<Arc<Pending>> {
        match self.pending.lookup(id) {
            Some(p) => Some(p),
            None => remote(self, id).await.map(Arc::new),
        }
    }

    /// The approvals that can be decided now, on every replica, the
    /// soonest to expire first.
    pub async fn approvals_waiting(&self, now_ms: u64) -> Vec<(String, Arc<Pending>)> {
        let mut all = self.pending.waiting(now_ms);
        if let Some(relay) = &self.relay {
            let keys = relay.fact_keys(KEY_PREFIX).await.unwrap_or_default();
            for id in keys.iter().filter_map(|k| k.strip_prefix(KEY_PREFIX)) {
                if let Some(p) = remote(self, id).await.filter(|p| p.expires_ms > now_ms) {
                    all.push((id.to_owned(), Arc::new(p)));
                }
            }
        }
        all.sort_by_key(|(_, p)| p.expires_ms);
        all
    }

    /// Decide the approval `id`, once: here, or handed to the replica that
    /// holds it.
    pub async fn decide_approval(
        &self,
        id: &str,
        decision: Decision<'_>,
        now_ms: u64,
    ) -> Result<(), Undecided> {
        if self.pending.holds(id) || self.relay.is_none() {
            let decided = self.pending.decide(
                id,
                decision.csrf,
                decision.verdict,
                decision.remember,
                decision.by,
                now_ms,
            );
            if decided.is_ok() {
                forget(self, id);
            }
            return decided.map(|_| ());
        }
        let relay = self.relay.as_ref().ok_or(Undecided::NotFound)?;
        let outcome = hand(relay, id, &decision).await;
        let label = match &outcome {
            Ok(()) => "delivered",
            Err(Undecided::HolderGone) => RelayError::HolderGone.as_str(),
            Err(Undecided::Unreachable) => RelayError::Unavailable.as_str(),
            Err(_) => "refused",
        };
        self.metrics.bridge.handoff("decision", label);
        if matches!(
            outcome,
            Ok(()) | Err(Undecided::NotFound | Undecided::HolderGone)
        ) {
            forget(self, id);
        }
        outcome
    }
}

/// A decision taken on the page.
pub struct Decision<'a> {
    pub csrf: &'a str,
    pub verdict: Verdict,
    pub remember: bool,
    /// The approver, as recorded.
    pub by: &'a str,
}

async fn hand(relay: &Arc<Relay>, id: &str, d: &Decision<'_>) -> Result<(), Undecided> {
    let holder = holder_of(id).ok_or(Undecided::NotFound)?;
    let hand = Hand::Decide {
        id: id.to_owned(),
        csrf: d.csrf.to_owned(),
        verdict: d.verdict,
        remember: d.remember,
        by: d.by.to_owned(),
    };
    match relay.hand(holder, hand, DECISION_WAIT).await {
        Ok(Reply::Delivered) => Ok(()),
        Ok(Reply::Undecided { why }) => Err(why),
        Ok(_) => Err(Undecided::NotFound),
        Err(RelayError::HolderGone | RelayError::TimedOut) => Err(Undecided::HolderGone),
        Err(RelayError::Unavailable) => Err(Undecided::Unreachable),
    }
}

/// The relay's holder on this replica: a decision for an approval held
/// here is taken by its pending approvals; the rest goes to `calls`.
pub(crate) fn holder(calls: Arc<dyn Holder>, pending: &Arc<PendingApprovals>) -> Arc<dyn Holder> {
    Arc::new(Approvals {
        calls,
        pending: Arc::downgrade(pending),
        clock: crate::model::SystemClock,
    })
}

struct Approvals {
    calls: Arc<dyn Holder>,
    pending: Weak<PendingApprovals>,
    clock: crate::model::SystemClock,
}

#[async_trait::async_trait]
impl Holder for Approvals {
    async fn take(&self, hand: Hand) -> Reply {
        let Some(pending) = self.pending.upgrade() else {
            return Reply::NotWaiting;
        };
        match hand {
            Hand::Decide {
                id,
                csrf,
                verdict,
                remember,
                by,
            } => {
                let now = self.clock.now_millis();
                match pending.decide(&id, &csrf, verdict, remember, &by, now) {
                    Ok(_) => Reply::Delivered,
                    Err(why) => Reply::Undecided { why },
                }
            }
            Hand::AwaitDecision {
                id,
                principal,
                digest,
            } => {
                self.await_decision(&pending, &id, &principal, &digest)
                    .await
            }
            other => self.calls.take(other).await,
        }
    }
}

impl Approvals {
    /// The decision on the approval `id` held here, for the retry of its
    /// call that reached another replica (the same caller, arguments).
    async fn await_decision(
        &self,
        pending: &Arc<PendingApprovals>,
        id: &str,
        principal: &str,
        digest: &str,
    ) -> Reply {
        let Some(waiter) = pending.waiter(id) else {
            return Reply::NotWaiting;
        };
        let bound = waiter
            .pending()
            .is_some_and(|p| p.caller_key == principal && p.digest == digest);
        if !bound {
            // Not this call's: the approval stays for the call it is.
            waiter.release();
            return Reply::refused(Refusal::new(
                Reason::StateInvalid,
                "the approval belongs to another call",
            ));
        }
        match waiter.decision(self.clock.now_millis()).await {
            Outcome::Decided {
                verdict,
                by,
                remember,
            } => Reply::Decided {
                verdict: Some(verdict),
                by: by.to_string(),
                remember,
            },
            Outcome::Expired => Reply::Decided {
                verdict: None,
                by: String::new(),
                remember: false,
            },
        }
    }
}

/// A 2026-07-28 retry for an approval another replica holds: the outcome,
/// waited for there; `None` when no replica holds it.
pub(super) async fn await_elsewhere(
    ctx: &RequestCtx,
    id: &str,
) -> Option<Result<Outcome, Refusal>> {
    let gateway = &ctx.gateway;
    let relay = gateway.relay.as_ref()?;
    if gateway.pending.holds(id) {
        return None;
    }
    let holder = holder_of(id)?;
    let facts: Option<Facts> = relay.fact(&key(id)).await.ok().flatten();
    let now = gateway.clock.now_millis();
    let left = facts.map_or(Duration::ZERO, |f| {
        Duration::from_millis(f.expires_ms.saturating_sub(now))
    });
    let hand = Hand::AwaitDecision {
        id: id.to_owned(),
        principal: ctx.binding().principal_key(),
        digest: ctx.request.digest().to_owned(),
    };
    let outcome = relay.hand(holder, hand, left + DECISION_WAIT).await;
    let label = match &outcome {
        Ok(Reply::Decided { .. }) => "answered",
        Ok(Reply::NotWaiting) => "not_waiting",
        Ok(_) => "refused",
        Err(e) => e.as_str(),
    };
    gateway.metrics.bridge.handoff("decision", label);
    match outcome {
        Ok(Reply::Decided {
            verdict: Some(verdict),
            by,
            remember,
        }) => Some(Ok(Outcome::Decided {
            verdict,
            by: Arc::from(by),
            remember,
        })),
        Ok(Reply::Decided { verdict: None, .. }) => Some(Ok(Outcome::Expired)),
        Ok(Reply::Refused {
            reason,
            message,
            extra,
            status,
        }) => Some(Err(Reply::to_refusal(&reason, message, extra, status))),
        Ok(_) => None,
        Err(e) => Some(Err(e.refusal())),
    }
}
