//! The stdio transport's framing: one JSON-RPC message per line. A line from
//! the program is read with a bound, sorted into what it is, and its id
//! written over when the gateway numbered the request it answers; nothing
//! else of it is touched.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::model::McpMethod;
use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Why a line from the program is not a message the gateway can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LineFault {
    #[error("a line longer than the limit")]
    Oversized,
    #[error("a line that is not UTF-8")]
    NotUtf8,
    #[error("a line of text that is not JSON")]
    Text,
    #[error("JSON that is not a JSON-RPC 2.0 message")]
    NotJsonRpc,
    #[error("a response to an id the gateway did not send")]
    UnknownId,
}

impl LineFault {
    /// The `kind` label of `portcullis_stdio_stdout_rejected_total`.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            LineFault::Oversized => "oversized",
            LineFault::NotUtf8 => "not_utf8",
            LineFault::Text => "text",
            LineFault::NotJsonRpc => "not_jsonrpc",
            LineFault::UnknownId => "unknown_id",
        }
    }

    /// Whether the program can still be trusted to be in step after it:
    /// a line of text between messages leaves the framing whole (servers
    /// that log to stdout keep working); the rest do not.
    pub(crate) const fn keeps_step(self) -> bool {
        matches!(self, LineFault::Text)
    }
}

/// A line read whole, or the end of the stream.
pub(super) enum Line {
    Message(Bytes),
    Fault(LineFault),
    End,
}

/// The next line of `reader`, at most `max` bytes; a longer one is read to
/// its end and dropped (the stream is out of step either way). `mid_line`
/// says, while it waits for more, whether part of a line is read already.
pub(super) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
    mid_line: &AtomicBool,
) -> std::io::Result<Line> {
    let mut line = BytesMut::new();
    let mut oversized = false;
    loop {
        mid_line.store(!line.is_empty() || oversized, Ordering::Release);
        let buf = reader.fill_buf().await;
        mid_line.store(false, Ordering::Release);
        let buf = buf?;
        if buf.is_empty() {
            return Ok(if line.is_empty() && !oversized {
                Line::End
            } else if oversized {
                Line::Fault(LineFault::Oversized)
            } else {
                finish(line.freeze())
            });
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !oversized {
            if line.len() + chunk.len() > max {
                oversized = true;
                line = BytesMut::new();
            } else {
                line.put_slice(chunk);
            }
        }
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            if oversized {
                return Ok(Line::Fault(LineFault::Oversized));
            }
            if line.last() == Some(&b'\r') {
                line.truncate(line.len() - 1);
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                line.clear();
                continue;
            }
            return Ok(finish(line.freeze()));
        }
    }
}

fn finish(line: Bytes) -> Line {
    if std::str::from_utf8(&line).is_err() {
        return Line::Fault(LineFault::NotUtf8);
    }
    match line.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Line::Message(line),
        // JSON that is not an object (a batch, a bare value) is no message;
        // anything else (`[INFO] starting`) is a line of text.
        _ if serde_json::from_slice::<serde::de::IgnoredAny>(&line).is_ok() => {
            Line::Fault(LineFault::NotJsonRpc)
        }
        _ => Line::Fault(LineFault::Text),
    }
}

/// A JSON-RPC message's envelope, borrowed from its line (or from a
/// request the face serves).
#[derive(Deserialize)]
pub(super) struct Envelope<'a> {
    pub(crate) jsonrpc: &'a str,
    #[serde(borrow, default)]
    pub(crate) id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

impl Envelope<'_> {
    /// Its method, from the one method table (`Other` when it has none: a
    /// response).
    pub(super) fn mcp_method(&self) -> McpMethod {
        self.method
            .as_deref()
            .map_or(McpMethod::Other, McpMethod::parse)
    }
}

/// What a line from the program is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FromProgram {
    /// A response to the gateway's request numbered `id`.
    Response {
        id: u64,
    },
    /// A response whose id the gateway never used as a number.
    Stray,
    /// A request the program makes of the client (or the gateway); its id
    /// as JSON text.
    Request {
        method: String,
        id: String,
    },
    Notification {
        method: String,
    },
}

/// Sort a line the program wrote.
pub(super) fn classify(line: &[u8]) -> Result<FromProgram, LineFault> {
    let env: Envelope<'_> = serde_json::from_slice(line).map_err(|_| LineFault::NotJsonRpc)?;
    if env.jsonrpc != "2.0" {
        return Err(LineFault::NotJsonRpc);
    }
    match (
        env.method,
        env.id,
        env.result.is_some() || env.error.is_some(),
    ) {
        (Some(method), Some(id), false) => Ok(FromProgram::Request {
            method: method.into_owned(),
            id: id.get().to_owned(),
        }),
        (Some(method), None, false) => Ok(FromProgram::Notification {
            method: method.into_owned(),
        }),
        (None, Some(id), true) => Ok(match id.get().parse::<u64>() {
            Ok(n) => FromProgram::Response { id: n },
            Err(_) => FromProgram::Stray,
        }),
        _ => Err(LineFault::NotJsonRpc),
    }
}

