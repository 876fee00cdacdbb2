//! The upstream message inspector, as a JSON body or as an event stream fed
//! to the SSE framer in random chunkings. Input: a control byte (carrier and
//! client method), a byte choosing the client's capabilities and the route's
//! policy, a chunking seed, then the body or the raw stream.
//!
//! Properties: the framer splits the same events whatever the chunking; a
//! message delivered unchanged (Notify, Final) re-parses strictly to what any
//! JSON parser reads from it, and is the kind of message allowed there; a
//! rewritten one parses strictly, keeps the id (a list keeps a subset of its
//! items, a question a subset of its questions and fields, with the
//! gateway's sealed state), and in enforce mode no text a person reads
//! carries a forbidden character.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::json::parse_value;
use portcullis::model::Generation;
use portcullis::pipeline::response::disposition::Disposition;
use portcullis::pipeline::response::exchange::{Carrier, Exchange};
use portcullis::pipeline::sse::{SseEvent, SseFramer};
use portcullis::policy::config::{Mode, Policy};
use portcullis::policy::icon_rules::IconAction;
use portcullis_fuzz::forbidden::{decode_numeric_refs, first_forbidden};
use portcullis_fuzz::{offline, Chunks};
use serde_json::Value;

const MAX_EVENT: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let [ctl, choice, seed, payload @ ..] = data else {
        return;
    };
    let method = usize::from(ctl >> 1);
    let request = offline::request(method, usize::from(choice & 3));
    let mut ex = offline::exchange(usize::from(choice >> 2), request);
    if ctl & 1 == 0 {
        let d = ex.inspect(payload, Carrier::Body);
        judge(&ex, payload, Carrier::Body, &d);
    } else {
        stream(&mut ex, payload, *seed);
    }
});

/// Frame the stream whole and in chunks; inspect each event's data like the
/// gateway's stream body does, until the exchange ends.
fn stream(ex: &mut Exchange, payload: &[u8], seed: u8) {
    let whole = frame(payload, &mut |_| payload.len());
    let mut chunks = Chunks::new(seed);
    let chunked = frame(payload, &mut |max| chunks.next_len(max.min(97)));
    assert_eq!(whole, chunked, "the framing depends on the chunking");
    let Ok(events) = whole else { return };
    for ev in events {
        let Some(data) = ev.data.as_deref() else {
            continue;
        };
        let mut d = ex.inspect(data.as_bytes(), Carrier::Stream);
        judge(ex, data.as_bytes(), Carrier::Stream, &d);
        // A pushed question waits for the budget; offline there is none.
        if let Disposition::PushPending(push) = d {
            d = ex.admit_push(push, Ok(()));
            judge(ex, data.as_bytes(), Carrier::Stream, &d);
        }
        if matches!(d, Disposition::ReplayRefused { .. }) {
            continue;
        }
        if !matches!(
            d,
            Disposition::Notify | Disposition::NotifyRewritten(_) | Disposition::AskNotify(_)
        ) {
            return;
        }
    }
}

fn frame(
    payload: &[u8],
    next_len: &mut dyn FnMut(usize) -> usize,
) -> Result<Vec<SseEvent>, portcullis::pipeline::sse::SseError> {
    let mut f = SseFramer::new(MAX_EVENT);
    let mut events = Vec::new();
    let mut rest = payload;
    while !rest.is_empty() {
        let n = next_len(rest.len()).min(rest.len());
        f.push(&rest[..n]);
        rest = &rest[n..];
        while let Some(ev) = f.next_event()? {
            events.push(ev);
        }
    }
    let joined: Vec<u8> = events.iter().flat_map(|e| e.raw.to_vec()).collect();
    // A BOM that starts the stream is dropped, as clients' decoders do.
    let body = payload.strip_prefix(b"\xef\xbb\xbf").unwrap_or(payload);
    assert!(
        body.starts_with(&joined),
        "the events are not the stream's bytes, in order"
    );
    assert_eq!(f.pending(), body.len() - joined.len());
    Ok(events)
}

fn strict(bytes: &[u8], what: &str) -> Value {
    let v = parse_value(bytes).unwrap_or_else(|e| panic!("{what} does not parse strictly: {e}"));
    let lenient: Value = serde_json::from_slice(bytes).expect("strict JSON is JSON");
    assert_eq!(v, lenient, "{what}: strict and lenient parsers disagree");
    v
}

