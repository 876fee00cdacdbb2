//! The approvals that wait for an approver other than the caller
//! (`approver = "approvers"`, or `fallback = "approvers"`): each is one
//! call held by the approve phase, known by an id from the system's CSPRNG
//! and decided once, on the gateway's approval page (served by the admin
//! listener, `src/admin/approvals/`). What the page shows was written
//! when the call was asked about — the gateway's own words and the
//! arguments as the approval form shows them (names, values shortened,
//! secrets masked) — and nothing else of the call is kept.
//!
//! An approval lives until it is decided and its call has read the
//! decision, until its expiry, or until the call it holds went away (the
//! waiting call's [`Waiter`] removes it). It lives in this gateway
//! process; behind replicas sharing Redis its page facts are told to the
//! others (the approve phase's `shared` module), whose pages show it and hand
//! a decision here.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwapOption;
use globset::GlobSet;
use tokio::sync::watch;

use crate::identify::{AuthSchemes, Principal, PrincipalGlobs, SchemeId};
use crate::mrtr::seal::new_operation_id;
use crate::pipeline::relay::Relay;
pub use portcullis_approval::{Undecided, Verdict};

/// Where the approval page is served.
pub const PAGE_PATH: &str = "/approvals";
/// At most this many approvals wait at once (each holds a call).
const MAX_PENDING: usize = 10_000;
/// The most approvals one caller may have waiting on one instance: a
/// caller who never retries cannot take every slot (nor fill the
/// approvers' list).
const MAX_PENDING_PER_CALLER: usize = 32;

/// An approval's state, as its call waits on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Waiting,
    Decided {
        verdict: Verdict,
        by: Arc<str>,
        /// The approver ticked "remember" (offered where the rule lets an
        /// approval be remembered).
        remember: bool,
    },
}

/// Who may decide: the rule's `approvers` (principal globs) and
/// `approver_groups`, authenticated by the schemes of the route the call
/// came on (a token for its resource when it is an OAuth protected one).
#[derive(Clone)]
pub struct Deciders {
    pub approvers: Option<PrincipalGlobs>,
    pub approver_groups: Option<GlobSet>,
    /// The schemes of the config generation the call started under, and
    /// those of its route.
    pub auth: Arc<AuthSchemes>,
    pub schemes: Vec<SchemeId>,
    pub resource: Option<String>,
}

impl Deciders {
    /// The rule's `approvers` as written, matched with the config's auth
    /// schemes (`None`: no list, or one that no longer builds).
    pub fn approvers(written: &[String], auth: &AuthSchemes) -> Option<PrincipalGlobs> {
        if written.is_empty() {
            return None;
        }
        let globs: Vec<&str> = written.iter().map(String::as_str).collect();
        PrincipalGlobs::new(&globs, &auth.names()).ok()
    }

    /// Whether `who` is one of the rule's approvers (an anonymous
    /// principal never is). An `approvers` glob names a principal by name
    /// (of any of the route's schemes) or as `scheme:name` (of that one).
    pub fn admits(&self, who: &Principal) -> bool {
        if who.is_anonymous() {
            return false;
        }
        let by_name = self.approvers.as_ref().is_some_and(|g| g.names(who));
        let by_group = self
            .approver_groups
            .as_ref()
            .is_some_and(|g| who.groups.iter().any(|group| g.is_match(group)));
        by_name || by_group
    }
}

/// One call waiting for an approver, as the page shows and checks it.
pub struct Pending {
    pub rule: String,
    pub because: String,
    /// The tool as the client called it, and the server's display name.
    pub tool: String,
    pub server: String,
    /// The approval form's message: the gateway's words, values shortened
    /// and secrets masked.
    pub message: String,
    /// Who asked: the caller as `scheme:name`.
    pub caller: String,
    /// The binding the call's answer is checked against (caller, arguments).
    pub caller_key: String,
    pub digest: String,
    pub deciders: Deciders,
    /// The token a decision must carry (bound to this approval alone).
    pub csrf: String,
    /// The rule lets an approval be remembered: the page offers it, and
    /// says for how long.
    pub remember: Option<String>,
    /// Unix milliseconds.
    pub expires_ms: u64,
    /// The upstream's metric label, and the waiting call's audit context:
    /// what an attempt on this approval is recorded under.
    pub upstream: String,
    pub audit: crate::audit::AuditContext,
}

struct Entry {
    pending: Arc<Pending>,
    state: watch::Sender<State>,
}

