//! The demo upstream: a small room-booking MCP server (protocol 2026-07-28)
//! used by `portcullis demo`, the integration tests and the benchmarks.
//!
//! It speaks stateless Streamable HTTP at `POST /mcp`, one JSON-RPC message per
//! body, and offers three tools:
//!
//! * `get_room`: the fast path, answered from precomputed JSON.
//! * `book_room`: the MRTR seed scenario. An ambiguous hint is answered with an
//!   `input_required` result holding a form elicitation and a `requestState`;
//!   the retry carries the person's choice in `inputResponses`.
//! * `room_report`: a `text/event-stream` answer with progress notifications,
//!   which stops working as soon as the client goes away (MCP cancellation).
//!
//! The JSON-RPC layer is the pure function [`handle_message`]; the HTTP layer
//! around it only routes, reads the body and writes the [`Reply`].

use std::borrow::Cow;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// The one path the demo server answers on.
const MCP_PATH: &str = "/mcp";
/// The protocol generation this server implements.
const PROTOCOL_VERSION: &str = "2026-07-28";
/// Far above any legitimate demo request; keeps a bad client from making us buffer forever.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// How long in-flight requests get to finish once shutdown is requested.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a failed `accept` (e.g. out of file descriptors) so we do not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// Events buffered between the report producer and the connection; small, so
/// a slow client applies back-pressure to the producer.
const EVENT_BUFFER: usize = 4;
/// Longest hint or `when` echoed back in messages and carried in the state.
const MAX_ECHO_CHARS: usize = 80;
/// Longest tool name echoed back in an "Unknown tool" error.
const MAX_TOOL_NAME_CHARS: usize = 64;

const PARSE_ERROR: i32 = -32700;
const INVALID_REQUEST: i32 = -32600;
const METHOD_NOT_FOUND: i32 = -32601;
const INVALID_PARAMS: i32 = -32602;
const MISSING_CAPABILITY: i32 = -32021;
const UNSUPPORTED_VERSION: i32 = -32022;

/// The result of `ping` (and of anything else that only needs to say "done").
const COMPLETE_RESULT: &str = r#"{"resultType":"complete"}"#;

/// Counts `room_report` streams whose client went away before the final event.
static REPORT_STREAMS_CANCELLED: AtomicU64 = AtomicU64::new(0);

// ---------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------

