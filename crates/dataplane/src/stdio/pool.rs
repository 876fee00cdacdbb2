//! The processes of one stdio upstream: which generation the program
//! speaks, who each process belongs to, leases, restarts with backoff,
//! idle stops, and the stop of all on drain or when a reload drops them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::cgroup::{cgroups, ProgramCgroup};
use super::face::Sessions;
use super::metrics::StdioMetrics;
use super::process::{Exit, Process};
use super::spawn::spawn;
use crate::config::{CgroupMode, StdioSettings};
use crate::model::Generation;
use crate::model::McpMethod;

/// The protocol versions of the sessions generation a program may answer
/// `initialize` with, newest first.
pub(super) const SESSION_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const STATELESS_VERSION: &str = "2026-07-28";

/// Whom a process serves: one caller's declared capabilities and the
/// route's roots (a 2026-07-28 program: the roots only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) principal: String,
    /// The client's capabilities, as canonical JSON.
    pub(crate) caps: String,
    pub(crate) roots: Arc<[String]>,
}

/// Why no process could be had.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("the program could not be started: {0}")]
    Spawn(std::io::Error),
    #[error("the program did not start: {0}")]
    Start(String),
    #[error("the program keeps exiting; the next start is in {0:?}")]
    Backoff(Duration),
    #[error("all {0} of its processes are busy")]
    Busy(usize),
}

/// A process and whom it serves (`None`: started, not yet given to anyone).
struct Worker {
    process: Arc<Process>,
    owner: Option<Owner>,
    /// The program's `initialize` result (sessions generation).
    initialized: Option<Bytes>,
    leased: bool,
    last_used: Instant,
}

#[derive(Default)]
struct Restarts {
    crashes: u32,
    not_before: Option<Instant>,
}

/// One stdio upstream's processes. Shared by the upstreams and routes
/// built alike, and kept across reloads while its settings are unchanged.
pub struct StdioUpstream {
    /// The runtime it was made on (the shared one): its programs' pipes
    /// and tasks live there ([`Self::spawn_one`]).
    runtime: tokio::runtime::Handle,
    pub(super) label: Arc<str>,
    pub(super) settings: Arc<StdioSettings>,
    pub(super) max_line: usize,
    start_timeout: Duration,
    pub(super) metrics: Arc<StdioMetrics>,
    workers: Mutex<Vec<Worker>>,
    /// A process became free (given back, or ended).
    freed: Arc<Notify>,
    /// What the program speaks, once known (configured, or found at the
    /// first start): the one generation its face speaks.
    generation: Arc<OnceLock<Generation>>,
    probing: tokio::sync::Mutex<()>,
    restarts: Arc<Mutex<Restarts>>,
    pub(super) sessions: Sessions,
    stopped: AtomicBool,
    /// Processes being started (and initialized) right now.
    starting: AtomicUsize,
    /// One per process a pooled program may have: the callers' turns.
    turns: Arc<Semaphore>,
    /// What holds of its limits was logged.
    limits_said: AtomicBool,
    /// `true` once the eager start is over (at once when not eager):
    /// `/readyz` waits for it, as a load balancer's first caller should
    /// not be the one who waits for the program to start.
    warmed: tokio::sync::watch::Sender<bool>,
}

/// A start in progress, counted against `max_processes` until it is a
/// worker in the list (or failed).
struct Starting<'a>(&'a StdioUpstream);

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.0.starting.fetch_sub(1, Ordering::AcqRel);
        self.0.freed.notify_waiters();
    }
}

