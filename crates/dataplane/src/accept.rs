//! Phase: accept. TCP or TLS connections, HTTP/1.1 and HTTP/2 (ALPN on TLS,
//! prior knowledge on plain TCP), with limits on connections, header size and
//! header read time, and graceful draining on shutdown.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::config::Limits;
use crate::identify::PeerIdentity;
pub(crate) use crate::peer::Peer;

/// One bound listener, ready to serve.
pub struct BoundListener {
    pub name: String,
    /// Index in the config's listeners.
    pub index: usize,
    pub listener: TcpListener,
    pub tls: Option<TlsAcceptor>,
}

fn http_builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    b.http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(limits.http2_max_concurrent_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)));
    b
}

/// What a listener serves its connections with (the pipeline crate builds it): each
/// connection's service, the gauge of open connections, and the cut of open streams at
/// the drain deadline. Cloned once per listener loop.
pub trait Connections: Clone + Send + Sync + 'static {
    /// The response body of every request.
    type Body: http_body::Body<Data = bytes::Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + 'static;
    /// The service one connection's requests go through, built once for it.
    type Service: hyper::service::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<Self::Body>,
            Error = Infallible,
            Future: Send + 'static,
        > + Send
        + 'static;

    fn service(&self, peer: Peer) -> Self::Service;

    /// The open connections' gauge, read when a connection is accepted (the one
    /// it is counted in until it closes).
    fn open_connections(&self) -> prometheus::IntGauge;

    /// The drain deadline has passed: open event streams send their last event.
    fn cut_streams(&self);
}

/// Accept and serve until `shutdown` flips, then stop accepting and give open
/// connections until `drain` to finish their requests.
pub async fn serve<C: Connections>(
    bound: BoundListener,
    serving: C,
    limits: Limits,
    connections: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
    drain: Duration,
) {
    let builder = Arc::new(http_builder(&limits));
    let graceful = GracefulShutdown::new();
    loop {
        let permit = tokio::select! {
            _ = shutdown.changed() => break,
            p = connections.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        let (stream, addr) = tokio::select! {
            _ = shutdown.changed() => break,
            r = bound.listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(listener = %bound.name, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let open = serving.open_connections();
        let local = stream.local_addr().unwrap_or(addr);
        match &bound.tls {
            None => {
                let peer = Peer::new(addr, local, bound.index, false, PeerIdentity::default());
                let conn = builder
                    .serve_connection(TokioIo::new(stream), serving.service(peer))
                    .into_owned();
                let fut = graceful.watch(conn);
                tokio::spawn(async move {
                    open.inc();
                    let _ = fut.await;
                    open.dec();
                    drop(permit);
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let builder = builder.clone();
                let watcher = graceful.watcher();
                let handshake_timeout = limits.header_read_timeout;
                let serving = serving.clone();
                let index = bound.index;
                tokio::spawn(async move {
                    let Ok(Ok(tls_stream)) =
                        tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await
                    else {
                        drop(permit);
                        return;
                    };
                    // rustls has verified the chain against the listener's client CA.
                    let client_cert = tls_stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .map(|c| Arc::<[u8]>::from(c.as_ref()));
                    let peer = Peer::new(addr, local, index, true, PeerIdentity { client_cert });
                    open.inc();
                    let conn = builder
                        .serve_connection(TokioIo::new(tls_stream), serving.service(peer))
                        .into_owned();
                    let _ = watcher.watch(conn).await;
                    open.dec();
                    drop(permit);
                });
            }
        }
    }
    drop(bound.listener);
    let mut drained = std::pin::pin!(graceful.shutdown());
    if tokio::time::timeout(drain, &mut drained).await.is_ok() {
        return;
    }
    // Open event streams end with a final shutting_down event; a moment
    // to write it, then whatever is left is closed.
    serving.cut_streams();
    if tokio::time::timeout(FINAL_EVENT_GRACE, &mut drained)
        .await
        .is_err()
    {
        tracing::warn!(listener = %bound.name, "drain deadline passed; closing remaining connections");
    }
}

/// How long streams cut at the drain deadline get to send their last event.
const FINAL_EVENT_GRACE: Duration = Duration::from_millis(500);
