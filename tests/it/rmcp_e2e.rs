//! End to end with the official Rust MCP SDK (rmcp 3.11, protocol
//! 2026-07-28) on both sides of the gateway: an rmcp server upstream and an
//! rmcp client, plus the rmcp client against the built-in demo server.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use rmcp::handler::server::tool::{InputResponses as InputResponsesArg, RequestState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, ContentBlock, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, ElicitationSchema, Implementation, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, ProgressNotificationParam, ProtocolVersion,
    Request, ServerCapabilities, ServerConfig, ServerResult,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, RoleClient, RoleServer, RunningService,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{
    tool, tool_handler, tool_router, ClientHandler, ClientLifecycleMode, ClientServiceExt,
    ErrorData, ServerHandler,
};
use serde_json::json;

// ---------------------------------------------------------------- upstream

/// An rmcp server: `book_room` asks which room over MRTR (two rounds when the
/// first answer is "atrium": it then asks for a time), `slow_task` reports
/// progress. Records every requestState it receives.
#[derive(Clone, Default)]
struct Rooms {
    states_issued: Arc<Mutex<Vec<String>>>,
    states_received: Arc<Mutex<Vec<String>>>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct BookArgs {
    hint: String,
}

fn form(message: &str, property: &str, schema: serde_json::Value) -> InputRequest {
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object", "properties": { property: schema }, "required": [property]
    }))
    .expect("valid elicitation schema");
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.into(),
            requested_schema: schema,
        },
    ))
}

impl Rooms {
    /// A state with bytes a careless proxy might alter: padding, slashes,
    /// unicode escapes in JSON and a long tail.
    fn issue(&self, round: u32, hint: &str) -> String {
        let state = format!("r{round}:{hint}/+==\u{e9}\\u0041:{}", "z".repeat(200));
        self.states_issued.lock().unwrap().push(state.clone());
        state
    }

    fn ask(&self, round: u32, hint: &str, key: &str, req: InputRequest) -> CallToolResponse {
        let mut reqs = InputRequests::new();
        reqs.insert(key.to_string(), req);
        InputRequiredResult::new(Some(reqs), Some(self.issue(round, hint))).into()
    }
}

#[tool_router]
impl Rooms {
    #[tool(description = "Book a room; asks which one when the hint is ambiguous")]
    async fn book_room(
        &self,
        Parameters(args): Parameters<BookArgs>,
        RequestState(state): RequestState,
        InputResponsesArg(responses): InputResponsesArg,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(state) = state else {
            let room =
                json!({"type": "string", "title": "Room", "enum": ["atrium", "studio-b", "nook"]});
            return Ok(self.ask(
                1,
                &args.hint,
                "room",
                form("Which room is the big room?", "room_id", room),
            ));
        };
        self.states_received.lock().unwrap().push(state.clone());
        let responses =
            responses.ok_or_else(|| ErrorData::invalid_params("inputResponses missing", None))?;
        if let Some(room) = responses.get("room") {
            if room["action"] != "accept" {
                return Ok(
                    CallToolResult::success(vec![ContentBlock::text("Booking cancelled")]).into(),
                );
            }
            let id = room["content"]["room_id"]
                .as_str()
                .unwrap_or("?")
                .to_owned();
            if id == "atrium" {
                let time =
                    json!({"type": "string", "title": "Start time", "enum": ["09:00", "14:00"]});
                return Ok(self.ask(
                    2,
                    &args.hint,
                    "time",
                    form("The atrium is busy at noon. When?", "start", time),
                ));
            }
            return Ok(
                CallToolResult::success(vec![ContentBlock::text(format!("Booked {id}"))]).into(),
            );
        }
        if let Some(time) = responses.get("time") {
            let start = time["content"]["start"].as_str().unwrap_or("?");
            return Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "Booked atrium at {start}"
            ))])
            .into());
        }
        Err(ErrorData::invalid_params("unexpected inputResponses", None))
    }

    #[tool(description = "Three steps with progress")]
    async fn slow_task(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let token = ctx.meta.get_progress_token();
        for step in 1..=3u32 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            if let Some(token) = token.clone() {
                ctx.peer
                    .notify_progress(
                        ProgressNotificationParam::new(token, f64::from(step)).with_total(3.0),
                    )
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "slow done",
        )]))
    }
}

