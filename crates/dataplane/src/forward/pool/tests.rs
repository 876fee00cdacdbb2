//! The pool against a real HTTP/1.1 server on loopback that counts the
//! connections it accepts and can be told to close them.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Either, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::{ConnPool, PoolLimits};

/// A server answering 202 with no body when `size` is 0, 200 with `size`
/// bytes otherwise, and on `/hold` 200 with a body that never ends; counts
/// accepted connections.
struct Server {
    url: Uri,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn server(size: usize, keep_alive: bool) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: Request<hyper::body::Incoming>| async move {
                        let held = req.uri().path() == "/hold";
                        let _ = req.into_body().collect().await;
                        let resp = match held {
                            true => Response::new(Either::Right(Held(false))),
                            false => answer(size).map(Either::Left),
                        };
                        Ok::<_, Infallible>(resp)
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(keep_alive)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Server {
        url: format!("http://{addr}/mcp").parse().unwrap(),
        accepted,
        task,
    }
}

fn answer(size: usize) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(vec![b'x'; size])));
    if size == 0 {
        *resp.status_mut() = StatusCode::ACCEPTED;
    }
    resp
}

/// A body that sends one chunk and then never ends: its end cannot be
/// buffered when the client lets go of it.
struct Held(bool);

impl Body for Held {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0 {
            return Poll::Pending;
        }
        self.0 = true;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"partial")))))
    }
}

fn pool(url: &Uri, limits: PoolLimits) -> Arc<ConnPool<HttpConnector>> {
    ConnPool::new(HttpConnector::new(), super::super::dial_target(url), limits)
}

fn limits() -> PoolLimits {
    PoolLimits {
        idle_timeout: Duration::from_secs(60),
        max_idle: 8,
        http2_only: false,
        slots: 1,
    }
}

fn request() -> Request<Full<Bytes>> {
    request_to("/mcp")
}

fn request_to(path: &'static str) -> Request<Full<Bytes>> {
    let mut req = Request::new(Full::new(Bytes::from_static(b"{}")));
    *req.method_mut() = http::Method::POST;
    *req.uri_mut() = Uri::from_static(path);
    req.headers_mut().insert(
        http::header::HOST,
        http::HeaderValue::from_static("upstream"),
    );
    req
}

async fn fetch(pool: &Arc<ConnPool<HttpConnector>>, url: &Uri) -> (StatusCode, usize) {
    let resp = pool.send(request(), url).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, body.len())
}

#[tokio::test]
async fn a_connection_read_to_the_end_is_used_again() {
    for size in [0, 10, 300 << 10] {
        let s = server(size, true).await;
        let p = pool(&s.url, limits());
        for _ in 0..5 {
            assert_eq!(fetch(&p, &s.url).await.1, size);
        }
        assert_eq!(s.accepted.load(Ordering::SeqCst), 1, "{size} bytes");
        assert_eq!(p.idle_count(), 1);
    }
}

#[tokio::test]
async fn an_answer_dropped_before_its_end_closes_its_connection() {
    let s = server(64 << 10, true).await;
    let p = pool(&s.url, limits());
    let resp = p.send(request_to("/hold"), &s.url).await.unwrap();
    drop(resp);
    assert_eq!(p.idle_count(), 0);
    assert_eq!(fetch(&p, &s.url).await.1, 64 << 10);
    assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn connections_the_server_closes_are_not_reused() {
    let s = server(10, false).await;
    let p = pool(&s.url, limits());
    for _ in 0..4 {
        assert_eq!(fetch(&p, &s.url).await, (StatusCode::OK, 10));
        // The server's FIN arrives; the sweep or the next checkout sees it.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.accepted.load(Ordering::SeqCst), 4);
    p.sweep_once();
    assert_eq!(p.idle_count(), 0);
}

/// A server that answers one request per connection as if it would keep
/// it (no `Connection: close`), then closes it a moment later: an idle
/// connection that dies in the pool.
async fn closes_when_idle() -> Server {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    let Ok(n) = stream.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                }
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nxxxxxxxxxx")
                    .await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            });
        }
    });
    Server {
        url: format!("http://{addr}/mcp").parse().unwrap(),
        accepted,
        task,
    }
}

