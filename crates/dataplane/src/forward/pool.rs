//! The upstream connections of one pool, driven by the requests that use
//! them (pingora's model): an HTTP/1.1 connection is checked out, its
//! request written and its answer read in the request's own task, and it
//! goes back to the idle list when the answer's body has been read to the
//! end. No connection task, no channel hop, no per-request spawn. HTTP/2
//! (by `http2 = true`, or negotiated by ALPN) multiplexes, so its one
//! connection is driven by a task of its own, as hyper's clients do.
//!
//! Idle connections are kept last-in first-out (the warmest first), at most
//! `pool_max_idle_per_host`, each for at most `pool_idle_timeout`; a sweep
//! drops expired ones and those their server closed meanwhile. A request
//! that finds its reused connection closed before anything was written is
//! sent again on another one.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::client::legacy::connect::Connection;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tower::ServiceExt;

type BoxError = Box<dyn StdError + Send + Sync>;

/// Why a request got no response head.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    #[error("could not connect: {0}")]
    Connect(#[source] BoxError),
    #[error("{0}")]
    Http(#[from] hyper::Error),
}

/// What a pool dials: hyper's connector trait, as `tower::Service<Uri>`.
pub trait Dial: Clone + Send + Sync + 'static {
    type Io: hyper::rt::Read + hyper::rt::Write + Connection + Unpin + Send + 'static;
    fn dial(&self, target: Uri) -> impl Future<Output = Result<Self::Io, BoxError>> + Send;
}

impl<C> Dial for C
where
    C: tower::Service<Uri> + Clone + Send + Sync + 'static,
    C::Response: hyper::rt::Read + hyper::rt::Write + Connection + Unpin + Send + 'static,
    C::Future: Send,
    C::Error: Into<BoxError>,
{
    type Io = C::Response;
    fn dial(&self, target: Uri) -> impl Future<Output = Result<Self::Io, BoxError>> + Send {
        let connector = self.clone();
        async move { connector.oneshot(target).await.map_err(Into::into) }
    }
}

/// How a pool keeps its connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolLimits {
    pub(crate) idle_timeout: Duration,
    /// Per idle list.
    pub(crate) max_idle: usize,
    pub(crate) http2_only: bool,
    /// Idle lists: one per runtime that sends (see [`set_worker`]).
    pub(crate) slots: usize,
}

thread_local! {
    /// The idle list this thread's runtime uses: 0 on the shared runtime,
    /// 1.. on the per-core workers.
    static WORKER: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Called once on each per-core worker thread: its connections are its own.
pub(crate) fn set_worker(index: usize) {
    WORKER.with(|w| w.set(index));
}

/// One upstream's connections.
pub(crate) struct ConnPool<D: Dial> {
    dialer: D,
    /// `scheme://authority/`: what the dialer connects to.
    target: Uri,
    limits: PoolLimits,
    /// Idle connections by runtime, the warmest last.
    idle: Box<[IdleSlot<D::Io>]>,
    /// The multiplexed connection, once one is up.
    h2: Mutex<Option<http2::SendRequest<Full<Bytes>>>>,
    /// Set when the sweep task runs (started by the first idle connection).
    sweeping: std::sync::atomic::AtomicBool,
}

/// An HTTP/1.1 connection: the handle that sends and the state machine the
/// user drives.
struct H1<T: hyper::rt::Read + hyper::rt::Write + Unpin> {
    send: http1::SendRequest<Full<Bytes>>,
    conn: http1::Connection<T, Full<Bytes>>,
}

/// One runtime's idle connections, the warmest last.
type IdleSlot<T> = Mutex<Vec<Idle<T>>>;

struct Idle<T: hyper::rt::Read + hyper::rt::Write + Unpin> {
    h1: Box<H1<T>>,
    since: Instant,
}

impl<T: hyper::rt::Read + hyper::rt::Write + Unpin + Send> H1<T> {
    /// Let the connection make progress; `true` once it has ended (closed
    /// by either side or failed): it can carry nothing more.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        Pin::new(&mut self.conn).poll(cx).is_ready()
    }
}

/// An HTTP/1.1 connection out of the pool while its answer is read.
pub(crate) struct Lease<D: Dial> {
    h1: Box<H1<D::Io>>,
    pool: Arc<ConnPool<D>>,
    /// The connection has ended: not driven again, never given back.
    ended: bool,
}

impl<D: Dial> Lease<D> {
    fn drive(&mut self, cx: &mut Context<'_>) {
        if !self.ended {
            self.ended = self.h1.drive(cx);
        }
    }

    /// The answer was read to the end: one more turn lets the connection
    /// become idle, then it goes back.
    fn give_back(mut self, cx: &mut Context<'_>) {
        self.drive(cx);
        if !self.ended && !self.h1.send.is_closed() {
            self.pool.put(self.h1);
        }
    }
}