/// The approvals waiting in this process, carried across reloads.
#[derive(Default)]
pub struct PendingApprovals {
    entries: Mutex<HashMap<String, Entry>>,
    /// The admin listener's bound address (set once it listens).
    admin: OnceLock<SocketAddr>,
    /// The instance id every approval's id starts with (as a bridged
    /// call's does): which replica holds it, for another replica's page.
    instance: OnceLock<String>,
    /// Behind replicas sharing Redis, where each approval's page facts are
    /// kept for the others (the current config generation's relay).
    relay: ArcSwapOption<Relay>,
}

/// Where the page facts of the approval `id` are kept for other replicas.
pub(crate) fn facts_key(id: &str) -> String {
    format!("{FACTS_PREFIX}{id}")
}

/// What the keys of approvals' page facts start with.
pub(crate) const FACTS_PREFIX: &str = "portcullis:approval:";

impl Pending {
    /// Whether `who` may decide this call: one of the rule's approvers, and
    /// not the caller (the page is for a second person; whoever the rule
    /// names, nobody approves their own call there).
    pub fn may_be_decided_by(&self, who: &Principal) -> bool {
        who.key() != self.caller_key && self.deciders.admits(who)
    }
}

impl PendingApprovals {
    /// The admin listener is at `addr`: the page's links point there unless
    /// `[admin] approval_url` says otherwise.
    pub fn serve_page_at(&self, addr: SocketAddr) {
        let _ = self.admin.set(addr);
    }

    /// The base of the page's links, or `None` when no admin listener
    /// serves the page.
    pub fn page_base(&self, configured: Option<&str>) -> Option<String> {
        if let Some(base) = configured {
            return Some(base.trim_end_matches('/').to_owned());
        }
        self.admin.get().map(|a| format!("http://{a}"))
    }

    /// Keep page facts for other replicas through `relay` (each config
    /// generation's; none without a shared Redis).
    pub(crate) fn share_through(&self, relay: Option<&Arc<Relay>>) {
        self.relay.store(relay.cloned());
    }

    /// Forget the page facts of `id` (decided, or its call gone), in the
    /// background; an expiry removes them anyway.
    pub(crate) fn forget(&self, id: &str) {
        let Some(relay) = self.relay.load_full() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let key = facts_key(id);
        runtime.spawn(async move {
            let _ = relay.drop_fact(&key).await;
        });
    }

    /// Name every approval's id after the instance `instance` (once).
    pub(crate) fn name_ids_with(&self, instance: &str) {
        let _ = self.instance.set(instance.to_owned());
    }

    /// Whether the approval `id` is held by this instance (or by nobody
    /// another replica could reach: an id named after no instance).
    pub(crate) fn holds(&self, id: &str) -> bool {
        match (crate::pipeline::relay::holder_of(id), self.instance.get()) {
            (Some(holder), Some(me)) => holder == me,
            _ => true,
        }
    }

    /// Hold a call for an approver: its id and a handle to wait with.
    /// `None` when too many approvals wait already.
    pub fn open(self: &Arc<Self>, pending: Pending, now_ms: u64) -> Option<Waiter> {
        let id = match self.instance.get() {
            Some(instance) => format!("{instance}.{}", new_operation_id()),
            None => new_operation_id(),
        };
        let (state, _) = watch::channel(State::Waiting);
        let mut entries = self.entries.lock().ok()?;
        entries.retain(|_, e| e.pending.expires_ms > now_ms);
        let callers = entries
            .values()
            .filter(|e| e.pending.caller_key == pending.caller_key)
            .count();
        if entries.len() >= MAX_PENDING || callers >= MAX_PENDING_PER_CALLER {
            return None;
        }
        entries.insert(
            id.clone(),
            Entry {
                pending: Arc::new(pending),
                state,
            },
        );
        drop(entries);
        Some(Waiter {
            store: self.clone(),
            id,
            held: true,
        })
    }

    /// The waiting call's handle on the approval `id` (a 2026-07-28 retry's).
    pub fn waiter(self: &Arc<Self>, id: &str) -> Option<Waiter> {
        let entries = self.entries.lock().ok()?;
        entries.contains_key(id).then(|| Waiter {
            store: self.clone(),
            id: id.to_owned(),
            held: true,
        })
    }

    /// The approval `id` while it can still be decided.
    pub fn get(&self, id: &str, now_ms: u64) -> Result<Arc<Pending>, Undecided> {
        let entries = self.entries.lock().map_err(|_| Undecided::NotFound)?;
        let entry = entries.get(id).ok_or(Undecided::NotFound)?;
        if entry.pending.expires_ms <= now_ms {
            return Err(Undecided::Expired);
        }
        if *entry.state.borrow() != State::Waiting {
            return Err(Undecided::AlreadyDecided);
        }
        Ok(entry.pending.clone())
    }

