//! Resource URIs in an upstream's checked answer, as the client knows them:
//! under the upstream's prefix, so a URI the client reads in a result — a
//! resource's contents, a resource link a tool returned, a resource a prompt
//! embeds, an update notification — leads back to the same upstream when
//! the client uses it. The answer was inspected before; this only prefixes.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, Response};
use http_body_util::BodyExt;
use hyper::body::Body;
use serde_json::Value;

use super::super::body::{EventSource, ProxyBody};
use super::super::sse::{event_with_id, SseFramer};
use crate::model::{expose, McpMethod, Reason, TargetKind};

/// The checked answer with its resource URIs under `prefix`.
pub(super) async fn answer(resp: Response<ProxyBody>, prefix: &str) -> Response<ProxyBody> {
    if prefix.is_empty() {
        return resp;
    }
    let media = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_start().to_ascii_lowercase())
        .unwrap_or_default();
    let (mut head, body) = resp.into_parts();
    if media.starts_with("text/event-stream") {
        let events = ExposedEvents {
            inner: body,
            prefix: prefix.to_owned(),
        };
        return Response::from_parts(head, ProxyBody::stream(Box::new(events)));
    }
    if !media.starts_with("application/json") {
        return Response::from_parts(head, body);
    }
    // The gateway's own checked body, whole in memory already.
    let bytes = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(never) => match never {},
    };
    // Most answers name no resource: they are not parsed again.
    if !may_name_a_uri(&bytes) {
        return Response::from_parts(head, ProxyBody::full(bytes));
    }
    let bytes = match crate::json::parse_value(&bytes) {
        Ok(mut message) => match expose_message(&mut message, prefix) {
            true => serde_json::to_vec(&message).map_or(bytes, Bytes::from),
            false => bytes,
        },
        Err(_) => bytes,
    };
    head.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(head, ProxyBody::full(bytes))
}

/// An event of a checked stream, its message's resource URIs under `prefix`.
pub(super) fn event(event: Bytes, prefix: &str) -> Bytes {
    if prefix.is_empty() || !may_name_a_uri(&event) {
        return event;
    }
    let mut framer = SseFramer::new(event.len() + 1);
    framer.push(&event);
    let Ok(Some(parsed)) = framer.next_event() else {
        return event;
    };
    let Some(mut message) = parsed
        .data
        .and_then(|d| crate::json::parse_value(d.as_bytes()).ok())
    else {
        return event;
    };
    if !expose_message(&mut message, prefix) {
        return event;
    }
    match serde_json::to_vec(&message) {
        Ok(bytes) => event_with_id(parsed.id.as_deref(), &bytes),
        Err(_) => event,
    }
}

/// MCP Apps: the `ui://` resource a listed tool's view is read from
/// (`_meta.ui.resourceUri`, and the older flat `_meta["ui/resourceUri"]`),
/// under the tool's upstream prefix, so the host's `resources/read` of it
/// reaches the same upstream.
pub(super) fn tool_ui(tool: &mut serde_json::Map<String, Value>, prefix: &str) {
    if prefix.is_empty() {
        return;
    }
    let Some(Value::Object(meta)) = tool.get_mut("_meta") else {
        return;
    };
    if let Some(Value::Object(ui)) = meta.get_mut("ui") {
        expose_uri(ui.get_mut("resourceUri"), prefix);
    }
    expose_uri(meta.get_mut("ui/resourceUri"), prefix);
}

/// Whether a message's bytes may hold a `uri` member or a listen's
/// subscribed resources (a key written with escapes is still read: `\u`
/// sends it to the parse).
fn may_name_a_uri(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"uri").is_some()
        || memchr::memmem::find(bytes, b"\\u").is_some()
        || memchr::memmem::find(bytes, b"resourceSubscriptions").is_some()
}

