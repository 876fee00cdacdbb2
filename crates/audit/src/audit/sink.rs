//! Where audit lines go: a bounded queue in front of one writer thread.
//!
//! The request path only serialises the event and `try_send`s the line: it
//! never waits on a lock held across I/O, a disk or a pipe. A full queue
//! drops the event and counts it ([`AuditSink::dropped`]); every lost line
//! is also reported by cause ([`AuditSink::report_to`]).
//!
//! *Serialisation happens on the caller's side.* The envelope is borrowed
//! from the caller's [`AuditContext`]; serialising in place costs about what
//! cloning its nine strings into an owned message would (one buffer instead
//! of up to nine allocations), the `ts` is the moment of the event rather
//! than of the write, the queue holds plain bytes (its memory is easy to
//! reason about), and the writer cannot fail on anything but I/O. An event
//! that would be dropped because the queue is already full is not
//! serialised at all.
//!
//! *The writer is a dedicated OS thread, not a tokio task.* Writing a file or
//! stdout is blocking I/O; on a runtime worker it would stall requests
//! whenever the disk or the stdout pipe is slow, and `tokio::fs` would pay
//! a `spawn_blocking` hand-off per write. The thread also works when no
//! runtime is running (tests, `portcullis check`). It drains the queue in
//! batches and hands each batch to the OS with one write, so lines are
//! never interleaved with other output. It exits (after writing everything
//! queued) when the last clone of the sink is dropped.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};

use crate::model::{AuditLoss, AuditSinkKind, Health, HealthReport};

use super::config::{AuditSettings, AuditTarget, FileSettings};
use super::config_event::GatewayAbout;
use super::drops::Drops;
use super::event::AuditEvent;
use super::line::{
    timestamp, to_line, to_object, to_unbound_line, to_unbound_object, AuditContext,
};
use super::otlp::{OtlpLogs, OtlpLogsError};

/// Events queued between the request path and the writer. At a few hundred
/// bytes a line this is a few MiB at most, and several seconds of a stalled
/// disk at thousands of events per second.
pub(super) const QUEUE_CAPACITY: usize = 8192;
/// Write to the OS once this much is batched, even if more is queued.
const BATCH_BYTES: usize = 64 * 1024;
/// How long to wait before trying again to open the file after a failure.
const REOPEN_AFTER: Duration = Duration::from_secs(1);
/// How long to keep appending to an oversize file after a failed rotation.
const ROTATE_RETRY_AFTER: Duration = Duration::from_secs(10);

enum Msg {
    Line(Vec<u8>),
    Flush(oneshot::Sender<()>),
}

/// The audit trail's output. Cheap to clone; every clone feeds the same
/// queue and writer.
#[derive(Clone)]
pub struct AuditSink {
    inner: Arc<Inner>,
}

struct Inner {
    settings: AuditSettings,
    /// `None` for `off`.
    tx: Option<mpsc::Sender<Msg>>,
    /// The queue's receiving end until the writer is started.
    pending: Mutex<Option<mpsc::Receiver<Msg>>>,
    started: AtomicBool,
    /// Start the writer on the first `emit` (off only in tests, to fill the
    /// queue on purpose).
    autostart: bool,
    dropped: Arc<Drops>,
    /// `[audit.otlp]`, once [`AuditSink::start_otlp`] has built it.
    otlp: OnceLock<OtlpLogs>,
    /// Records lost on their way to the collector (`None` without `[audit.otlp]`).
    otlp_dropped: Option<Arc<Drops>>,
}

