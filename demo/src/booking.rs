//! `book_room`: the seed scenario of MRTR elicitation.
//!
//! A hint that names exactly one room is booked at once. Otherwise the server
//! answers `input_required` with a `room` form (which room did you mean?) and
//! a `requestState`; the client's retry carries the answer in
//! `inputResponses` and the state back, and the room is booked (or not, on
//! decline or cancel).
//!
//! The state comes back from a client the server does not control, so it is
//! sealed with an HMAC (rmcp's [`RequestStateCodec`]) under a key made at
//! start, with a short expiry, and bound to the method and the arguments it
//! was issued for: a state minted for one booking cannot be replayed onto
//! another. (Single use is not the server's job here: the gateway enforces it
//! when configured, see `config/demo.toml`.)

use std::time::Duration;

use chrono::NaiveDate;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitationCapability, ElicitationSchema, EnumSchema,
    FormElicitationCapability, InputRequest, InputRequests, InputRequiredResult, InputResponses,
    RequestStateCodec, RequestStateError, SealOptions,
};
use rmcp::schemars::JsonSchema;
use rmcp::ErrorData;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::clip;
use crate::rooms::{self, Room};

/// The `inputRequests` key of the room question.
pub const ROOM_KEY: &str = "room";
/// The form field holding the chosen room.
pub const ROOM_FIELD: &str = "room_id";
/// How long an issued state stays valid: a person's thinking time, not a day.
const STATE_TTL: Duration = Duration::from_secs(10 * 60);
/// Questions per booking before the server gives up on non-answers.
const MAX_ROUNDS: u32 = 3;
/// Longest hint echoed back in the question.
const MAX_ECHO_CHARS: usize = 80;
/// The key length the codec asks for (HMAC-SHA256).
const KEY_BYTES: usize = 32;

/// The arguments of `book_room`, as in the seed scenario.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct BookRoomArgs {
    /// The day to book (YYYY-MM-DD).
    pub day: NaiveDate,
    /// The hour the booking starts, 0-23.
    #[schemars(range(max = 23))]
    pub hour: u8,
    /// Which room, in your own words (e.g. "the big room").
    pub room_hint: String,
}

/// What the server keeps between rounds, inside the sealed `requestState`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct BookingState {
    round: u32,
}

/// The MRTR part of a `tools/call`: present on a retry.
#[derive(Debug, Default)]
pub struct Retry {
    pub request_state: Option<String>,
    pub input_responses: Option<InputResponses>,
}

/// Books rooms; holds the key that seals this server's `requestState`.
pub struct Booker {
    codec: RequestStateCodec,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("no randomness for the requestState key: {0}")]
    Random(#[from] getrandom::Error),
    #[error(transparent)]
    Codec(#[from] RequestStateError),
}

impl Booker {
    /// A booker with a fresh random key: states survive neither a restart nor
    /// a hop to another instance, which is fine for a demo.
    pub fn with_random_key() -> Result<Self, KeyError> {
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key)?;
        Ok(Booker {
            codec: RequestStateCodec::try_new(key.to_vec())?,
        })
    }

    /// One round of `book_room`. `can_ask` says whether the client declared
    /// form elicitation for this request.
    pub fn call(
        &self,
        args: &BookRoomArgs,
        retry: Retry,
        can_ask: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        if args.hour > 23 {
            return Ok(tool_error("hour must be between 0 and 23"));
        }
        match (retry.request_state, retry.input_responses) {
            (None, None) => self.first_round(args, can_ask),
            (Some(state), Some(responses)) => self.answered(args, &state, &responses),
            (Some(_), None) => Err(ErrorData::invalid_params(
                "requestState without inputResponses",
                None,
            )),
            (None, Some(_)) => Err(ErrorData::invalid_params(
                "inputResponses without requestState",
                None,
            )),
        }
    }

    fn first_round(
        &self,
        args: &BookRoomArgs,
        can_ask: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        let named = rooms::named_by(&args.room_hint);
        if let [room] = named.as_slice() {
            return Ok(booked(room, args));
        }
        if !can_ask {
            return Err(missing_form_elicitation());
        }
        let hint = clip(&args.room_hint, MAX_ECHO_CHARS);
        let message = if named.is_empty() {
            format!("'{hint}' does not match any room. Which did you mean?")
        } else {
            format!("'{hint}' matches more than one room. Which did you mean?")
        };
        self.ask(args, 1, message)
    }

    fn answered(
        &self,
        args: &BookRoomArgs,
        sealed: &str,
        responses: &InputResponses,
    ) -> Result<CallToolResponse, ErrorData> {
        let state: BookingState = self
            .codec
            .open_json_with(sealed, &binding(args))
            .map_err(state_refused)?;
        let answer = responses
            .get(ROOM_KEY)
            .ok_or_else(|| ErrorData::invalid_params("missing inputResponses.room", None))?;
        let answer: RoomAnswer = serde_json::from_value(answer.clone())
            .map_err(|_| ErrorData::invalid_params("inputResponses.room is not an answer", None))?;
        match answer.action {
            Action::Decline => Ok(not_booked(
                "Booking cancelled: you declined to pick a room.",
            )),
            Action::Cancel => Ok(not_booked("Booking cancelled.")),
            Action::Accept => match answer.chosen_room() {
                Some(room) => Ok(booked(room, args)),
                None if state.round < MAX_ROUNDS => self.ask(
                    args,
                    state.round + 1,
                    "That is not one of the rooms. Which did you mean?".to_owned(),
                ),
                None => Ok(tool_error(
                    "No room chosen after several questions; nothing booked.",
                )),
            },
        }
    }

    /// The `input_required` result: the `room` form and the sealed state.
    fn ask(
        &self,
        args: &BookRoomArgs,
        round: u32,
        message: String,
    ) -> Result<CallToolResponse, ErrorData> {
        let bound = binding(args);
        let options = SealOptions::new().associated_data(&bound).ttl(STATE_TTL);
        let state = self
            .codec
            .seal_json_with(&BookingState { round }, &options)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let mut requests = InputRequests::new();
        requests.insert(ROOM_KEY.to_owned(), room_question(message)?);
        Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
    }
}