/// Serve the demo MCP server at path `/mcp` on `listener` until `shutdown` flips to true.
///
/// HTTP/1.1 (keep-alive) and HTTP/2 are both accepted on the same port. After
/// shutdown is requested, in-flight requests get a short grace period; any
/// connection still open after it is dropped.
pub async fn serve(listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // hyper's HTTP/1 header-read timeout only works with a timer installed.
    builder.http1().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    // Owning the connection tasks lets us abort stragglers when we return.
    let mut connections = JoinSet::new();

    loop {
        tokio::select! {
            () = shutdown_requested(&mut shutdown) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    // Small SSE events and JSON replies should not wait for Nagle.
                    let _ = stream.set_nodelay(true);
                    let service = service_fn(|req| async { Ok::<_, Infallible>(route(req).await) });
                    let conn = builder.serve_connection(TokioIo::new(stream), service).into_owned();
                    let conn = graceful.watch(conn);
                    // Connection errors are the client's business (resets, bad
                    // HTTP); nothing useful to do with them here.
                    connections.spawn(async move {
                        let _ = conn.await;
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "demo upstream: accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections so the set does not grow forever.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }

    drop(listener);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
    // Dropping `connections` aborts whatever did not drain in time.
}

/// How many `room_report` streams stopped early because their client went
/// away (the MCP way to cancel a request). Tests use it to check that the
/// upstream really stops working on cancellation.
pub fn report_streams_cancelled() -> u64 {
    REPORT_STREAMS_CANCELLED.load(Ordering::Relaxed)
}

/// Resolves once the flag is true. A dropped sender can never flip it, so in
/// that case we keep serving rather than stop by surprise.
async fn shutdown_requested(shutdown: &mut watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow_and_update() {
            return;
        }
        if shutdown.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

// ---------------------------------------------------------------------------
// HTTP layer
// ---------------------------------------------------------------------------

async fn route(req: Request<Incoming>) -> Response<ReplyBody> {
    if req.uri().path() != MCP_PATH {
        return status_only(StatusCode::NOT_FOUND);
    }
    if req.method() != Method::POST {
        let mut response = status_only(StatusCode::METHOD_NOT_ALLOWED);
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    if !content_type_is_json(req.headers()) {
        return status_only(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(body) => into_response(handle_message(&body.to_bytes())),
        Err(error) if error.is::<LengthLimitError>() => status_only(StatusCode::PAYLOAD_TOO_LARGE),
        Err(_) => status_only(StatusCode::BAD_REQUEST),
    }
}

/// A missing Content-Type is tolerated (simple load generators omit it); a
/// present one must say JSON.
fn content_type_is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return true;
    };
    value.to_str().is_ok_and(|value| {
        let essence = value.split(';').next().unwrap_or_default().trim();
        essence.eq_ignore_ascii_case("application/json")
    })
}

fn into_response(reply: Reply) -> Response<ReplyBody> {
    match reply {
        Reply::Json(status, bytes) => {
            let mut response = with_status(status, ReplyBody::Once(Some(bytes)));
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Reply::Accepted => status_only(StatusCode::ACCEPTED),
        Reply::Stream(plan) => start_report_stream(plan),
    }
}

fn status_only(status: StatusCode) -> Response<ReplyBody> {
    with_status(status, ReplyBody::Once(None))
}

fn with_status(status: StatusCode, body: ReplyBody) -> Response<ReplyBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
}

/// Starts the producer task and answers with the event stream it feeds.
fn start_report_stream(plan: ReportPlan) -> Response<ReplyBody> {
    let (events, receiver) = mpsc::channel(EVENT_BUFFER);
    tokio::spawn(produce_report(plan, events));
    let mut response = with_status(StatusCode::OK, ReplyBody::Events(receiver));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Does the report's work step by step. hyper drops the response body when
/// the client disconnects (or resets the HTTP/2 stream), which closes the
/// channel: that is our cancellation signal, checked while sleeping and on
/// every send.
async fn produce_report(plan: ReportPlan, events: mpsc::Sender<Bytes>) {
    let steps = plan.report.steps;
    for step in 1..=steps {
        let finished_sleeping = tokio::select! {
            () = tokio::time::sleep(plan.report.delay) => true,
            () = events.closed() => false,
        };
        if !finished_sleeping {
            return note_cancelled();
        }
        if let Some(token) = &plan.report.progress_token {
            if events
                .send(progress_event(token, step, steps))
                .await
                .is_err()
            {
                return note_cancelled();
            }
        }
    }
    let last = sse_event(&success(&plan.id, &report_result(steps)));
    if events.send(last).await.is_err() {
        note_cancelled();
    }
}

fn note_cancelled() {
    REPORT_STREAMS_CANCELLED.fetch_add(1, Ordering::Relaxed);
}

fn progress_event(token: &Value, step: u32, total: u32) -> Bytes {
    let notification = json!({
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {
            "progressToken": token,
            "progress": step,
            "total": total,
            "message": format!("Checked room {step} of {total}"),
        }
    });
    sse_event(notification.to_string().as_bytes())
}

/// One SSE event. Compact JSON never contains a newline, so one `data:` line suffices.
fn sse_event(json: &[u8]) -> Bytes {
    const HEAD: &[u8] = b"event: message\ndata: ";
    let mut event = Vec::with_capacity(HEAD.len() + json.len() + 2);
    event.extend_from_slice(HEAD);
    event.extend_from_slice(json);
    event.extend_from_slice(b"\n\n");
    event.into()
}

/// Response body: either one buffered chunk or a live stream of SSE events.
/// A custom body keeps the common case allocation-free (no boxing) and lets
/// each event reach the connection as soon as it is produced.
enum ReplyBody {
    Once(Option<Bytes>),
    Events(mpsc::Receiver<Bytes>),
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ReplyBody::Once(chunk) => Poll::Ready(chunk.take().map(|b| Ok(Frame::data(b)))),
            ReplyBody::Events(events) => events
                .poll_recv(cx)
                .map(|event| event.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ReplyBody::Once(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReplyBody::Once(chunk) => {
                SizeHint::with_exact(chunk.as_ref().map_or(0, |b| b.len() as u64))
            }
            ReplyBody::Events(_) => SizeHint::default(),
        }
    }
}

// ---------------------------------------------------------------------------
// JSON-RPC layer (pure)
// ---------------------------------------------------------------------------

/// What the HTTP layer should send back for one message.
#[derive(Debug)]
enum Reply {
    /// A JSON body (a response or an error) with its HTTP status.
    Json(StatusCode, Bytes),
    /// A notification or a client response: 202, no body.
    Accepted,
    /// A `room_report` call, answered as an event stream.
    Stream(ReportPlan),
}

/// Everything the report producer needs, owned so it can move to a task.
#[derive(Debug)]
struct ReportPlan {
    id: Box<RawValue>,
    report: Report,
}

#[derive(Debug, PartialEq)]
struct Report {
    progress_token: Option<Value>,
    steps: u32,
    delay: Duration,
}

/// A request's outcome before it is wrapped in a JSON-RPC envelope.
#[derive(Debug)]
enum Answer {
    /// The `result` member, as serialized JSON.
    Result(Cow<'static, str>),
    Stream(Report),
}

#[derive(Debug)]
struct RpcError {
    code: i32,
    message: Cow<'static, str>,
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i32, message: impl Into<Cow<'static, str>>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn invalid_params(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    fn missing_form_elicitation() -> Self {
        RpcError {
            data: Some(json!({"requiredCapabilities": {"elicitation": {"form": {}}}})),
            ..Self::new(
                MISSING_CAPABILITY,
                "Server requires the elicitation capability for this request",
            )
        }
    }

    /// Errors about the message itself get a 4xx; everything else is a
    /// well-formed exchange and rides on 200.
    fn http_status(&self) -> StatusCode {
        match self.code {
            PARSE_ERROR | INVALID_REQUEST | UNSUPPORTED_VERSION => StatusCode::BAD_REQUEST,
            _ => StatusCode::OK,
        }
    }
}

/// One JSON-RPC message, borrowed from the body so parsing does not allocate.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    /// `None` only when absent: a present `null` is kept so it can be refused.
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default)]
    result: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

/// The request params this server looks at, for every method.
#[derive(Deserialize, Default)]
struct Params<'a> {
    #[serde(rename = "_meta", default, borrow)]
    meta: Meta<'a>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "inputResponses", default, borrow)]
    input_responses: Option<&'a RawValue>,
    #[serde(rename = "requestState", default, borrow)]
    request_state: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct Meta<'a> {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<Value>,
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", default, borrow)]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", default, borrow)]
    client_capabilities: Option<ClientCapabilities<'a>>,
}

#[derive(Deserialize, Default)]
struct ClientCapabilities<'a> {
    #[serde(default, borrow)]
    elicitation: Option<&'a RawValue>,
}

/// Turns one request body into the reply to send. No I/O, so tests call it directly.
fn handle_message(body: &[u8]) -> Reply {
    let message: Message = match serde_json::from_slice(body) {
        Ok(message) => message,
        // Valid JSON of the wrong shape (a batch, a string, a numeric method…).
        Err(error) if error.is_data() => return invalid_request(),
        Err(_) => return error_reply(None, RpcError::new(PARSE_ERROR, "Parse error")),
    };
    if message.jsonrpc != "2.0" {
        return invalid_request();
    }
    let Some(method) = message.method else {
        // A client's response to us; there is nothing to do with it.
        let is_response = message.result.is_some() || message.error.is_some();
        return if is_response && message.id.is_some() {
            Reply::Accepted
        } else {
            invalid_request()
        };
    };
    let Some(id) = message.id else {
        return Reply::Accepted; // a notification
    };
    if !is_valid_id(id) {
        return invalid_request();
    }
    match dispatch(&method, message.params) {
        Ok(Answer::Result(result)) => Reply::Json(StatusCode::OK, success(id, &result)),
        Ok(Answer::Stream(report)) => Reply::Stream(ReportPlan {
            id: id.to_owned(),
            report,
        }),
        Err(error) => error_reply(Some(id), error),
    }
}