impl std::fmt::Debug for AuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditSink")
            .field("settings", &self.inner.settings)
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl AuditSink {
    /// Validate `[audit]` (absent: stdout) and build its sink. Nothing is
    /// opened or spawned until [`start`](Self::start) or the first event.
    #[cfg(test)]
    pub(crate) fn from_config(
        raw: Option<&toml::Spanned<super::RawAudit>>,
        base: &Path,
    ) -> Result<AuditSink, super::AuditConfigError> {
        AuditSettings::from_raw(raw, base, None).map(AuditSink::from_settings)
    }

    pub fn from_settings(settings: AuditSettings) -> AuditSink {
        AuditSink::build(settings, QUEUE_CAPACITY, true)
    }

    pub fn off() -> AuditSink {
        AuditSink::from_settings(AuditSettings {
            target: AuditTarget::Off,
            otlp: None,
        })
    }

    pub(super) fn build(settings: AuditSettings, capacity: usize, autostart: bool) -> AuditSink {
        let sink = match settings.target {
            AuditTarget::Off => None,
            AuditTarget::Stdout => Some(AuditSinkKind::Stdout),
            AuditTarget::File(_) => Some(AuditSinkKind::File),
        };
        let (tx, rx) = match settings.target {
            AuditTarget::Off => (None, None),
            _ => {
                let (tx, rx) = mpsc::channel(capacity.max(1));
                (Some(tx), Some(rx))
            }
        };
        AuditSink {
            inner: Arc::new(Inner {
                tx,
                pending: Mutex::new(rx),
                started: AtomicBool::new(false),
                autostart,
                dropped: Arc::new(Drops::new(sink)),
                otlp: OnceLock::new(),
                otlp_dropped: settings
                    .otlp
                    .is_some()
                    .then(|| Arc::new(Drops::new(Some(AuditSinkKind::Otlp)))),
                settings,
            }),
        }
    }

    /// Report lost lines to `health` from now on (the first call wins, so a
    /// sink carried across reloads keeps reporting to the same place); its
    /// series start at zero.
    pub fn report_to(&self, health: &HealthReport) {
        let otlp = self.inner.otlp_dropped.as_ref();
        for drops in std::iter::once(&self.inner.dropped).chain(otlp) {
            let _ = drops.health.set(health.clone());
            if let Some(sink) = drops.sink {
                for cause in AuditLoss::ALL {
                    health.report(Health::AuditDropped(sink, *cause, 0));
                }
            }
        }
    }

    /// Start exporting events as OpenTelemetry log records through
    /// `client`, when `[audit.otlp]` is configured (otherwise, or when
    /// already started, nothing happens). Call from inside the Tokio
    /// runtime the client sends from.
    pub fn start_otlp<C: opentelemetry_http::HttpClient + 'static>(
        &self,
        client: C,
    ) -> Result<(), OtlpLogsError> {
        let (Some(settings), Some(dropped)) = (&self.inner.settings.otlp, &self.inner.otlp_dropped)
        else {
            return Ok(());
        };
        if self.inner.otlp.get().is_some() {
            return Ok(());
        }
        let logs = OtlpLogs::start(settings, client, dropped.clone())?;
        let _ = self.inner.otlp.set(logs);
        Ok(())
    }

    /// What this sink was built from (a reload keeps the running sink when
    /// the new settings are equal, so that two writers never share a file).
    pub fn settings(&self) -> &AuditSettings {
        &self.inner.settings
    }

    /// Whether events go anywhere (callers may skip building them if not).
    pub fn enabled(&self) -> bool {
        self.inner.tx.is_some() || self.inner.settings.otlp.is_some()
    }

    /// Start the writer now (idempotent; otherwise the first event does).
    /// For a file sink the file is opened here, on the calling thread, so
    /// that a path that cannot be written is reported at startup. The
    /// writer runs even when that fails: it tries to open the file again
    /// (at most once a second) and counts lines it could not write as
    /// dropped.
    pub fn start(&self) -> io::Result<()> {
        if self.inner.started.load(Ordering::Acquire) {
            return Ok(());
        }
        let Some(rx) = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Ok(());
        };
        self.inner.started.store(true, Ordering::Release);
        let dropped = self.inner.dropped.clone();
        let (out, opened) = match &self.inner.settings.target {
            AuditTarget::File(settings) => {
                let mut file = FileOut::new(settings.clone(), dropped);
                let opened = file.open();
                if let Err(e) = &opened {
                    file.failed_open(e);
                }
                (Output::File(file), opened)
            }
            _ => (Output::Stdout(StdoutOut::new(dropped)), Ok(())),
        };
        std::thread::Builder::new()
            .name("portcullis-audit".into())
            .spawn(move || run(rx, out))?;
        opened
    }

    /// Record one event. Never blocks: the line is serialised here and
    /// queued for the writer (and the log record queued for export, with
    /// `[audit.otlp]`); when a queue is full the event is dropped there
    /// and counted.
    pub fn emit(&self, ctx: &AuditContext, event: AuditEvent) {
        let otlp = self.inner.otlp.get();
        if self.inner.tx.is_none() && otlp.is_none() {
            return;
        }
        let at = SystemTime::now();
        let ts = timestamp(at);
        self.write_line(&ts, ctx, &event);
        if let Some(otlp) = otlp {
            otlp.emit(at, &event, ctx.trace, || to_object(&ts, ctx, &event));
        }
    }

    /// Record one event tied to no request (a reload's), with its own
    /// envelope; queued like any other.
    pub fn emit_unbound(&self, about: &GatewayAbout, event: AuditEvent) {
        let otlp = self.inner.otlp.get();
        if self.inner.tx.is_none() && otlp.is_none() {
            return;
        }
        let at = SystemTime::now();
        let ts = timestamp(at);
        self.queue_line(|| to_unbound_line(&ts, about, &event));
        if let Some(otlp) = otlp {
            otlp.emit(at, &event, None, || to_unbound_object(&ts, about, &event));
        }
    }

    fn write_line(&self, ts: &str, ctx: &AuditContext, event: &AuditEvent) {
        self.queue_line(|| to_line(ts, ctx, event));
    }

    /// Queue one line, serialised only when there is room for it.
    fn queue_line(&self, line: impl FnOnce() -> serde_json::Result<Vec<u8>>) {
        let Some(tx) = &self.inner.tx else { return };
        if self.inner.autostart && !self.inner.started.load(Ordering::Acquire) {
            // The error is logged by the writer's file handling; emitting
            // goes on (lines are counted as dropped until the file opens).
            let _ = self.start();
        }
        if tx.capacity() == 0 {
            self.inner.dropped.note(1, AuditLoss::QueueFull);
            return;
        }
        let Ok(line) = line() else {
            self.inner.dropped.note(1, AuditLoss::Unencodable);
            return;
        };
        match tx.try_send(Msg::Line(line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.inner.dropped.note(1, AuditLoss::QueueFull),
            // The writer is gone: nothing will write it.
            Err(TrySendError::Closed(_)) => self.inner.dropped.note(1, AuditLoss::WriteFailed),
        }
    }

    /// Events lost so far: queue full, writer gone, or the output failed
    /// (lines and log records together).
    pub(crate) fn dropped(&self) -> u64 {
        let otlp = self.inner.otlp_dropped.as_ref();
        std::iter::once(&self.inner.dropped)
            .chain(otlp)
            .map(|d| d.total.load(Ordering::Relaxed))
            .sum()
    }

    /// Wait until every event emitted before this call has been handed to
    /// the OS (and, for a file, synced to disk), and every log record
    /// exported (or its export failed). Starts the writer if it is not
    /// running. For tests and shutdown.
    pub async fn flush(&self) {
        if self.inner.otlp.get().is_some() {
            let inner = self.inner.clone();
            let exported = tokio::task::spawn_blocking(move || {
                if let Some(otlp) = inner.otlp.get() {
                    otlp.flush();
                }
            });
            let _ = exported.await;
        }
        let Some(tx) = &self.inner.tx else { return };
        let _ = self.start();
        let (ack, done) = oneshot::channel();
        if tx.send(Msg::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
    }
}

fn run(mut rx: mpsc::Receiver<Msg>, mut out: Output) {
    while let Some(msg) = rx.blocking_recv() {
        out.handle(msg);
        while let Ok(msg) = rx.try_recv() {
            out.handle(msg);
            if out.batch_full() {
                out.flush(false);
            }
        }
        out.flush(false);
    }
    out.flush(true);
}

enum Output {
    Stdout(StdoutOut),
    File(FileOut),
}

impl Output {
    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Line(line) => match self {
                Output::Stdout(o) => o.write(&line),
                Output::File(o) => o.write(&line),
            },
            Msg::Flush(ack) => {
                self.flush(true);
                let _ = ack.send(());
            }
        }
    }

    fn batch_full(&self) -> bool {
        match self {
            Output::Stdout(o) => o.buf.len() >= BATCH_BYTES,
            Output::File(o) => o
                .file
                .as_ref()
                .is_some_and(|f| f.buffer().len() >= BATCH_BYTES),
        }
    }

    fn flush(&mut self, hard: bool) {
        match self {
            Output::Stdout(o) => o.flush(),
            Output::File(o) => o.flush(hard),
        }
    }
}

