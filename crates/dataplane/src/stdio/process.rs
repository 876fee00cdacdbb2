//! One running stdio program: its stdin (written by whoever sends), the task reading
//! its stdout (every line sorted, responses handed to the request waiting
//! for them, the rest to the call in flight), its stderr logged with a
//! bound, and its exit noticed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot, watch};

mod settle;

use super::cgroup::ProgramCgroup;
use super::frame::{self, FromProgram, Line, LineFault};
use super::metrics::StdioMetrics;
use super::spawn::{signal_group, Spawned, Supervisor};
use crate::model::McpMethod;

/// Why a request to the program got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProgramFailed {
    #[error("the program exited before answering")]
    Exited,
    #[error("the program wrote {0} on stdout and was restarted")]
    OutOfStep(LineFault),
}

/// What the process's stdout hands a request: its response line.
type Waiter = oneshot::Sender<Result<Bytes, ProgramFailed>>;

/// Responses the gateway stopped waiting for, remembered so their late
/// arrival is not mistaken for a program out of step.
const ABANDONED_KEPT: usize = 256;

/// What is shared between a process's handle and its tasks.
struct Shared {
    upstream: Arc<str>,
    /// The runtime its pipes are registered with and its tasks run on
    /// (the shared one: a per-core worker's runtime may stop first).
    runtime: tokio::runtime::Handle,
    /// The supervisor's pid: its process group is the program's.
    /// The supervisor (its pid is the program's process group).
    supervisor: Supervisor,
    /// The program's pid as the gateway sees it, once it reported its
    /// start (a sandboxed program's is its supervisor's), for the log.
    pid: AtomicU32,
    pending: Mutex<HashMap<u64, Waiter>>,
    abandoned: Mutex<VecDeque<u64>>,
    /// Requests given up on that the program has not ended yet (`settle.rs`).
    overdue: Mutex<HashSet<u64>>,
    /// Its processes serve any caller in turn (2026-07-28).
    pooled: AtomicBool,
    /// The program let a settling `ping` go unanswered: not settled again.
    ignores_ping: AtomicBool,
    /// It has answered a request.
    answered: AtomicBool,
    /// The reader holds part of a line, waiting for its end.
    mid_line: AtomicBool,
    /// Its stdout has ended, or it fell out of step: it serves nothing more
    /// (sent before its supervisor's end, which `exited` waits for).
    gone: watch::Sender<Option<Exit>>,
    /// Where messages that are not a response go: the call in flight's
    /// stream, else the session's own stream.
    call: Mutex<Option<mpsc::Sender<Bytes>>>,
    listener: Mutex<Option<mpsc::Sender<Bytes>>>,
    roots: Mutex<Arc<[String]>>,
    metrics: Arc<StdioMetrics>,
    alive: AtomicBool,
    /// The gateway asked it to stop (idle, drain, reload): its end is no crash.
    stopping: AtomicBool,
    exited: watch::Sender<Exit>,
}

/// Whether a program has ended, and whether the gateway ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Running,
    Ended { stopped: bool },
}

impl Exit {
    pub(crate) fn ended(self) -> bool {
        self != Exit::Running
    }
}

/// The program's stdin, written by the request that sends (no task in
/// between): one message at a time, each whole.
struct Stdin {
    pipe: tokio::sync::Mutex<ChildStdin>,
    shared: Arc<Shared>,
    /// Lines written from where no one can wait for them (the gateway's own
    /// answers to the program's requests, a cancellation), in the order
    /// they were queued: one task at a time writes them.
    later: Mutex<VecDeque<Vec<u8>>>,
    draining: AtomicBool,
}

impl Stdin {
    async fn write(&self, line: &[u8]) -> Result<(), ProgramFailed> {
        if !self.shared.alive.load(Ordering::Acquire) {
            return Err(ProgramFailed::Exited);
        }
        let mut pipe = self.pipe.lock().await;
        if pipe.write_all(line).await.is_err() || pipe.flush().await.is_err() {
            self.shared.fail_all(ProgramFailed::Exited);
            return Err(ProgramFailed::Exited);
        }
        Ok(())
    }