fn judge(ex: &Exchange, message: &[u8], carrier: Carrier, d: &Disposition) {
    let enforcing = ex.ctx.route.upstream.settings.policy.mode == Mode::Enforce;
    let want_id = ex
        .ctx
        .id()
        .map(|t| parse_value(t.as_bytes()).expect("request id"));
    match d {
        Disposition::Notify => {
            assert_eq!(carrier, Carrier::Stream, "a notification as the JSON body");
            let v = strict(message, "a delivered notification");
            assert!(v.get("id").is_none() && v["method"].is_string());
            assert_ne!(
                v["method"], "notifications/tasks/status",
                "a task's status passed uninspected"
            );
            if enforcing {
                notification_text_is_clean(&v);
            }
        }
        Disposition::AskNotify(out) => {
            assert_eq!(carrier, Carrier::Stream);
            let v = strict(out, "a task's status that asks");
            assert_eq!(v["method"], "notifications/tasks/status");
            let orig: Value = serde_json::from_slice(message).expect("it was JSON");
            question_is_subset(&v["params"], &orig["params"], enforcing);
        }
        Disposition::NotifyRewritten(out) => {
            assert_eq!(carrier, Carrier::Stream);
            let v = strict(out, "a rewritten notification");
            let orig: Value = serde_json::from_slice(message).expect("it was JSON");
            assert_eq!(v["method"], orig["method"]);
            if v.get("method").is_some() {
                assert!(v.get("id").is_none());
                notification_text_is_clean(&v);
            } else {
                // A list replayed on a resumed stream.
                assert_eq!(v["id"], orig["id"]);
                list_is_kept(ex, &v["result"], &orig["result"], enforcing);
            }
        }
        Disposition::Final => {
            let v = strict(message, "a delivered response");
            assert!(
                v.get("method").is_none(),
                "a request or notification as the response"
            );
            assert!(v.get("result").is_some() != v.get("error").is_some());
            if v.get("error").is_none() || !v["id"].is_null() {
                assert_eq!(Some(&v["id"]), want_id.as_ref(), "an answer to another id");
            }
            let kind = v["result"]["resultType"].as_str();
            assert_ne!(
                kind,
                Some("input_required"),
                "a question passed uninspected"
            );
            assert!(
                kind != Some("task") && ex.ctx.request.method.as_str() != "tasks/get"
                    || v.get("error").is_some(),
                "a task passed uninspected"
            );
            if let (true, Some(items)) = (enforcing, ex.ctx.request.method.catalogue()) {
                listed_text_is_clean(&ex.ctx.route.upstream.settings.policy, &v["result"], items);
            }
            if enforcing {
                server_info_is_clean(&ex.ctx.route.upstream.settings.policy, &v);
            }
        }
        Disposition::FinalRewritten(out) => {
            let v = strict(out, "a rewritten response");
            let orig: Value = serde_json::from_slice(message).expect("it was JSON");
            assert_eq!(v["id"], orig["id"]);
            // A list answering its own method keeps the upstream's items but
            // for their text; any other result is data, whose every string
            // the content rules may clean.
            if ex.ctx.request.method.catalogue().is_some() {
                list_is_kept(ex, &v["result"], &orig["result"], enforcing);
            }
            if enforcing {
                server_info_is_clean(&ex.ctx.route.upstream.settings.policy, &v);
            }
        }
        Disposition::Ask(out) => {
            let v = strict(out, "a delivered question");
            let orig: Value = serde_json::from_slice(message).expect("it was JSON");
            assert_eq!(Some(&v["id"]), want_id.as_ref());
            question_is_subset(&v["result"], &orig["result"], enforcing);
        }
        // Pushed requests exist only in 2025-11-25 sessions, on a stream.
        Disposition::Pushed(out) => {
            assert_eq!(
                carrier,
                Carrier::Stream,
                "a pushed request as the JSON body"
            );
            assert_eq!(ex.ctx.request.generation(), Generation::Sessions);
            let v = strict(out, "a pushed request");
            let id = v["id"].as_str().expect("a pushed request's id");
            assert!(id.starts_with("psr1."), "not the gateway's sealed id");
        }
        Disposition::Withheld => {
            assert_eq!(carrier, Carrier::Stream);
            assert_eq!(ex.ctx.request.generation(), Generation::Sessions);
        }
        Disposition::PushPending(_) => {
            assert_eq!(
                carrier,
                Carrier::Stream,
                "a pushed request as the JSON body"
            );
            assert_eq!(ex.ctx.request.generation(), Generation::Sessions);
        }
        Disposition::ReplayRefused { message, refusal } => {
            assert_eq!(carrier, Carrier::Stream, "a replay in a JSON body");
            let e = strict(message, "a refused replay");
            assert_eq!(e["error"]["data"]["reason"], refusal.reason.as_str());
        }
        // Waits for the single-use store: only in a 2025-11-25 session.
        Disposition::Held(_) => {
            assert_eq!(carrier, Carrier::Stream);
            assert!(ex.ctx.in_session(), "a held message outside a session");
        }
        Disposition::Refuse(r) => {
            let body = portcullis::json::error_body(ex.ctx.id(), r, Some("fuzz"));
            let e = strict(&body, "a refusal");
            assert_eq!(e["error"]["data"]["reason"], r.reason.as_str());
        }
    }
}