/// A process lent to one request or session; given back when dropped.
pub(crate) struct Lease {
    upstream: Arc<StdioUpstream>,
    pub(crate) process: Arc<Process>,
    pub(crate) initialized: Option<Bytes>,
    /// A pooled (2026-07-28) program's turn, given back after the process
    /// is marked idle (fields drop after `drop`).
    turn: Option<OwnedSemaphorePermit>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.process.listen(None);
        let mut workers = lock(&self.upstream.workers);
        if let Some(w) = workers
            .iter_mut()
            .find(|w| Arc::ptr_eq(&w.process, &self.process))
        {
            w.leased = false;
            w.last_used = Instant::now();
        }
        drop(workers);
        self.upstream.freed.notify_waiters();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl StdioUpstream {
    pub(crate) fn new(
        label: &str,
        settings: Arc<StdioSettings>,
        configured: Option<&[Generation]>,
        max_line: usize,
        start_timeout: Duration,
        metrics: Arc<StdioMetrics>,
    ) -> Arc<StdioUpstream> {
        // Configured generations decide; a program that speaks both is
        // used in the newer one.
        let generation = Arc::new(OnceLock::new());
        if let Some(g) = configured {
            let _ = generation.set(if g.contains(&Generation::Stateless) {
                Generation::Stateless
            } else {
                Generation::Sessions
            });
        }
        let max_processes = settings.max_processes;
        let eager = settings.eager;
        let upstream = Arc::new(StdioUpstream {
            runtime: tokio::runtime::Handle::current(),
            label: Arc::from(label),
            settings,
            max_line,
            start_timeout,
            metrics,
            workers: Mutex::default(),
            freed: Arc::new(Notify::new()),
            generation,
            probing: tokio::sync::Mutex::new(()),
            restarts: Arc::default(),
            sessions: Sessions::default(),
            stopped: AtomicBool::new(false),
            starting: AtomicUsize::new(0),
            turns: Arc::new(Semaphore::new(max_processes)),
            limits_said: AtomicBool::new(false),
            warmed: tokio::sync::watch::Sender::new(!eager),
        });
        upstream.runtime.spawn(tend(Arc::downgrade(&upstream)));
        upstream
    }

    /// How long `process` has to answer a request the forward phase sent
    /// with `headers` ([`super::answer_within`]).
    pub(super) fn answer_within(
        &self,
        headers: &http::HeaderMap,
        process: &Process,
    ) -> Option<Duration> {
        super::answer_within(headers, !process.has_answered(), self.start_timeout)
    }

    /// The generation its face speaks, shared with the bridge's knowledge
    /// of the upstream.
    pub fn face_generation(&self) -> Arc<OnceLock<Generation>> {
        self.generation.clone()
    }

    /// Start one process now (`eager = true`), so the first caller does not
    /// wait for the program to start; [`Self::warmed`] resolves when that
    /// start is over, started or not.
    pub(crate) fn start_eagerly(self: &Arc<Self>) {
        if !self.settings.eager {
            return;
        }
        let upstream = self.clone();
        self.runtime.spawn(async move {
            if let Err(e) = upstream.start_one_idle().await {
                tracing::warn!(upstream = %upstream.label, "stdio program not started eagerly: {e}");
            }
            upstream.warmed.send_replace(true);
        });
    }

    /// The eager start is over (or it is not eager).
    pub fn is_warm(&self) -> bool {
        *self.warmed.borrow()
    }

    /// Resolves once the eager start is over (at once when not eager).
    pub async fn warmed(&self) {
        let mut over = self.warmed.subscribe();
        // The sender lives as long as `self`: `wait_for` cannot fail here.
        let _ = over.wait_for(|done| *done).await;
    }

    /// One idle process nobody owns yet: the probe's, when the generation
    /// had to be found, or one started for it when it was configured.
    async fn start_one_idle(self: &Arc<Self>) -> Result<(), Unavailable> {
        self.generation().await?;
        {
            let workers = lock(&self.workers);
            let busy = workers.len() + self.starting.load(Ordering::Acquire);
            if busy > 0 {
                return Ok(());
            }
            self.starting.fetch_add(1, Ordering::AcqRel);
        }
        let _starting = Starting(self);
        let process = self.spawn_one().await?;
        lock(&self.workers).push(Worker {
            process,
            owner: None,
            initialized: None,
            leased: false,
            last_used: Instant::now(),
        });
        self.freed.notify_waiters();
        Ok(())
    }

    /// The generation the program speaks, starting one process to find
    /// out when nobody said.
    pub async fn generation(self: &Arc<Self>) -> Result<Generation, Unavailable> {
        if let Some(g) = self.generation.get() {
            return Ok(*g);
        }
        let _one = self.probing.lock().await;
        if let Some(g) = self.generation.get() {
            return Ok(*g);
        }
        let process = self.spawn_one().await?;
        let found = self.probe(&process).await;
        let _ = self.generation.set(found);
        if found == Generation::Sessions && !process.is_alive() {
            // An older program may die of the question; the next start skips it.
            return Ok(found);
        }
        let mut workers = lock(&self.workers);
        workers.push(Worker {
            process,
            owner: None,
            initialized: None,
            leased: false,
            last_used: Instant::now(),
        });
        Ok(found)
    }

    /// A process for `owner`: one of its own that is idle, a fresh one, a
    /// new one while under `max_processes` (an idle one of another owner
    /// is stopped to make room), or the first freed within the start
    /// timeout.
    pub(crate) async fn lease(self: &Arc<Self>, owner: &Owner) -> Result<Lease, Unavailable> {
        let generation = self.generation().await?;
        let deadline = tokio::time::Instant::now() + self.start_timeout;
        // Callers of a pooled program take turns in arrival order: without
        // it, a caller whose answer just freed a process takes it again
        // before those already waiting (a p99 of 100 ms at 16 callers).
        let turn = match generation {
            Generation::Stateless => {
                let turns = self.turns.clone().acquire_owned();
                match tokio::time::timeout_at(deadline, turns).await {
                    Ok(Ok(turn)) => Some(turn),
                    _ => return Err(Unavailable::Busy(self.settings.max_processes)),
                }
            }
            Generation::Sessions => None,
        };
        let mut lease = self.lease_process(owner, generation, deadline).await?;
        lease.turn = turn;
        Ok(lease)
    }

    async fn lease_process(
        self: &Arc<Self>,
        owner: &Owner,
        generation: Generation,
        deadline: tokio::time::Instant,
    ) -> Result<Lease, Unavailable> {
        loop {
            // Registered before the look, so a process freed in between wakes it.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match self.claim(owner) {
                Claim::Ready(lease) => return Ok(lease),
                Claim::Fresh(process) => {
                    let _starting = Starting(self);
                    return self.give(process, owner, generation).await;
                }
                Claim::Start => {
                    let _starting = Starting(self);
                    let process = self.spawn_one().await?;
                    return self.give(process, owner, generation).await;
                }
                Claim::Wait => {
                    // A session left open by a client that went away must
                    // not hold a process from everyone else.
                    if self.sessions.evict_one(EVICTABLE_AFTER) {
                        continue;
                    }
                    if tokio::time::timeout_at(deadline, freed).await.is_err() {
                        return Err(Unavailable::Busy(self.settings.max_processes));
                    }
                }
            }
        }
    }

