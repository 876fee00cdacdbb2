//! A stdio program's HTTP face: the Streamable HTTP server the forward
//! phase talks to, served in this process. A program that speaks
//! 2026-07-28 gets a stateless face (each request on any pooled process);
//! an older one a 2025-11-25 face whose sessions each hold one process.
//! What the program says during a call comes back as an event stream; its
//! response last, under the id the request came with.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use super::frame::{self, Envelope};
use super::pool::{Lease, Owner, StdioUpstream, Unavailable, SESSION_VERSIONS};
use super::process::{Process, ProgramFailed};
use super::{Unanswered, OWNER, ROOTS, UNANSWERED};
use crate::headers::MCP_SESSION_ID;
use crate::model::Generation;
use crate::model::McpMethod;

/// Serve one request of the forward phase.
pub(super) async fn serve(
    upstream: Arc<StdioUpstream>,
    req: Request<Incoming>,
) -> Result<Response<FaceBody>, Infallible> {
    let generation = match upstream.generation().await {
        Ok(g) => g,
        Err(e) => return Ok(unavailable(&upstream, &e)),
    };
    let (parts, body) = req.into_parts();
    let owner = owner(&parts.headers, generation);
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
    };
    Ok(match generation {
        Generation::Stateless => stateless(&upstream, &parts, body, &owner).await,
        Generation::Sessions => {
            in_session(&upstream, &parts.method, &parts.headers, body, owner).await
        }
    })
}

/// Whom the request is for: the gateway's headers (never a client's: the
/// forward phase sets both on every request).
fn owner(headers: &HeaderMap, generation: Generation) -> Owner {
    let roots: Vec<String> = headers
        .get(&ROOTS)
        .and_then(|v| serde_json::from_slice(v.as_bytes()).ok())
        .unwrap_or_default();
    let principal = match generation {
        Generation::Stateless => String::new(),
        Generation::Sessions => headers
            .get(&OWNER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
    };
    Owner {
        principal,
        caps: String::new(),
        roots: Arc::from(roots),
    }
}

async fn stateless(
    upstream: &Arc<StdioUpstream>,
    parts: &http::request::Parts,
    body: Bytes,
    owner: &Owner,
) -> Response<FaceBody> {
    if parts.method != Method::POST {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    }
    let Some(id) = request_id(&body) else {
        // Notifications and responses: a stateless program has no call to give them to.
        return status(StatusCode::ACCEPTED);
    };
    match upstream.lease(owner).await {
        Ok(lease) => {
            let process = lease.process.clone();
            let within = upstream.answer_within(&parts.headers, &process);
            call(process, body, id, Held::Lease(lease), None, within).await
        }
        Err(e) => unavailable(upstream, &e),
    }
}

/// The id of a JSON-RPC request (`None`: a notification or a response).
fn request_id(body: &[u8]) -> Option<String> {
    let peek: Envelope<'_> = serde_json::from_slice(body).ok()?;
    peek.method.as_ref()?;
    peek.id.map(|id| id.get().to_owned())
}

async fn in_session(
    upstream: &Arc<StdioUpstream>,
    method: &Method,
    headers: &HeaderMap,
    body: Bytes,
    owner: Owner,
) -> Response<FaceBody> {
    let session_id = headers.get(&MCP_SESSION_ID).and_then(|v| v.to_str().ok());
    let Some(session_id) = session_id else {
        if method == Method::POST {
            return initialize(upstream, &body, owner).await;
        }
        return rpc_error(
            StatusCode::BAD_REQUEST,
            "an Mcp-Session-Id header is required",
        );
    };
    let Some(session) = upstream.sessions.get(session_id) else {
        return rpc_error(
            StatusCode::NOT_FOUND,
            "no such session (it ended, or its program did)",
        );
    };
    session.touch();
    match *method {
        Method::DELETE => {
            upstream.sessions.remove(session_id);
            status(StatusCode::OK)
        }
        Method::GET => listen(&session),
        Method::POST => {
            let within = upstream.answer_within(headers, &session.lease.process);
            session_post(&session, body, within).await
        }
        _ => status(StatusCode::METHOD_NOT_ALLOWED),
    }
}

/// `initialize`: a process of the caller's (started and initialized with
/// its capabilities when there is none idle) and a session that holds it.
async fn initialize(
    upstream: &Arc<StdioUpstream>,
    body: &[u8],
    mut owner: Owner,
) -> Response<FaceBody> {
    let Ok(peek) = serde_json::from_slice::<Envelope<'_>>(body) else {
        return rpc_error(StatusCode::BAD_REQUEST, "not a JSON-RPC message");
    };
    let (Some(id), McpMethod::Initialize) = (peek.id, peek.mcp_method()) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            "an Mcp-Session-Id header is required",
        );
    };
    let params: Value = peek
        .params
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or_default();
    let caps = params
        .get("capabilities")
        .cloned()
        .unwrap_or_else(|| json!({}));
    // serde_json's maps keep their order: equal capabilities, equal text.
    owner.caps = canonical(&caps);
    let asked = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = SESSION_VERSIONS
        .iter()
        .find(|v| **v == asked)
        .unwrap_or(&SESSION_VERSIONS[0]);
    let lease = match upstream.lease(&owner).await {
        Ok(lease) => lease,
        Err(e) => return unavailable(upstream, &e),
    };
    let mut result: Value = lease
        .initialized
        .as_ref()
        .and_then(|r| serde_json::from_slice(r).ok())
        .unwrap_or_else(|| json!({}));
    result["protocolVersion"] = json!(version);
    let session_id = upstream.sessions.open(lease);
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
        id.get(),
        result
    );
    let mut resp = json_response(Bytes::from(answer));
    if let Ok(v) = HeaderValue::from_str(&session_id) {
        resp.headers_mut().insert(MCP_SESSION_ID.clone(), v);
    }
    resp
}

