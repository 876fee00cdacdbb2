//! Shared test harness: a gateway started in-process on 127.0.0.1, real
//! upstream servers on loopback (scripted raw-TCP ones for hostile behaviour),
//! and an HTTP client.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portcullis::config::GatewayConfig;
use portcullis::server::RunningGateway;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const VERSION: &str = "2026-07-28";

/// The older protocol generation, with sessions.
pub const LEGACY_VERSION: &str = "2025-11-25";

/// POST a 2025-11-25 message, in `session` when given.
pub fn legacy_post(
    c: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: serde_json::Value,
) -> reqwest::RequestBuilder {
    let mut r = c
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", LEGACY_VERSION)
        .body(body.to_string());
    if let Some(s) = session {
        r = r.header("mcp-session-id", s);
    }
    r
}

/// How a test's upstream is reached: over HTTP, or as a stdio program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamKind {
    Http,
    /// A stdio program of the 2026-07-28 generation.
    Stdio,
    /// A stdio program of the 2025-11-25 generation (sessions).
    StdioSessions,
}

tokio::task_local! {
    /// The kind of upstream [`config_text`] writes, in this test.
    pub static UPSTREAM_KIND: UpstreamKind;
}

/// A test run twice, over an HTTP upstream and over the same upstream as a
/// stdio program (`over_http`, `over_stdio` in a module named after it):
/// the response-side phases must treat both alike.
#[macro_export]
macro_rules! over_both_kinds {
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        $crate::over_both_kinds!(Stdio; $(#[$meta])* async fn $name() $body);
    };
    ($stdio:ident; $(#[$meta:meta])* async fn $name:ident() $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn run() $body
            $(#[$meta])*
            #[tokio::test]
            async fn over_http() {
                $crate::common::UPSTREAM_KIND.scope($crate::common::UpstreamKind::Http, run()).await
            }
            $(#[$meta])*
            #[tokio::test]
            async fn over_stdio() {
                $crate::common::UPSTREAM_KIND.scope($crate::common::UpstreamKind::$stdio, run()).await
            }
        }
    };
}

/// The kind of upstream this test runs against.
pub fn upstream_kind() -> UpstreamKind {
    UPSTREAM_KIND.try_with(|k| *k).unwrap_or(UpstreamKind::Http)
}

pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The gateways of these tests run in the test binary: their stdio
    // programs are supervised by the portcullis binary itself.
    portcullis_dataplane::stdio::use_supervisor(env!("CARGO_BIN_EXE_portcullis").into());
    // What the stdio programs and their supervisors said, shown with a
    // failing test's output (a program that did not start says why there).
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "portcullis_dataplane::stdio=info",
        ))
        .try_init();
}

/// Gateway config with one listener, an admin listener and one upstream
/// routed at /mcp. `extra` is appended (more [[upstream]] or [limits]...).
///
/// Inside [`over_both_kinds!`]'s stdio run, the upstream is the stdio
/// program `tests/it/stdio_relay.py` relaying to `upstream_url`.
pub fn config_text(upstream_url: &str, upstream_extra: &str, extra: &str) -> String {
    let reached = match upstream_kind() {
        UpstreamKind::Http => format!("url = \"{upstream_url}\"\nconnect_timeout = \"1s\""),
        kind => {
            let relay = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/stdio_relay.py");
            let generations = match kind {
                _ if upstream_extra.contains("generations") => "",
                UpstreamKind::StdioSessions => "generations = [\"2025-11-25\"]",
                _ => "generations = [\"2026-07-28\"]",
            };
            format!("command = [\"python3\", \"{relay}\", \"{upstream_url}\"]\nconnect_timeout = \"20s\"\n{generations}")
        }
    };
    // A relayed answer is a Python thread's HTTP round trip: on a loaded
    // 2-core CI machine it has taken longer than an HTTP upstream's 2 s.
    let timeout = match upstream_kind() {
        UpstreamKind::Http => "2s",
        _ => "10s",
    };
    format!(
        r#"
[[listener]]
address = "127.0.0.1:0"

[admin]
address = "127.0.0.1:0"

[[upstream]]
id = "test"
name = "Test upstream"
{reached}
response_timeout = "{timeout}"
stream_idle_timeout = "{timeout}"
{upstream_extra}

[[route]]
path = "/mcp"
upstream = "test"

[audit]
sink = "off"

{extra}
"#
    )
}

pub async fn start_gateway(text: &str) -> RunningGateway {
    install_crypto();
    let config = GatewayConfig::parse(text, Path::new("test.toml")).expect("test config is valid");
    RunningGateway::start(config).await.expect("gateway starts")
}

