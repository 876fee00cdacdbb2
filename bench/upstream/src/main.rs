//! `bench-upstream`: a minimal MCP answerer (protocol 2026-07-28) for
//! `bench/load.sh` and `bench/memory.sh`. It is the one upstream behind every
//! target of the load benchmark (direct, nginx, Portcullis), and it is cheap
//! on purpose: the real SDK server of `portcullis demo` costs several times
//! what the proxies cost, which hides the difference being measured.
//!
//! It answers `server/discover` with a constant 2026-07-28 discovery result
//! (`supportedVersions: ["2026-07-28"]`, `capabilities: {"tools":{}}`, its
//! name and version under `_meta`: what the gateway needs to bridge a
//! 2025-11-25 client to it), `tools/list` with its four tools (one page),
//! and `tools/call` by the tool's name (anything else gets an empty
//! `complete` result), echoing the request's id byte for byte:
//!
//! * `get_room`: a small `complete` result (the size of the demo's answer);
//! * `watch_room`: an event stream of three `notifications/progress` (with
//!   the request's `_meta.progressToken`), then the `complete` result;
//! * `room_report`: a `complete` result of about 256 KiB (rows of objects);
//! * `book_room`: the MRTR exchange, scripted. Without `requestState` it
//!   answers `input_required` with a 5-field form and a `requestState` of its
//!   own; a retry must bring that state back (with `inputResponses`), and is
//!   answered `complete`, echoing the state; anything else is a JSON-RPC error.
//!
//! Not a conforming MCP server: no header checks, no sessions, and no
//! `initialize` (it gets the empty `complete` result, as any method it does
//! not know, rather than the refusal a 2026-07-28-only server sends, so
//! `load.sh` names it `generations = ["2026-07-28"]` for its bridged
//! route). It listens on every loopback address it is given (one process
//! standing in for several upstreams of a federated route, each on its own
//! port) and never reads anything but 127.0.0.1 traffic it is sent.
//!
//! `bench-upstream --stdio` is the same answerer as a stdio program (one
//! message a line, on stdin and stdout), and `bench-upstream --drive ...`
//! calls such a program directly over stdio (`stdio.rs`): the two sides of
//! load.sh's `stdio` scenario.

mod stdio;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The prefix of this server's own `requestState`s; a retry must echo one.
const STATE_PREFIX: &str = "bench-up.";

const GET_ROOM: &str = r#"{"resultType":"complete","content":[{"type":"text","text":"The Atrium (atrium) has 24 seats."}],"structuredContent":{"room_id":"atrium","seats":24},"isError":false}"#;

const FORM: &str = r#"{"resultType":"input_required","inputRequests":{"contact":{"method":"elicitation/create","params":{"mode":"form","message":"Who should we send the booking to?","requestedSchema":{"type":"object","properties":{"name":{"type":"string","title":"Name","maxLength":80},"email":{"type":"string","format":"email","title":"Email"},"seats":{"type":"integer","minimum":1,"maximum":40,"title":"Seats"},"room":{"type":"string","title":"Room","oneOf":[{"const":"atrium","title":"Atrium"},{"const":"nook","title":"Nook"}]},"catering":{"type":"boolean","title":"Catering","default":false}},"required":["name","email"]}}}},"requestState":""#;

/// `server/discover`: a 2026-07-28-only server with tools.
const DISCOVER: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":3600000,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"bench-upstream","version":"0.1.0"}}}"#;

/// `tools/list`: the four tools above, on one page.
const TOOLS: &str = r#"{"resultType":"complete","tools":[{"name":"get_room","title":"Get room","description":"Look up a room by id: atrium, studio-b or nook.","inputSchema":{"type":"object","properties":{"room_id":{"type":"string","description":"The room's id."}},"required":["room_id"]}},{"name":"watch_room","title":"Watch rooms","description":"Check the rooms one by one, reporting progress as it goes.","inputSchema":{"type":"object","properties":{"room_id":{"type":"string"}}}},{"name":"room_report","title":"Room report","description":"Report on every room: floor, seats and whether it is free.","inputSchema":{"type":"object","properties":{}}},{"name":"book_room","title":"Book a room","description":"Book a meeting room for a day and hour; asks who the booking is for.","inputSchema":{"type":"object","properties":{"day":{"type":"string","format":"date"},"hour":{"type":"integer","minimum":0,"maximum":23},"room_hint":{"type":"string"}},"required":["day","hour"]}}]}"#;

/// What the answerer reads of a request.
#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a str>,
    #[serde(default)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize, Default)]
struct Params<'a> {
    #[serde(borrow, default)]
    name: Option<&'a str>,
    #[serde(rename = "requestState", borrow, default)]
    request_state: Option<&'a str>,
    #[serde(rename = "inputResponses", borrow, default)]
    input_responses: Option<&'a RawValue>,
    #[serde(rename = "_meta", default)]
    meta: Option<Meta<'a>>,
}

#[derive(Deserialize, Default)]
struct Meta<'a> {
    #[serde(rename = "progressToken", borrow, default)]
    progress_token: Option<&'a RawValue>,
}

/// A JSON-RPC response: `{"jsonrpc":"2.0","id":ID,` then `rest`.
fn message(id: &str, member: &str, value: &[&str]) -> Bytes {
    let len = value.iter().map(|v| v.len()).sum::<usize>();
    let mut out = BytesMut::with_capacity(32 + id.len() + member.len() + len);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"");
    out.extend_from_slice(member.as_bytes());
    out.extend_from_slice(b"\":");
    for v in value {
        out.extend_from_slice(v.as_bytes());
    }
    out.extend_from_slice(b"}");
    out.freeze()
}