/// Capabilities as text with sorted keys.
fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

async fn session_post(
    session: &Arc<Session>,
    body: Bytes,
    within: Option<Duration>,
) -> Response<FaceBody> {
    let Ok(peek) = serde_json::from_slice::<Envelope<'_>>(&body) else {
        return rpc_error(StatusCode::BAD_REQUEST, "not a JSON-RPC message");
    };
    let process = session.lease.process.clone();
    match (peek.mcp_method(), peek.id) {
        (McpMethod::Ping, Some(id)) => json_response(Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
            id.get()
        ))),
        (_, Some(id)) if peek.method.is_some() => {
            let id = id.get().to_owned();
            let slot = session.slot.clone().lock_owned().await;
            let cancel = session.calling(&id);
            call(process, body, id, Held::Slot(slot), Some(cancel), within).await
        }
        // The gateway initialized the program itself; the roots are the route's.
        (McpMethod::Initialized | McpMethod::RootsListChanged, None) => {
            status(StatusCode::ACCEPTED)
        }
        (McpMethod::Cancelled, None) => {
            let target = peek
                .params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .and_then(|p| p.get("requestId").map(Value::to_string));
            if let Some(target) = target {
                session.cancel(&target);
            }
            status(StatusCode::ACCEPTED)
        }
        // A notification, or the client's answer to the program's request.
        _ => match process.send(body.to_vec()).await {
            Ok(()) => status(StatusCode::ACCEPTED),
            Err(e) => failed(e),
        },
    }
}

/// What a call keeps until it ends: its lease (stateless) or its
/// session's turn; given back when the call's task ends.
enum Held {
    Lease(#[allow(dead_code)] Lease),
    Slot(#[allow(dead_code)] tokio::sync::OwnedMutexGuard<()>),
}

enum Item {
    Related(Bytes),
    Done(Result<Bytes, ProgramFailed>),
}

/// One request to the program. Answered in this task when the program's
/// response comes first (the usual case); when it says something first,
/// the rest of the call moves to a task of its own, which ends (and
/// abandons the request) when nobody reads its messages any more, and the
/// answer is an event stream, the response last under the request's `id`.
/// `cancel` ends the call early (the client's `notifications/cancelled`);
/// `within` (counted from here: the process has the request) ends one that
/// gets neither an answer nor a first message in time.
async fn call(
    process: Arc<Process>,
    body: Bytes,
    id: String,
    held: Held,
    cancel: Option<Arc<Notify>>,
    within: Option<Duration>,
) -> Response<FaceBody> {
    let (related, mut said) = mpsc::channel::<Bytes>(64);
    let mut asked = Box::pin(async move { process.request(&body, Some(related)).await });
    let cancelled = async move {
        match cancel {
            Some(cancel) => cancel.notified().await,
            None => std::future::pending().await,
        }
    };
    let mut cancelled = Box::pin(cancelled);
    let late = async move {
        match within {
            Some(within) => tokio::time::sleep(within).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        answer = &mut asked => {
            // What it wrote with its answer, already read, goes first.
            let mut before = Vec::new();
            while let Ok(m) = said.try_recv() {
                before.push(m);
            }
            if before.is_empty() {
                return answered(answer, &id);
            }
            let (tx, rx) = mpsc::channel::<Item>(before.len() + 1);
            let first = before.remove(0);
            for m in before {
                let _ = tx.try_send(Item::Related(m));
            }
            let _ = tx.try_send(Item::Done(answer));
            events(Some(first), rx, Some(id))
        }
        () = &mut cancelled => rpc_error(StatusCode::OK, "the client cancelled this request"),
        () = late => {
            let within = within.map(humantime::format_duration).map(|d| d.to_string()).unwrap_or_default();
            unanswered(Unanswered::Timeout, &format!("it did not answer within {within}"))
        }
        Some(first) = said.recv() => {
            let (tx, rx) = mpsc::channel::<Item>(64);
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        answer = &mut asked => {
                            let _ = tx.send(Item::Done(answer)).await;
                            break;
                        }
                        Some(m) = said.recv() => {
                            if tx.send(Item::Related(m)).await.is_err() {
                                break;
                            }
                        }
                        () = tx.closed() => break,
                        () = &mut cancelled => break,
                    }
                }
                // A request given up is abandoned (the program told) while
                // its process is still held: only then may the next caller
                // have the process.
                drop(asked);
                drop(held);
            });
            events(Some(first), rx, Some(id))
        }
    }
}