#[tool_handler]
impl ServerHandler for Rooms {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[ProtocolVersion::V_2026_07_28])
    }
}

async fn start_rmcp_upstream(rooms: Rooms) -> String {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_sse_keep_alive(None);
    let service = StreamableHttpService::new(
        move || Ok(rooms.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let svc = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}/mcp")
}

// ------------------------------------------------------------------ client

/// An rmcp client that answers forms from a fixed list and counts progress.
#[derive(Clone)]
struct Person {
    answers: Arc<Mutex<Vec<ElicitResult>>>,
    forms_seen: Arc<Mutex<Vec<String>>>,
    progress: Arc<AtomicU32>,
}

impl Person {
    fn answering(answers: Vec<ElicitResult>) -> Self {
        Person {
            answers: Arc::new(Mutex::new(answers)),
            forms_seen: Default::default(),
            progress: Default::default(),
        }
    }
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let mut caps = ClientCapabilities::default();
        caps.elicitation = Some(ElicitationCapability::new());
        ClientConfig::new(caps, Implementation::new("portcullis-test", "0.1.0"))
    }

    async fn create_elicitation(
        &self,
        req: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.forms_seen
            .lock()
            .unwrap()
            .push(serde_json::to_string(&req).unwrap());
        let mut answers = self.answers.lock().unwrap();
        if answers.is_empty() {
            return Ok(ElicitResult::new(ElicitationAction::Cancel));
        }
        Ok(answers.remove(0))
    }

    async fn on_progress(
        &self,
        _p: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.progress.fetch_add(1, Ordering::SeqCst);
    }
}

async fn connect(person: Person, url: &str) -> RunningService<RoleClient, Person> {
    install_crypto();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    );
    person
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("rmcp client connects through the gateway")
}

fn accept(content: serde_json::Value) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(content)
}

fn text_of(r: &CallToolResult) -> String {
    serde_json::to_value(&r.content).unwrap().to_string()
}

fn args(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v.as_object().cloned().unwrap()
}

// ------------------------------------------------------------------- tests

#[tokio::test]
async fn rmcp_client_and_server_run_multi_round_mrtr_through_the_gateway() {
    let rooms = Rooms::default();
    let upstream = start_rmcp_upstream(rooms.clone()).await;
    let gw = start_gateway(&config_text(&upstream, "", "")).await;
    let person = Person::answering(vec![
        accept(json!({"room_id": "atrium"})),
        accept(json!({"start": "14:00"})),
    ]);
    let client = connect(person.clone(), &url(&gw)).await;

    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "book_room"));

    let done = client
        .call_tool(
            CallToolRequestParams::new("book_room")
                .with_arguments(args(json!({"hint": "the big room"}))),
        )
        .await
        .unwrap();
    assert!(
        text_of(&done).contains("Booked atrium at 14:00"),
        "{}",
        text_of(&done)
    );
    assert_eq!(
        person.forms_seen.lock().unwrap().len(),
        2,
        "two rounds of questions"
    );
    // Each requestState came back to the upstream exactly as it was issued.
    assert_eq!(
        *rooms.states_received.lock().unwrap(),
        *rooms.states_issued.lock().unwrap()
    );
    client.cancel().await.unwrap();
    gw.shutdown().await;
}

#[tokio::test]
async fn rmcp_manual_rounds_and_decline_through_the_gateway() {
    let rooms = Rooms::default();
    let upstream = start_rmcp_upstream(rooms.clone()).await;
    let gw = start_gateway(&config_text(&upstream, "", "")).await;
    let client = connect(Person::answering(vec![]), &url(&gw)).await;
    let params = CallToolRequestParams::new("book_room")
        .with_arguments(args(json!({"hint": "the big room"})));
    let CallToolResponse::InputRequired(first) =
        client.call_tool_once(params.clone()).await.unwrap()
    else {
        panic!("expected input_required");
    };
    let state = first.request_state.clone().expect("requestState");
    assert!(
        state.starts_with("pcs1."),
        "the client holds the gateway's sealed state: {state}"
    );
    assert_ne!(
        state,
        rooms.states_issued.lock().unwrap()[0],
        "never the upstream's own"
    );
    let mut responses = InputResponses::new();
    responses.insert("room".into(), json!({"action": "decline"}));
    let retry = params
        .with_input_responses(responses)
        .with_request_state(state);
    let CallToolResponse::Complete(done) = client.call_tool_once(retry).await.unwrap() else {
        panic!("expected complete");
    };
    assert!(text_of(&done).contains("Booking cancelled"));
    // The upstream got its own state back, byte for byte.
    assert_eq!(
        *rooms.states_received.lock().unwrap(),
        *rooms.states_issued.lock().unwrap()
    );
    client.cancel().await.unwrap();
    gw.shutdown().await;
}