fn error(id: &str, text: &str) -> Bytes {
    let e = serde_json::json!({"code": -32602, "message": text}).to_string();
    message(id, "error", &[&e])
}

/// About 256 KiB of rows, built once.
fn report_result() -> String {
    let rows: Vec<String> = (0..4750)
        .map(|i| {
            format!(
                r#"{{"room":"room-{i}","floor":{},"seats":{},"free":{}}}"#,
                i % 9,
                i % 40,
                i % 2 == 0
            )
        })
        .collect();
    format!(
        r#"{{"resultType":"complete","content":[{{"type":"text","text":"{} rooms"}}],"structuredContent":{{"rooms":[{}]}}}}"#,
        rows.len(),
        rows.join(",")
    )
}

struct Answers {
    report: String,
    states: AtomicU64,
}

enum Answer {
    Json(Bytes),
    Events(Vec<Bytes>),
}

impl Answers {
    fn answer(&self, body: &[u8]) -> Answer {
        let Ok(call) = serde_json::from_slice::<Call<'_>>(body) else {
            return Answer::Json(error("null", "not a JSON-RPC request"));
        };
        let id = call.id.map_or("null", RawValue::get);
        match call.method {
            Some("tools/list") => return Answer::Json(message(id, "result", &[TOOLS])),
            Some("server/discover") => return Answer::Json(message(id, "result", &[DISCOVER])),
            _ => {}
        }
        let params = call.params.unwrap_or_default();
        match params.name {
            Some("get_room") => Answer::Json(message(id, "result", &[GET_ROOM])),
            Some("room_report") => Answer::Json(message(id, "result", &[&self.report])),
            Some("watch_room") => Answer::Events(watch(id, &params)),
            Some("book_room") => Answer::Json(self.book(id, &params)),
            _ => Answer::Json(message(
                id,
                "result",
                &[r#"{"resultType":"complete","content":[]}"#],
            )),
        }
    }

    fn book(&self, id: &str, params: &Params<'_>) -> Bytes {
        match (params.request_state, params.input_responses) {
            (None, None) => {
                let n = self.states.fetch_add(1, Ordering::Relaxed);
                let state = format!("{STATE_PREFIX}{n}");
                message(id, "result", &[FORM, &state, "\"}"])
            }
            (Some(state), Some(_)) if state.starts_with(STATE_PREFIX) => {
                let done = format!(
                    r#"{{"resultType":"complete","content":[{{"type":"text","text":"Booked ({state})."}}]}}"#
                );
                message(id, "result", &[&done])
            }
            (Some(_), Some(_)) => error(id, "requestState is not this server's"),
            _ => error(id, "requestState and inputResponses go together"),
        }
    }
}

/// Three progress notifications, then the result: one SSE event each.
fn watch(id: &str, params: &Params<'_>) -> Vec<Bytes> {
    let token = params
        .meta
        .as_ref()
        .and_then(|m| m.progress_token)
        .map_or("\"bench\"", RawValue::get);
    let mut events: Vec<Bytes> = (1..=3)
        .map(|i| {
            Bytes::from(format!(
                "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{token},\"progress\":{i},\"total\":3,\"message\":\"Checked {i} of 3 rooms\"}}}}\n\n"
            ))
        })
        .collect();
    let result = message(id, "result", &[GET_ROOM]);
    let mut last = BytesMut::with_capacity(result.len() + 24);
    last.extend_from_slice(b"event: message\ndata: ");
    last.extend_from_slice(&result);
    last.extend_from_slice(b"\n\n");
    events.push(last.freeze());
    events
}

/// The events of a stream, one frame each (written as they are polled, as
/// a server that produces them one by one would).
struct Events(std::collections::VecDeque<Bytes>);

impl http_body::Body for Events {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn handle(
    answers: &'static Answers,
    req: Request<Incoming>,
) -> Result<Response<Body>, hyper::Error> {
    let body = req.into_body().collect().await?.to_bytes();
    let (ctype, body): (&'static str, Body) = match answers.answer(&body) {
        Answer::Json(b) => ("application/json", Full::new(b).boxed()),
        Answer::Events(events) => ("text/event-stream", Events(events.into()).boxed()),
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    Ok(resp)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--stdio") => stdio::serve(&answers()),
        Some("--drive") => stdio::drive(&args[1..]),
        _ => serve_http(),
    }
}

fn answers() -> Answers {
    Answers {
        report: report_result(),
        states: AtomicU64::new(0),
    }
}

#[tokio::main]
async fn serve_http() {
    let addrs: Vec<SocketAddr> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()
        .unwrap_or_default();
    if addrs.is_empty() {
        eprintln!("usage: bench-upstream 127.0.0.1:PORT [127.0.0.1:PORT ...]");
        std::process::exit(2);
    }
    if !addrs.iter().all(|a| a.ip().is_loopback()) {
        eprintln!("bench-upstream listens on loopback only");
        std::process::exit(2);
    }
    let mut listeners = Vec::with_capacity(addrs.len());
    for addr in &addrs {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => listeners.push(l),
            Err(e) => {
                eprintln!("bench-upstream: cannot listen on {addr}: {e}");
                std::process::exit(1);
            }
        }
    }
    let answers: &'static Answers = Box::leak(Box::new(answers()));
    let on: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    eprintln!(
        "bench-upstream on {} (room_report result: {} bytes)",
        on.join(", "),
        answers.report.len()
    );
    let accepting: Vec<_> = listeners
        .into_iter()
        .map(|l| tokio::spawn(accept(l, answers)))
        .collect();
    for a in accepting {
        let _ = a.await;
    }
}

/// Serve every connection `listener` accepts.
async fn accept(listener: tokio::net::TcpListener, answers: &'static Answers) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(answers, req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
