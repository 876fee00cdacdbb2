//! Keeping a process in step between callers: a request the gateway gave
//! up on (timeout, client gone), and what a pooled program writes after
//! its answers.
//!
//! - Given up: the program is told `notifications/cancelled`, and may
//!   rightly never answer (the spec asks it not to). For a short while it
//!   goes to no other caller, and is watched: one that is still burning the
//!   CPU on work nobody waits for (spinning), or that stopped in the middle
//!   of a line (the next answer's framing would be corrupt), is stopped and
//!   started afresh for the next caller. One that went quiet is kept.
//! - Settle: what a pooled (2026-07-28) program writes after its answer —
//!   a log line, a late progress note — belongs to the caller that is gone,
//!   not to the next one. Before a reused process takes the next request,
//!   the gateway sends it `ping` and drops whatever the program writes
//!   before that answer. Every reused process is settled, even one that
//!   has never written anything but answers: its first late line may
//!   still be on the way. A program that leaves the `ping` unanswered
//!   (`SETTLE_WAIT`) is not settled again.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;

use super::{lock, remember, Process, Shared};
use crate::model::McpMethod;
use crate::stdio::frame;

/// How long a pooled program has to answer the settling `ping`.
const SETTLE_WAIT: Duration = Duration::from_secs(1);

/// How long a program is watched after a request was given up (at most its
/// stop timeout), how often it is looked at, and the share of looks that
/// find it running (on a CPU, or waiting for one) that counts as still
/// working: a count of states, not of CPU time, holds on a loaded machine.
const WATCHED: Duration = Duration::from_secs(1);
const LOOKS: u32 = 10;
const BUSY_SHARE: u32 = 6;

impl Shared {
    /// `id` was given up: watch the program for a while (see the module).
    pub(super) fn owe(self: &Arc<Self>, id: u64, grace: Duration) {
        lock(&self.overdue).insert(id);
        let Some(runtime) = self.runtime_left() else {
            return;
        };
        let shared = self.clone();
        let window = grace.min(WATCHED);
        runtime.spawn(async move {
            let mut running = 0;
            for _ in 0..LOOKS {
                tokio::time::sleep(window / LOOKS).await;
                if !lock(&shared.overdue).contains(&id) {
                    return;
                }
                running += u32::from(tree_running(shared.supervisor.pid()).await);
            }
            let owed = lock(&shared.overdue).remove(&id);
            if !owed || !shared.alive.load(Ordering::Acquire) {
                return;
            }
            let spinning = running >= BUSY_SHARE;
            let mid_line = shared.mid_line.load(Ordering::Acquire);
            if !(spinning || mid_line) {
                return;
            }
            let pid = shared.pid.load(Ordering::Relaxed);
            let why = if mid_line {
                "stopped in the middle of a line"
            } else {
                "kept working on it"
            };
            tracing::warn!(upstream = %shared.upstream, pid, "stdio program {why} after a request was given up; stopped");
            // The gateway's decision, not a crash: no restart backoff.
            shared.stopping.store(true, Ordering::Release);
            shared.kill_now();
        });
    }

    /// The program answered `id` (late): it owes nothing for it.
    pub(super) fn paid(&self, id: u64) {
        lock(&self.overdue).remove(&id);
    }
}

/// Whether any thread of the supervisor `root`'s processes (itself and
/// every process below it) is running or waiting for a CPU (from /proc,
/// off the runtime's workers).
async fn tree_running(root: u32) -> bool {
    tokio::task::spawn_blocking(move || below(root).into_iter().any(threads_running))
        .await
        .unwrap_or(false)
}

/// `root` and the processes below it.
fn below(root: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return vec![root];
    };
    let parents: Vec<(u32, u32)> = entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(parents.iter().filter(|p| p.1 == parent).map(|p| p.0));
        i += 1;
    }
    tree
}

/// Any thread of `pid` in state R.
fn threads_running(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('R'))
            })
            .unwrap_or(false)
    })
}

impl Process {
    /// Whether the program still owes the end of a request given up on:
    /// no caller gets it meanwhile.
    pub(crate) fn overdue(&self) -> bool {
        !lock(&self.shared.overdue).is_empty()
    }

    /// A pooled program is one whose processes serve any caller in turn.
    pub(crate) fn set_pooled(&self) {
        self.shared.pooled.store(true, Ordering::Release);
    }

    /// Before a reused pooled process takes a request: `ping`, with what
    /// the program writes before its answer dropped (its previous caller's).
    pub(super) async fn settle(&self) {
        let shared = &self.shared;
        let needed = shared.pooled.load(Ordering::Acquire)
            && shared.answered.load(Ordering::Acquire)
            && !shared.ignores_ping.load(Ordering::Acquire);
        if !needed {
            return;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&shared.pending).insert(id, tx);
        *lock(&shared.call) = None;
        let ping = json!({"jsonrpc": "2.0", "id": id, "method": McpMethod::Ping.as_str()});
        let written = self
            .stdin
            .write(&frame::one_line(ping.to_string().into_bytes()))
            .await;
        if written.is_ok() && tokio::time::timeout(SETTLE_WAIT, rx).await.is_ok() {
            return;
        }
        if written.is_ok() {
            shared.ignores_ping.store(true, Ordering::Release);
        }
        lock(&shared.pending).remove(&id);
        remember(&shared.abandoned, id);
    }
}
