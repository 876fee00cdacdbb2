use super::*;

fn args(hint: &str) -> BookRoomArgs {
    serde_json::from_value(json!({"day": "2026-09-17", "hour": 9, "room_hint": hint})).unwrap()
}

fn booker() -> Booker {
    Booker::with_random_key().unwrap()
}

fn json_of(response: &CallToolResponse) -> Value {
    match response {
        CallToolResponse::Complete(result) => serde_json::to_value(result).unwrap(),
        CallToolResponse::InputRequired(result) => serde_json::to_value(result).unwrap(),
        other => panic!("unexpected response {other:?}"),
    }
}

fn first(booker: &Booker, hint: &str) -> Value {
    json_of(&booker.call(&args(hint), Retry::default(), true).unwrap())
}

fn answer(booker: &Booker, hint: &str, state: &Value, room: Value) -> Result<Value, ErrorData> {
    let retry = Retry {
        request_state: state.as_str().map(str::to_owned),
        input_responses: Some(InputResponses::from([(ROOM_KEY.to_owned(), room)])),
    };
    booker.call(&args(hint), retry, true).map(|r| json_of(&r))
}

fn accept(room_id: &str) -> Value {
    json!({"action": "accept", "content": {"room_id": room_id}})
}

#[test]
fn the_seed_request_asks_the_seed_question() {
    let asked = first(&booker(), "the big room");
    assert_eq!(asked["resultType"], "input_required");
    assert_eq!(
        asked["inputRequests"],
        json!({"room": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "'the big room' matches more than one room. Which did you mean?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "room_id": {
                            "type": "string",
                            "enum": ["atrium", "studio-b", "nook"],
                            "description": "The room to book. The Atrium seats 24, Studio B 12, The Nook 4."
                        }
                    },
                    "required": ["room_id"]
                }
            }
        }})
    );
    assert!(asked["requestState"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
}

#[test]
fn a_hint_naming_one_room_books_it_without_asking() {
    for can_ask in [true, false] {
        let done = booker()
            .call(&args("the nook"), Retry::default(), can_ask)
            .unwrap();
        let done = json_of(&done);
        assert_eq!(done["resultType"], "complete");
        assert_eq!(
            done["content"][0]["text"],
            "Booked nook (The Nook) on 2026-09-17 at 09:00."
        );
        assert_eq!(
            done["structuredContent"],
            json!({"booked": true, "room_id": "nook", "day": "2026-09-17", "hour": 9})
        );
    }
}

#[test]
fn a_hint_naming_no_room_asks_too() {
    let asked = first(&booker(), "somewhere quiet");
    let message = &asked["inputRequests"]["room"]["params"]["message"];
    assert_eq!(
        message,
        "'somewhere quiet' does not match any room. Which did you mean?"
    );
    let long = first(&booker(), &"é".repeat(300));
    let message = long["inputRequests"]["room"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with(&format!("'{}' does", "é".repeat(80))),
        "{message}"
    );
}

#[test]
fn asking_needs_form_elicitation() {
    let refused = booker()
        .call(&args("the big room"), Retry::default(), false)
        .unwrap_err();
    assert_eq!(refused.code.0, -32021);
    assert_eq!(
        refused.data,
        Some(json!({"requiredCapabilities": {"elicitation": {"form": {}}}}))
    );
}

#[test]
fn form_support_is_read_from_the_capabilities() {
    let caps = |v: Value| serde_json::from_value::<ClientCapabilities>(v).unwrap();
    assert!(supports_form(Some(&caps(json!({"elicitation": {}})))));
    assert!(supports_form(Some(&caps(
        json!({"elicitation": {"form": {}, "url": {}}})
    ))));
    assert!(!supports_form(Some(&caps(
        json!({"elicitation": {"url": {}}})
    ))));
    assert!(!supports_form(Some(&caps(json!({})))));
    assert!(!supports_form(None));
}

#[test]
fn the_seed_answer_books_studio_b() {
    let booker = booker();
    let state = first(&booker, "the big room")["requestState"].clone();
    let done = answer(&booker, "the big room", &state, accept("studio-b")).unwrap();
    assert_eq!(done["resultType"], "complete");
    assert_eq!(
        done["content"][0]["text"],
        "Booked studio-b (Studio B) on 2026-09-17 at 09:00."
    );
    assert_eq!(done["structuredContent"]["room_id"], "studio-b");
}

#[test]
fn decline_and_cancel_book_nothing() {
    let booker = booker();
    let state = first(&booker, "the big room")["requestState"].clone();
    for (action, text) in [
        ("decline", "Booking cancelled: you declined to pick a room."),
        ("cancel", "Booking cancelled."),
    ] {
        let done = answer(&booker, "the big room", &state, json!({"action": action})).unwrap();
        assert_eq!(done["content"][0]["text"], text);
        assert_eq!(done["structuredContent"], json!({"booked": false}));
    }
}

#[test]
fn a_non_room_is_asked_again_then_given_up() {
    let booker = booker();
    let mut state = first(&booker, "the big room")["requestState"].clone();
    for _ in 1..MAX_ROUNDS {
        let again = answer(&booker, "the big room", &state, accept("attic")).unwrap();
        assert_eq!(again["resultType"], "input_required");
        assert_eq!(
            again["inputRequests"]["room"]["params"]["message"],
            "That is not one of the rooms. Which did you mean?"
        );
        state = again["requestState"].clone();
    }
    let given_up = answer(&booker, "the big room", &state, json!({"action": "accept"})).unwrap();
    assert_eq!(given_up["isError"], true);
}

#[test]
fn the_state_is_bound_to_its_arguments_and_its_server() {
    let booker = booker();
    let state = first(&booker, "the big room")["requestState"].clone();
    let other_hint = answer(&booker, "the big room!", &state, accept("nook")).unwrap_err();
    assert_eq!(other_hint.message, "invalid requestState");
    let other_server = answer(&self::booker(), "the big room", &state, accept("nook")).unwrap_err();
    assert_eq!(other_server.message, "invalid requestState");

    let mut retry = args("the big room");
    retry.hour = 10;
    let retry_state = Retry {
        request_state: state.as_str().map(str::to_owned),
        input_responses: Some(InputResponses::from([(
            ROOM_KEY.to_owned(),
            accept("nook"),
        )])),
    };
    let other_hour = booker.call(&retry, retry_state, true).unwrap_err();
    assert_eq!(other_hour.code.0, -32602);
}

#[test]
fn a_tampered_state_is_refused() {
    let booker = booker();
    let state = first(&booker, "the big room")["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut tampered = state.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    for bad in [tampered.as_str(), "", "rs2.x.y", "not a state"] {
        let refused = answer(&booker, "the big room", &json!(bad), accept("nook")).unwrap_err();
        assert_eq!(refused.code.0, -32602, "{bad}");
    }
}

#[test]
fn half_a_retry_is_invalid_params() {
    let booker = booker();
    let state = first(&booker, "the big room")["requestState"].clone();
    let cases = [
        (
            Retry {
                request_state: state.as_str().map(str::to_owned),
                input_responses: None,
            },
            "requestState without inputResponses",
        ),
        (
            Retry {
                request_state: None,
                input_responses: Some(InputResponses::new()),
            },
            "inputResponses without requestState",
        ),
        (
            Retry {
                request_state: state.as_str().map(str::to_owned),
                input_responses: Some(InputResponses::from([("other".to_owned(), accept("nook"))])),
            },
            "missing inputResponses.room",
        ),
        (
            Retry {
                request_state: state.as_str().map(str::to_owned),
                input_responses: Some(InputResponses::from([(
                    ROOM_KEY.to_owned(),
                    json!({"action": "maybe"}),
                )])),
            },
            "inputResponses.room is not an answer",
        ),
    ];
    for (retry, message) in cases {
        let refused = booker.call(&args("the big room"), retry, true).unwrap_err();
        assert_eq!(
            (refused.code.0, refused.message.as_ref()),
            (-32602, message)
        );
    }
}

#[test]
fn an_hour_out_of_range_is_a_tool_error() {
    let mut late = args("the nook");
    late.hour = 24;
    let done = json_of(&booker().call(&late, Retry::default(), true).unwrap());
    assert_eq!(done["isError"], true);
}

proptest::proptest! {
    #[test]
    fn any_hint_is_booked_or_asked_about(hint in "\\PC{0,200}") {
        let booker = booker();
        let named = rooms::named_by(&hint).len();
        let reply = first(&booker, &hint);
        if named == 1 {
            proptest::prop_assert_eq!(&reply["resultType"], "complete");
        } else {
            proptest::prop_assert_eq!(&reply["resultType"], "input_required");
            let message = reply["inputRequests"]["room"]["params"]["message"].as_str().unwrap();
            // The longer of the two questions, around an echo of at most MAX_ECHO_CHARS.
            let frame = "'' does not match any room. Which did you mean?".chars().count();
            proptest::prop_assert!(message.chars().count() <= MAX_ECHO_CHARS + frame, "{}", message);
            proptest::prop_assert!(message.ends_with("Which did you mean?"), "{}", message);
        }
    }

    #[test]
    fn any_changed_byte_of_a_state_is_refused(at in 0usize..4096, to in proptest::num::u8::ANY) {
        let booker = booker();
        let state = first(&booker, "the big room")["requestState"].as_str().unwrap().to_owned();
        let mut bytes = state.clone().into_bytes();
        let at = at % bytes.len();
        proptest::prop_assume!(bytes[at] != to);
        bytes[at] = to;
        let changed = String::from_utf8_lossy(&bytes).into_owned();
        proptest::prop_assume!(changed != state);
        let refused = answer(&booker, "the big room", &json!(changed), accept("nook")).unwrap_err();
        proptest::prop_assert_eq!(refused.code.0, -32602);
    }
}
