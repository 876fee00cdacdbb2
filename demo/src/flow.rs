//! `portcullis demo --flow`: the seed's exchange through a running gateway,
//! every message printed as it crosses the wire.
//!
//! 1. The client sends the seed's first request verbatim.
//! 2. The gateway answers `input_required`, as the client receives it: the
//!    form after the gateway's policy (sanitised text, provenance under
//!    `_meta`) and the gateway's own sealed `requestState`.
//! 3. The client retries: a new id, the same params, the answer in
//!    `inputResponses` and the `requestState` echoed byte for byte.
//! 4. The booking comes back complete.

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use crate::SEED_REQUEST;

/// Where `portcullis demo` serves the example upstream (config/demo.toml).
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080/mcp/rooms";
/// The seed's answer to the form.
const CHOSEN_ROOM: &str = "studio-b";
/// The id of the retry: a new request, so a new id.
const RETRY_ID: u64 = 8;
const PROTOCOL_VERSION: &str = "2026-07-28";
const PROVENANCE: &str = "dev.portcullis/provenance";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("bad gateway URL {url:?}: {source}")]
    Url {
        url: String,
        source: http::uri::InvalidUri,
    },
    #[error("cannot reach the gateway at {url}: {source} (is `portcullis demo` running?)")]
    Connect {
        url: String,
        source: hyper_util::client::legacy::Error,
    },
    #[error("the gateway at {url} did not answer within {REQUEST_TIMEOUT:?}")]
    Timeout { url: String },
    #[error("cannot build the request: {0}")]
    Request(#[from] http::Error),
    #[error("reading the gateway's answer: {0}")]
    Body(#[from] hyper::Error),
    #[error("the gateway's answer is not a JSON-RPC message: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("expected {expected}; the gateway answered (HTTP {status}): {answer}")]
    Unexpected {
        expected: &'static str,
        status: StatusCode,
        answer: String,
    },
    #[error("writing the transcript: {0}")]
    Output(#[from] std::io::Error),
}

/// One HTTP answer: its status and the JSON-RPC message it carried.
struct Answer {
    status: StatusCode,
    message: Value,
}

/// Runs the exchange against the gateway endpoint `url`, printing to `out`.
pub async fn run(url: &str, out: &mut impl Write) -> Result<(), FlowError> {
    let uri: Uri = url.parse().map_err(|source| FlowError::Url {
        url: url.to_owned(),
        source,
    })?;
    let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let first: Value = serde_json::from_str(SEED_REQUEST)?;

    writeln!(
        out,
        "1. The client calls book_room (the seed's request, verbatim):\n"
    )?;
    writeln!(out, "POST {url}\n{}", SEED_REQUEST.trim_end())?;
    let asked = post(&client, &uri, SEED_REQUEST.to_owned()).await?;
    let state = expect_input_required(&asked)?;
    writeln!(
        out,
        "\n2. The gateway answers input_required (HTTP {}):\n",
        asked.status
    )?;
    writeln!(out, "{}", serde_json::to_string_pretty(&asked.message)?)?;
    describe_answer(out, &asked.message, &state)?;

    let retry = retry_of(&first, &state);
    writeln!(
        out,
        "\n3. The person picks {CHOSEN_ROOM}; the client retries with a new id, the same \
         params, inputResponses and the requestState echoed byte for byte:\n"
    )?;
    writeln!(out, "POST {url}\n{}", serde_json::to_string_pretty(&retry)?)?;
    let done = post(&client, &uri, retry.to_string()).await?;
    expect_complete(&done)?;
    writeln!(
        out,
        "\n4. The booking is complete (HTTP {}):\n",
        done.status
    )?;
    writeln!(out, "{}", serde_json::to_string_pretty(&done.message)?)?;
    Ok(())
}

/// Points out what the gateway changed on the way: the state and the provenance.
fn describe_answer(out: &mut impl Write, answer: &Value, state: &str) -> Result<(), FlowError> {
    let shown: String = state.chars().take(24).collect();
    writeln!(
        out,
        "\n   requestState {shown}… ({} bytes) is the gateway's sealed state: it carries the \
         upstream's own state, who asked, for which tool and arguments, the round and the \
         asked schema; the client cannot read or change it.",
        state.len()
    )?;
    if answer["result"]["_meta"].get(PROVENANCE).is_some() {
        writeln!(
            out,
            "   _meta[\"{PROVENANCE}\"] is the gateway's provenance: which upstream asked \
             (its configured name), under which policy, and what the policy changed."
        )?;
    }
    Ok(())
}

/// The seed's retry: same params, plus the answer and the echoed state.
fn retry_of(first: &Value, state: &str) -> Value {
    let mut retry = first.clone();
    retry["id"] = json!(RETRY_ID);
    retry["params"]["inputResponses"] =
        json!({"room": {"action": "accept", "content": {"room_id": CHOSEN_ROOM}}});
    retry["params"]["requestState"] = json!(state);
    retry
}

fn expect_input_required(answer: &Answer) -> Result<String, FlowError> {
    let result = &answer.message["result"];
    match (
        result["resultType"].as_str(),
        result["requestState"].as_str(),
    ) {
        (Some("input_required"), Some(state)) => Ok(state.to_owned()),
        _ => Err(unexpected(
            "an input_required result with a requestState",
            answer,
        )),
    }
}

fn expect_complete(answer: &Answer) -> Result<(), FlowError> {
    match answer.message["result"]["resultType"].as_str() {
        Some("complete") => Ok(()),
        _ => Err(unexpected("a complete result", answer)),
    }
}

fn unexpected(expected: &'static str, answer: &Answer) -> FlowError {
    FlowError::Unexpected {
        expected,
        status: answer.status,
        answer: answer.message.to_string(),
    }
}

/// POSTs one `tools/call` of `book_room` (the headers must match the body).
async fn post(
    client: &Client<HttpConnector, Full<Bytes>>,
    uri: &Uri,
    body: String,
) -> Result<Answer, FlowError> {
    let request = Request::post(uri.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .header("MCP-Protocol-Version", PROTOCOL_VERSION)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "book_room")
        .body(Full::new(Bytes::from(body)))?;
    let url = uri.to_string();
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|source| FlowError::Connect {
                url: url.clone(),
                source,
            })?;
        let status = response.status();
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = response.into_body().collect().await?.to_bytes();
        let message = if is_stream {
            last_event(&body)?
        } else {
            serde_json::from_slice(&body)?
        };
        Ok(Answer { status, message })
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| FlowError::Timeout { url: url.clone() })?
}