impl<D: Dial> ConnPool<D> {
    pub(crate) fn new(dialer: D, target: Uri, limits: PoolLimits) -> Arc<Self> {
        Arc::new(ConnPool {
            dialer,
            target,
            limits,
            idle: (0..limits.slots.max(1))
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            h2: Mutex::new(None),
            sweeping: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Send `req` (origin-form URI and `Host` for HTTP/1.1, absolute for
    /// HTTP/2: `absolute` is the latter); resolves with the response head.
    pub(crate) async fn send(
        self: &Arc<Self>,
        mut req: Request<Full<Bytes>>,
        absolute: &Uri,
    ) -> Result<Response<PooledBody<D>>, SendError> {
        if let Some(h2) = self.shared() {
            return Self::send_h2(h2, req, absolute).await;
        }
        // A reused connection may turn out closed before the request was
        // written; then it goes on the next one, or a new one.
        loop {
            let (h1, reused) = match self.checkout() {
                Some(h1) => (h1, true),
                // Boxed: the handshake's future is large and rarely needed;
                // inline, every request's future would carry its size.
                None => match Box::pin(self.connect()).await? {
                    Connected::H1(h1) => (h1, false),
                    Connected::H2(h2) => return Self::send_h2(h2, req, absolute).await,
                },
            };
            match self.send_h1(h1, req).await {
                Ok(resp) => return Ok(resp),
                Err(mut e) => match e.take_message() {
                    Some(back) if reused => req = back,
                    _ => return Err(SendError::Http(e.into_error())),
                },
            }
        }
    }

    /// The HTTP/2 connection, while it is open.
    fn shared(&self) -> Option<http2::SendRequest<Full<Bytes>>> {
        let mut h2 = self.h2.lock().unwrap_or_else(|e| e.into_inner());
        match &*h2 {
            Some(send) if !send.is_closed() => Some(send.clone()),
            Some(_) => {
                *h2 = None;
                None
            }
            None => None,
        }
    }

    async fn send_h2(
        mut h2: http2::SendRequest<Full<Bytes>>,
        mut req: Request<Full<Bytes>>,
        absolute: &Uri,
    ) -> Result<Response<PooledBody<D>>, SendError> {
        *req.uri_mut() = absolute.clone();
        req.headers_mut().remove(http::header::HOST);
        let resp = h2.send_request(req).await?;
        Ok(resp.map(|body| PooledBody { body, lease: None }))
    }

    /// Write the request and read the response head, driving the connection
    /// here; the body takes the connection on from there.
    async fn send_h1(
        self: &Arc<Self>,
        mut h1: Box<H1<D::Io>>,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<PooledBody<D>>, hyper::client::conn::TrySendError<Request<Full<Bytes>>>>
    {
        let mut answer = std::pin::pin!(h1.send.try_send_request(req));
        let mut ended = false;
        let head = std::future::poll_fn(|cx| {
            if !ended {
                ended = h1.drive(cx);
            }
            answer.as_mut().poll(cx)
        })
        .await?;
        let mut lease = Lease {
            h1,
            pool: self.clone(),
            ended,
        };
        if head.body().is_end_stream() {
            // Nothing to read (202, 204, an empty body): nobody may poll it.
            std::future::poll_fn(|cx| {
                lease.drive(cx);
                Poll::Ready(())
            })
            .await;
            if !lease.ended && !lease.h1.send.is_closed() {
                self.put(lease.h1);
            }
            return Ok(head.map(|body| PooledBody { body, lease: None }));
        }
        Ok(head.map(|body| PooledBody {
            body,
            lease: Some(lease),
        }))
    }

    /// This runtime's idle list.
    fn idle_here(&self) -> std::sync::MutexGuard<'_, Vec<Idle<D::Io>>> {
        let slot = WORKER.with(std::cell::Cell::get) % self.idle.len();
        self.idle[slot].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The warmest idle connection still open and within its idle time.
    fn checkout(&self) -> Option<Box<H1<D::Io>>> {
        let now = Instant::now();
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            let Idle { mut h1, since } = self.idle_here().pop()?;
            if now.duration_since(since) >= self.limits.idle_timeout {
                // The rest are older still.
                self.idle_here().clear();
                return None;
            }
            // A connection its server closed while idle ends here.
            if !h1.drive(&mut cx) && !h1.send.is_closed() {
                return Some(h1);
            }
        }
    }

    fn put(self: &Arc<Self>, h1: Box<H1<D::Io>>) {
        {
            let mut idle = self.idle_here();
            if idle.len() >= self.limits.max_idle {
                return;
            }
            idle.push(Idle {
                h1,
                since: Instant::now(),
            });
        }
        if !self
            .sweeping
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn(sweep(Arc::downgrade(self), self.limits.idle_timeout))),
                // Outside a runtime (a body dropped at shutdown): the next one starts it.
                Err(_) => self
                    .sweeping
                    .store(false, std::sync::atomic::Ordering::Relaxed),
            }
        }
    }

    async fn connect(self: &Arc<Self>) -> Result<Connected<D::Io>, SendError> {
        let io = self
            .dialer
            .dial(self.target.clone())
            .await
            .map_err(SendError::Connect)?;
        if self.limits.http2_only || io.connected().is_negotiated_h2() {
            let (send, conn) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(io)
                .await?;
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!("upstream HTTP/2 connection ended: {e}");
                }
            });
            *self.h2.lock().unwrap_or_else(|e| e.into_inner()) = Some(send.clone());
            return Ok(Connected::H2(send));
        }
        let (send, conn) = http1::handshake(io).await?;
        Ok(Connected::H1(Box::new(H1 { send, conn })))
    }

    /// Drop idle connections past their time, and those their server
    /// closed (their sockets would wait in CLOSE_WAIT until checked out).
    fn sweep_once(&self) {
        let now = Instant::now();
        let mut cx = Context::from_waker(Waker::noop());
        for slot in &self.idle {
            let mut idle = slot.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain_mut(|i| {
                now.duration_since(i.since) < self.limits.idle_timeout
                    && !i.h1.drive(&mut cx)
                    && !i.h1.send.is_closed()
            });
        }
    }

    /// Idle connections now (tests and the sweep).
    #[cfg(test)]
    pub(crate) fn idle_count(&self) -> usize {
        self.idle
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}