    /// Write from where no one can wait for it (the reader, a drop), after
    /// every line queued before it.
    fn write_later(self: &Arc<Self>, line: Vec<u8>) {
        lock(&self.later).push_back(line);
        if self.draining.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(runtime) = self.shared.runtime_left() else {
            self.draining.store(false, Ordering::Release);
            return;
        };
        let stdin = self.clone();
        runtime.spawn(async move {
            loop {
                let next = lock(&stdin.later).pop_front();
                if let Some(line) = next {
                    let _ = stdin.write(&line).await;
                    continue;
                }
                stdin.draining.store(false, Ordering::Release);
                // A line queued between the look and the flag's drop is
                // this task's still, unless another task took the flag.
                if lock(&stdin.later).is_empty() || stdin.draining.swap(true, Ordering::AcqRel) {
                    return;
                }
            }
        });
    }
}

/// A started program. Dropping the last handle stops it.
pub(crate) struct Process {
    shared: Arc<Shared>,
    stdin: Arc<Stdin>,
    next_id: AtomicU64,
    stop_timeout: Duration,
    /// Where the program's start report arrives (taken by `ready`).
    report: Mutex<Option<pipe::Receiver>>,
}

/// The longest start report read.
const REPORT_BYTES: usize = 256;
/// How long the gateway waits, past the stop timeout, for a supervisor
/// that was told to stop, before it kills the supervisor's group itself.
const SUPERVISOR_GRACE: Duration = Duration::from_secs(2);

