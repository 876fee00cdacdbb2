//! Starting, reloading and stopping a gateway: bind every listener, serve;
//! on a reload (SIGHUP or a changed file) validate the new config in full
//! and swap it in atomically; on a shutdown signal stop accepting, report
//! not-ready, and drain.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::accept::{self, BoundListener};
use crate::audit::AuditSink;
use crate::config::{ConfigError, GatewayConfig};
use crate::mrtr::replay::ReplayStore;
use crate::pipeline::record::Metrics;
use crate::pipeline::Gateway;

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
}

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("upstream TLS setup: {0}")]
    Tls(#[from] rustls::Error),
    #[error("this gateway was not started from a config file")]
    NoSource,
}

/// A started gateway. Dropping it does not stop it; call [`shutdown`].
pub struct RunningGateway {
    /// Bound data-plane addresses, in config order (port 0 resolved).
    pub addrs: Vec<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
    current: Arc<ArcSwap<Gateway>>,
    source: Option<PathBuf>,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// The admin listener outlives the drain so probes can watch it.
    admin: Option<(watch::Sender<bool>, tokio::task::JoinHandle<()>)>,
    metrics: Arc<Metrics>,
}

async fn bind(address: SocketAddr, name: &str) -> Result<TcpListener, StartError> {
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
    socket.bind(address).map_err(bind_err)?;
    socket.listen(4096).map_err(bind_err)
}