/// A gateway whose rules read `clock` (tests move it instead of sleeping).
pub async fn start_gateway_with_clock(
    text: &str,
    clock: std::sync::Arc<portcullis::model::ManualClock>,
) -> RunningGateway {
    install_crypto();
    let config = GatewayConfig::parse(text, Path::new("test.toml")).expect("test config is valid");
    RunningGateway::start_with(config, Vec::new(), clock)
        .await
        .expect("gateway starts")
}

pub fn url(g: &RunningGateway) -> String {
    format!("http://{}/mcp", g.addrs[0])
}

pub fn client() -> reqwest::Client {
    install_crypto();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

/// A tools/call request body.
pub fn call_body(id: &str, tool: &str, args: serde_json::Value) -> String {
    serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
                "progressToken": format!("progress-{id}")
            },
            "name": tool, "arguments": args
        }
    })
    .to_string()
}

/// POST a tools/call with consistent MCP headers.
pub fn call(
    c: &reqwest::Client,
    url: &str,
    id: &str,
    tool: &str,
    args: serde_json::Value,
) -> reqwest::RequestBuilder {
    call_with(c, url, id, tool, args, &[])
}

/// POST a tools/call whose headers are the consistent ones with `replace`
/// applied: `(name, Some(value))` sets a header, `(name, None)` removes it.
pub fn call_with(
    c: &reqwest::Client,
    url: &str,
    id: &str,
    tool: &str,
    args: serde_json::Value,
    replace: &[(&str, Option<&str>)],
) -> reqwest::RequestBuilder {
    let mut h = reqwest::header::HeaderMap::new();
    for (k, v) in [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", VERSION),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ] {
        h.insert(k, v.parse().unwrap());
    }
    for (k, v) in replace {
        let name: reqwest::header::HeaderName = k.parse().unwrap();
        match v {
            Some(v) => {
                h.insert(name, v.parse().unwrap());
            }
            None => {
                h.remove(name);
            }
        }
    }
    c.post(url).headers(h).body(call_body(id, tool, args))
}

pub async fn json_of(resp: reqwest::Response) -> serde_json::Value {
    let bytes = resp.bytes().await.expect("body");
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
}

/// One request as a scripted upstream received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub head: String,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }
}

/// What a scripted upstream does on one connection after reading a request.
#[derive(Debug, Clone)]
pub enum Step {
    Write(Vec<u8>),
    Sleep(Duration),
    /// Write; if the peer has gone, note it as a cancellation and stop.
    WriteOrNoteCancel(Vec<u8>),
    Close,
}