/// MCP request ids are strings or numbers.
fn is_valid_id(id: &RawValue) -> bool {
    matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

fn invalid_request() -> Reply {
    error_reply(None, RpcError::new(INVALID_REQUEST, "Invalid Request"))
}

fn error_reply(id: Option<&RawValue>, error: RpcError) -> Reply {
    let status = error.http_status();
    let mut object = json!({"code": error.code, "message": error.message});
    if let Some(data) = error.data {
        object["data"] = data;
    }
    let id = id.map_or("null", RawValue::get);
    Reply::Json(status, envelope(id, "error", &object.to_string()))
}

fn success(id: &RawValue, result: &str) -> Bytes {
    envelope(id.get(), "result", result)
}

/// Splices already-serialized JSON into the envelope: the id is echoed
/// byte for byte and static results are not re-serialized.
fn envelope(id: &str, member: &str, value: &str) -> Bytes {
    let mut out = Vec::with_capacity(32 + id.len() + value.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"");
    out.extend_from_slice(member.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(value.as_bytes());
    out.push(b'}');
    out.into()
}

fn dispatch(method: &str, params: Option<&RawValue>) -> Result<Answer, RpcError> {
    let params: Params = match params {
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|_| RpcError::invalid_params("Invalid params"))?,
        None => Params::default(),
    };
    check_protocol_version(&params.meta)?;
    match method {
        "ping" => Ok(Answer::Result(Cow::Borrowed(COMPLETE_RESULT))),
        "server/discover" => Ok(Answer::Result(Cow::Borrowed(discover_result()))),
        "tools/list" => Ok(Answer::Result(Cow::Borrowed(tools_list_result()))),
        "tools/call" => call_tool(&params),
        _ => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("Method not found: {}", clip(method, MAX_TOOL_NAME_CHARS)),
        )),
    }
}

/// An absent version is tolerated (load generators); a wrong one is refused.
fn check_protocol_version(meta: &Meta) -> Result<(), RpcError> {
    match meta.protocol_version.as_deref() {
        None | Some(PROTOCOL_VERSION) => Ok(()),
        Some(requested) => Err(RpcError {
            data: Some(json!({
                "supported": [PROTOCOL_VERSION],
                "requested": clip(requested, MAX_ECHO_CHARS),
            })),
            ..RpcError::new(UNSUPPORTED_VERSION, "Unsupported protocol version")
        }),
    }
}

// ---------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------

/// Why a tool call did not produce its normal result.
enum Failure {
    /// A protocol-level problem: a JSON-RPC error.
    Protocol(RpcError),
    /// A problem with the tool's input: a result with `isError`, so the model can correct itself.
    Tool(String),
}

impl From<RpcError> for Failure {
    fn from(error: RpcError) -> Self {
        Failure::Protocol(error)
    }
}

fn call_tool(params: &Params) -> Result<Answer, RpcError> {
    let name = params
        .name
        .as_deref()
        .ok_or_else(|| RpcError::invalid_params("Missing tool name"))?;
    let arguments = params.arguments.map_or("{}", RawValue::get);
    let outcome = match name {
        "get_room" => get_room(arguments),
        "book_room" => book_room(params, arguments),
        "room_report" => room_report(params, arguments),
        _ => Err(Failure::Protocol(RpcError::invalid_params(format!(
            "Unknown tool: {}",
            clip(name, MAX_TOOL_NAME_CHARS)
        )))),
    };
    match outcome {
        Ok(answer) => Ok(answer),
        Err(Failure::Tool(text)) => Ok(Answer::Result(Cow::Owned(tool_error(&text)))),
        Err(Failure::Protocol(error)) => Err(error),
    }
}

fn parse_args<'a, T: Deserialize<'a>>(tool: &str, arguments: &'a str) -> Result<T, Failure> {
    serde_json::from_str(arguments)
        .map_err(|error| Failure::Tool(format!("Invalid arguments for {tool}: {error}")))
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Room {
    id: &'static str,
    name: &'static str,
    seats: u32,
    /// How a free-text hint may name the room.
    aliases: &'static [&'static str],
}

const ROOMS: [Room; 3] = [
    Room {
        id: "atrium",
        name: "Atrium",
        seats: 40,
        aliases: &["atrium"],
    },
    Room {
        id: "studio-b",
        name: "Studio B",
        seats: 12,
        aliases: &["studio-b", "studio b"],
    },
    Room {
        id: "nook",
        name: "The Nook",
        seats: 4,
        aliases: &["nook"],
    },
];

fn room_by_id(id: &str) -> Option<&'static Room> {
    ROOMS.iter().find(|room| room.id == id)
}

/// The option label people see in the elicitation form.
fn room_label(room: &Room) -> String {
    format!("{} ({} seats)", room.name, room.seats)
}

// --- get_room ---------------------------------------------------------------

#[derive(Deserialize)]
struct GetRoomArgs<'a> {
    #[serde(borrow)]
    room_id: Cow<'a, str>,
}

fn get_room(arguments: &str) -> Result<Answer, Failure> {
    let args: GetRoomArgs = parse_args("get_room", arguments)?;
    match ROOMS.iter().position(|room| room.id == args.room_id) {
        Some(index) => Ok(Answer::Result(Cow::Borrowed(&room_results()[index]))),
        None => Err(Failure::Tool(format!(
            "No room named \"{}\". Rooms: atrium, studio-b, nook.",
            clip(&args.room_id, MAX_ECHO_CHARS)
        ))),
    }
}