impl RunningGateway {
    pub async fn start(config: GatewayConfig) -> Result<RunningGateway, StartError> {
        let source = config.source.is_file().then(|| config.source.clone());
        let config = Arc::new(config);
        let metrics = Metrics::new()?;
        config.throttle.start().await;
        config.auth.spawn_refresh();
        let replay = Arc::new(ReplayStore::new(&config.state.replay));
        let audit = AuditSink::from_settings(config.audit.clone());
        if let Err(e) = audit.start() {
            tracing::error!("audit trail: {e}; events are counted as dropped until it opens");
        }
        let gateway = Gateway::new(config.clone(), metrics.clone(), replay, audit)?;
        metrics.config_loaded(true);
        let current = Arc::new(ArcSwap::from_pointee(gateway));
        let (tx, rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let connections = Arc::new(Semaphore::new(config.limits.max_connections));

        let mut bound = Vec::new();
        let mut addrs = Vec::new();
        for l in &config.listeners {
            let listener = bind(l.address, &l.name).await?;
            addrs.push(listener.local_addr().map_err(|source| StartError::Bind {
                name: l.name.clone(),
                address: l.address,
                source,
            })?);
            bound.push(BoundListener {
                name: l.name.clone(),
                listener,
                tls: l.tls.clone().map(TlsAcceptor::from),
            });
        }
        let (admin_addr, admin) = match config.admin {
            Some(address) => {
                let listener = bind(address, "admin").await?;
                let addr = listener.local_addr().map_err(|source| StartError::Bind {
                    name: "admin".into(),
                    address,
                    source,
                })?;
                let (admin_tx, admin_rx) = watch::channel(false);
                let task = tokio::spawn(crate::admin::serve(listener, metrics.clone(), admin_rx));
                (Some(addr), Some((admin_tx, task)))
            }
            None => (None, None),
        };
        for (b, addr) in bound.into_iter().zip(&addrs) {
            tracing::info!(listener = %b.name, %addr, tls = b.tls.is_some(), "listening");
            tasks.spawn(accept::serve(
                b,
                current.clone(),
                config.limits,
                connections.clone(),
                rx.clone(),
                config.drain_timeout,
            ));
        }
        metrics.ready.store(true, Ordering::Relaxed);
        Ok(RunningGateway {
            addrs,
            admin_addr,
            current,
            source,
            shutdown: tx,
            tasks,
            admin,
            metrics,
        })
    }

    /// The config in force now.
    pub fn config(&self) -> Arc<GatewayConfig> {
        self.current.load().config().clone()
    }

    /// Load the config file again, validate it in full and swap it in. On
    /// any error the running config stays, and the error says why. Listener
    /// addresses, TLS and connection-level limits need a restart.
    pub fn reload(&self) -> Result<(), ReloadError> {
        let result = self.try_reload();
        self.metrics.config_loaded(result.is_ok());
        match &result {
            Ok(()) => tracing::info!("config reloaded"),
            Err(e) => tracing::error!("config reload failed, keeping the running config: {e}"),
        }
        result
    }

    fn try_reload(&self) -> Result<(), ReloadError> {
        let path = self.source.as_ref().ok_or(ReloadError::NoSource)?;
        let config = GatewayConfig::load(path)?;
        let old = self.current.load_full();
        let listeners_changed = config.listeners.iter().map(|l| l.address).ne(old
            .config()
            .listeners
            .iter()
            .map(|l| l.address));
        if listeners_changed {
            tracing::warn!(
                "listener addresses changed in the config; they take effect at the next restart"
            );
        }
        let replay = if old.replay_store().serves(&config.state.replay) {
            old.replay_store().clone()
        } else {
            Arc::new(ReplayStore::new(&config.state.replay))
        };
        let audit = if old.audit().settings() == &config.audit {
            old.audit().clone()
        } else {
            let sink = AuditSink::from_settings(config.audit.clone());
            let _ = sink.start();
            sink
        };
        let config = Arc::new(config);
        let gateway = Gateway::new(config.clone(), self.metrics.clone(), replay, audit)?;
        config.auth.spawn_refresh();
        let throttle = config.throttle.clone();
        tokio::spawn(async move { throttle.start().await });
        self.current.store(Arc::new(gateway));
        Ok(())
    }

    /// Reload when the config file, a policy file or the state keys file
    /// changes (checked every `every`).
    pub fn watch_files(self: &Arc<Self>, every: Duration) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last = None;
            loop {
                tokio::time::sleep(every).await;
                let Some(gw) = me.upgrade() else { return };
                let stamp = watched_stamp(&gw.config());
                if last.is_some() && last != Some(stamp.clone()) {
                    let _ = gw.reload();
                }
                last = Some(stamp);
            }
        });
    }

    /// Stop accepting, report not-ready, and wait for in-flight requests (up to
    /// the configured drain deadline).
    pub async fn shutdown(mut self) {
        self.metrics.ready.store(false, Ordering::Relaxed);
        let _ = self.shutdown.send(true);
        while self.tasks.join_next().await.is_some() {}
        self.current.load().audit().flush().await;
        if let Some((tx, task)) = self.admin.take() {
            let _ = tx.send(true);
            let _ = task.await;
        }
    }

    /// [`shutdown`] for a gateway shared with a file watcher.
    pub async fn shutdown_shared(self: Arc<Self>) {
        match Arc::try_unwrap(self) {
            Ok(me) => me.shutdown().await,
            Err(shared) => {
                // The watcher holds only a weak reference, so this is another
                // strong holder: signal and let it finish the drain.
                shared.metrics.ready.store(false, Ordering::Relaxed);
                let _ = shared.shutdown.send(true);
            }
        }
    }
}

/// Modification times of every file the config is made of.
fn watched_stamp(config: &GatewayConfig) -> Vec<(PathBuf, Option<SystemTime>)> {
    let mut files: Vec<PathBuf> = vec![config.source.clone()];
    files.extend(config.watched_files.iter().cloned());
    let mut out: Vec<(PathBuf, Option<SystemTime>)> = Vec::new();
    for f in files {
        if f.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&f) {
                let mut inner: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
                inner.sort();
                out.extend(inner.into_iter().map(|p| (p.clone(), mtime(&p))));
            }
        }
        out.push((f.clone(), mtime(&f)));
    }
    out
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
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