struct StdoutOut {
    buf: Vec<u8>,
    lines: u64,
    failing: bool,
    dropped: Arc<Drops>,
}

impl StdoutOut {
    fn new(dropped: Arc<Drops>) -> StdoutOut {
        StdoutOut {
            buf: Vec::with_capacity(BATCH_BYTES),
            lines: 0,
            failing: false,
            dropped,
        }
    }

    fn write(&mut self, line: &[u8]) {
        self.buf.extend_from_slice(line);
        self.lines += 1;
    }

    /// One `write_all` under stdout's lock: whole lines, never interleaved.
    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let mut stdout = io::stdout().lock();
        match stdout.write_all(&self.buf).and_then(|()| stdout.flush()) {
            Ok(()) => self.failing = false,
            Err(e) => {
                if !self.failing {
                    tracing::error!(error = %e, "cannot write audit events to stdout");
                    self.failing = true;
                }
                self.dropped.note(self.lines, AuditLoss::WriteFailed);
            }
        }
        self.buf.clear();
        self.lines = 0;
    }
}

/// The file sink: append, rotate by size, reopen after failures.
struct FileOut {
    settings: FileSettings,
    file: Option<BufWriter<File>>,
    /// Bytes in the file, counting what is still buffered.
    size: u64,
    /// Lines buffered and not yet handed to the OS.
    unflushed: u64,
    retry_open_at: Option<Instant>,
    retry_rotate_at: Option<Instant>,
    failing: bool,
    dropped: Arc<Drops>,
}