impl Process {
    /// Take over a spawned child: its pipes to tasks of their own.
    pub(crate) fn run(
        spawned: Spawned,
        upstream: Arc<str>,
        max_line: usize,
        stop_timeout: Duration,
        metrics: Arc<StdioMetrics>,
    ) -> Option<Process> {
        let Spawned {
            mut child,
            report,
            cgroup,
        } = spawned;
        let (stdin, stdout, stderr) = (
            child.stdin.take()?,
            child.stdout.take()?,
            child.stderr.take()?,
        );
        let pid = child.id()?;
        let (exited, _) = watch::channel(Exit::Running);
        let shared = Arc::new(Shared {
            upstream,
            runtime: tokio::runtime::Handle::current(),
            supervisor: Supervisor::hold(pid),
            pid: AtomicU32::new(pid),
            pending: Mutex::default(),
            abandoned: Mutex::default(),
            overdue: Mutex::default(),
            pooled: AtomicBool::new(false),
            ignores_ping: AtomicBool::new(false),
            answered: AtomicBool::new(false),
            mid_line: AtomicBool::new(false),
            gone: watch::channel(None).0,
            call: Mutex::default(),
            listener: Mutex::default(),
            roots: Mutex::new(Arc::from(Vec::new())),
            metrics,
            alive: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            exited,
        });
        shared.metrics.started(&shared.upstream);
        let stdin = Arc::new(Stdin {
            pipe: tokio::sync::Mutex::new(stdin),
            shared: shared.clone(),
            later: Mutex::default(),
            draining: AtomicBool::new(false),
        });
        let runtime = &shared.runtime;
        runtime.spawn(read_stdout(stdout, max_line, stdin.clone(), shared.clone()));
        runtime.spawn(read_stderr(stderr, shared.clone()));
        runtime.spawn(wait_exit(child, cgroup, shared.clone()));
        Some(Process {
            shared,
            stdin,
            next_id: AtomicU64::new(1),
            stop_timeout,
            report: Mutex::new(Some(report)),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.shared.pid.load(Ordering::Relaxed)
    }

    /// Wait for the program's start report: its sandbox set up, its limits
    /// set, it is about to run. A program that ends first, or says nothing
    /// within `timeout`, did not start.
    pub(crate) async fn ready(&self, timeout: Duration) -> Result<(), String> {
        let Some(mut report) = lock(&self.report).take() else {
            return Ok(());
        };
        let mut exit = self.exit_signal();
        let mut got = Vec::new();
        let read = read_report(&mut report, &mut got);
        // The report first: a program that started and ended at once has
        // both ready, and it did start.
        let outcome = tokio::select! {
            biased;
            r = read => r,
            _ = exit.wait_for(|e| e.ended()) => None,
            () = tokio::time::sleep(timeout) => {
                self.kill();
                return Err(format!("it did not start within {timeout:?}"));
            }
        };
        let outcome = outcome.or_else(|| {
            // Ended: what it wrote before it went is still in the pipe.
            let mut buf = [0u8; REPORT_BYTES];
            while let Ok(n @ 1..) = report.try_read(&mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
            parse_report(&got)
        });
        let Some(report) = outcome.filter(|r| r["started"] == true) else {
            self.kill();
            tracing::warn!(
                upstream = %self.shared.upstream,
                supervisor = self.shared.supervisor.pid(),
                report_bytes = got.len(),
                ended = exit.borrow().ended(),
                "stdio program ended before its start report (its stderr lines are logged above)"
            );
            return Err(
                "it ended before it started (the sandbox or its limits could not be set up as configured; the gateway's log has the program's own words)".into(),
            );
        };
        if let Some(pid) = report["pid"].as_u64().and_then(|p| u32::try_from(p).ok()) {
            self.shared.pid.store(pid, Ordering::Relaxed);
        }
        Ok(())
    }

    /// What its `roots/list` is answered with from now on.
    pub(crate) fn answer_roots(&self, roots: Arc<[String]>) {
        *lock(&self.shared.roots) = roots;
    }

    /// Changes when the program has exited.
    pub(crate) fn exit_signal(&self) -> watch::Receiver<Exit> {
        self.shared.exited.subscribe()
    }

    /// Set when the program serves nothing more (its stdout ended, or it
    /// fell out of step), at once, before its supervisor is gone.
    pub(crate) fn gone_signal(&self) -> watch::Receiver<Option<Exit>> {
        self.shared.gone.subscribe()
    }

    /// Whether it has answered a request yet: until then, a request to it
    /// waits for the program's own start as well (an interpreter loading,
    /// a package fetched), which no start report can see.
    pub(crate) fn has_answered(&self) -> bool {
        self.shared.answered.load(Ordering::Acquire)
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::Acquire)
    }

    /// Resolves when the program has exited.
    pub(crate) async fn exited(&self) {
        let mut rx = self.shared.exited.subscribe();
        let _ = rx.wait_for(|e| e.ended()).await;
    }

    /// Send `message` (a JSON-RPC request) numbered by the gateway; the
    /// messages the program writes before its response go to `related`.
    /// Dropping the returned future abandons the request (the program is
    /// told with `notifications/cancelled`).
    pub(crate) async fn request(
        &self,
        message: &[u8],
        related: Option<mpsc::Sender<Bytes>>,
    ) -> Result<Bytes, ProgramFailed> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = frame::with_id(message, &id.to_string())
            .map_err(|_| ProgramFailed::OutOfStep(LineFault::NotJsonRpc))?;
        self.settle().await;
        let (tx, rx) = oneshot::channel();
        lock(&self.shared.pending).insert(id, tx);
        *lock(&self.shared.call) = related.clone();
        let mut guard = Abandon {
            process: self,
            id,
            related,
            done: false,
        };
        if let Err(e) = self.stdin.write(&line).await {
            guard.done = true;
            lock(&self.shared.pending).remove(&id);
            return Err(e);
        }
        let answer = rx.await.unwrap_or(Err(ProgramFailed::Exited));
        guard.done = true;
        self.shared.end_call(guard.related.as_ref());
        self.shared.answered.store(true, Ordering::Release);
        answer
    }

    /// Write a message that needs no answer (a notification, or the
    /// client's response to the program's own request).
    pub(crate) async fn send(&self, message: Vec<u8>) -> Result<(), ProgramFailed> {
        self.stdin.write(&frame::one_line(message)).await
    }

    /// The stream that gets what the program says outside of a call.
    pub(crate) fn listen(&self, to: Option<mpsc::Sender<Bytes>>) {
        *lock(&self.shared.listener) = to;
    }

    /// SIGTERM to its process group; its supervisor kills what is left
    /// after the stop timeout (the gateway backs it, a little later).
    pub(crate) fn stop(&self) {
        if !self.is_alive() {
            return;
        }
        self.shared.stopping.store(true, Ordering::Release);
        let Some(runtime) = self.shared.runtime_left() else {
            // No runtime left to wait in (the gateway is exiting).
            self.shared.kill_now();
            return;
        };
        self.shared.supervisor.signal_group(libc::SIGTERM);
        let shared = self.shared.clone();
        let grace = self.stop_timeout;
        runtime.spawn(async move {
            let mut rx = shared.exited.subscribe();
            if tokio::time::timeout(grace, rx.wait_for(|e| e.ended())).await.is_err() {
                let pid = shared.pid.load(Ordering::Relaxed);
                tracing::warn!(upstream = %shared.upstream, pid, "stdio program ignored SIGTERM; killed");
                shared.kill_now();
            }
        });
    }

    /// Stop it at once: it cannot be trusted to stay in step.
    pub(crate) fn kill(&self) {
        self.shared.kill_now();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A request given up before its answer: forgotten, remembered as
/// abandoned, and the program told.
struct Abandon<'a> {
    process: &'a Process,
    id: u64,
    /// Where its related messages went (the call's, while it is the call).
    related: Option<mpsc::Sender<Bytes>>,
    done: bool,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let shared = &self.process.shared;
        lock(&shared.pending).remove(&self.id);
        shared.end_call(self.related.as_ref());
        remember(&shared.abandoned, self.id);
        shared.owe(self.id, self.process.stop_timeout);
        let cancel = json!({"jsonrpc": "2.0", "method": McpMethod::Cancelled.as_str(),
            "params": {"requestId": self.id, "reason": "the client went away"}});
        self.process
            .stdin
            .write_later(frame::one_line(cancel.to_string().into_bytes()));
    }
}

/// An id whose answers, from now on, are dropped quietly.
fn remember(finished: &Mutex<VecDeque<u64>>, id: u64) {
    let mut finished = lock(finished);
    if finished.len() == ABANDONED_KEPT {
        finished.pop_front();
    }
    finished.push_back(id);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// The process's runtime, to spawn on, unless this runs where no
    /// runtime is left (the gateway is exiting: nothing spawned would run).
    fn runtime_left(&self) -> Option<&tokio::runtime::Handle> {
        tokio::runtime::Handle::try_current()
            .is_ok()
            .then_some(&self.runtime)
    }

    /// Everything of the program killed now: its supervisor kills every
    /// process below it (those that left the group too); should the
    /// supervisor not be gone soon after, its group is killed from here.
    fn kill_now(self: &Arc<Self>) {
        self.supervisor.signal(libc::SIGUSR1);
        let Some(runtime) = self.runtime_left() else {
            self.supervisor.signal_group(libc::SIGKILL);
            return;
        };
        let shared = self.clone();
        runtime.spawn(async move {
            let mut rx = shared.exited.subscribe();
            if tokio::time::timeout(SUPERVISOR_GRACE, rx.wait_for(|e| e.ended()))
                .await
                .is_err()
            {
                shared.supervisor.signal_group(libc::SIGKILL);
            }
        });
    }

    /// The program is gone or out of step: every waiting request fails.
    fn fail_all(&self, why: ProgramFailed) {
        self.alive.store(false, Ordering::Release);
        let stopped = self.stopping.load(Ordering::Acquire);
        self.gone.send_if_modified(|g| {
            let first = g.is_none();
            if first {
                *g = Some(Exit::Ended { stopped });
            }
            first
        });
        let waiting: Vec<Waiter> = lock(&self.pending).drain().map(|(_, w)| w).collect();
        for w in waiting {
            let _ = w.send(Err(why));
        }
        *lock(&self.call) = None;
        *lock(&self.listener) = None;
    }

    /// The call whose related messages went to `ours` is over. Another
    /// call's are left alone: a request given up is dropped after its
    /// process may already serve the next caller, and clearing that
    /// caller's stream would lose what the program says to it.
    fn end_call(&self, ours: Option<&mpsc::Sender<Bytes>>) {
        let mut call = lock(&self.call);
        if matches!((call.as_ref(), ours), (Some(c), Some(o)) if c.same_channel(o)) {
            *call = None;
        }
    }

    /// Where a message that is not a response goes.
    fn related(&self) -> Option<mpsc::Sender<Bytes>> {
        lock(&self.call)
            .clone()
            .or_else(|| lock(&self.listener).clone())
    }
}

async fn read_stdout(stdout: ChildStdout, max_line: usize, stdin: Arc<Stdin>, shared: Arc<Shared>) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    loop {
        let line = match frame::read_line(&mut reader, max_line, &shared.mid_line).await {
            Ok(Line::Message(line)) => line,
            Ok(Line::Fault(fault)) => {
                if fault_kept_step(&shared, fault) {
                    continue;
                }
                return;
            }
            Ok(Line::End) | Err(_) => {
                shared.fail_all(ProgramFailed::Exited);
                return;
            }
        };
        let kind = match frame::classify(&line) {
            Ok(kind) => kind,
            Err(fault) => {
                if fault_kept_step(&shared, fault) {
                    continue;
                }
                return;
            }
        };
        match kind {
            FromProgram::Response { id } => {
                let waiter = lock(&shared.pending).remove(&id);
                match waiter {
                    Some(w) => {
                        let _ = w.send(Ok(line));
                        // A second answer to it is dropped quietly, as a late one.
                        remember(&shared.abandoned, id);
                    }
                    None => {
                        shared.paid(id);
                        let late = {
                            let mut abandoned = lock(&shared.abandoned);
                            let at = abandoned.iter().position(|a| *a == id);
                            at.map(|i| abandoned.remove(i)).is_some()
                        };
                        if !late && !fault_kept_step(&shared, LineFault::UnknownId) {
                            return;
                        }
                    }
                }
            }
            FromProgram::Stray => {
                if !fault_kept_step(&shared, LineFault::UnknownId) {
                    return;
                }
            }
            FromProgram::Request { method, id } => {
                // The reader never waits on stdin: a program blocked writing
                // to us while we wait to write to it would never move again.
                if let Some(answer) = answered_here(&method, &id, &shared) {
                    stdin.write_later(answer);
                } else if let Some(to) = shared.related() {
                    let _ = to.send(line).await;
                } else {
                    let refused = json!({"jsonrpc": "2.0", "id": serde_json::from_str::<Value>(&id).unwrap_or(Value::Null),
                        "error": {"code": -32603, "message": "no client is waiting to answer this request"}});
                    stdin.write_later(frame::one_line(refused.to_string().into_bytes()));
                }
            }
            FromProgram::Notification { .. } => {
                if let Some(to) = shared.related() {
                    // A slow reader loses notifications, never stalls the program.
                    let _ = to.try_send(line);
                }
            }
        }
    }
}