/// A message the gateway writes to the program: `line` (one JSON-RPC
/// message) with its `id` replaced by `id`, on one line. Requests keep
/// their method and params; responses their result or error.
pub(super) fn with_id(line: &[u8], id: &str) -> Result<Vec<u8>, LineFault> {
    let env: Envelope<'_> = serde_json::from_slice(line).map_err(|_| LineFault::NotJsonRpc)?;
    let mut out = Vec::with_capacity(line.len() + 16);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    if let Some(method) = env.method {
        out.extend_from_slice(b",\"method\":");
        serde_json::to_writer(&mut out, &method).map_err(|_| LineFault::NotJsonRpc)?;
    }
    for (key, value) in [
        (&b",\"params\":"[..], env.params),
        (b",\"result\":", env.result),
        (b",\"error\":", env.error),
    ] {
        if let Some(v) = value {
            out.extend_from_slice(key);
            out.extend_from_slice(v.get().as_bytes());
        }
    }
    out.push(b'}');
    Ok(one_line(out))
}

/// A checked JSON message written on one line. Valid JSON holds a raw
/// CR or LF only as whitespace between tokens (inside a string they must be
/// escaped), so each becomes a space.
pub(super) fn one_line(mut message: Vec<u8>) -> Vec<u8> {
    for b in &mut message {
        if *b == b'\n' || *b == b'\r' {
            *b = b' ';
        }
    }
    message.push(b'\n');
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Result<String, LineFault>> {
        let mut reader = tokio::io::BufReader::with_capacity(8, input);
        let mut out = Vec::new();
        loop {
            match read_line(&mut reader, max, &AtomicBool::new(false))
                .await
                .unwrap()
            {
                Line::End => return out,
                Line::Message(m) => out.push(Ok(String::from_utf8(m.to_vec()).unwrap())),
                Line::Fault(f) => out.push(Err(f)),
            }
        }
    }

    #[tokio::test]
    async fn lines_are_bounded_checked_and_kept_in_step() {
        let long = format!("{{\"a\":\"{}\"}}", "x".repeat(100));
        let input = format!(
            "{{\"jsonrpc\":\"2.0\"}}\r\n\n  \nstarting server...\n[1,2]\n[INFO] up\n{long}\n{{\"b\":1}}\n{{\"tail\":true}}"
        );
        let mut bytes = input.into_bytes();
        bytes.extend_from_slice(b"\n{\"bad\":\"\xff\"}\n");
        let got = lines(&bytes, 64).await;
        assert_eq!(
            got,
            vec![
                Ok("{\"jsonrpc\":\"2.0\"}".to_owned()),
                Err(LineFault::Text),
                Err(LineFault::NotJsonRpc),
                Err(LineFault::Text),
                Err(LineFault::Oversized),
                Ok("{\"b\":1}".to_owned()),
                Ok("{\"tail\":true}".to_owned()),
                Err(LineFault::NotUtf8),
            ]
        );
    }

    #[test]
    fn messages_are_sorted_by_their_envelope() {
        let c = |s: &str| classify(s.as_bytes());
        assert_eq!(
            c(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#),
            Ok(FromProgram::Response { id: 7 })
        );
        assert_eq!(
            c(r#"{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}"#),
            Ok(FromProgram::Stray)
        );
        assert!(matches!(
            c(r#"{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{}}"#),
            Ok(FromProgram::Request { ref method, .. }) if method == "elicitation/create"
        ));
        assert_eq!(
            c(r#"{"jsonrpc":"2.0","method":"notifications/message"}"#),
            Ok(FromProgram::Notification {
                method: "notifications/message".into()
            })
        );
        for bad in [
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
            r#"{"jsonrpc":"2.0","method":7}"#,
        ] {
            assert_eq!(c(bad), Err(LineFault::NotJsonRpc), "{bad}");
        }
    }

    #[test]
    fn an_id_is_written_over_and_the_rest_kept() {
        let out = with_id(
            br#"{"id":"abc","method":"tools/call","jsonrpc":"2.0","params":{"name":"n\n"}}"#,
            "42",
        )
        .unwrap();
        assert_eq!(
            out,
            b"{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\",\"params\":{\"name\":\"n\\n\"}}\n"
        );
        let back = with_id(br#"{"jsonrpc":"2.0","id":42,"result":{"x":1}}"#, "\"abc\"").unwrap();
        assert_eq!(
            back,
            b"{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"result\":{\"x\":1}}\n"
        );
        assert_eq!(
            one_line(b"{\"a\":\r\n 1}".to_vec()),
            b"{\"a\":   1}\n".to_vec()
        );
    }
}