impl FileOut {
    fn new(settings: FileSettings, dropped: Arc<Drops>) -> FileOut {
        FileOut {
            settings,
            file: None,
            size: 0,
            unflushed: 0,
            retry_open_at: None,
            retry_rotate_at: None,
            failing: false,
            dropped,
        }
    }

    fn open(&mut self) -> io::Result<()> {
        let file = open_append(&self.settings.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(BufWriter::with_capacity(BATCH_BYTES, file));
        self.unflushed = 0;
        self.retry_open_at = None;
        if self.failing {
            tracing::info!(path = %self.settings.path.display(), "audit file is writable again");
            self.failing = false;
        }
        Ok(())
    }

    fn failed_open(&mut self, e: &io::Error) {
        self.retry_open_at = Some(Instant::now() + REOPEN_AFTER);
        if !self.failing {
            tracing::error!(path = %self.settings.path.display(), error = %e,
                "cannot open the audit file; audit events are dropped until it can be opened");
            self.failing = true;
        }
    }

    /// An I/O error on the open file: everything buffered is lost; close it
    /// and open it again on the next line.
    fn failed_write(&mut self, e: &io::Error, lost: u64) {
        self.dropped.note(lost, AuditLoss::WriteFailed);
        self.file = None;
        self.unflushed = 0;
        if !self.failing {
            tracing::error!(path = %self.settings.path.display(), error = %e,
                "cannot write the audit file; reopening it");
            self.failing = true;
        }
    }

    fn ensure_open(&mut self) -> bool {
        if self.file.is_some() {
            return true;
        }
        if self.retry_open_at.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        match self.open() {
            Ok(()) => true,
            Err(e) => {
                self.failed_open(&e);
                false
            }
        }
    }

    fn write(&mut self, line: &[u8]) {
        let len = line.len() as u64;
        if self.ensure_open()
            && self.size > 0
            && self.size.saturating_add(len) > self.settings.max_file_bytes
            && self.retry_rotate_at.is_none_or(|t| Instant::now() >= t)
        {
            if let Err(e) = self.rotate() {
                tracing::error!(path = %self.settings.path.display(), error = %e,
                    "cannot rotate the audit file; appending to it for now");
                self.retry_rotate_at = Some(Instant::now() + ROTATE_RETRY_AFTER);
            } else {
                self.retry_rotate_at = None;
            }
        }
        if !self.ensure_open() {
            self.dropped.note(1, AuditLoss::WriteFailed);
            return;
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        match file.write_all(line) {
            Ok(()) => {
                self.size += len;
                self.unflushed += 1;
            }
            Err(e) => {
                let lost = self.unflushed + 1;
                self.failed_write(&e, lost);
            }
        }
    }

    /// `audit.jsonl` → `audit.jsonl.1` → … → `audit.jsonl.N`; the oldest
    /// is deleted; a new empty file takes the name.
    fn rotate(&mut self) -> io::Result<()> {
        if let Some(mut file) = self.file.take() {
            if let Err(e) = file.flush() {
                let lost = self.unflushed;
                self.failed_write(&e, lost);
            }
        }
        self.unflushed = 0;
        let path = &self.settings.path;
        let max = self.settings.max_files;
        ignore_missing(std::fs::remove_file(backup(path, max)))?;
        for n in (1..max).rev() {
            ignore_missing(std::fs::rename(backup(path, n), backup(path, n + 1)))?;
        }
        ignore_missing(std::fs::rename(path, backup(path, 1)))?;
        self.open()
    }

    fn flush(&mut self, hard: bool) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let result = file.flush().and_then(|()| {
            if hard {
                file.get_ref().sync_data()
            } else {
                Ok(())
            }
        });
        match result {
            Ok(()) => self.unflushed = 0,
            Err(e) => {
                let lost = self.unflushed;
                self.failed_write(&e, lost);
            }
        }
    }
}

/// `path` with `.n` appended to its file name.
pub(super) fn backup(path: &Path, n: u32) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

fn ignore_missing(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Open for appending, creating it readable and writable by its owner only.
fn open_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}