    fn claim(self: &Arc<Self>, owner: &Owner) -> Claim {
        let mut workers = lock(&self.workers);
        workers.retain(|w| w.process.is_alive());
        // One still busy with a request given up on waits for its end.
        let idle = |w: &Worker| !w.leased && !w.process.overdue();
        if let Some(w) = workers
            .iter_mut()
            .find(|w| idle(w) && w.owner.as_ref() == Some(owner))
        {
            w.leased = true;
            return Claim::Ready(Lease {
                upstream: self.clone(),
                process: w.process.clone(),
                initialized: w.initialized.clone(),
                turn: None,
            });
        }
        if let Some(i) = workers.iter().position(|w| idle(w) && w.owner.is_none()) {
            // Out of the list while it is given: counted as starting.
            self.starting.fetch_add(1, Ordering::AcqRel);
            return Claim::Fresh(workers.remove(i).process);
        }
        // Processes being started count: they are not in the list yet.
        if workers.len() + self.starting.load(Ordering::Acquire) >= self.settings.max_processes {
            match workers.iter().position(idle) {
                Some(i) => {
                    let other = workers.remove(i);
                    other.process.stop();
                }
                None => return Claim::Wait,
            }
        }
        self.starting.fetch_add(1, Ordering::AcqRel);
        Claim::Start
    }

    /// Make `process` `owner`'s: initialized with its capabilities when
    /// the program keeps sessions; then leased.
    async fn give(
        self: &Arc<Self>,
        process: Arc<Process>,
        owner: &Owner,
        generation: Generation,
    ) -> Result<Lease, Unavailable> {
        process.answer_roots(owner.roots.clone());
        let initialized = match generation {
            Generation::Stateless => {
                process.set_pooled();
                None
            }
            Generation::Sessions => Some(self.initialize(&process, owner).await?),
        };
        lock(&self.workers).push(Worker {
            process: process.clone(),
            owner: Some(owner.clone()),
            initialized: initialized.clone(),
            leased: true,
            last_used: Instant::now(),
        });
        Ok(Lease {
            upstream: self.clone(),
            process,
            initialized,
            turn: None,
        })
    }

    /// Start one process and wait for its start report, on the runtime
    /// this upstream was made on (the shared one): the program's pipes and
    /// tasks are registered there, not with the per-core worker that asked,
    /// whose runtime stops before the programs do.
    async fn spawn_one(self: &Arc<Self>) -> Result<Arc<Process>, Unavailable> {
        let upstream = self.clone();
        let started = self
            .runtime
            .spawn(async move { upstream.spawn_here().await });
        started
            .await
            .unwrap_or_else(|e| Err(Unavailable::Start(format!("the start did not finish: {e}"))))
    }