#[tokio::test]
async fn an_idle_connection_its_server_closed_is_replaced_without_an_error() {
    let s = closes_when_idle().await;
    let p = pool(&s.url, limits());
    for _ in 0..3 {
        assert_eq!(fetch(&p, &s.url).await, (StatusCode::OK, 10));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(s.accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn idle_connections_expire_and_are_bounded() {
    let s = server(10, true).await;
    let p = pool(
        &s.url,
        PoolLimits {
            idle_timeout: Duration::from_millis(200),
            max_idle: 3,
            http2_only: false,
            slots: 1,
        },
    );
    // Eight at once: eight connections, three kept.
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let (p, url) = (p.clone(), s.url.clone());
            tokio::spawn(async move { fetch(&p, &url).await })
        })
        .collect();
    for c in calls {
        assert_eq!(c.await.unwrap(), (StatusCode::OK, 10));
    }
    assert_eq!(s.accepted.load(Ordering::SeqCst), 8);
    assert_eq!(p.idle_count(), 3);
    // Past the idle timeout the sweep has dropped them.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(p.idle_count(), 0);
    fetch(&p, &s.url).await;
    assert_eq!(s.accepted.load(Ordering::SeqCst), 9);
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    drop(listener);
    let p = pool(&url, limits());
    match p.send(request(), &url).await {
        Err(super::SendError::Connect(_)) => {}
        Err(e) => panic!("{e:?}"),
        Ok(resp) => panic!("answered {}", resp.status()),
    }
}

/// An h2c server (HTTP/2 with prior knowledge) answering 200 with `size`
/// bytes; each connection is closed after `lifetime`.
async fn h2c_server(size: usize, lifetime: Duration) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: Request<hyper::body::Incoming>| async move {
                        assert_eq!(req.version(), http::Version::HTTP_2);
                        let _ = req.into_body().collect().await;
                        Ok::<_, Infallible>(answer(size))
                    },
                );
                let conn =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service);
                let _ = tokio::time::timeout(lifetime, conn).await;
            });
        }
    });
    Server {
        url: format!("http://{addr}/mcp").parse().unwrap(),
        accepted,
        task,
    }
}

#[tokio::test]
async fn http2_requests_share_one_multiplexed_connection() {
    let s = h2c_server(20 << 10, Duration::from_secs(60)).await;
    let p = pool(
        &s.url,
        PoolLimits {
            http2_only: true,
            ..limits()
        },
    );
    // The first dials; then sixteen at once ride the same connection.
    assert_eq!(fetch(&p, &s.url).await, (StatusCode::OK, 20 << 10));
    let calls: Vec<_> = (0..16)
        .map(|_| {
            let (p, url) = (p.clone(), s.url.clone());
            tokio::spawn(async move { fetch(&p, &url).await })
        })
        .collect();
    for c in calls {
        assert_eq!(c.await.unwrap(), (StatusCode::OK, 20 << 10));
    }
    assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(p.idle_count(), 0, "HTTP/2 keeps no HTTP/1.1 idle list");
}

#[tokio::test]
async fn a_closed_http2_connection_is_dialled_again() {
    let s = h2c_server(10, Duration::from_millis(100)).await;
    let p = pool(
        &s.url,
        PoolLimits {
            http2_only: true,
            ..limits()
        },
    );
    fetch(&p, &s.url).await;
    // The server drops the connection; the shared sender sees it closed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fetch(&p, &s.url).await, (StatusCode::OK, 10));
    assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_body_dropped_with_only_its_end_left_gives_its_connection_back() {
    let s = server(100, true).await;
    let p = pool(&s.url, limits());
    for _ in 0..3 {
        let resp = p.send(request(), &s.url).await.unwrap();
        let mut body = resp.into_body();
        // Read the one data frame, not the end; let the end arrive.
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap().len(), 100);
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(body);
    }
    assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(p.idle_count(), 1);
}
