//! The pipeline as what a listener serves (`portcullis_dataplane::accept::Connections`):
//! each connection's requests go through the generic layers, then the gateway that is
//! current when each request starts (swapped on reload; a request keeps its own).

use std::convert::Infallible;
use std::sync::Arc;

use arc_swap::ArcSwap;
use hyper_util::service::TowerToHyperService;
use portcullis_dataplane::accept::Connections;

use crate::layers::{LayerSettings, Layered, RequestId};
use crate::pipeline::body::ProxyBody;
use crate::pipeline::{Gateway, Peer};

/// Every listener's connections: the current gateway inside the layers.
#[derive(Clone)]
pub struct GatewayConnections {
    pub gateway: Arc<ArcSwap<Gateway>>,
    pub layers: LayerSettings,
}

impl Connections for GatewayConnections {
    type Body = ProxyBody;
    type Service = TowerToHyperService<Layered<PipelineService>>;

    /// Built once for the connection (hyper clones it per request: a few
    /// reference counts).
    fn service(&self, peer: Peer) -> Self::Service {
        let pipeline = PipelineService {
            gateway: self.gateway.clone(),
            peer: Arc::new(peer),
        };
        TowerToHyperService::new(crate::layers::around(pipeline, &self.layers))
    }

    fn open_connections(&self) -> prometheus::IntGauge {
        self.gateway.load().metrics.connections.clone()
    }

    fn cut_streams(&self) {
        self.gateway.load().metrics.drain.cut();
    }
}

/// The pipeline as a tower service for one connection: every request of
/// the connection shares its peer.
#[derive(Clone)]
pub struct PipelineService {
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
        // The handler's own future, boxed once (a wrapping block would hold
        // it and copy it again).
        Box::pin(gateway.handle(req, peer, id))
    }
}