/// `get_room` answers are constant, so they are serialized once (benchmark fast path).
fn room_results() -> &'static [String; 3] {
    static RESULTS: OnceLock<[String; 3]> = OnceLock::new();
    RESULTS.get_or_init(|| {
        ROOMS.map(|room| {
            let text = format!("{} ({}) has {} seats.", room.name, room.id, room.seats);
            tool_result(&text, json!({"room_id": room.id, "seats": room.seats}))
        })
    })
}

// --- book_room --------------------------------------------------------------

#[derive(Deserialize)]
struct BookRoomArgs<'a> {
    #[serde(borrow)]
    hint: Cow<'a, str>,
    #[serde(default, borrow)]
    when: Option<Cow<'a, str>>,
}

fn book_room(params: &Params, arguments: &str) -> Result<Answer, Failure> {
    if let Some(responses) = params.input_responses {
        return finish_booking(params.request_state.as_deref(), responses);
    }
    let args: BookRoomArgs = parse_args("book_room", arguments)?;
    if let Some(room) = named_room(&args.hint) {
        return Ok(booked(room, args.when.as_deref()));
    }
    if !supports_form_elicitation(&params.meta) {
        return Err(RpcError::missing_form_elicitation().into());
    }
    let state = BookingState::first(&args.hint, args.when.as_deref());
    Ok(ask_for_room(&state, ""))
}

/// The room a hint names, if it names exactly one.
fn named_room(hint: &str) -> Option<&'static Room> {
    let mut named = ROOMS
        .iter()
        .filter(|room| room.aliases.iter().any(|alias| contains_word(hint, alias)));
    match (named.next(), named.next()) {
        (Some(room), None) => Some(room),
        _ => None,
    }
}

/// ASCII case-insensitive search for `needle` as a whole word, so that
/// "snooker" does not name the nook. Works on bytes: no allocation.
fn contains_word(haystack: &str, needle: &str) -> bool {
    let (hay, needle) = (haystack.as_bytes(), needle.as_bytes());
    if needle.is_empty() || hay.len() < needle.len() {
        return false;
    }
    let is_word_byte = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    (0..=hay.len() - needle.len()).any(|start| {
        let end = start + needle.len();
        hay[start..end].eq_ignore_ascii_case(needle)
            && !is_word_byte(start.checked_sub(1).and_then(|i| hay.get(i)))
            && !is_word_byte(hay.get(end))
    })
}

/// `elicitation: {}` means form mode only; otherwise the modes are listed.
fn supports_form_elicitation(meta: &Meta) -> bool {
    #[derive(Deserialize)]
    struct Modes {
        form: Option<IgnoredAny>,
        url: Option<IgnoredAny>,
    }
    let Some(raw) = meta
        .client_capabilities
        .as_ref()
        .and_then(|caps| caps.elicitation)
    else {
        return false;
    };
    serde_json::from_str::<Modes>(raw.get())
        .is_ok_and(|modes| modes.form.is_some() || modes.url.is_none())
}

/// What the server needs to finish a booking on a retry. It travels to the
/// client and back as `requestState`, so it is plain data and re-validated on
/// the way in. (Integrity is the gateway's job in the demo: it seals it.)
#[derive(Debug, PartialEq, Deserialize)]
struct BookingState {
    v: u32,
    hint: String,
    when: Option<String>,
    round: u32,
}

impl BookingState {
    const VERSION: u32 = 1;

    fn first(hint: &str, when: Option<&str>) -> Self {
        BookingState {
            v: Self::VERSION,
            hint: clip(hint, MAX_ECHO_CHARS).to_owned(),
            when: when.map(|when| clip(when, MAX_ECHO_CHARS).to_owned()),
            round: 1,
        }
    }

    fn next_round(self) -> Self {
        BookingState {
            round: self.round.saturating_add(1),
            ..self
        }
    }

    fn encode(&self) -> String {
        let json = json!({"v": self.v, "hint": self.hint, "when": self.when, "round": self.round});
        URL_SAFE_NO_PAD.encode(json.to_string())
    }

    fn decode(encoded: &str) -> Option<Self> {
        let json = URL_SAFE_NO_PAD.decode(encoded).ok()?;
        let state: Self = serde_json::from_slice(&json).ok()?;
        (state.v == Self::VERSION && state.round >= 1).then_some(state)
    }
}

/// The `input_required` result asking which room was meant.
fn ask_for_room(state: &BookingState, preface: &str) -> Answer {
    let message = format!(
        "{preface}\"{}\" could mean three rooms. Which one should I book?",
        clip(&state.hint, MAX_ECHO_CHARS)
    );
    let options: Vec<Value> = ROOMS
        .iter()
        .map(|room| json!({"const": room.id, "title": room_label(room)}))
        .collect();
    let result = json!({
        "resultType": "input_required",
        "inputRequests": {
            "room": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": message,
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "room_id": {"type": "string", "title": "Room", "oneOf": options}
                        },
                        "required": ["room_id"]
                    }
                }
            }
        },
        "requestState": state.encode(),
    });
    Answer::Result(Cow::Owned(result.to_string()))
}