    async fn spawn_here(&self) -> Result<Arc<Process>, Unavailable> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(Unavailable::Start("the gateway is stopping".into()));
        }
        if let Some(at) = lock(&self.restarts).not_before {
            let now = Instant::now();
            if at > now {
                return Err(Unavailable::Backoff(at - now));
            }
        }
        let started = match self.cgroup().await {
            Ok(cgroup) => spawn(&self.settings, cgroup).map_err(Unavailable::Spawn),
            Err(e) => Err(e),
        };
        let spawned = started.inspect_err(|e| {
            tracing::error!(upstream = %self.label, "stdio program did not start: {e}");
        })?;
        let process = Process::run(
            spawned,
            self.label.clone(),
            self.max_line,
            self.settings.stop_timeout,
            self.metrics.clone(),
        )
        .ok_or_else(|| Unavailable::Start("its pipes could not be opened".into()))?;
        self.runtime.spawn(watch_exit(
            process.gone_signal(),
            self.restarts.clone(),
            self.label.clone(),
            self.freed.clone(),
        ));
        if let Err(why) = process.ready(self.start_timeout).await {
            tracing::error!(upstream = %self.label, "stdio program did not start: {why}");
            return Err(Unavailable::Start(why));
        }
        tracing::info!(upstream = %self.label, pid = process.pid(), "stdio program started");
        Ok(Arc::new(process))
    }

    /// The program's own cgroup, as `cgroup` asks: one where it can be
    /// made (`auto`: the kernel's per-process limits otherwise, said once),
    /// one or no start (`required`), none (`off`).
    async fn cgroup(&self) -> Result<Option<ProgramCgroup>, Unavailable> {
        let mode = self.settings.cgroup;
        if mode == CgroupMode::Off {
            return Ok(None);
        }
        let limits = self.settings.limits;
        let made = tokio::task::spawn_blocking(move || {
            let found = cgroups();
            found
                .make(&limits)
                .map_err(|e| (e.to_string(), found.missing()))
        })
        .await
        .map_err(|e| Unavailable::Start(e.to_string()))?;
        match (mode, made) {
            (CgroupMode::Required, Ok(c)) if !(c.memory && c.tasks) => {
                Err(Unavailable::Start(format!(
                    "cgroup = \"required\", and its cgroup would not keep every limit ({})",
                    cgroups().missing()
                )))
            }
            (CgroupMode::Required, Err((why, _))) => Err(Unavailable::Start(format!(
                "cgroup = \"required\", and no cgroup can be made: {why}"
            ))),
            (_, Ok(c)) => {
                if !(c.memory && c.tasks) {
                    self.said_once(|| {
                        format!(
                            "its cgroup keeps part of its limits only ({})",
                            cgroups().missing()
                        )
                    });
                }
                Ok(Some(c))
            }
            (_, Err((why, _))) => {
                self.said_once(|| {
                    format!("no cgroup ({why}): its memory and task limits are per process")
                });
                Ok(None)
            }
        }
    }

    /// Warn about the program's limits once per upstream.
    fn said_once(&self, what: impl FnOnce() -> String) {
        if !self.limits_said.swap(true, Ordering::AcqRel) {
            tracing::warn!(upstream = %self.label, "stdio program: {}", what());
        }
    }

    /// Ask `server/discover`; an error, silence or a version list without
    /// 2026-07-28 means the older generation.
    async fn probe(&self, process: &Process) -> Generation {
        let discover = json!({"jsonrpc": "2.0", "id": 0, "method": McpMethod::ServerDiscover.as_str(), "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
            "io.modelcontextprotocol/clientInfo": client_info(),
            "io.modelcontextprotocol/clientCapabilities": {}}}});
        let wait = self.start_timeout.min(Duration::from_secs(3));
        let asked =
            tokio::time::timeout(wait, process.request(discover.to_string().as_bytes(), None))
                .await;
        let speaks = asked
            .ok()
            .and_then(Result::ok)
            .and_then(|line| serde_json::from_slice::<Value>(&line).ok())
            .is_some_and(|m| {
                m.pointer("/result/supportedVersions")
                    .and_then(Value::as_array)
                    .is_some_and(|v| v.iter().any(|v| v == STATELESS_VERSION))
            });
        let generation = if speaks {
            Generation::Stateless
        } else {
            Generation::Sessions
        };
        tracing::info!(upstream = %self.label, pid = process.pid(), generation = generation.as_str(), "stdio program's generation");
        generation
    }

    /// The gateway's own `initialize`, with the owner's capabilities (its
    /// roots the route's): the program's result, checked.
    async fn initialize(&self, process: &Process, owner: &Owner) -> Result<Bytes, Unavailable> {
        let mut caps: Value = serde_json::from_str(&owner.caps).unwrap_or_else(|_| json!({}));
        if let Some(caps) = caps.as_object_mut() {
            caps.remove("roots");
            if !owner.roots.is_empty() {
                caps.insert("roots".into(), json!({"listChanged": false}));
            }
        }
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": McpMethod::Initialize.as_str(), "params": {
            "protocolVersion": SESSION_VERSIONS[0], "capabilities": caps, "clientInfo": client_info()}});
        let failed = |why: String| {
            process.kill();
            Unavailable::Start(why)
        };
        let answer = tokio::time::timeout(
            self.start_timeout,
            process.request(init.to_string().as_bytes(), None),
        )
        .await
        .map_err(|_| failed("no answer to initialize in time".into()))?
        .map_err(|e| failed(e.to_string()))?;
        let message: Value = serde_json::from_slice(&answer)
            .map_err(|_| failed("initialize answered with bad JSON".into()))?;
        let Some(result) = message.get("result") else {
            return Err(failed("initialize was refused".into()));
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !SESSION_VERSIONS.contains(&version) {
            return Err(failed(format!(
                "it answered initialize with protocol version {:?}, which the gateway does not speak",
                version.chars().take(32).collect::<String>()
            )));
        }
        process
            .send(
                json!({"jsonrpc": "2.0", "method": McpMethod::Initialized.as_str()})
                    .to_string()
                    .into_bytes(),
            )
            .await
            .map_err(|e| failed(e.to_string()))?;
        serde_json::to_vec(result)
            .map(Bytes::from)
            .map_err(|e| failed(e.to_string()))
    }

    /// Stop every process (drain, or a reload that dropped the upstream).
    pub fn stop_all(&self) {
        self.stopped.store(true, Ordering::Release);
        for w in lock(&self.workers).iter() {
            w.process.stop();
        }
        self.sessions.clear();
    }

    /// Resolves once every process of this upstream has exited.
    pub async fn stopped(&self) {
        let all: Vec<Arc<Process>> = lock(&self.workers)
            .iter()
            .map(|w| w.process.clone())
            .collect();
        for p in all {
            p.exited().await;
        }
    }

    /// Idle processes past `idle_timeout` stopped (one kept when eager).
    fn stop_idle(&self) {
        let idle_for = self.settings.idle_timeout;
        let mut workers = lock(&self.workers);
        workers.retain(|w| w.process.is_alive());
        let keep = usize::from(self.settings.eager);
        let mut alive = workers.len();
        workers.retain(|w| {
            let stale = !w.leased && w.last_used.elapsed() >= idle_for && alive > keep;
            if stale {
                alive -= 1;
                w.process.stop();
            }
            !stale
        });
    }
}