/// The program's response as the JSON answer to the request `id`.
fn answered(answer: Result<Bytes, ProgramFailed>, id: &str) -> Response<FaceBody> {
    match answer.map(|line| frame::with_id(&line, id)) {
        Ok(Ok(mut line)) => {
            line.pop();
            json_response(Bytes::from(line))
        }
        Ok(Err(_)) => failed(ProgramFailed::OutOfStep(frame::LineFault::NotJsonRpc)),
        Err(e) => failed(e),
    }
}

/// The session's own stream: what the program says outside of a call.
fn listen(session: &Arc<Session>) -> Response<FaceBody> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    session.lease.process.listen(Some(tx));
    let (items, out) = mpsc::channel::<Item>(64);
    tokio::spawn(async move {
        let mut rx = rx;
        while let Some(m) = rx.recv().await {
            if items.send(Item::Related(m)).await.is_err() {
                return;
            }
        }
    });
    events(None, out, None)
}

fn events(
    first: Option<Bytes>,
    rx: mpsc::Receiver<Item>,
    id: Option<String>,
) -> Response<FaceBody> {
    let mut resp = Response::new(FaceBody::Events(EventBody {
        first,
        rx,
        id,
        done: false,
    }));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    resp
}

/// A session's requests and the stream its program's messages go to.
#[derive(Default)]
pub(super) struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
}

pub(super) struct Session {
    lease: Lease,
    /// One request at a time: what the program says during a call is that
    /// call's (stdio has no other way to tell).
    slot: Arc<tokio::sync::Mutex<()>>,
    last_seen: Mutex<Instant>,
    /// Its calls by the id the client gave them, for `notifications/cancelled`
    /// (gone with the call).
    calls: Mutex<HashMap<String, Weak<Notify>>>,
}

impl Session {
    fn touch(&self) {
        *lock(&self.last_seen) = Instant::now();
    }

    fn calling(&self, id: &str) -> Arc<Notify> {
        let cancel = Arc::new(Notify::new());
        let mut calls = lock(&self.calls);
        calls.retain(|_, c| c.strong_count() > 0);
        calls.insert(id.to_owned(), Arc::downgrade(&cancel));
        cancel
    }

    /// The client cancelled its request `id`: the call ends, which tells
    /// the program (`notifications/cancelled` under its own number).
    fn cancel(&self, id: &str) {
        if let Some(cancel) = lock(&self.calls).remove(id).and_then(|c| c.upgrade()) {
            cancel.notify_one();
        }
    }

