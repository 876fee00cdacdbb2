//! Keeping a process in step between callers: a request the gateway gave
//! up on (timeout, client gone) is owed an end by the program, and a
//! pooled program that speaks outside its answers is settled before the
//! next caller gets it.
//!
//! - Overdue: the program is told `notifications/cancelled`; if it has
//!   neither answered nor finished the line it was writing within its stop
//!   timeout, it is still busy with work nobody waits for (spinning, or
//!   stopped mid-line, which would corrupt the next answer's framing): it
//!   is stopped, and until then given to no caller.
//! - Settle: what a pooled (2026-07-28) program writes after its answer —
//!   a log line, a late progress note — belongs to the caller that is gone,
//!   not to the next one. Before a reused process takes the next request,
//!   the gateway sends it `ping` and drops whatever the program writes
//!   before that answer. A program that has never written anything but
//!   answers costs nothing.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;

use super::{lock, remember, Process, Shared};
use crate::pipeline::stdio::frame;

/// How long a pooled program has to answer the settling `ping`.
const SETTLE_WAIT: Duration = Duration::from_secs(1);

impl Shared {
    /// `id` was given up: the program has `grace` to end it.
    pub(super) fn owe(self: &Arc<Self>, id: u64, grace: Duration) {
        lock(&self.overdue).insert(id);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(grace).await;
            if lock(&shared.overdue).contains(&id) && shared.alive.load(Ordering::Acquire) {
                let pid = shared.pid.load(Ordering::Relaxed);
                tracing::warn!(upstream = %shared.upstream, pid, "stdio program did not end a cancelled request within {grace:?}; stopped");
                shared.kill_now();
            }
        });
    }

    /// The program answered `id` (late): it owes nothing for it.
    pub(super) fn paid(&self, id: u64) {
        lock(&self.overdue).remove(&id);
    }
}

impl Process {
    /// Whether the program still owes the end of a request given up on:
    /// no caller gets it meanwhile.
    pub fn overdue(&self) -> bool {
        !lock(&self.shared.overdue).is_empty()
    }

    /// A pooled program is one whose processes serve any caller in turn.
    pub fn set_pooled(&self) {
        self.shared.pooled.store(true, Ordering::Release);
    }

    /// Before a reused pooled process takes a request: `ping`, with what
    /// the program writes before its answer dropped (its previous caller's).
    pub(super) async fn settle(&self) {
        let shared = &self.shared;
        let needed = shared.pooled.load(Ordering::Acquire)
            && shared.speaks.load(Ordering::Acquire)
            && shared.answered.load(Ordering::Acquire);
        if !needed {
            return;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&shared.pending).insert(id, tx);
        *lock(&shared.call) = None;
        let ping = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
        let written = self
            .stdin
            .write(&frame::one_line(ping.to_string().into_bytes()))
            .await;
        if written.is_ok() && tokio::time::timeout(SETTLE_WAIT, rx).await.is_ok() {
            return;
        }
        lock(&shared.pending).remove(&id);
        remember(&shared.abandoned, id);
    }
}