/// A rewritten list keeps a subsequence of the upstream's items, in order;
/// each kept item is the upstream's but for the text a person or model
/// reads (titles and descriptions), which in enforce mode is clean.
fn list_is_kept(ex: &Exchange, new: &Value, old: &Value, enforcing: bool) {
    for member in ["tools", "prompts", "resources", "resourceTemplates"] {
        let (Some(n), Some(o)) = (new.get(member), old.get(member)) else {
            assert!(
                new.get(member).is_none(),
                "a list the upstream did not send"
            );
            continue;
        };
        let (Some(n), Some(o)) = (n.as_array(), o.as_array()) else {
            panic!("{member} changed type");
        };
        let mut upstream = o.iter();
        for item in n {
            assert!(
                upstream.any(|was| same_but_text(item, was)),
                "a list item the upstream did not send, or out of order"
            );
        }
    }
    if let (true, Some(items)) = (enforcing, ex.ctx.request.method.catalogue()) {
        listed_text_is_clean(&ex.ctx.route.upstream.settings.policy, new, items);
    }
}

/// Equal, except that a string under a `title` or `description` key may
/// have been cleaned, and an item's icons may have lost some (or, when
/// they were no list, gone).
fn same_but_text(new: &Value, old: &Value) -> bool {
    match (new, old) {
        (Value::Object(n), Value::Object(o)) => {
            let icons_gone = usize::from(!n.contains_key("icons") && o.contains_key("icons"));
            n.len() + icons_gone == o.len()
                && n.iter().all(|(k, x)| {
                    o.get(k).is_some_and(|y| {
                        let text = matches!(k.as_str(), "title" | "description")
                            && x.is_string()
                            && y.is_string();
                        text || (k == "icons" && kept_icons(x, y)) || same_but_text(x, y)
                    })
                })
        }
        (Value::Array(n), Value::Array(o)) => {
            n.len() == o.len() && n.iter().zip(o).all(|(x, y)| same_but_text(x, y))
        }
        _ => new == old,
    }
}

/// Icons kept are the upstream's, in order; in enforce mode each is an
/// image by `data:` or an https URL.
fn kept_icons(new: &Value, old: &Value) -> bool {
    let (Some(n), Some(o)) = (new.as_array(), old.as_array()) else {
        return false;
    };
    let mut upstream = o.iter();
    n.iter().all(|icon| upstream.any(|was| was == icon))
}

/// In enforce mode no listed name hides a character, and no listed text a
/// person or model reads carries a forbidden character: an item's title and description, its
/// annotations' title, every title and description of its schemas, its
/// arguments' titles and descriptions.
fn listed_text_is_clean(policy: &Policy, result: &Value, items: &str) {
    let Some(list) = result.get(items).and_then(Value::as_array) else {
        return;
    };
    for (i, item) in list.iter().enumerate() {
        let at = format!("{items}[{i}]");
        if let Some((_, c, why)) = item["name"].as_str().and_then(first_forbidden) {
            panic!("{at}: a name with a {why} ({c:?}) is listed");
        }
        for part in ["title", "description"] {
            string_is_clean(&item[part], &format!("{at}.{part}"));
            if let Some(args) = item["arguments"].as_array() {
                for a in args {
                    string_is_clean(&a[part], &format!("{at}.arguments.{part}"));
                }
            }
        }
        string_is_clean(&item["annotations"]["title"], &format!("{at}.annotations"));
        for schema in ["inputSchema", "outputSchema"] {
            schema_text_is_clean(&item[schema], &format!("{at}.{schema}"));
        }
        icons_are_safe(policy, &item["icons"], &at);
    }
}

