//! Starting, reloading and stopping a gateway: bind every listener, serve;
//! on a reload (SIGHUP or a changed file) validate the new config in full,
//! off the runtime's workers, and swap it in atomically; on a shutdown signal
//! stop accepting, report not-ready, and drain.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::accept::{self, BoundListener};
use crate::audit::ReloadOutcome::{Applied, Refused};
use crate::config::{
    weakened, ConfigErrors, GatewayConfig, OnWeakened, RuntimeModel, SecurityControls, Weakened,
};
use crate::connection::GatewayConnections;
use crate::layers::LayerSettings;
use crate::model::{system_clock, SharedClock};
use crate::pipeline::record::Metrics;
use crate::pipeline::{Carried, Gateway};
use crate::telemetry::Telemetry;
use crate::watch::FileWatch;
use crate::workers::{Serving, WorkerSocket};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {address} ({name}): {source}")]
    Bind {
        name: String,
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("metrics registry: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("upstream TLS setup: {0}")]
    Tls(#[from] rustls::Error),
    #[error("tracing: {0}")]
    Telemetry(#[from] crate::telemetry::TelemetryError),
    #[error("cannot start a worker thread: {0}")]
    Worker(std::io::Error),
}

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    #[error("upstream TLS setup: {0}")]
    Tls(#[from] rustls::Error),
    #[error("this gateway was not started from a config file")]
    NoSource,
    #[error("the config loader stopped unexpectedly")]
    Loader,
    /// `[reload] on_weakened = "refuse"` and the new config weakens
    /// these controls: the running config stays.
    #[error("{0}")]
    Weakened(crate::weakened::WeakenedControls),
}

/// A started gateway. Dropping it does not stop it; call [`RunningGateway::shutdown`].
pub struct RunningGateway {
    /// Bound data-plane addresses, in config order (port 0 resolved).
    pub addrs: Vec<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
    current: Arc<ArcSwap<Gateway>>,
    source: Option<PathBuf>,
    shutdown: watch::Sender<bool>,
    /// The accept loops; taken by the one drain that waits for them.
    tasks: tokio::sync::Mutex<JoinSet<()>>,
    /// The per-core workers' threads (none in the shared model).
    worker_threads: Vec<std::thread::JoinHandle<()>>,
    /// The admin listener outlives the drain so probes can watch it.
    admin: std::sync::Mutex<Option<AdminTask>>,
    metrics: Arc<Metrics>,
    /// Stamps of the config's files when the running config was loaded.
    files: std::sync::Mutex<FileWatch>,
    /// One reload at a time: two built from the same running generation
    /// would each make their own pools, and the later swap would stop the
    /// programs the earlier one had started.
    reloading: tokio::sync::Mutex<()>,
    /// The config the listeners were bound and the logger set up with:
    /// what restart-only settings are compared against.
    started: Arc<GatewayConfig>,
    /// The trace exporter, when `[tracing]` is configured (fixed at start).
    telemetry: Option<Arc<Telemetry>>,
}

/// What a reload read off the runtime's workers: the next generation's
/// config, the stamps of its files, what it keeps of the running one, the
/// controls it weakens and the running generation; or, refused, the
/// weakened controls and the stamps of the running config's files now.
type Loaded = Result<
    (
        GatewayConfig,
        FileWatch,
        Carried,
        Vec<Weakened>,
        Arc<Gateway>,
    ),
    (crate::weakened::WeakenedControls, FileWatch),
>;

/// The admin listener's stop switch and task.
type AdminTask = (watch::Sender<bool>, tokio::task::JoinHandle<()>);

/// Listeners a caller bound already (tests hand theirs over), by config order.
pub type Listeners = Vec<std::net::TcpListener>;

/// `reuse_port`: the first socket of a per-core listener's `SO_REUSEPORT`
/// group (the workers bind the others).
async fn bind(
    address: SocketAddr,
    name: &str,
    reuse_port: bool,
) -> Result<TcpListener, StartError> {
    let bind_err = |source| StartError::Bind {
        name: name.to_owned(),
        address,
        source,
    };
    let socket = match address {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }
    .map_err(bind_err)?;
    socket.set_reuseaddr(true).map_err(bind_err)?;
    if reuse_port {
        socket.set_reuseport(true).map_err(bind_err)?;
    }
    socket.bind(address).map_err(bind_err)?;
    socket.listen(4096).map_err(bind_err)
}

fn adopt(l: std::net::TcpListener, name: &str) -> Result<TcpListener, StartError> {
    let address = l
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let err = |source| StartError::Bind {
        name: name.to_owned(),
        address,
        source,
    };
    l.set_nonblocking(true).map_err(err)?;
    TcpListener::from_std(l).map_err(err)
}

impl RunningGateway {
    pub async fn start(config: GatewayConfig) -> Result<RunningGateway, StartError> {
        Self::start_with(config, Vec::new(), system_clock()).await
    }

    /// Start with listeners bound by the caller (data-plane listeners first,
    /// in config order, then the admin listener when configured; missing
    /// ones are bound here) and the clock every rule reads.
    pub async fn start_with(
        config: GatewayConfig,
        handed: Listeners,
        clock: SharedClock,
    ) -> Result<RunningGateway, StartError> {
        portcullis_dataplane::stdio::keep_gateway_private();
        let source = config.source.is_file().then(|| config.source.clone());
        let files = std::sync::Mutex::new(FileWatch::of(&config));
        let config = Arc::new(config);
        let metrics = Metrics::new()?;
        let carried = Carried::first(&config, metrics.clone(), clock);
        let gateway = Gateway::new(config.clone(), carried)?;
        gateway.throttle.start().await;
        config
            .auth
            .spawn_refresh(|issuer| metrics.jwks_fetch_failed(issuer));
        let warm = wait_until_warm(config.auth.clone(), gateway.warming());
        metrics.config_loaded(true);
        let current = Arc::new(ArcSwap::from_pointee(gateway));
        let (tx, rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let connections = Arc::new(Semaphore::new(config.limits.max_connections));
        let telemetry = config.tracing.as_ref().map(Telemetry::start).transpose()?;
        let layers = LayerSettings::new(
            config.limits.max_in_flight_requests,
            config.limits.request_timeout,
            metrics.clone(),
        )
        .with_telemetry(telemetry.clone());

        let per_core = matches!(config.runtime, RuntimeModel::PerCore { .. });
        let mut handed = handed.into_iter();
        let mut bound = Vec::new();
        let mut addrs = Vec::new();
        let mut adopted = Vec::new();
        for (index, l) in config.listeners.iter().enumerate() {
            let listener = match handed.next() {
                Some(std) => {
                    adopted.push(true);
                    adopt(std, &l.name)?
                }
                None => {
                    adopted.push(false);
                    bind(l.address, &l.name, per_core).await?
                }
            };
            addrs.push(listener.local_addr().map_err(|source| StartError::Bind {
                name: l.name.clone(),
                address: l.address,
                source,
            })?);
            bound.push(BoundListener {
                name: l.name.clone(),
                index,
                listener,
                tls: l.tls.clone().map(TlsAcceptor::from),
            });
        }
        let (admin_addr, admin) = match config.admin {
            Some(address) => {
                let listener = match handed.next() {
                    Some(std) => adopt(std, "admin")?,
                    None => bind(address, "admin", false).await?,
                };
                let addr = listener.local_addr().map_err(|source| StartError::Bind {
                    name: "admin".into(),
                    address,
                    source,
                })?;
                // Logged like the listeners: with port 0 this is how a
                // supervisor (or a test) learns the port the OS chose.
                tracing::info!(%addr, "admin listening");
                current.load().pending.serve_page_at(addr);
                let (admin_tx, admin_rx) = watch::channel(false);
                let task = tokio::spawn(crate::admin::serve(
                    listener,
                    metrics.clone(),
                    warm.clone(),
                    Some(current.clone()),
                    admin_rx,
                ));
                (Some(addr), Some((admin_tx, task)))
            }
            None => (None, None),
        };
        let serving = Serving {
            service: GatewayConnections {
                gateway: current.clone(),
                layers,
            },
            limits: config.limits,
            connections,
            shutdown: rx,
            drain: config.drain_timeout,
        };
        let mut worker_threads = Vec::new();
        match config.runtime {
            RuntimeModel::Shared => {
                for (b, addr) in bound.into_iter().zip(&addrs) {
                    tracing::info!(listener = %b.name, %addr, tls = b.tls.is_some(), "listening");
                    let s = serving.clone();
                    tasks.spawn(accept::serve(
                        b,
                        s.service,
                        s.limits,
                        s.connections,
                        s.shutdown,
                        s.drain,
                    ));
                }
            }
            RuntimeModel::PerCore { workers } => {
                let sockets = per_core_sockets(bound, &addrs, &adopted, workers)?;
                for (i, sockets) in sockets.into_iter().enumerate() {
                    let worker = crate::workers::spawn(i + 1, sockets, serving.clone())
                        .map_err(StartError::Worker)?;
                    worker_threads.push(worker.thread);
                    let stopped = worker.stopped;
                    tasks.spawn(async move {
                        let _ = stopped.await;
                    });
                }
            }
        }
        metrics.ready.store(true, Ordering::Relaxed);
        Ok(RunningGateway {
            addrs,
            admin_addr,
            current,
            source,
            shutdown: tx,
            tasks: tokio::sync::Mutex::new(tasks),
            worker_threads,
            admin: std::sync::Mutex::new(admin),
            metrics,
            files,
            reloading: tokio::sync::Mutex::new(()),
            started: config,
            telemetry,
        })
    }

    /// How many of its per-core worker threads are still running.
    pub fn workers_running(&self) -> usize {
        self.worker_threads
            .iter()
            .filter(|t| !t.is_finished())
            .count()
    }

    /// The config in force now.
    pub fn config(&self) -> Arc<GatewayConfig> {
        self.current.load().config.clone()
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Load the config file again (off the runtime's workers), validate it
    /// in full and swap it in. On any error the running config stays, and
    /// the error says why. Listener addresses, TLS and connection-level
    /// limits need a restart.
    pub async fn reload(&self) -> Result<(), ReloadError> {
        let _one = self.reloading.lock().await;
        let result = self.try_reload().await;
        match &result {
            Err(ReloadError::Weakened(_)) => self.metrics.config_refused(),
            _ => self.metrics.config_loaded(result.is_ok()),
        }
        match &result {
            Ok(()) => tracing::info!("config reloaded"),
            Err(e @ ReloadError::Weakened(_)) => {
                tracing::error!("config reload refused, keeping the running config: {e}")
            }
            // One event per problem, each with its place in the file.
            Err(ReloadError::Config(problems)) => {
                for p in problems {
                    tracing::error!(
                        file = %p.file,
                        line = p.line,
                        column = p.column,
                        field = %p.field,
                        "config reload failed, keeping the running config: {}",
                        p.message
                    );
                }
            }
            Err(e) => tracing::error!("config reload failed, keeping the running config: {e}"),
        }
        result
    }

    async fn try_reload(&self) -> Result<(), ReloadError> {
        let path = self.source.clone().ok_or(ReloadError::NoSource)?;
        let running = self.current.load_full();
        let metrics = self.metrics.clone();
        // Off the workers: reading the files, and what the next generation
        // keeps of the running one (a changed audit file is opened here).
        let loaded = tokio::task::spawn_blocking(move || -> Result<Loaded, ReloadError> {
            let mut c = GatewayConfig::load(&path)?;
            let weakened = weakened(
                &SecurityControls::of(&running.config),
                &SecurityControls::of(&c),
            );
            // The running config's own setting decides: a file cannot
            // switch the refusal off in the edit that weakens.
            if running.config.on_weakened == OnWeakened::Refuse && !weakened.is_empty() {
                let (config, audit) = (&*running.config, &running.audit);
                crate::weakened::report(&weakened, config, &metrics, audit, Refused);
                let list = crate::weakened::WeakenedControls(weakened);
                return Ok(Err((list, FileWatch::of(config))));
            }
            let stamps = FileWatch::of(&c);
            let carried = Carried::from_previous(&running, &mut c);
            Ok(Ok((c, stamps, carried, weakened, running)))
        })
        .await
        .map_err(|_| ReloadError::Loader)??;
        let (config, stamps, carried, weakened, running) = match loaded {
            Ok(next) => next,
            Err((list, seen)) => {
                // The watcher does not try the refused files again (and
                // count them again) until one of them changes again.
                if let Ok(mut files) = self.files.lock() {
                    *files = seen;
                }
                return Err(ReloadError::Weakened(list));
            }
        };
        let restart = config.restart_only_changes(&self.started);
        if !restart.is_empty() {
            tracing::warn!(
                settings = %restart.join(", "),
                "these settings changed and take effect only at the next restart; the rest of the config is reloaded"
            );
        }
        let config = Arc::new(config);
        let gateway = Gateway::new(config.clone(), carried)?;
        config
            .auth
            .spawn_refresh(|issuer| self.metrics.jwks_fetch_failed(issuer));
        let throttle = gateway.throttle.clone();
        tokio::spawn(async move { throttle.start().await });
        self.current.store(Arc::new(gateway));
        crate::weakened::report(&weakened, &config, &self.metrics, &running.audit, Applied);
        self.metrics.config_restart_required(!restart.is_empty());
        if let Ok(mut files) = self.files.lock() {
            *files = stamps;
        }
        Ok(())
    }

    /// Reload when the config file, a policy file or the state keys file
    /// changes (checked every `every` on a thread of its own, against the
    /// files as they were when the running config was loaded).
    pub fn watch_files(self: &Arc<Self>, every: Duration) {
        let me = Arc::downgrade(self);
        let handle = tokio::runtime::Handle::current();
        let spawned = std::thread::Builder::new()
            .name("portcullis-watch".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                let Some(gw) = me.upgrade() else { return };
                let changed = gw.files.lock().map(|f| f.changed()).unwrap_or_default();
                if changed.is_empty() {
                    continue;
                }
                let names: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
                tracing::info!(files = %names.join(", "), "config files changed; reloading");
                let _ = handle.block_on(gw.reload());
                if let Ok(mut f) = gw.files.lock() {
                    f.accept(&changed);
                };
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the config file watcher: {e}");
        }
    }

    /// Stop accepting, report not-ready, and wait for in-flight requests (up to
    /// the configured drain deadline).
    pub async fn shutdown(self) {
        self.drain().await;
    }

    /// The drain itself, on a shared reference: whoever else holds the
    /// gateway (the file watcher in the middle of a reload) cannot make it
    /// skip the wait for open streams.
    async fn drain(&self) {
        self.stop_accepting().await;
        {
            let mut tasks = self.tasks.lock().await;
            while tasks.join_next().await.is_some() {}
        }
        self.current.load().audit.flush().await;
        self.current.load().routes.stop_programs().await;
        if let Some(t) = self.telemetry.clone() {
            t.shutdown().await;
        }
        let admin = self.admin.lock().ok().and_then(|mut a| a.take());
        if let Some((tx, task)) = admin {
            let _ = tx.send(true);
            let _ = task.await;
        }
    }

    /// Report not-ready; serve on for the pre-stop delay (so load balancers
    /// see the 503 and move traffic away first); then stop accepting.
    async fn stop_accepting(&self) {
        self.metrics.ready.store(false, Ordering::Relaxed);
        let delay = self.current.load().config.pre_stop_delay;
        if !delay.is_zero() {
            tracing::info!(
                delay = %humantime::format_duration(delay),
                "not ready; serving on for the pre-stop delay"
            );
            tokio::time::sleep(delay).await;
        }
        let _ = self.shutdown.send(true);
    }

    /// [`RunningGateway::shutdown`] for a gateway shared with a file watcher
    /// (or anything else holding it): the same drain, whoever holds it.
    pub async fn shutdown_shared(self: Arc<Self>) {
        self.drain().await;
    }
}

/// Each worker's socket of every listener: the bound one for the first
/// worker, another of its `SO_REUSEPORT` group for each other (a listener
/// handed over by the caller is shared instead: its group is unknown).
fn per_core_sockets(
    bound: Vec<BoundListener>,
    addrs: &[SocketAddr],
    adopted: &[bool],
    workers: usize,
) -> Result<Vec<Vec<WorkerSocket>>, StartError> {
    let mut per_worker: Vec<Vec<WorkerSocket>> = (0..workers).map(|_| Vec::new()).collect();
    for ((b, &addr), &adopted) in bound.into_iter().zip(addrs).zip(adopted) {
        tracing::info!(listener = %b.name, %addr, tls = b.tls.is_some(), workers, "listening");
        let err = |source| StartError::Bind {
            name: b.name.clone(),
            address: addr,
            source,
        };
        let first = b.listener.into_std().map_err(err)?;
        for sockets in per_worker.iter_mut().skip(1) {
            let listener = if adopted {
                first.try_clone()
            } else {
                crate::workers::reuse_port(addr)
            }
            .map_err(err)?;
            sockets.push(WorkerSocket {
                name: b.name.clone(),
                index: b.index,
                listener,
                tls: b.tls.clone(),
            });
        }
        per_worker[0].push(WorkerSocket {
            name: b.name.clone(),
            index: b.index,
            listener: first,
            tls: b.tls,
        });
    }
    Ok(per_worker)
}

/// Set once every `jwks_url` scheme has its first key set, or its
/// `jwks_ready_timeout` is over (each URL still without one is logged), and
/// every `eager` stdio program's first start is over: until then `/readyz`
/// answers 503, so no JWT caller is sent here to be refused for want of
/// keys, and no caller waits for a program the gateway starts anyway.
fn wait_until_warm(
    auth: Arc<crate::identify::AuthSchemes>,
    upstreams: Option<impl std::future::Future<Output = ()> + Send + 'static>,
) -> Arc<AtomicBool> {
    let ready = Arc::new(AtomicBool::new(!auth.fetches_keys() && upstreams.is_none()));
    if ready.load(Ordering::Acquire) {
        return ready;
    }
    let flag = ready.clone();
    let started = std::time::Instant::now();
    tokio::spawn(async move {
        if auth.fetches_keys() {
            for (scheme, url) in auth.wait_for_keys(started).await {
                tracing::error!(
                    auth_scheme = %scheme,
                    %url,
                    "no JWKS key set fetched from {url} within jwks_ready_timeout; ready anyway: this scheme's callers are refused until a fetch succeeds"
                );
            }
        }
        if let Some(upstreams) = upstreams {
            upstreams.await;
        }
        flag.store(true, Ordering::Release);
    });
    ready
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = term.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
