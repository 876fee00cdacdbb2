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
use arc_swap::ArcSwap;

use crate::identify::PeerIdentity;
use crate::pipeline::body::ProxyBody;
use crate::pipeline::{Gateway, Peer};

/// One bound listener, ready to serve.
pub struct BoundListener {
    pub name: String,
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

/// The per-connection service: every request of the connection shares its peer.
#[derive(Clone)]
struct ConnectionService {
    /// The current gateway; swapped on reload. A request keeps the one it
    /// started with until it ends.
    gateway: Arc<ArcSwap<Gateway>>,
    peer: Arc<Peer>,
}

type Handled = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<http::Response<ProxyBody>, Infallible>> + Send>,
>;

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for ConnectionService {
    type Response = http::Response<ProxyBody>;
    type Error = Infallible;
    type Future = Handled;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Handled {
        let gateway = self.gateway.load_full();
        let peer = self.peer.clone();
        Box::pin(async move { Ok(gateway.handle(req, &peer).await) })
    }
}

fn service(gateway: Arc<ArcSwap<Gateway>>, peer: Peer) -> ConnectionService {
    ConnectionService {
        gateway,
        peer: Arc::new(peer),
    }
}

/// Accept and serve until `shutdown` flips, then stop accepting and give open
/// connections until `drain` to finish their requests.
pub async fn serve(
    bound: BoundListener,
    gateway: Arc<ArcSwap<Gateway>>,
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
        let metrics = gateway.load().metrics().clone();
        match &bound.tls {
            None => {
                let peer = Peer {
                    addr,
                    tls: false,
                    identity: PeerIdentity::default(),
                };
                let conn = builder
                    .serve_connection(TokioIo::new(stream), service(gateway.clone(), peer))
                    .into_owned();
                let fut = graceful.watch(conn);
                tokio::spawn(async move {
                    metrics.connections.inc();
                    let _ = fut.await;
                    metrics.connections.dec();
                    drop(permit);
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let builder = builder.clone();
                let watcher = graceful.watcher();
                let handshake_timeout = limits.header_read_timeout;
                let gateway = gateway.clone();
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
                    let peer = Peer {
                        addr,
                        tls: true,
                        identity: PeerIdentity { client_cert },
                    };
                    metrics.connections.inc();
                    let conn = builder
                        .serve_connection(TokioIo::new(tls_stream), service(gateway, peer))
                        .into_owned();
                    let _ = watcher.watch(conn).await;
                    metrics.connections.dec();
                    drop(permit);
                });
            }
        }
    }
    drop(bound.listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(listener = %bound.name, "drain deadline passed; closing remaining connections");
    }
}
