//! The MCP server: four tools on rmcp's tool router.
//!
//! * `book_room`: the MRTR seed scenario (see [`crate::booking`]).
//! * `cancel_booking`: listed as destructive, so the demo gateway's
//!   `[[approval]]` rule asks the person before it goes through.
//! * `room_report`: slow work with `notifications/progress`, so the answer is
//!   an event stream; it stops as soon as the client goes away.
//! * `get_room`: a plain, fast lookup (the benchmark's request).

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{InputResponses, RequestState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, Implementation, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::json;

use crate::booking::{self, BookRoomArgs, Booker, KeyError, Retry};
use crate::clip;
use crate::rooms;

/// The name the server gives itself in `server/discover`.
pub const SERVER_NAME: &str = "portcullis-demo-rooms";
const MAX_REPORT_STEPS: u32 = 20;
const MAX_REPORT_DELAY_MS: u64 = 5000;
/// Longest room id echoed back in an error.
const MAX_ECHO_CHARS: usize = 80;

const INSTRUCTIONS: &str = "Demo room-booking server. Use `get_room` to look a room up, \
    `book_room` to book one (if the hint does not name exactly one room, the server asks \
    which one you mean), `cancel_booking` to cancel a booking, and `room_report` for a slow, streamed report with progress.";

/// Counts `room_report` runs that stopped because their client went away.
static REPORTS_CANCELLED: AtomicU64 = AtomicU64::new(0);

/// How many `room_report` runs stopped early because their client went away
/// (the MCP way to cancel a request). Tests use it to check that the server
/// really stops working on cancellation.
pub fn report_streams_cancelled() -> u64 {
    REPORTS_CANCELLED.load(Ordering::Relaxed)
}

/// The server. Cheap to clone: the transport makes one per request.
#[derive(Clone)]
pub struct RoomServer {
    inner: Arc<Inner>,
}

struct Inner {
    booker: Booker,
    /// Built once: rmcp's default would rebuild every tool's schema per call.
    tools: ToolRouter<RoomServer>,
}

impl RoomServer {
    pub fn new() -> Result<Self, KeyError> {
        Ok(RoomServer {
            inner: Arc::new(Inner {
                booker: Booker::with_random_key()?,
                tools: Self::tool_router(),
            }),
        })
    }
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct GetRoomArgs {
    /// atrium, studio-b or nook
    room_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct CancelBookingArgs {
    /// atrium, studio-b or nook
    room_id: String,
    /// The day of the booking (YYYY-MM-DD).
    day: String,
    /// The hour the booking starts, 0-23.
    #[schemars(range(max = 23))]
    hour: u8,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct RoomReportArgs {
    /// How many rooms to check (at most 20).
    #[serde(default = "default_steps")]
    #[schemars(range(max = 20))]
    steps: u32,
    /// Time spent per room, in milliseconds (at most 5000).
    #[serde(default = "default_delay_ms")]
    #[schemars(range(max = 5000))]
    delay_ms: u64,
}

fn default_steps() -> u32 {
    3
}

fn default_delay_ms() -> u64 {
    300
}

#[tool_router]
impl RoomServer {
    #[tool(
        title = "Book a room",
        description = "Book a meeting room for a day and hour from a free-text hint. If the \
            hint does not name exactly one room (atrium, studio-b, nook), asks which room is meant."
    )]
    fn book_room(
        &self,
        Parameters(args): Parameters<BookRoomArgs>,
        RequestState(request_state): RequestState,
        InputResponses(input_responses): InputResponses,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let can_ask = booking::supports_form(ctx.client_capabilities().as_ref());
        let retry = Retry {
            request_state,
            input_responses,
        };
        self.inner.booker.call(&args, retry, can_ask)
    }

    #[tool(
        title = "Get a room",
        description = "Look up a room by id: atrium, studio-b or nook.",
        annotations(read_only_hint = true)
    )]
    fn get_room(&self, Parameters(args): Parameters<GetRoomArgs>) -> CallToolResult {
        match rooms::by_id(&args.room_id) {
            Some(room) => {
                let text = format!("{} ({}) has {} seats.", room.name, room.id, room.seats);
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(json!({"room_id": room.id, "seats": room.seats}));
                result
            }
            None => CallToolResult::error(vec![ContentBlock::text(format!(
                "No room named \"{}\". Rooms: atrium, studio-b, nook.",
                clip(&args.room_id, MAX_ECHO_CHARS)
            ))]),
        }
    }

    #[tool(
        title = "Cancel a booking",
        description = "Cancel the booking of a room for a day and hour.",
        annotations(destructive_hint = true, read_only_hint = false)
    )]
    fn cancel_booking(&self, Parameters(args): Parameters<CancelBookingArgs>) -> CallToolResult {
        let Some(room) = rooms::by_id(&args.room_id) else {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "No room named \"{}\". Rooms: atrium, studio-b, nook.",
                clip(&args.room_id, MAX_ECHO_CHARS)
            ))]);
        };
        let day = clip(&args.day, MAX_ECHO_CHARS);
        let text = format!(
            "Cancelled the booking of {} ({}) on {day} at {:02}:00.",
            room.id, room.name, args.hour
        );
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content =
            Some(json!({"cancelled": true, "room_id": room.id, "day": day, "hour": args.hour}));
        result
    }

    #[tool(
        title = "Room report",
        description = "Check the rooms one by one, reporting progress as it goes.",
        annotations(read_only_hint = true)
    )]
    async fn room_report(
        &self,
        Parameters(args): Parameters<RoomReportArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if args.steps > MAX_REPORT_STEPS {
            return Ok(report_error(format!(
                "steps must be at most {MAX_REPORT_STEPS}"
            )));
        }
        if args.delay_ms > MAX_REPORT_DELAY_MS {
            return Ok(report_error(format!(
                "delay_ms must be at most {MAX_REPORT_DELAY_MS}"
            )));
        }
        let mut run = ReportRun::started();
        let token = ctx.meta.get_progress_token();
        for step in 1..=args.steps {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(args.delay_ms)) => {}
                () = ctx.ct.cancelled() => return Err(ErrorData::internal_error("cancelled", None)),
            }
            if let Some(token) = token.clone() {
                let progress = ProgressNotificationParam::new(token, f64::from(step))
                    .with_total(f64::from(args.steps))
                    .with_message(format!("Checked room {step} of {}", args.steps));
                if ctx.peer.notify_progress(progress).await.is_err() {
                    return Err(ErrorData::internal_error("client went away", None));
                }
            }
        }
        run.finished();
        Ok(report_result(args.steps))
    }
}

/// Counts a report as cancelled unless it reached its end, however it stopped
/// (an early return, or rmcp dropping the handler).
struct ReportRun {
    finished: bool,
}

impl ReportRun {
    fn started() -> Self {
        ReportRun { finished: false }
    }

    fn finished(&mut self) {
        self.finished = true;
    }
}

impl Drop for ReportRun {
    fn drop(&mut self) {
        if !self.finished {
            REPORTS_CANCELLED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn report_result(steps: u32) -> CallToolResult {
    let rooms: Vec<_> = rooms::all()
        .iter()
        .map(|room| json!({"room_id": room.id, "seats": room.seats}))
        .collect();
    let text = format!("Room report: checked {steps} rooms, all available.");
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({"checked": steps, "rooms": rooms}));
    result
}

fn report_error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

#[tool_handler(router = self.inner.tools)]
impl ServerHandler for RoomServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[ProtocolVersion::V_2026_07_28])
    }
}