pub fn http_response(status: &str, content_type: &str, body: &str) -> Step {
    Step::Write(
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

pub fn sse_head() -> Step {
    Step::Write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n".to_vec())
}

pub fn chunk(data: &str) -> Vec<u8> {
    format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
}

pub fn sse_event(json: &str) -> Step {
    Step::WriteOrNoteCancel(chunk(&format!("event: message\ndata: {json}\n\n")))
}

pub fn sse_end() -> Step {
    Step::Write(b"0\r\n\r\n".to_vec())
}

type Script = Arc<dyn Fn(&Received) -> Vec<Step> + Send + Sync>;

/// A real TCP server on 127.0.0.1 that reads HTTP/1.1 requests and answers
/// each with a script of raw bytes, pauses and closes: the hostile upstream.
#[derive(Clone)]
pub struct ScriptedUpstream {
    pub addr: SocketAddr,
    pub received: Arc<Mutex<Vec<Received>>>,
    /// The list requests it answered itself from [`listing`] (never shown
    /// to the script; see [`ScriptedUpstream::start`]).
    pub listed: Arc<Mutex<Vec<Received>>>,
    lists_itself: bool,
    pub cancellations: Arc<Mutex<u32>>,
    /// TCP connections accepted so far (each one a dial by the gateway).
    pub accepted: Arc<std::sync::atomic::AtomicUsize>,
}

impl ScriptedUpstream {
    /// An upstream that lists like a real server: a `tools/list`,
    /// `prompts/list` or `resources/templates/list` its script does not
    /// answer with a list of that kind (a script written for calls) gets
    /// the shared [`listing`] instead, recorded in `listed`, not in
    /// `received`; a script that lists is used as it is. The gateway checks
    /// calls against what was listed (`[arguments] schema`, on in the
    /// `untrusted` preset) and fetches the list itself when the caller
    /// never listed: the script stays about what its test is about.
    pub async fn start(script: impl Fn(&Received) -> Vec<Step> + Send + Sync + 'static) -> Self {
        Self::start_with(script, true).await
    }

    /// An upstream whose script answers list requests too, whatever it
    /// answers: tests of a list that fails (an error, a pause, no list).
    pub async fn start_unlisted(
        script: impl Fn(&Received) -> Vec<Step> + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(script, false).await
    }

    async fn start_with(
        script: impl Fn(&Received) -> Vec<Step> + Send + Sync + 'static,
        lists_itself: bool,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let up = ScriptedUpstream {
            addr,
            listed: Default::default(),
            lists_itself,
            received: Default::default(),
            cancellations: Default::default(),
            accepted: Default::default(),
        };
        let script: Script = Arc::new(script);
        let state = up.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                state
                    .accepted
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(serve_conn(stream, script.clone(), state.clone()));
            }
        });
        up
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// What it received but list requests (the gateway fetches a list
    /// itself for a caller that calls before listing).
    pub fn calls(&self) -> Vec<Received> {
        let list = |r: &Received| {
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
            matches!(
                v.get("method").and_then(|m| m.as_str()),
                Some("tools/list" | "prompts/list" | "resources/templates/list")
            )
        };
        self.requests().into_iter().filter(|r| !list(r)).collect()
    }

    pub fn cancelled(&self) -> u32 {
        *self.cancellations.lock().unwrap()
    }

    /// How many connections the gateway has opened to this upstream.
    pub fn connections(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Received> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len = head
                .lines()
                .find_map(|l| {
                    l.split_once(':')
                        .filter(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                })
                .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let mut chunk = [0u8; 8192];
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Some(Received { head, body });
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn serve_conn(mut stream: TcpStream, script: Script, state: ScriptedUpstream) {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut stream, &mut buf).await {
        let steps = script(&req);
        let steps = match listing_answer(&req, &steps).filter(|_| state.lists_itself) {
            Some(answer) => {
                state.listed.lock().unwrap().push(req.clone());
                vec![answer]
            }
            None => {
                state.received.lock().unwrap().push(req.clone());
                steps
            }
        };
        for step in steps {
            match step {
                Step::Write(b) => {
                    if stream.write_all(&b).await.is_err() {
                        return;
                    }
                }
                Step::WriteOrNoteCancel(b) => {
                    let gone = stream.write_all(&b).await.is_err()
                        || stream.flush().await.is_err()
                        || peer_closed(&mut stream).await;
                    if gone {
                        *state.cancellations.lock().unwrap() += 1;
                        return;
                    }
                }
                Step::Sleep(d) => tokio::time::sleep(d).await,
                Step::Close => return,
            }
        }
    }
}

/// What the scripted upstreams list (`tests/it/common/listing.json`): the
/// tools, prompts and resource templates the tests call, each with the
/// arguments they send declared.
pub fn listing() -> &'static serde_json::Value {
    static LISTING: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    LISTING.get_or_init(|| {
        serde_json::from_str(include_str!("listing.json")).expect("listing.json is JSON")
    })
}

/// The answer to a list request its script does not answer with a list of
/// that kind, from [`listing`]; `None` for any other request.
fn listing_answer(req: &Received, scripted: &[Step]) -> Option<Step> {
    let v: serde_json::Value = serde_json::from_slice(&req.body).ok()?;
    let member = match v.get("method")?.as_str()? {
        "tools/list" => "tools",
        "prompts/list" => "prompts",
        "resources/templates/list" => "resourceTemplates",
        _ => return None,
    };
    // A script that lists, or refuses, is used as it is; one that answers
    // a list as it answers calls (200, no error, no list) gets the shared
    // listing. Tests of a list that fails otherwise use `start_unlisted`.
    let mut written = String::new();
    for step in scripted {
        if let Step::Write(b) | Step::WriteOrNoteCancel(b) = step {
            written.push_str(&String::from_utf8_lossy(b));
        }
    }
    let as_a_call = written.starts_with("HTTP/1.1 200")
        && !written.contains("\"error\"")
        && !written.contains(&format!("\"{member}\""));
    if !as_a_call {
        return None;
    }
    let result = serde_json::json!({ member: listing()[member].clone() });
    let id = v.get("id")?.to_string();
    Some(http_response(
        "200 OK",
        "application/json",
        &result_json(&id, result),
    ))
}

/// The peer closed its side (EOF), seen without blocking.
async fn peer_closed(stream: &mut TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_millis(20), stream.peek(&mut probe)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

/// A JSON-RPC result for request `id` (a JSON value as text).
pub fn result_json(id: &str, result: serde_json::Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": serde_json::from_str::<serde_json::Value>(id).unwrap(), "result": result}).to_string()
}

/// The `id` member of a received JSON-RPC request, as JSON text.
pub fn id_of(req: &Received) -> String {
    let v: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
    v.get("id")
        .map(|i| i.to_string())
        .unwrap_or_else(|| "null".into())
}

/// A demo `room_report` call through `gw`, read up to its first progress
/// event: the event stream, still open.
pub async fn open_room_report(
    gw: &RunningGateway,
    id: &str,
    steps: u32,
    delay_ms: u64,
) -> futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>> {
    let args = serde_json::json!({"steps": steps, "delay_ms": delay_ms});
    let resp = call(&client(), &url(gw), id, "room_report", args)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut stream = futures_util::StreamExt::boxed(resp.bytes_stream());
    let first = futures_util::StreamExt::next(&mut stream)
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("notifications/progress"));
    stream
}

/// The gateway's /metrics page.
pub async fn metrics(gw: &RunningGateway) -> String {
    client()
        .get(format!(
            "http://{}/metrics",
            gw.admin_addr.expect("an admin listener")
        ))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text")
}

/// An upstream that answers every request with a small `complete` result.
pub async fn answering_ok() -> ScriptedUpstream {
    ScriptedUpstream::start(|req| {
        let result = serde_json::json!({"content": [{"type": "text", "text": "ok"}]});
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id_of(req), result),
        )]
    })
    .await
}