/// What the icon rule keeps in enforce mode: an icon the route's policy
/// accepts, and never a source a client runs or reads locally.
fn icons_are_safe(policy: &Policy, icons: &Value, at: &str) {
    if policy.icons.action == IconAction::Allow {
        return;
    }
    let Some(icons) = icons.as_array() else {
        assert!(icons.is_null(), "{at}: icons that are not a list");
        return;
    };
    for icon in icons {
        let src = icon["src"]
            .as_str()
            .unwrap_or_else(|| panic!("{at}: an icon without src"));
        let lower = src.to_ascii_lowercase();
        assert!(
            lower.starts_with("data:image/")
                || lower.starts_with("https://")
                || lower.starts_with("http://"),
            "{at}: an icon the client should not fetch"
        );
        assert!(
            policy.icons.check(src, icon["mimeType"].as_str()).is_ok(),
            "{at}: an icon the policy refuses"
        );
    }
}

/// The server identity a 2026-07-28 result may carry under `_meta` is
/// shown to people: in enforce mode its text is clean and its icons safe.
fn server_info_is_clean(policy: &Policy, response: &Value) {
    let info = &response["result"]["_meta"]["io.modelcontextprotocol/serverInfo"];
    string_is_clean(&info["title"], "serverInfo.title");
    string_is_clean(&info["description"], "serverInfo.description");
    icons_are_safe(policy, &info["icons"], "serverInfo");
}

/// The listing rule reads strings only; any other value there is data.
fn string_is_clean(v: &Value, at: &str) {
    if v.is_string() {
        readable_text_is_clean(v, at);
    }
}

fn schema_text_is_clean(v: &Value, at: &str) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let at = format!("{at}.{k}");
                match (k.as_str(), x) {
                    ("title" | "description", Value::String(_)) => readable_text_is_clean(x, &at),
                    ("properties", Value::Object(props)) => {
                        props.values().for_each(|p| schema_text_is_clean(p, &at))
                    }
                    _ => schema_text_is_clean(x, &at),
                }
            }
        }
        Value::Array(xs) => xs.iter().for_each(|x| schema_text_is_clean(x, at)),
        _ => {}
    }
}

fn question_is_subset(new: &Value, old: &Value, enforcing: bool) {
    // A task asks from a tasks/get result, an MRTR question from input_required.
    if new.get("taskId").is_some() {
        assert_eq!(new["status"], "input_required");
    } else {
        assert_eq!(new["resultType"], "input_required");
    }
    let state = new["requestState"].as_str().expect("a requestState");
    assert!(state.starts_with("pcs1."), "not the gateway's sealed state");
    let Some(asked) = new.get("inputRequests").and_then(Value::as_object) else {
        return;
    };
    for (key, request) in asked {
        let before = &old["inputRequests"][key];
        assert!(before.is_object(), "a question the upstream did not ask");
        let schema = &request["params"]["requestedSchema"];
        if let Some(props) = schema["properties"].as_object() {
            for name in props.keys() {
                assert!(
                    before["params"]["requestedSchema"]["properties"]
                        .get(name)
                        .is_some(),
                    "a field the upstream did not ask"
                );
            }
        }
        if enforcing && request["method"] == "elicitation/create" {
            readable_text_is_clean(&request["params"], "params");
        }
    }
}

/// Every string a person may read in an elicitation: everything but `_meta`
/// (machine data for the client) and the URL of a URL-mode request.
fn readable_text_is_clean(v: &Value, at: &str) {
    match v {
        Value::String(s) => {
            if let Some((i, c, why)) = first_forbidden(s) {
                panic!("{at}: a {why} ({c:?} at byte {i}) reaches a person");
            }
            if let Some((_, c, why)) = first_forbidden(&decode_numeric_refs(s)) {
                panic!("{at}: a character reference to a {why} ({c:?}) reaches a person");
            }
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, x)| readable_text_is_clean(x, &format!("{at}[{i}]"))),
        Value::Object(map) => {
            for (k, x) in map {
                if k == "_meta" || (k == "url" && at == "params") {
                    continue;
                }
                readable_text_is_clean(x, &format!("{at}.{k}"));
            }
        }
        _ => {}
    }
}

fn notification_text_is_clean(v: &Value) {
    match v["method"].as_str() {
        Some("notifications/progress") => {
            readable_text_is_clean(&v["params"]["message"], "progress.message")
        }
        Some("notifications/message") => readable_text_is_clean(&v["params"]["data"], "log.data"),
        _ => {}
    }
}