/// The response in an event stream: its last `data:` line.
fn last_event(body: &[u8]) -> Result<Value, FlowError> {
    let text = String::from_utf8_lossy(body);
    let data = text
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or_default();
    Ok(serde_json::from_str(data.trim_start())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_keeps_the_params_and_adds_the_answer_and_state() {
        let first: Value = serde_json::from_str(SEED_REQUEST).unwrap();
        let retry = retry_of(&first, "pcs1.abc");
        assert_eq!(retry["id"], 8);
        assert_eq!(retry["params"]["arguments"], first["params"]["arguments"]);
        assert_eq!(retry["params"]["_meta"], first["params"]["_meta"]);
        assert_eq!(retry["params"]["requestState"], "pcs1.abc");
        assert_eq!(
            retry["params"]["inputResponses"]["room"],
            json!({"action": "accept", "content": {"room_id": "studio-b"}})
        );
    }

    #[test]
    fn an_event_stream_answer_is_its_last_message() {
        let body = b"event: message\ndata: {\"method\":\"notifications/progress\"}\n\n\
            event: message\ndata: {\"id\":7,\"result\":{}}\n\n";
        assert_eq!(last_event(body).unwrap(), json!({"id": 7, "result": {}}));
        assert!(matches!(last_event(b""), Err(FlowError::NotJson(_))));
    }

    #[test]
    fn answers_of_the_wrong_kind_are_named() {
        let error = json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "no"}});
        let answer = Answer {
            status: StatusCode::BAD_REQUEST,
            message: error,
        };
        let refused = expect_input_required(&answer).unwrap_err();
        assert!(
            refused.to_string().contains("HTTP 400 Bad Request"),
            "{refused}"
        );
        assert!(expect_complete(&answer).is_err());
    }

    #[tokio::test]
    async fn no_gateway_is_a_clear_error() {
        // Port 1 (tcpmux) is privileged and closed on any machine this runs on.
        let error = run("http://127.0.0.1:1/mcp/rooms", &mut Vec::new())
            .await
            .unwrap_err();
        assert!(matches!(error, FlowError::Connect { .. }), "{error}");
        assert!(error.to_string().contains("portcullis demo"), "{error}");
        let bad = run("not a url", &mut Vec::new()).await.unwrap_err();
        assert!(matches!(bad, FlowError::Url { .. }), "{bad}");
    }
}