/// An upstream that answers every request with the same `input_required`:
/// one form under `key` with `properties`. Retries only get asked again.
pub async fn always_asking(
    key: &'static str,
    message: &'static str,
    properties: serde_json::Value,
) -> ScriptedUpstream {
    ScriptedUpstream::start(move |req| {
        let result = serde_json::json!({"resultType": "input_required", "requestState": "upstream-state",
            "inputRequests": {key: {"method": "elicitation/create", "params": {"message": message,
              "requestedSchema": {"type": "object", "properties": properties.clone()}}}}});
        vec![http_response("200 OK", "application/json", &result_json(&id_of(req), result))]
    })
    .await
}

/// Where a process started by a test listens, read from what it logs: the
/// gateway's `listening … addr=` (one per listener) and `admin listening
/// addr=` lines, the demo server's `demo MCP server on http://…`. Configs
/// say port 0, so the OS picks and nothing can take a port between the test
/// choosing it and the process binding it.
#[derive(Debug)]
pub struct Bound {
    pub listeners: Vec<SocketAddr>,
    pub admin: Option<SocketAddr>,
}

fn addr_after(line: &str, prefix: &str) -> Option<SocketAddr> {
    let rest = &line[line.find(prefix)? + prefix.len()..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '/')
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Wait (up to 15 s) until the log file `log` names `listeners` listener
/// addresses and, when `admin`, the admin one.
pub async fn bound_from_log(log: &Path, listeners: usize, admin: bool) -> Bound {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let mut bound = Bound {
            listeners: Vec::new(),
            admin: None,
        };
        for line in text.lines() {
            if line.contains("admin listening") {
                bound.admin = addr_after(line, "addr=");
            } else if line.contains(" listening ") {
                bound.listeners.extend(addr_after(line, "addr="));
            } else if line.contains("demo MCP server on ") {
                bound.listeners.extend(addr_after(line, "http://"));
            }
        }
        if bound.listeners.len() >= listeners && (bound.admin.is_some() || !admin) {
            return bound;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no listening addresses in {}:\n{text}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A file for a child process's stderr.
pub fn log_file(dir: &Path, name: &str) -> (std::process::Stdio, std::path::PathBuf) {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).expect("log file");
    (std::process::Stdio::from(file), path)
}

/// An HTTP answer read as a 2025-11-25 event stream, message by message as
/// it arrives (a JSON body yields its one message).
pub struct EventStream {
    resp: reqwest::Response,
    text: String,
}

impl EventStream {
    pub fn new(resp: reqwest::Response) -> EventStream {
        EventStream {
            resp,
            text: String::new(),
        }
    }

    /// The next JSON-RPC message (`None` at the end).
    pub async fn next(&mut self) -> Option<serde_json::Value> {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let event: String = self.text.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                let joined = data.join("\n");
                if !joined.trim().is_empty() {
                    return Some(serde_json::from_str(&joined).unwrap());
                }
                continue;
            }
            let Some(chunk) = self.resp.chunk().await.unwrap() else {
                let rest = std::mem::take(&mut self.text);
                return (!rest.trim().is_empty()).then(|| serde_json::from_str(&rest).unwrap());
            };
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}