/// A new connection. Boxed: with TLS it holds rustls's state, a few KiB
/// that would otherwise be copied at each move between pool, request and
/// body.
enum Connected<T: hyper::rt::Read + hyper::rt::Write + Unpin> {
    H1(Box<H1<T>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

/// The pool's sweep, while the pool lives.
async fn sweep<D: Dial>(pool: Weak<ConnPool<D>>, every: Duration) {
    let every = every.clamp(Duration::from_millis(100), Duration::from_secs(30));
    loop {
        tokio::time::sleep(every).await;
        let Some(pool) = pool.upgrade() else { return };
        pool.sweep_once();
    }
}

/// An upstream response's body. Reading it drives the HTTP/1.1 connection
/// it came on; read to the end, it gives the connection back to the pool;
/// dropped before the end, the connection is closed (an unread answer
/// cannot be skipped on HTTP/1.1, and closing is how MCP cancels).
pub struct PooledBody<D: Dial> {
    body: Incoming,
    lease: Option<Lease<D>>,
}

impl<D: Dial> PooledBody<D> {
    /// The answer is complete (an event stream's final message has been
    /// read): what is left is the stream's end. It is read in the
    /// background, for at most [`LEFTOVER_TIME`] and [`LEFTOVER_FRAMES`],
    /// then the connection goes back; closed otherwise. (Dropping the body
    /// instead closes the connection unless its end is already here: that
    /// is how a client's cancellation reaches the upstream.)
    pub(crate) fn release(mut self) {
        if self.lease.is_none() || self.take_buffered_end() {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        drop(rt.spawn(async move {
            let rest = async {
                for _ in 0..LEFTOVER_FRAMES {
                    match http_body_util::BodyExt::frame(&mut self).await {
                        Some(Ok(_)) => continue,
                        None | Some(Err(_)) => return,
                    }
                }
            };
            let _ = tokio::time::timeout(LEFTOVER_TIME, rest).await;
        }));
    }

    /// Skip the frames already received, without waiting: `true` when that
    /// reached the end (the connection went back) or the body has no lease.
    fn take_buffered_end(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..LEFTOVER_FRAMES {
            if self.lease.is_none() {
                return true;
            }
            match Pin::new(&mut *self).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(None) => return true,
                Poll::Ready(Some(Err(_))) | Poll::Pending => return false,
            }
        }
        self.lease.is_none()
    }
}

/// How long a released body's end may take to arrive.
const LEFTOVER_TIME: Duration = Duration::from_secs(1);

impl<D: Dial> Drop for PooledBody<D> {
    /// Let go of before its end: an event stream whose final message has
    /// been read, whose end (the last chunk) is usually already here. Take
    /// what is already buffered, without waiting; at the end the connection
    /// goes back, otherwise it closes (how MCP cancels a stream).
    fn drop(&mut self) {
        if self.lease.is_some() {
            // At the end the lease goes back in `poll_frame`.
            self.take_buffered_end();
        }
    }
}

/// How many frames a released or dropped body may skip to reach its end.
const LEFTOVER_FRAMES: usize = 16;

impl<D: Dial> Body for PooledBody<D> {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let mut frame = Pin::new(&mut this.body).poll_frame(cx);
        if frame.is_pending() {
            if let Some(lease) = &mut this.lease {
                lease.drive(cx);
                frame = Pin::new(&mut this.body).poll_frame(cx);
            }
        }
        // The end is `None`, not the last frame: hyper's dispatcher ends the
        // body only once it has read all of it, and it must be driven to.
        if let Poll::Ready(None) = frame {
            if let Some(lease) = this.lease.take() {
                lease.give_back(cx);
            }
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests;