/// What the state is bound to: this method, this tool and these arguments.
/// Serialising the typed arguments gives one canonical form (fixed field order).
fn binding(args: &BookRoomArgs) -> Vec<u8> {
    let mut bound = b"tools/call:book_room:".to_vec();
    // Serialising a struct of a date, an integer and a string cannot fail.
    bound.extend(serde_json::to_vec(args).unwrap_or_default());
    bound
}

fn state_refused(error: RequestStateError) -> ErrorData {
    let message = match error {
        RequestStateError::Expired => "requestState has expired; start the booking again",
        _ => "invalid requestState",
    };
    ErrorData::invalid_params(message, None)
}

/// The form: one required `room_id`, a single-select enum of the room ids.
fn room_question(message: String) -> Result<InputRequest, ErrorData> {
    let ids = rooms::all().iter().map(|room| room.id.clone()).collect();
    let room_id = EnumSchema::builder(ids)
        .description(format!("The room to book. {}", rooms::seats_summary()))
        .build();
    let schema = ElicitationSchema::builder()
        .required_enum_schema(ROOM_FIELD, room_id)
        .build()
        .map_err(|e| ErrorData::internal_error(e, None))?;
    Ok(InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        },
    )))
}

#[derive(Deserialize)]
struct RoomAnswer {
    action: Action,
    #[serde(default)]
    content: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Action {
    Accept,
    Decline,
    Cancel,
}

impl RoomAnswer {
    fn chosen_room(&self) -> Option<&'static Room> {
        let id = self.content.as_ref()?.get(ROOM_FIELD)?.as_str()?;
        rooms::by_id(id)
    }
}

/// `-32021`: this tool can only resolve an ambiguous hint by asking.
fn missing_form_elicitation() -> ErrorData {
    let mut required = ClientCapabilities::default();
    required.elicitation =
        Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
    ErrorData::missing_required_client_capability(required)
}

/// `elicitation: {}` means form only; otherwise the modes are listed.
pub fn supports_form(caps: Option<&ClientCapabilities>) -> bool {
    caps.and_then(|caps| caps.elicitation.as_ref())
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

fn booked(room: &Room, args: &BookRoomArgs) -> CallToolResponse {
    let text = format!(
        "Booked {} ({}) on {} at {:02}:00.",
        room.id, room.name, args.day, args.hour
    );
    let data = json!({"booked": true, "room_id": room.id, "day": args.day, "hour": args.hour});
    with_data(
        CallToolResult::success(vec![ContentBlock::text(text)]),
        data,
    )
}

fn not_booked(text: &str) -> CallToolResponse {
    with_data(
        CallToolResult::success(vec![ContentBlock::text(text)]),
        json!({"booked": false}),
    )
}

fn tool_error(text: &str) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

fn with_data(mut result: CallToolResult, data: Value) -> CallToolResponse {
    result.structured_content = Some(data);
    result.into()
}

#[cfg(test)]
mod tests;