/// Prefix every resource URI a client may use again; `true` when one was.
fn expose_message(message: &mut Value, prefix: &str) -> bool {
    let mut changed = false;
    let method = message.get("method").and_then(Value::as_str);
    match method.map(McpMethod::parse) {
        Some(McpMethod::ResourcesUpdated) => {
            changed |= expose_uri(message.pointer_mut("/params/uri"), prefix);
        }
        // What a listen's upstream agreed to: the resources as subscribed.
        Some(McpMethod::SubscriptionsAcknowledged) => {
            for uri in each(message.pointer_mut("/params/notifications/resourceSubscriptions")) {
                changed |= expose_uri(Some(uri), prefix);
            }
        }
        _ => {}
    }
    let Some(result) = message.get_mut("result") else {
        return changed;
    };
    for contents in each(result.get_mut("contents")) {
        changed |= expose_uri(contents.get_mut("uri"), prefix);
    }
    for block in each(result.get_mut("content")) {
        changed |= expose_block(block, prefix);
    }
    for prompt_message in each(result.get_mut("messages")) {
        match prompt_message.get_mut("content") {
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    changed |= expose_block(block, prefix);
                }
            }
            Some(block) => changed |= expose_block(block, prefix),
            None => {}
        }
    }
    changed
}

fn each(v: Option<&mut Value>) -> impl Iterator<Item = &mut Value> {
    v.and_then(Value::as_array_mut).into_iter().flatten()
}

/// A content block that names a resource: a link, or an embedded resource.
fn expose_block(block: &mut Value, prefix: &str) -> bool {
    match block.get("type").and_then(Value::as_str) {
        Some("resource_link") => expose_uri(block.get_mut("uri"), prefix),
        Some("resource") => expose_uri(block.pointer_mut("/resource/uri"), prefix),
        _ => false,
    }
}

fn expose_uri(uri: Option<&mut Value>, prefix: &str) -> bool {
    match uri {
        Some(Value::String(own)) => {
            *own = expose(TargetKind::Resource, prefix, own);
            true
        }
        _ => false,
    }
}

/// A checked stream whose events name resources as the client knows them.
struct ExposedEvents {
    inner: ProxyBody,
    prefix: String,
}

impl EventSource for ExposedEvents {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            return match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => Poll::Ready(Some(event(data, &self.prefix))),
                    Err(_) => continue,
                },
                Poll::Ready(Some(Err(never))) => match never {},
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }

    fn refused(&self) -> Option<Reason> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_carrier_of_a_uri_is_prefixed() {
        let mut read =
            json!({"result": {"contents": [{"uri": "file:///a", "text": "x"}, {"blob": "AA"}]}});
        assert!(expose_message(&mut read, "gh"));
        assert_eq!(read["result"]["contents"][0]["uri"], "gh+file:///a");
        let mut call = json!({"result": {"content": [
            {"type": "text", "text": "uri file:///x"},
            {"type": "resource_link", "uri": "file:///b", "name": "b"},
            {"type": "resource", "resource": {"uri": "mem://c", "text": "c"}}]}});
        assert!(expose_message(&mut call, "gh"));
        assert_eq!(call["result"]["content"][0]["text"], "uri file:///x");
        assert_eq!(call["result"]["content"][1]["uri"], "gh+file:///b");
        assert_eq!(
            call["result"]["content"][2]["resource"]["uri"],
            "gh+mem://c"
        );
        let mut prompt = json!({"result": {"messages": [
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///d"}}},
            {"role": "user", "content": [{"type": "resource_link", "uri": "file:///e"}]}]}});
        assert!(expose_message(&mut prompt, "gh"));
        assert_eq!(
            prompt["result"]["messages"][0]["content"]["resource"]["uri"],
            "gh+file:///d"
        );
        assert_eq!(
            prompt["result"]["messages"][1]["content"][0]["uri"],
            "gh+file:///e"
        );
        let mut updated =
            json!({"method": "notifications/resources/updated", "params": {"uri": "file:///f"}});
        assert!(expose_message(&mut updated, "gh"));
        assert_eq!(updated["params"]["uri"], "gh+file:///f");
        let mut plain = json!({"result": {"content": [{"type": "text", "text": "t"}]}});
        assert!(!expose_message(&mut plain, "gh"));
    }

    #[test]
    fn an_event_keeps_its_id() {
        let e = Bytes::from_static(
            b"id: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"x:1\"}}\n\n",
        );
        let out = String::from_utf8(event(e, "p").to_vec()).unwrap();
        assert!(out.starts_with("id: 7\n"), "{out}");
        assert!(out.contains("\"uri\":\"p+x:1\""), "{out}");
        let other = Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n\n");
        assert_eq!(event(other.clone(), "p"), other);
    }
}