/// What the person answered to "which room?".
#[derive(Debug, PartialEq)]
enum Choice {
    Room(&'static Room),
    /// Declined or cancelled: nothing gets booked.
    NoRoom,
    /// Accepted, but with something that is not one of the rooms.
    NotARoom,
}

#[derive(Deserialize)]
struct RoomAnswers {
    room: Option<ElicitAnswer>,
}

#[derive(Deserialize)]
struct ElicitAnswer {
    action: ElicitAction,
    #[serde(default)]
    content: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ElicitAction {
    Accept,
    Decline,
    Cancel,
}

fn finish_booking(request_state: Option<&str>, responses: &RawValue) -> Result<Answer, Failure> {
    let state = request_state
        .and_then(BookingState::decode)
        .ok_or_else(|| RpcError::invalid_params("invalid requestState"))?;
    Ok(match room_choice(responses)? {
        Choice::Room(room) => booked(room, state.when.as_deref()),
        Choice::NoRoom => tool_answer(
            "Booking cancelled: no room chosen",
            json!({"booked": false}),
        ),
        Choice::NotARoom => ask_for_room(
            &state.next_round(),
            "That answer was not one of the rooms. ",
        ),
    })
}

fn room_choice(responses: &RawValue) -> Result<Choice, RpcError> {
    let answers: RoomAnswers = serde_json::from_str(responses.get())
        .map_err(|_| RpcError::invalid_params("invalid inputResponses"))?;
    let answer = answers
        .room
        .ok_or_else(|| RpcError::invalid_params("missing inputResponses.room"))?;
    Ok(match answer.action {
        ElicitAction::Decline | ElicitAction::Cancel => Choice::NoRoom,
        ElicitAction::Accept => answer
            .content
            .as_ref()
            .and_then(|content| content.get("room_id"))
            .and_then(Value::as_str)
            .and_then(room_by_id)
            .map_or(Choice::NotARoom, Choice::Room),
    })
}

fn booked(room: &Room, when: Option<&str>) -> Answer {
    let when = when.map_or("today", |when| clip(when, MAX_ECHO_CHARS));
    tool_answer(
        &format!("Booked {} for {when}", room.id),
        json!({"room_id": room.id, "booked": true}),
    )
}

// --- room_report ------------------------------------------------------------

const MAX_REPORT_STEPS: u32 = 20;
const MAX_REPORT_DELAY_MS: u64 = 5000;

#[derive(Deserialize)]
struct RoomReportArgs {
    #[serde(default = "default_steps")]
    steps: u32,
    #[serde(default = "default_delay_ms")]
    delay_ms: u64,
}

fn default_steps() -> u32 {
    3
}

fn default_delay_ms() -> u64 {
    300
}

fn room_report(params: &Params, arguments: &str) -> Result<Answer, Failure> {
    let args: RoomReportArgs = parse_args("room_report", arguments)?;
    if args.steps > MAX_REPORT_STEPS {
        return Err(Failure::Tool(format!(
            "steps must be at most {MAX_REPORT_STEPS}"
        )));
    }
    if args.delay_ms > MAX_REPORT_DELAY_MS {
        return Err(Failure::Tool(format!(
            "delay_ms must be at most {MAX_REPORT_DELAY_MS}"
        )));
    }
    Ok(Answer::Stream(Report {
        progress_token: params.meta.progress_token.clone(),
        steps: args.steps,
        delay: Duration::from_millis(args.delay_ms),
    }))
}

fn report_result(steps: u32) -> String {
    let rooms: Vec<Value> = ROOMS
        .iter()
        .map(|room| json!({"room_id": room.id, "seats": room.seats}))
        .collect();
    tool_result(
        &format!("Room report: checked {steps} rooms, all available."),
        json!({"checked": steps, "rooms": rooms}),
    )
}

// --- results ----------------------------------------------------------------

fn tool_answer(text: &str, structured: Value) -> Answer {
    Answer::Result(Cow::Owned(tool_result(text, structured)))
}

fn tool_result(text: &str, structured: Value) -> String {
    json!({
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
    })
    .to_string()
}

fn tool_error(text: &str) -> String {
    json!({
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "isError": true,
    })
    .to_string()
}

fn discover_result() -> &'static str {
    static RESULT: OnceLock<String> = OnceLock::new();
    RESULT.get_or_init(|| {
        json!({
            "resultType": "complete",
            "supportedVersions": [PROTOCOL_VERSION],
            "capabilities": {"tools": {}},
            // Required by the 2026-07-28 schema: how long a client may cache this.
            "ttlMs": 3_600_000,
            "cacheScope": "public",
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "portcullis-demo-rooms",
                    "version": env!("CARGO_PKG_VERSION"),
                }
            },
            "instructions": "Demo room-booking server. Use `get_room` to look a room up, \
                `book_room` to book one (if the hint does not name exactly one room, \
                the server asks which one you mean), and `room_report` for a slow, \
                streamed report with progress.",
        })
        .to_string()
    })
}

fn tools_list_result() -> &'static str {
    static RESULT: OnceLock<String> = OnceLock::new();
    RESULT.get_or_init(|| {
        json!({
            "resultType": "complete",
            "tools": [book_room_tool(), room_report_tool(), get_room_tool()],
            "ttlMs": 300_000,
            "cacheScope": "public",
        })
        .to_string()
    })
}

fn book_room_tool() -> Value {
    json!({
        "name": "book_room",
        "title": "Book a room",
        "description": "Book a meeting room from a free-text hint. If the hint does not \
            name exactly one room (atrium, studio-b, nook), asks which room is meant.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "hint": {"type": "string", "description": "Which room, in your own words"},
                "when": {"type": "string", "description": "When to book it (default: today)"}
            },
            "required": ["hint"]
        }
    })
}

fn room_report_tool() -> Value {
    json!({
        "name": "room_report",
        "title": "Room report",
        "description": "Check the rooms one by one, reporting progress as it goes.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "steps": {
                    "type": "integer", "minimum": 0, "maximum": MAX_REPORT_STEPS,
                    "default": default_steps(), "description": "How many rooms to check"
                },
                "delay_ms": {
                    "type": "integer", "minimum": 0, "maximum": MAX_REPORT_DELAY_MS,
                    "default": default_delay_ms(), "description": "Time spent per room, in milliseconds"
                }
            }
        },
        "annotations": {"readOnlyHint": true}
    })
}

fn get_room_tool() -> Value {
    json!({
        "name": "get_room",
        "title": "Get a room",
        "description": "Look up a room by id: atrium, studio-b or nook.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "room_id": {"type": "string", "description": "atrium, studio-b or nook"}
            },
            "required": ["room_id"]
        },
        "annotations": {"readOnlyHint": true}
    })
}

