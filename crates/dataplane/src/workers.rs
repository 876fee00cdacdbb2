//! The per-core model (`[runtime] model = "per_core"`): worker threads, each
//! running a single-threaded runtime that accepts from its own
//! `SO_REUSEPORT` socket of every listener and serves those connections to
//! the end. A connection, its requests, their upstream connections and
//! their timers stay on one thread: no work stealing, no cross-thread wake.
//! The shared runtime keeps the admin listener, reloads and background work.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{oneshot, watch, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::accept::{self, BoundListener, Connections};
use crate::config::Limits;
use crate::forward::pool;

/// One listener's socket for one worker, off any runtime until the worker
/// registers it with its own.
pub struct WorkerSocket {
    pub name: String,
    pub index: usize,
    pub listener: std::net::TcpListener,
    pub tls: Option<TlsAcceptor>,
}

/// What every worker serves with.
#[derive(Clone)]
pub struct Serving<C> {
    /// What each connection is served with.
    pub service: C,
    pub limits: Limits,
    pub connections: Arc<Semaphore>,
    pub shutdown: watch::Receiver<bool>,
    pub drain: Duration,
}

/// Another socket on `addr` in the listener's `SO_REUSEPORT` group: the
/// kernel hands each new connection to one of the group's sockets.
pub fn reuse_port(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(4096)?.into_std()
}

/// A started worker: its thread, and what resolves when it has drained.
pub struct Worker {
    pub thread: std::thread::JoinHandle<()>,
    pub stopped: oneshot::Receiver<()>,
}

/// Start worker `index` (1-based: the shared runtime's pool slot is 0) on
/// its sockets.
pub fn spawn<C: Connections>(
    index: usize,
    sockets: Vec<WorkerSocket>,
    serving: Serving<C>,
) -> std::io::Result<Worker> {
    let (done, stopped) = oneshot::channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let thread = std::thread::Builder::new()
        .name(format!("portcullis-worker-{index}"))
        .spawn(move || {
            pool::set_worker(index);
            runtime.block_on(serve(sockets, serving));
            let _ = done.send(());
        })?;
    Ok(Worker { thread, stopped })
}

async fn serve<C: Connections>(sockets: Vec<WorkerSocket>, s: Serving<C>) {
    let mut loops = tokio::task::JoinSet::new();
    for w in sockets {
        let listener = match TcpListener::from_std(w.listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(listener = %w.name, "a worker cannot take its socket: {e}");
                continue;
            }
        };
        let bound = BoundListener {
            name: w.name,
            index: w.index,
            listener,
            tls: w.tls,
        };
        loops.spawn(accept::serve(
            bound,
            s.service.clone(),
            s.limits,
            s.connections.clone(),
            s.shutdown.clone(),
            s.drain,
        ));
    }
    while loops.join_next().await.is_some() {}
}