/// A request the gateway answers itself: `roots/list` from the route's
/// configured roots (never the client's), and `ping`.
fn answered_here(method: &str, id: &str, shared: &Shared) -> Option<Vec<u8>> {
    let result = match McpMethod::parse(method) {
        McpMethod::Ping => json!({}),
        McpMethod::RootsList => {
            let roots = lock(&shared.roots).clone();
            let roots: Vec<Value> = roots.iter().map(|uri| json!({"uri": uri})).collect();
            json!({ "roots": roots })
        }
        _ => return None,
    };
    let id: Value = serde_json::from_str(id).ok()?;
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    Some(frame::one_line(answer.to_string().into_bytes()))
}

/// Count and log a bad line; a fault that leaves the stream out of step
/// fails the requests in flight and kills the program (`false`).
fn fault_kept_step(shared: &Arc<Shared>, fault: LineFault) -> bool {
    shared.metrics.rejected(&shared.upstream, fault);
    let (upstream, pid) = (&*shared.upstream, shared.pid.load(Ordering::Relaxed));
    if fault.keeps_step() {
        tracing::debug!(
            upstream,
            pid,
            "stdio program wrote {fault} on stdout; skipped"
        );
        return true;
    }
    tracing::warn!(
        upstream,
        pid,
        "stdio program wrote {fault} on stdout; restarting it"
    );
    shared.fail_all(ProgramFailed::OutOfStep(fault));
    shared.kill_now();
    false
}

