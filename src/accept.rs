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
use crate::layers::{LayerSettings, Layered, RequestId};
use crate::pipeline::body::ProxyBody;
use crate::pipeline::{Gateway, Peer};
use hyper_util::service::TowerToHyperService;

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

/// The pipeline as a tower service for one connection: every request of
/// the connection shares its peer, and runs under the gateway that is
/// current when it starts (swapped on reload; a request keeps its own).
#[derive(Clone)]
struct PipelineService {
    gateway: Arc<ArcSwap<Gateway>>,
    peer: Arc<Peer>,
}

type Handled = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<http::Response<ProxyBody>, Infallible>> + Send>,
>;

impl tower::Service<http::Request<hyper::body::Incoming>> for PipelineService {
    type Response = http::Response<ProxyBody>;
    type Error = Infallible;
    type Future = Handled;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<hyper::body::Incoming>) -> Handled {
        let gateway = self.gateway.load_full();
        let peer = self.peer.clone();
        let id = req
            .extensions()
            .get::<RequestId>()
            .map(|r| r.0.clone())
            .unwrap_or_else(|| Arc::from("-"));
        Box::pin(async move { Ok(gateway.handle(req, peer, id).await) })
    }
}

/// The hyper service of one connection: the pipeline inside the generic
/// layers, built once for the connection (hyper clones it per request: a few
/// reference counts).
fn service(
    gateway: Arc<ArcSwap<Gateway>>,
    peer: Peer,
    layers: &LayerSettings,
) -> TowerToHyperService<Layered<PipelineService>> {
    let pipeline = PipelineService {
        gateway,
        peer: Arc::new(peer),
    };
    TowerToHyperService::new(crate::layers::around(pipeline, layers))
}

/// Accept and serve until `shutdown` flips, then stop accepting and give open
/// connections until `drain` to finish their requests.
pub async fn serve(
    bound: BoundListener,
    gateway: Arc<ArcSwap<Gateway>>,
    layers: LayerSettings,
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
        let metrics = gateway.load().metrics.clone();
        let local = stream.local_addr().unwrap_or(addr);
        match &bound.tls {
            None => {
                let peer = Peer::new(addr, local, bound.index, false, PeerIdentity::default());
                let conn = builder
                    .serve_connection(
                        TokioIo::new(stream),
                        service(gateway.clone(), peer, &layers),
                    )
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
                let layers = layers.clone();
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
                    metrics.connections.inc();
                    let conn = builder
                        .serve_connection(TokioIo::new(tls_stream), service(gateway, peer, &layers))
                        .into_owned();
                    let _ = watcher.watch(conn).await;
                    metrics.connections.dec();
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
    gateway.load().metrics.drain.cut();
    if tokio::time::timeout(FINAL_EVENT_GRACE, &mut drained)
        .await
        .is_err()
    {
        tracing::warn!(listener = %bound.name, "drain deadline passed; closing remaining connections");
    }
}

/// How long streams cut at the drain deadline get to send their last event.
const FINAL_EVENT_GRACE: Duration = Duration::from_millis(500);