#[tokio::test]
async fn rmcp_progress_notifications_arrive_before_the_result() {
    let upstream = start_rmcp_upstream(Rooms::default()).await;
    let gw = start_gateway(&config_text(&upstream, "", "")).await;
    let person = Person::answering(vec![]);
    let client = connect(person.clone(), &url(&gw)).await;
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("slow_task"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let ServerResult::CallToolResult(r) = handle.await_response().await.unwrap() else {
        panic!("expected a tool result")
    };
    assert!(text_of(&r).contains("slow done"));
    assert_eq!(
        person.progress.load(Ordering::SeqCst),
        3,
        "all progress events came before the result"
    );
    client.cancel().await.unwrap();
    gw.shutdown().await;
}

async fn start_demo() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(portcullis_demo::serve(listener, std::future::pending()));
    format!("http://{addr}/mcp")
}

#[tokio::test]
async fn rmcp_client_books_the_big_room_on_the_demo_server() {
    let gw = start_gateway(&config_text(&start_demo().await, "", "")).await;
    let person = Person::answering(vec![accept(json!({"room_id": "studio-b"}))]);
    let client = connect(person.clone(), &url(&gw)).await;
    let done = client
        .call_tool(CallToolRequestParams::new("book_room").with_arguments(args(
            json!({"day": "2026-09-17", "hour": 9, "room_hint": "the big room"}),
        )))
        .await
        .unwrap();
    assert!(
        text_of(&done).to_lowercase().contains("studio"),
        "{}",
        text_of(&done)
    );
    let form = person.forms_seen.lock().unwrap()[0].clone();
    for room in ["atrium", "studio-b", "nook"] {
        assert!(form.contains(room), "{form}");
    }
    client.cancel().await.unwrap();
    gw.shutdown().await;
}

#[tokio::test]
async fn dropping_a_demo_report_midway_cancels_it_upstream() {
    let gw = start_gateway(&config_text(&start_demo().await, "", "")).await;
    let before = portcullis_demo::report_streams_cancelled();
    let stream = open_room_report(&gw, "r1", 20, 100).await;
    drop(stream);
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while portcullis_demo::report_streams_cancelled() == before
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        portcullis_demo::report_streams_cancelled() > before,
        "the demo server saw the cancellation"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn the_seeds_first_request_sent_verbatim_gets_the_seeds_form() {
    let gw = start_gateway(&config_text(&start_demo().await, "", "")).await;
    let resp = client()
        .post(url(&gw))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "book_room")
        .body(portcullis_demo::SEED_REQUEST)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let answer = json_of(resp).await;
    assert_eq!(answer["id"], 7);
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    assert_eq!(
        result["inputRequests"],
        json!({"room": {"method": "elicitation/create", "params": {
            "mode": "form",
            "message": "'the big room' matches more than one room. Which did you mean?",
            "requestedSchema": {
                "type": "object",
                "properties": {"room_id": {
                    "type": "string",
                    "enum": ["atrium", "studio-b", "nook"],
                    "description": "The room to book. The Atrium seats 24, Studio B 12, The Nook 4."
                }},
                "required": ["room_id"]
            }
        }}})
    );
    assert!(result["requestState"]
        .as_str()
        .unwrap()
        .starts_with("pcs1."));
    assert_eq!(
        result["_meta"]["dev.portcullis/provenance"]["upstream"]["name"],
        "Test upstream"
    );
    gw.shutdown().await;
}