    /// Every call of the session ends.
    fn cancel_all(&self) {
        for (_, cancel) in lock(&self.calls).drain() {
            if let Some(cancel) = cancel.upgrade() {
                cancel.notify_one();
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Sessions {
    fn open(&self, lease: Lease) -> String {
        let mut raw = [0u8; 16];
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw);
        let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let session = Arc::new(Session {
            lease,
            slot: Arc::default(),
            last_seen: Mutex::new(Instant::now()),
            calls: Mutex::default(),
        });
        lock(&self.map).insert(id.clone(), session);
        id
    }

    fn get(&self, id: &str) -> Option<Arc<Session>> {
        let map = lock(&self.map);
        map.get(id).filter(|s| s.lease.process.is_alive()).cloned()
    }

    /// End a session (DELETE): its calls in flight end with it, so its
    /// process goes back with nothing of this session still running on it.
    fn remove(&self, id: &str) {
        let session = lock(&self.map).remove(id);
        if let Some(session) = session {
            session.cancel_all();
        }
    }

    pub(super) fn clear(&self) {
        lock(&self.map).clear();
    }

    /// Under pressure (every process taken): the session unused longest,
    /// with no call in flight and idle for `at_least`, ends and gives its
    /// process back; its client's next request gets 404 and starts over.
    pub(super) fn evict_one(&self, at_least: Duration) -> bool {
        let mut map = lock(&self.map);
        let oldest = map
            .iter()
            .filter(|(_, s)| Arc::strong_count(&s.slot) == 1)
            .map(|(id, s)| (id.clone(), *lock(&s.last_seen)))
            .filter(|(_, seen)| seen.elapsed() >= at_least)
            .min_by_key(|(_, seen)| *seen);
        match oldest {
            Some((id, _)) => map.remove(&id).is_some(),
            None => false,
        }
    }

    /// Sessions idle for `idle` (or whose program ended) give their
    /// process back.
    pub(super) fn expire(&self, idle: Duration) {
        lock(&self.map).retain(|_, s| {
            s.lease.process.is_alive()
                && (lock(&s.last_seen).elapsed() < idle || Arc::strong_count(&s.slot) > 1)
        });
    }
}

/// The face's bodies: a whole message, or an event stream.
pub(super) enum FaceBody {
    Full(Option<Bytes>),
    Events(EventBody),
}

pub(super) struct EventBody {
    first: Option<Bytes>,
    rx: mpsc::Receiver<Item>,
    /// The id the call's answer is written back under.
    id: Option<String>,
    done: bool,
}

fn event(data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

impl Body for FaceBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            FaceBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            FaceBody::Events(e) => {
                if let Some(first) = e.first.take() {
                    return Poll::Ready(Some(Ok(Frame::data(event(&first)))));
                }
                if e.done {
                    return Poll::Ready(None);
                }
                match e.rx.poll_recv(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(None) | Poll::Ready(Some(Item::Done(Err(_)))) => {
                        e.done = true;
                        Poll::Ready(None)
                    }
                    Poll::Ready(Some(Item::Related(m))) => {
                        Poll::Ready(Some(Ok(Frame::data(event(&m)))))
                    }
                    Poll::Ready(Some(Item::Done(Ok(line)))) => {
                        e.done = true;
                        let id = e.id.as_deref().unwrap_or("null");
                        match frame::with_id(&line, id) {
                            Ok(mut line) => {
                                line.pop();
                                Poll::Ready(Some(Ok(Frame::data(event(&line)))))
                            }
                            Err(_) => Poll::Ready(None),
                        }
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, FaceBody::Full(None))
    }
}

fn json_response(body: Bytes) -> Response<FaceBody> {
    let mut resp = Response::new(FaceBody::Full(Some(body)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn status(code: StatusCode) -> Response<FaceBody> {
    let mut resp = Response::new(FaceBody::Full(None));
    *resp.status_mut() = code;
    resp
}

fn rpc_error(code: StatusCode, message: &str) -> Response<FaceBody> {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}});
    let mut resp = json_response(Bytes::from(body.to_string()));
    *resp.status_mut() = code;
    resp
}

/// The program gave no answer: the forward phase reads why from the
/// header and refuses the call with its usual upstream reason.
fn unanswered(why: Unanswered, message: &str) -> Response<FaceBody> {
    let mut resp = rpc_error(StatusCode::BAD_GATEWAY, message);
    resp.headers_mut()
        .insert(UNANSWERED.clone(), HeaderValue::from_static(why.as_str()));
    resp
}

fn failed(e: ProgramFailed) -> Response<FaceBody> {
    let why = match e {
        ProgramFailed::Exited => Unanswered::Exited,
        ProgramFailed::OutOfStep(_) => Unanswered::OutOfStep,
    };
    unanswered(why, &e.to_string())
}

fn unavailable(upstream: &StdioUpstream, e: &Unavailable) -> Response<FaceBody> {
    tracing::warn!(upstream = %upstream.label, "stdio program unavailable: {e}");
    unanswered(Unanswered::Unavailable, &e.to_string())
}
