//! Starting and stopping a gateway: bind every listener, serve, and on a
//! shutdown signal stop accepting, report not-ready, and drain.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::accept::{self, BoundListener};
use crate::config::GatewayConfig;
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

/// A started gateway. Dropping it does not stop it; call [`shutdown`].
pub struct RunningGateway {
    /// Bound data-plane addresses, in config order (port 0 resolved).
    pub addrs: Vec<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
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
        let config = Arc::new(config);
        let metrics = Metrics::new()?;
        config.throttle.start().await;
        config.auth.spawn_refresh();
        let gateway = Arc::new(Gateway::new(config.clone(), metrics.clone())?);
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
                gateway.clone(),
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
            shutdown: tx,
            tasks,
            admin,
            metrics,
        })
    }

    /// Stop accepting, report not-ready, and wait for in-flight requests (up to
    /// the configured drain deadline).
    pub async fn shutdown(mut self) {
        self.metrics.ready.store(false, Ordering::Relaxed);
        let _ = self.shutdown.send(true);
        while self.tasks.join_next().await.is_some() {}
        if let Some((tx, task)) = self.admin.take() {
            let _ = tx.send(true);
            let _ = task.await;
        }
    }
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