enum Claim {
    Ready(Lease),
    Fresh(Arc<Process>),
    Start,
    Wait,
}

fn client_info() -> Value {
    json!({"name": "portcullis", "version": env!("CARGO_PKG_VERSION")})
}

/// How long a session must have been idle before a caller who finds
/// every process taken may end it.
const EVICTABLE_AFTER: Duration = Duration::from_secs(2);

/// A process that ends within this long of its start counts as a crash.
const CRASH_WITHIN: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A process's end: a crash soon after its start pushes the next start
/// back (1 s, 2 s, 4 s… up to a minute); a process that ran for a while
/// clears the count.
async fn watch_exit(
    mut gone: tokio::sync::watch::Receiver<Option<Exit>>,
    restarts: Arc<Mutex<Restarts>>,
    label: Arc<str>,
    freed: Arc<Notify>,
) {
    let started = Instant::now();
    let Ok(Some(exit)) = gone.wait_for(Option::is_some).await.map(|e| *e) else {
        return;
    };
    // Its place is free: a caller waiting for one may start another.
    freed.notify_waiters();
    let mut r = lock(&restarts);
    if exit == (Exit::Ended { stopped: true }) {
        return;
    }
    if started.elapsed() >= CRASH_WITHIN {
        *r = Restarts::default();
        return;
    }
    r.crashes = r.crashes.saturating_add(1);
    let wait = Duration::from_secs(1u64 << (r.crashes - 1).min(6)).min(MAX_BACKOFF);
    r.not_before = Some(Instant::now() + wait);
    tracing::warn!(upstream = %label, crashes = r.crashes, "stdio program ended {:?} after its start; next start in {wait:?}", started.elapsed());
}

/// The upstream's housekeeping: idle processes and sessions.
async fn tend(upstream: std::sync::Weak<StdioUpstream>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Some(upstream) = upstream.upgrade() else {
            return;
        };
        if upstream.stopped.load(Ordering::Acquire) {
            return;
        }
        upstream.stop_idle();
        upstream.sessions.expire(upstream.settings.idle_timeout);
    }
}

impl Drop for StdioUpstream {
    fn drop(&mut self) {
        self.stop_all();
    }
}