    /// The approval `id` whatever its state (to record an attempt on it).
    pub fn lookup(&self, id: &str) -> Option<Arc<Pending>> {
        let entries = self.entries.lock().ok()?;
        entries.get(id).map(|e| e.pending.clone())
    }

    /// The approvals that can be decided now, the soonest to expire first.
    pub fn waiting(&self, now_ms: u64) -> Vec<(String, Arc<Pending>)> {
        let Ok(entries) = self.entries.lock() else {
            return Vec::new();
        };
        let mut out: Vec<_> = entries
            .iter()
            .filter(|(_, e)| e.pending.expires_ms > now_ms && *e.state.borrow() == State::Waiting)
            .map(|(id, e)| (id.clone(), e.pending.clone()))
            .collect();
        out.sort_by_key(|(_, p)| p.expires_ms);
        out
    }

    /// Decide the approval `id`, once: the form's `csrf` must be its own.
    pub fn decide(
        &self,
        id: &str,
        csrf: &str,
        verdict: Verdict,
        remember: bool,
        by: &str,
        now_ms: u64,
    ) -> Result<Arc<Pending>, Undecided> {
        let entries = self.entries.lock().map_err(|_| Undecided::NotFound)?;
        let entry = entries.get(id).ok_or(Undecided::NotFound)?;
        if !same_token(&entry.pending.csrf, csrf) {
            return Err(Undecided::CsrfMismatch);
        }
        if entry.pending.expires_ms <= now_ms {
            return Err(Undecided::Expired);
        }
        let decided = State::Decided {
            verdict,
            by: Arc::from(by),
            remember: remember && entry.pending.remember.is_some(),
        };
        // Single use: only a waiting approval takes a decision.
        let mut taken = false;
        entry.state.send_if_modified(|state| {
            taken = *state == State::Waiting;
            if taken {
                *state = decided.clone();
            }
            taken
        });
        match taken {
            true => Ok(entry.pending.clone()),
            false => Err(Undecided::AlreadyDecided),
        }
    }

    fn watch(&self, id: &str) -> Option<(Arc<Pending>, watch::Receiver<State>)> {
        let entries = self.entries.lock().ok()?;
        let e = entries.get(id)?;
        Some((e.pending.clone(), e.state.subscribe()))
    }

    fn remove(&self, id: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(id);
        }
        self.forget(id);
    }
}

/// Compared in constant time: the token is a secret of the page.
pub fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |differ, (x, y)| differ | (x ^ y))
            == 0
}

/// A new CSRF token (CSPRNG).
pub fn new_token() -> String {
    new_operation_id()
}

/// The waiting call's hold on its approval: the approval goes when the
/// call stops waiting (decided, expired, or the call went away), so a
/// decision can never be given to a call that is no longer there.
pub struct Waiter {
    store: Arc<PendingApprovals>,
    id: String,
    /// Dropped while held, the approval goes with it.
    held: bool,
}

/// What became of the approval a call waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Decided {
        verdict: Verdict,
        by: Arc<str>,
        remember: bool,
    },
    Expired,
}

impl Waiter {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The approval outlives this handle: a 2026-07-28 call is answered
    /// with the question and waits again when it comes back with the
    /// answer (until then only the expiry removes it).
    pub fn release(mut self) -> String {
        self.held = false;
        std::mem::take(&mut self.id)
    }

    /// The approval, for the checks of a call that comes back for it.
    pub fn pending(&self) -> Option<Arc<Pending>> {
        self.store.watch(&self.id).map(|(p, _)| p)
    }

    /// Wait for the decision until the approval's expiry (`now_ms`: the
    /// gateway's clock, which the expiry is on).
    pub async fn decision(&self, now_ms: u64) -> Outcome {
        let Some((pending, mut state)) = self.store.watch(&self.id) else {
            return Outcome::Expired;
        };
        let left = std::time::Duration::from_millis(pending.expires_ms.saturating_sub(now_ms));
        let decided = async {
            loop {
                if let State::Decided {
                    verdict,
                    by,
                    remember,
                } = state.borrow_and_update().clone()
                {
                    return Outcome::Decided {
                        verdict,
                        by,
                        remember,
                    };
                }
                if state.changed().await.is_err() {
                    return Outcome::Expired;
                }
            }
        };
        tokio::time::timeout(left, decided)
            .await
            .unwrap_or(Outcome::Expired)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.held {
            self.store.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests;
