//! What the client sends and what it answers, held to the strict rules on
//! every round: ambiguous JSON anywhere in a request (generated), the answer
//! budget on the last round, concurrent replays of a single-use state, and
//! URL-mode links into the local network.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{json, Value};

use crate::common::*;

fn ok_result(req: &Received) -> Vec<Step> {
    let body = result_json(
        &id_of(req),
        json!({"resultType": "complete", "content": []}),
    );
    vec![http_response("200 OK", "application/json", &body)]
}

/// One way to make a JSON text that two parsers may read differently, or
/// (`Clean`) a text with the same look that is unambiguous.
#[derive(Debug, Clone)]
enum Trick {
    /// The same member twice; `mask` says which letters of the second
    /// spelling are `\u` escapes.
    Duplicate { key: String, mask: u8 },
    /// A string holding a lone surrogate escape (`as_key`: as a member name).
    Lone {
        unit: u16,
        follow: char,
        as_key: bool,
    },
    /// Distinct members and a proper surrogate pair: must pass.
    Clean { key: String },
}

impl Trick {
    fn text(&self) -> String {
        match self {
            Trick::Duplicate { key, mask } => {
                let second: String = key
                    .chars()
                    .enumerate()
                    .map(|(i, c)| {
                        if (mask >> (i % 8)) & 1 == 1 {
                            format!("\\u{:04x}", c as u32)
                        } else {
                            c.to_string()
                        }
                    })
                    .collect();
                format!(r#"{{"{key}":"room-a","{second}":"room-b"}}"#)
            }
            Trick::Lone {
                unit,
                follow,
                as_key,
            } => {
                let s = format!("x\\u{unit:04x}{follow}");
                if *as_key {
                    format!(r#"{{"{s}":1}}"#)
                } else {
                    format!(r#"{{"note":"{s}"}}"#)
                }
            }
            Trick::Clean { key } => {
                format!(r#"{{"{key}":"room-a","{key}2":"\ud83d\ude00 \u00e9"}}"#)
            }
        }
    }

    fn clean(&self) -> bool {
        matches!(self, Trick::Clean { .. })
    }
}

fn trick() -> impl Strategy<Value = Trick> {
    let key = "[a-z]{1,8}";
    // A high surrogate followed by anything but a low one, or a low one alone.
    let high = (
        0xd800u16..0xdc00,
        prop::sample::select(vec!['a', ' ', 'q', '\u{e9}']),
    );
    let low = (0xdc00u16..0xe000).prop_map(|u| (u, 'b'));
    prop_oneof![
        (key, any::<u8>()).prop_map(|(key, mask)| Trick::Duplicate { key, mask }),
        (prop_oneof![high, low], any::<bool>()).prop_map(|((unit, follow), as_key)| {
            Trick::Lone {
                unit,
                follow,
                as_key,
            }
        }),
        key.prop_map(|key| Trick::Clean { key }),
    ]
}

/// Where in the request the tricky text goes, wrapped in `wraps` layers of
/// objects and arrays.
fn request_body(trick: &Trick, wraps: &[u8], place: u8) -> String {
    let mut inner = trick.text();
    for w in wraps {
        inner = match w {
            0 => format!(r#"{{"w":{inner}}}"#),
            1 => format!("[{inner}]"),
            _ => format!(r#"{{"a":0,"w":{inner},"z":[1,2]}}"#),
        };
    }
    let (args, meta, extra) = match place {
        0 => (format!(r#"{{"v":{inner}}}"#), String::new(), String::new()),
        1 => ("{}".to_owned(), format!(r#","x":{inner}"#), String::new()),
        _ => (
            "{}".to_owned(),
            String::new(),
            format!(r#","extra":{inner}"#),
        ),
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":"d1","method":"tools/call","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"{VERSION}","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}}}}}},"progressToken":"p"{meta}}},"name":"hostile_tool","arguments":{args}{extra}}}}}"#
    )
}

#[test]
fn ambiguous_json_anywhere_in_a_request_never_reaches_the_upstream() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (up, gw) = rt.block_on(async {
        let up = ScriptedUpstream::start(ok_result).await;
        let gw = start_gateway(&config_text(&up.url(), "", "")).await;
        (up, gw)
    });
    let (c, target) = (client(), url(&gw));
    let clean = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let config = ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(t in trick(), wraps in prop::collection::vec(0u8..3, 0..4), place in 0u8..3)| {
        let body = request_body(&t, &wraps, place);
        let (status, v) = rt.block_on(async {
            let resp = call(&c, &target, "d1", "hostile_tool", json!({})).body(body.clone()).send().await.unwrap();
            (resp.status().as_u16(), json_of(resp).await)
        });
        if t.clean() {
            clean.lock().unwrap().insert(body.clone());
            prop_assert_eq!(status, 200, "{} -> {}", body, v);
        } else {
            prop_assert_eq!((status, v["error"]["data"]["reason"].as_str()), (400, Some("invalid_json")), "{} -> {}", body, v);
        }
    });
    // What reached the upstream is exactly the unambiguous requests, as
    // sent (a request the pool sent again on a fresh connection is the
    // same request, not another).
    let received: std::collections::BTreeSet<String> = up
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(
        received,
        *clean.lock().unwrap(),
        "only the unambiguous requests were forwarded"
    );
    rt.block_on(gw.shutdown());
}

/// An upstream that asks for notes `rounds` times (requestState
/// `round-N`), then answers `complete`.
async fn asking_for_notes(rounds: u32) -> ScriptedUpstream {
    ScriptedUpstream::start(move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let done = body["params"]["requestState"]
            .as_str()
            .and_then(|s| s.strip_prefix("round-"))
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0);
        let result = if done >= rounds {
            json!({"resultType": "complete", "content": [{"type": "text", "text": "thanks"}]})
        } else {
            json!({"resultType": "input_required", "requestState": format!("round-{}", done + 1),
                "inputRequests": {"more": {"method": "elicitation/create", "params": {"mode": "form",
                  "message": "Anything else?", "requestedSchema": {"type": "object",
                  "properties": {"notes": {"type": "string", "maxLength": 2000}}}}}}})
        };
        vec![http_response("200 OK", "application/json", &result_json(&id_of(req), result))]
    })
    .await
}

fn notes_answer(len: usize) -> Value {
    json!({"more": {"action": "accept", "content": {"notes": "n".repeat(len)}}})
}

/// The answers as the gateway counts them: their compact JSON.
fn answer_bytes(len: usize) -> usize {
    notes_answer(len).to_string().len()
}

fn retry_body(id: &str, state: &str, answers: &Value) -> String {
    let mut v: Value = serde_json::from_str(&call_body(id, "hostile_tool", json!({}))).unwrap();
    v["params"]["requestState"] = json!(state);
    v["params"]["inputResponses"] = answers.clone();
    v.to_string()
}

async fn send(c: &reqwest::Client, gw: &str, id: &str, body: String) -> (u16, Value) {
    let resp = call(c, gw, id, "hostile_tool", json!({}))
        .body(body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), json_of(resp).await)
}

/// Play an operation whose rounds answer notes of these lengths; the
/// outcome of the last retry and what reached the upstream.
async fn operation(limit: usize, lengths: &[usize]) -> (Value, Vec<Received>) {
    let up = asking_for_notes(lengths.len() as u32).await;
    let extra = format!("[state]\nmax_answer_bytes = {limit}\n");
    let gw = start_gateway(&config_text(&up.url(), "", &extra)).await;
    let (c, target) = (client(), url(&gw));
    let (_, mut v) = send(
        &c,
        &target,
        "a0",
        call_body("a0", "hostile_tool", json!({})),
    )
    .await;
    for (n, len) in lengths.iter().enumerate() {
        let state = v["result"]["requestState"]
            .as_str()
            .unwrap_or_else(|| panic!("round {n}: {v}"))
            .to_owned();
        let id = format!("a{}", n + 1);
        v = send(
            &c,
            &target,
            &id,
            retry_body(&id, &state, &notes_answer(*len)),
        )
        .await
        .1;
    }
    gw.shutdown().await;
    (v, up.calls())
}

#[tokio::test]
async fn the_answer_budget_holds_on_every_round_the_last_included() {
    const LIMIT: usize = 200;
    let base = answer_bytes(0);
    // Round lengths, as totals of answer bytes around the limit.
    let fit = |total: usize| total - base;
    let cases: Vec<Vec<usize>> = vec![
        vec![fit(LIMIT - 1)],
        vec![fit(LIMIT)],
        vec![fit(LIMIT + 1)],
        vec![fit(LIMIT) * 4],
        vec![1999],
        vec![fit(80), fit(LIMIT - 80)],
        vec![fit(80), fit(LIMIT - 79)],
        vec![fit(60), fit(60), fit(LIMIT - 120)],
        vec![fit(60), fit(60), fit(LIMIT - 119)],
    ];
    for lengths in cases {
        let total: usize = lengths.iter().map(|l| answer_bytes(*l)).sum();
        let (v, received) = operation(LIMIT, &lengths).await;
        let last = "n".repeat(*lengths.last().unwrap());
        let forwarded = received
            .iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains(&format!("\"{last}\"")));
        if total <= LIMIT {
            assert_eq!(v["result"]["resultType"], "complete", "{lengths:?}: {v}");
            assert!(forwarded, "{lengths:?}");
        } else {
            assert_eq!(
                v["error"]["data"]["reason"], "answer_limit_exceeded",
                "{lengths:?} ({total} bytes): {v}"
            );
            assert!(
                !forwarded,
                "an answer over the budget reached the upstream: {lengths:?}"
            );
            assert_eq!(received.len(), lengths.len(), "{lengths:?}");
        }
    }
}

/// An upstream that asks once, then completes each retry after `delay`, so
/// that concurrent retries are all in flight together.
async fn slow_booking(delay: Duration) -> ScriptedUpstream {
    ScriptedUpstream::start(move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        if body["params"].get("inputResponses").is_some() {
            let done = json!({"resultType": "complete", "content": [{"type": "text", "text": "booked"}]});
            return vec![
                Step::Sleep(delay),
                http_response("200 OK", "application/json", &result_json(&id_of(req), done)),
            ];
        }
        let ask = json!({"resultType": "input_required", "requestState": "up-1",
            "inputRequests": {"room": {"method": "elicitation/create", "params": {"mode": "form",
              "message": "Which room?", "requestedSchema": {"type": "object",
              "properties": {"room_id": {"type": "string", "enum": ["atrium", "nook"]}}, "required": ["room_id"]}}}}});
        vec![http_response("200 OK", "application/json", &result_json(&id_of(req), ask))]
    })
    .await
}

#[tokio::test]
async fn concurrent_retries_of_a_single_use_state_get_one_answer() {
    for n in [2usize, 5, 12] {
        let up = slow_booking(Duration::from_millis(300)).await;
        // single use is the untrusted preset's default.
        let gw = start_gateway(&config_text(&up.url(), "", "")).await;
        let c = client();
        let target = Arc::new(url(&gw));
        let (_, first) = send(
            &c,
            &target,
            "s0",
            call_body("s0", "hostile_tool", json!({})),
        )
        .await;
        let state = first["result"]["requestState"]
            .as_str()
            .expect("state")
            .to_owned();
        let answers = json!({"room": {"action": "accept", "content": {"room_id": "nook"}}});
        let retries = (0..n).map(|i| {
            let (c, target) = (c.clone(), target.clone());
            let body = retry_body(&format!("s{}", i + 1), &state, &answers);
            tokio::spawn(async move { send(&c, &target, &format!("s{}", i + 1), body).await })
        });
        let mut delivered = 0;
        let mut replayed = 0;
        for r in retries.collect::<Vec<_>>() {
            let (status, v) = r.await.unwrap();
            if v["result"]["resultType"] == "complete" {
                delivered += 1;
            } else {
                assert_eq!(
                    (status, v["error"]["data"]["reason"].as_str()),
                    (400, Some("state_replayed")),
                    "{v}"
                );
                replayed += 1;
            }
        }
        assert_eq!((delivered, replayed), (1, n - 1), "{n} concurrent retries");
        // A retry after the answer was delivered is refused before the upstream.
        let before = up.requests().len();
        let (_, v) = send(&c, &target, "late", retry_body("late", &state, &answers)).await;
        assert_eq!(v["error"]["data"]["reason"], "state_replayed", "{v}");
        assert_eq!(up.requests().len(), before);
        let counted = super::metric(
            &gw,
            "portcullis_request_state_refusals_total",
            &[r#"reason="state_replayed""#],
        )
        .await;
        assert_eq!(
            counted, n as u64,
            "the losers and the late retry are counted"
        );
        gw.shutdown().await;
    }
}

#[tokio::test]
async fn url_mode_links_into_the_local_network_are_refused() {
    let local = [
        "https://localhost/pay",
        "https://LOCALHOST./pay",
        "https://localhost:8443/pay",
        "https://app.localhost/pay",
        "https://printer.local/setup",
        "https://db.internal/admin",
        "https://wiki.intranet/",
        "https://router.lan/",
        "https://nas.home.arpa/",
        "https://build.corp/",
        "https://intranet/",
        "https://intranet./",
        "https://box.localdomain/",
        "https://db.INTERNAL./x",
    ];
    let public = [
        "https://pay.example.com/checkout",
        "https://pay.example.com./checkout",
    ];
    let mut scripts = Vec::new();
    for target in local.iter().chain(&public) {
        let ask = json!({"resultType": "input_required", "requestState": "s",
            "inputRequests": {"k": {"method": "elicitation/create", "params": {"mode": "url",
              "url": target, "message": "Continue in your browser", "elicitationId": "e1"}}}});
        scripts.push(ask);
    }
    let scripts = Arc::new(scripts);
    let up = ScriptedUpstream::start(move |req| {
        let id: Value = serde_json::from_str(&id_of(req)).unwrap_or_default();
        let i: usize = id.as_str().and_then(|s| s[1..].parse().ok()).unwrap_or(0);
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(&id_of(req), scripts[i].clone()),
        )]
    })
    .await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let c = client();
    for (i, target) in local.iter().chain(&public).enumerate() {
        let id = format!("u{i}");
        let body = call_body(&id, "hostile_tool", json!({})).replace(
            "{\"elicitation\":{\"form\":{}}}",
            "{\"elicitation\":{\"url\":{}}}",
        );
        let (_, v) = send(&c, &url(&gw), &id, body).await;
        if i < local.len() {
            assert_eq!(
                v["error"]["data"]["reason"], "url_not_allowed",
                "{target}: {v}"
            );
            assert_eq!(
                v["error"]["data"]["urlReason"], "local_name",
                "{target}: {v}"
            );
            assert!(
                !v.to_string().contains(target),
                "the link is not echoed: {v}"
            );
        } else {
            assert_eq!(v["result"]["resultType"], "input_required", "{target}: {v}");
        }
    }
    gw.shutdown().await;
}