/// stderr lines kept per line, and per second at most (a burst of more is
/// counted as dropped).
const STDERR_LINE_BYTES: usize = 2048;
const STDERR_LINES_PER_SECOND: u32 = 50;

/// Read the start report into `got` until its line ends; `None` when the
/// pipe ends first or the line is no report.
async fn read_report(report: &mut pipe::Receiver, got: &mut Vec<u8>) -> Option<Value> {
    let mut buf = [0u8; REPORT_BYTES];
    loop {
        match tokio::io::AsyncReadExt::read(report, &mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        if got.contains(&b'\n') || got.len() > REPORT_BYTES {
            return parse_report(got);
        }
    }
}

/// The report's first line, parsed.
fn parse_report(got: &[u8]) -> Option<Value> {
    let end = got.iter().position(|b| *b == b'\n')?;
    serde_json::from_slice(&got[..end]).ok()
}

async fn read_stderr(stderr: ChildStderr, shared: Arc<Shared>) {
    let pid = || shared.pid.load(Ordering::Relaxed);
    let mut reader = BufReader::new(stderr);
    let mut buf = Vec::new();
    let mut window = Instant::now();
    let (mut logged, mut dropped) = (0u32, 0u64);
    loop {
        buf.clear();
        // Read the line in bounded pieces: a line without end is no reason to hold memory.
        let read = (&mut reader)
            .take(STDERR_LINE_BYTES as u64 * 4)
            .read_until(b'\n', &mut buf)
            .await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if window.elapsed() >= Duration::from_secs(1) {
            if dropped > 0 {
                tracing::warn!(upstream = %shared.upstream, pid = pid(), dropped, "stdio program's stderr lines dropped (over {STDERR_LINES_PER_SECOND}/s)");
            }
            window = Instant::now();
            logged = 0;
            dropped = 0;
        }
        if logged >= STDERR_LINES_PER_SECOND {
            dropped += 1;
            shared.metrics.stderr_dropped(&shared.upstream);
            continue;
        }
        logged += 1;
        let text = String::from_utf8_lossy(&buf[..buf.len().min(STDERR_LINE_BYTES)]);
        // Control characters escaped: a program cannot forge log lines.
        let text: String = text.trim_end().escape_debug().collect();
        tracing::info!(upstream = %shared.upstream, pid = pid(), stderr = %text, "stdio program");
    }
}

async fn wait_exit(mut child: Child, cgroup: Option<ProgramCgroup>, shared: Arc<Shared>) {
    let status = child.wait().await;
    shared.fail_all(ProgramFailed::Exited);
    // Whatever it left behind in its group, or in its cgroup, goes with it
    // (just reaped: a member left in the group still holds its number).
    signal_group(shared.supervisor.pid(), libc::SIGKILL);
    if let Some(cgroup) = cgroup {
        let _ = tokio::task::spawn_blocking(move || cgroup.remove()).await;
    }
    let how = match &status {
        Ok(s) if s.success() => "exited",
        Ok(s) if std::os::unix::process::ExitStatusExt::signal(s).is_some() => "signalled",
        _ => "failed",
    };
    let pid = shared.pid.load(Ordering::Relaxed);
    tracing::info!(upstream = %shared.upstream, pid, status = ?status.ok(), "stdio program ended");
    shared.metrics.ended(&shared.upstream, how);
    let stopped = shared.stopping.load(Ordering::Acquire);
    let _ = shared.exited.send(Exit::Ended { stopped });
}