/// At most `max_chars` characters of `text`, cut on a character boundary.
fn clip(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    const ELICITATION: &str = r#"{"elicitation":{}}"#;

    fn meta(caps: &str) -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": serde_json::from_str::<Value>(caps).unwrap(),
        })
    }

    fn request(id: Value, method: &str, params: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .unwrap()
    }

    fn call_tool_body(name: &str, arguments: Value, caps: &str, extra: Value) -> Vec<u8> {
        let mut params = json!({"_meta": meta(caps), "name": name, "arguments": arguments});
        if let Value::Object(extra) = extra {
            params.as_object_mut().unwrap().extend(extra);
        }
        request(json!(7), "tools/call", params)
    }

    /// Runs a message through the dispatcher and returns status and parsed JSON.
    fn json_reply(body: &[u8]) -> (StatusCode, Value) {
        match handle_message(body) {
            Reply::Json(status, bytes) => (status, serde_json::from_slice(&bytes).unwrap()),
            other => panic!("expected a JSON reply, got {other:?}"),
        }
    }

    fn result_of(body: &[u8]) -> Value {
        let (status, reply) = json_reply(body);
        assert_eq!(status, StatusCode::OK);
        reply["result"].clone()
    }

    fn ask(hint: &str, caps: &str) -> Value {
        result_of(&call_tool_body(
            "book_room",
            json!({"hint": hint, "when": "Friday"}),
            caps,
            json!(null),
        ))
    }

    fn retry(state: &Value, responses: Value) -> (StatusCode, Value) {
        let extra = json!({"inputResponses": responses, "requestState": state});
        json_reply(&call_tool_body(
            "book_room",
            json!({"hint": "the big room"}),
            ELICITATION,
            extra,
        ))
    }

    // --- envelope and dispatch ----------------------------------------------

    #[test]
    fn ping_echoes_the_id_byte_for_byte() {
        let body = br#"{"jsonrpc":"2.0","id":"a\"b\u00e9","method":"ping"}"#;
        let Reply::Json(status, bytes) = handle_message(body) else {
            panic!()
        };
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            &bytes[..],
            br#"{"jsonrpc":"2.0","id":"a\"b\u00e9","result":{"resultType":"complete"}}"#
        );
        let (_, reply) =
            json_reply(br#"{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}"#);
        assert_eq!(reply["id"].to_string(), "12345678901234567890");
    }

    #[test]
    fn malformed_messages_get_400() {
        for (body, code) in [
            (&b"{not json"[..], PARSE_ERROR),
            (b"", PARSE_ERROR),
            (
                br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                INVALID_REQUEST,
            ),
            (br#"{"jsonrpc":"2.0","id":1,"method":5}"#, INVALID_REQUEST),
        ] {
            let (status, reply) = json_reply(body);
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "{}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(reply["error"]["code"], code);
            assert_eq!(reply["id"], Value::Null);
        }
    }

    #[test]
    fn notifications_and_client_responses_are_accepted() {
        let note = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#;
        assert!(matches!(handle_message(note), Reply::Accepted));
        let response = br#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
        assert!(matches!(handle_message(response), Reply::Accepted));
    }

    #[test]
    fn discover_and_list_describe_the_server() {
        let discover = result_of(&request(
            json!(1),
            "server/discover",
            json!({"_meta": meta("{}")}),
        ));
        assert_eq!(discover["supportedVersions"], json!([PROTOCOL_VERSION]));
        assert_eq!(discover["capabilities"], json!({"tools": {}}));
        assert_eq!(
            discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "portcullis-demo-rooms"
        );

        let list = result_of(&request(json!(2), "tools/list", json!({})));
        let names: Vec<&str> = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["book_room", "room_report", "get_room"]);
        assert_eq!(list["tools"][0]["inputSchema"]["required"], json!(["hint"]));
    }

    #[test]
    fn unknown_method_tool_and_version_are_refused() {
        let (status, reply) = json_reply(&request(json!(1), "resources/list", json!({})));
        assert_eq!(
            (status, reply["error"]["code"].clone()),
            (StatusCode::OK, json!(METHOD_NOT_FOUND))
        );

        let long_name = "x".repeat(200);
        let (status, reply) = json_reply(&call_tool_body(&long_name, json!({}), "{}", json!(null)));
        assert_eq!(status, StatusCode::OK);
        assert_eq!(reply["error"]["code"], INVALID_PARAMS);
        assert_eq!(
            reply["error"]["message"],
            format!("Unknown tool: {}", "x".repeat(64))
        );

        let params = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01"}});
        let (status, reply) = json_reply(&request(json!(1), "ping", params));
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(reply["error"]["data"]["requested"], "1900-01-01");
    }

    // --- get_room -------------------------------------------------------------

    #[test]
    fn get_room_answers_known_and_flags_unknown_rooms() {
        let result = result_of(&call_tool_body(
            "get_room",
            json!({"room_id": "studio-b"}),
            "{}",
            json!(null),
        ));
        assert_eq!(
            result["structuredContent"],
            json!({"room_id": "studio-b", "seats": 12})
        );
        assert_eq!(result["resultType"], "complete");

        let result = result_of(&call_tool_body(
            "get_room",
            json!({"room_id": "attic"}),
            "{}",
            json!(null),
        ));
        assert_eq!(result["isError"], true);
        let result = result_of(&call_tool_body("get_room", json!({}), "{}", json!(null)));
        assert_eq!(result["isError"], true);
    }

    // --- book_room --------------------------------------------------------------

    #[test]
    fn ambiguity_detection() {
        assert_eq!(named_room("the big room"), None);
        assert_eq!(
            named_room("the Atrium please").map(|r| r.id),
            Some("atrium")
        );
        assert_eq!(named_room("STUDIO B").map(|r| r.id), Some("studio-b"));
        assert_eq!(named_room("studio-b, 3pm").map(|r| r.id), Some("studio-b"));
        assert_eq!(named_room("the nook's corner").map(|r| r.id), Some("nook"));
        assert_eq!(named_room("atrium or nook"), None);
        assert_eq!(named_room("snooker table"), None);
        assert_eq!(named_room("studio-bb"), None);
        assert_eq!(named_room(""), None);
    }

    #[test]
    fn state_round_trips_and_rejects_garbage() {
        let state = BookingState::first("the big room", Some("Friday"));
        let encoded = state.encode();
        assert!(encoded
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(BookingState::decode(&encoded), Some(state));

        let wrong_version = URL_SAFE_NO_PAD.encode(r#"{"v":2,"hint":"x","when":null,"round":1}"#);
        let round_zero = URL_SAFE_NO_PAD.encode(r#"{"v":1,"hint":"x","when":null,"round":0}"#);
        for bad in [
            "",
            "!!!",
            "bm90IGpzb24",
            wrong_version.as_str(),
            round_zero.as_str(),
        ] {
            assert_eq!(BookingState::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn state_clips_long_text() {
        let state = BookingState::first(&"é".repeat(500), Some(&"w".repeat(500)));
        assert_eq!(state.hint.chars().count(), MAX_ECHO_CHARS);
        assert_eq!(state.when.unwrap().len(), MAX_ECHO_CHARS);
    }

    #[test]
    fn a_named_room_is_booked_directly() {
        let result = result_of(&call_tool_body(
            "book_room",
            json!({"hint": "nook"}),
            "{}",
            json!(null),
        ));
        assert_eq!(result["resultType"], "complete");
        assert_eq!(result["content"][0]["text"], "Booked nook for today");
        assert_eq!(
            result["structuredContent"],
            json!({"room_id": "nook", "booked": true})
        );
    }

    #[test]
    fn an_ambiguous_hint_asks_which_room() {
        let result = ask("the \"big\" room", ELICITATION);
        assert_eq!(result["resultType"], "input_required");
        let request = &result["inputRequests"]["room"];
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(request["params"]["mode"], "form");
        assert_eq!(
            request["params"]["message"],
            "\"the \"big\" room\" could mean three rooms. Which one should I book?"
        );
        let schema = &request["params"]["requestedSchema"];
        assert_eq!(schema["required"], json!(["room_id"]));
        assert_eq!(
            schema["properties"]["room_id"]["oneOf"],
            json!([
                {"const": "atrium", "title": "Atrium (40 seats)"},
                {"const": "studio-b", "title": "Studio B (12 seats)"},
                {"const": "nook", "title": "The Nook (4 seats)"}
            ])
        );
        let state = BookingState::decode(result["requestState"].as_str().unwrap()).unwrap();
        assert_eq!((state.round, state.when.as_deref()), (1, Some("Friday")));
    }

    #[test]
    fn the_question_clips_long_hints() {
        let result = ask(&"h".repeat(300), ELICITATION);
        let message = result["inputRequests"]["room"]["params"]["message"]
            .as_str()
            .unwrap();
        assert!(message.starts_with(&format!("\"{}\" could", "h".repeat(80))));
    }

    #[test]
    fn elicitation_capability_is_required_to_ask() {
        for caps in ["{}", r#"{"elicitation":{"url":{}}}"#, r#"{"sampling":{}}"#] {
            let body = call_tool_body(
                "book_room",
                json!({"hint": "the big room"}),
                caps,
                json!(null),
            );
            let (status, reply) = json_reply(&body);
            assert_eq!(status, StatusCode::OK);
            assert_eq!(reply["id"], 7);
            assert_eq!(reply["error"]["code"], MISSING_CAPABILITY, "{caps}");
            assert_eq!(
                reply["error"]["data"],
                json!({"requiredCapabilities": {"elicitation": {"form": {}}}})
            );
        }
        let form_and_url = r#"{"elicitation":{"form":{},"url":{}}}"#;
        assert_eq!(
            ask("the big room", form_and_url)["resultType"],
            "input_required"
        );
    }

    #[test]
    fn retry_with_a_room_books_it() {
        let state = ask("the big room", ELICITATION)["requestState"].clone();
        let (status, reply) = retry(
            &state,
            json!({"room": {"action": "accept", "content": {"room_id": "atrium"}}}),
        );
        assert_eq!(status, StatusCode::OK);
        let result = &reply["result"];
        assert_eq!(result["resultType"], "complete");
        assert_eq!(result["content"][0]["text"], "Booked atrium for Friday");
        assert_eq!(
            result["structuredContent"],
            json!({"room_id": "atrium", "booked": true})
        );
    }

    #[test]
    fn retry_with_decline_or_cancel_books_nothing() {
        let state = ask("the big room", ELICITATION)["requestState"].clone();
        for action in ["decline", "cancel"] {
            let (_, reply) = retry(&state, json!({"room": {"action": action}}));
            assert_eq!(
                reply["result"]["content"][0]["text"],
                "Booking cancelled: no room chosen"
            );
            assert_eq!(
                reply["result"]["structuredContent"],
                json!({"booked": false})
            );
        }
    }

    #[test]
    fn retry_with_a_non_room_asks_again() {
        let state = ask("the big room", ELICITATION)["requestState"].clone();
        for content in [
            json!({"room_id": "attic"}),
            json!({"room_id": 3}),
            json!(null),
        ] {
            let (_, reply) = retry(
                &state,
                json!({"room": {"action": "accept", "content": content}}),
            );
            let result = &reply["result"];
            assert_eq!(result["resultType"], "input_required");
            let message = result["inputRequests"]["room"]["params"]["message"]
                .as_str()
                .unwrap();
            assert!(
                message.starts_with("That answer was not one of the rooms."),
                "{message}"
            );
            let next = BookingState::decode(result["requestState"].as_str().unwrap()).unwrap();
            assert_eq!(next.round, 2);
        }
    }

    #[test]
    fn retry_without_valid_state_or_answer_is_invalid_params() {
        let state = ask("the big room", ELICITATION)["requestState"].clone();
        let accept = json!({"room": {"action": "accept", "content": {"room_id": "nook"}}});
        let cases = [
            (json!(null), accept.clone(), "invalid requestState"),
            (json!("not-a-state"), accept.clone(), "invalid requestState"),
            (
                state.clone(),
                json!({"other": {"action": "accept"}}),
                "missing inputResponses.room",
            ),
            (
                state.clone(),
                json!({"room": {"action": "maybe"}}),
                "invalid inputResponses",
            ),
            (state, json!([1]), "invalid inputResponses"),
        ];
        for (state, responses, message) in cases {
            let (status, reply) = retry(&state, responses);
            assert_eq!(status, StatusCode::OK);
            assert_eq!(reply["error"]["code"], INVALID_PARAMS);
            assert_eq!(reply["error"]["message"], message);
        }
    }

    // --- room_report --------------------------------------------------------------

    #[test]
    fn room_report_plans_a_stream() {
        let mut params = json!({"_meta": meta("{}"), "name": "room_report", "arguments": {"steps": 5, "delay_ms": 10}});
        params["_meta"]["progressToken"] = json!("tok");
        let Reply::Stream(plan) = handle_message(&request(json!("r1"), "tools/call", params))
        else {
            panic!()
        };
        assert_eq!(plan.id.get(), r#""r1""#);
        assert_eq!(
            plan.report,
            Report {
                progress_token: Some(json!("tok")),
                steps: 5,
                delay: Duration::from_millis(10)
            }
        );

        let Reply::Stream(plan) =
            handle_message(&call_tool_body("room_report", json!({}), "{}", json!(null)))
        else {
            panic!()
        };
        assert_eq!(
            plan.report,
            Report {
                progress_token: None,
                steps: 3,
                delay: Duration::from_millis(300)
            }
        );
    }

    #[test]
    fn room_report_rejects_out_of_range_arguments() {
        for arguments in [
            json!({"steps": 21}),
            json!({"delay_ms": 5001}),
            json!({"steps": -1}),
        ] {
            let result = result_of(&call_tool_body("room_report", arguments, "{}", json!(null)));
            assert_eq!(result["isError"], true);
        }
    }

    #[test]
    fn clip_respects_char_boundaries() {
        assert_eq!(clip("héllo", 2), "hé");
        assert_eq!(clip("hi", 80), "hi");
    }

    // --- over the network -----------------------------------------------------------

    mod network {
        use super::*;
        use http_body_util::Full;
        use hyper::client::conn::{http1, http2};

        async fn start() -> (std::net::SocketAddr, watch::Sender<bool>) {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (stop, stopped) = watch::channel(false);
            tokio::spawn(serve(listener, stopped));
            (addr, stop)
        }

        async fn http1_client(addr: std::net::SocketAddr) -> http1::SendRequest<Full<Bytes>> {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(conn);
            sender
        }

        fn post(path: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
            Request::post(path)
                .header(CONTENT_TYPE, "application/json")
                .header("host", "localhost")
                .body(Full::new(Bytes::from(body)))
                .unwrap()
        }

        #[tokio::test]
        async fn book_room_over_http1_returns_input_required() {
            let (addr, _stop) = start().await;
            let mut client = http1_client(addr).await;
            let body = call_tool_body(
                "book_room",
                json!({"hint": "the big room"}),
                ELICITATION,
                json!(null),
            );
            let response = client.send_request(post("/mcp", body)).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            let reply: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(reply["id"], 7);
            assert_eq!(reply["result"]["resultType"], "input_required");

            // Same connection (keep-alive): wrong path and wrong method.
            let response = client
                .send_request(post("/other", b"{}".to_vec()))
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::NOT_FOUND);
            let get = Request::get("/mcp")
                .header("host", "localhost")
                .body(Full::default())
                .unwrap();
            let response = client.send_request(get).await.unwrap();
            assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
            assert_eq!(response.headers()[ALLOW], "POST");
        }

        #[tokio::test]
        async fn ping_over_http2() {
            let (addr, _stop) = start().await;
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut client, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            let request = Request::post("http://localhost/mcp")
                .body(Full::new(Bytes::from(request(json!(1), "ping", json!({})))))
                .unwrap();
            let response = client.send_request(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(
                &bytes[..],
                br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#
            );
        }

        fn report_body(steps: u32, delay_ms: u64) -> Vec<u8> {
            let mut params = json!({"_meta": meta("{}"), "name": "room_report", "arguments": {"steps": steps, "delay_ms": delay_ms}});
            params["_meta"]["progressToken"] = json!(42);
            request(json!(9), "tools/call", params)
        }

        #[tokio::test]
        async fn room_report_streams_progress_then_the_result() {
            let (addr, _stop) = start().await;
            let mut client = http1_client(addr).await;
            let response = client
                .send_request(post("/mcp", report_body(2, 5)))
                .await
                .unwrap();
            assert_eq!(response.headers()[CONTENT_TYPE], "text/event-stream");
            assert_eq!(response.headers()[CACHE_CONTROL], "no-cache");
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            let text = std::str::from_utf8(&bytes).unwrap();
            let events: Vec<Value> = text
                .split("\n\n")
                .filter(|e| !e.is_empty())
                .map(|e| {
                    serde_json::from_str(e.strip_prefix("event: message\ndata: ").unwrap()).unwrap()
                })
                .collect();
            assert_eq!(events.len(), 3);
            assert_eq!(
                events[0]["params"],
                json!({"progressToken": 42, "progress": 1, "total": 2, "message": "Checked room 1 of 2"})
            );
            assert_eq!(events[2]["id"], 9);
            assert_eq!(events[2]["result"]["resultType"], "complete");
        }

        #[tokio::test]
        async fn room_report_stops_when_the_client_goes_away() {
            let (addr, _stop) = start().await;
            let before = report_streams_cancelled();
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut client, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
            let conn = tokio::spawn(conn);
            let response = client
                .send_request(post("/mcp", report_body(20, 50)))
                .await
                .unwrap();
            let mut body = response.into_body();
            let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
            assert!(first.starts_with(b"event: message\ndata: "));
            // Hang up mid-stream.
            drop((body, client));
            conn.abort();

            let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
            while report_streams_cancelled() <= before {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "producer kept running"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }

        #[tokio::test]
        async fn serve_returns_on_shutdown() {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let (stop, stopped) = watch::channel(false);
            let server = tokio::spawn(serve(listener, stopped));
            stop.send(true).unwrap();
            tokio::time::timeout(Duration::from_secs(2), server)
                .await
                .unwrap()
                .unwrap();
        }
    }
}
