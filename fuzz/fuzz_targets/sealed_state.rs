//! The sealed requestState. From the input: a state to seal, then edits
//! (flip a bit, insert, delete or replace a byte) applied to the fresh token;
//! the rest of the input is also offered to the opener as a token as is.
//!
//! Properties: a sealed state opens to exactly itself; an altered token
//! never opens (whatever the edit, unless it gave back the same token); a
//! token never opens under another purpose prefix or another key set; any
//! string is refused without a panic.
#![no_main]

use std::sync::LazyLock;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use portcullis::model::{Asked, FieldKind, FormField, FormSchema};
use portcullis::mrtr::seal::{OpenError, SealedState, StateKeys};

// Fixed keys so that a crash reproduces from its input file alone.
static KEYS: LazyLock<StateKeys> = LazyLock::new(|| {
    StateKeys::parse(
        "k2:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8,k1:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8",
    )
    .expect("keys")
});
static OTHER: LazyLock<StateKeys> = LazyLock::new(|| {
    StateKeys::parse("k2:QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8").expect("keys")
});

#[derive(Arbitrary, Debug)]
enum Edit {
    Flip { at: u16, bit: u8 },
    Insert { at: u16, byte: u8 },
    Delete { at: u16 },
    Replace { at: u16, byte: u8 },
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(state) = state(&mut u) else { return };
    let Ok(edits) = Vec::<Edit>::arbitrary(&mut u) else {
        return;
    };

    let token = KEYS.seal(&state).expect("sealing works");
    let opened = KEYS.open(&token).expect("a fresh token opens");
    assert_eq!(opened, state, "a token opens to what was sealed");
    assert!(
        KEYS.open_as::<SealedState>("pss1.", &token).is_err(),
        "opened under another purpose"
    );
    assert!(OTHER.open(&token).is_err(), "opened with another key set");

    let mut altered = token.clone().into_bytes();
    for edit in &edits {
        apply(&mut altered, edit);
    }
    if let Ok(text) = std::str::from_utf8(&altered) {
        if text != token {
            assert!(
                KEYS.open(text).is_err(),
                "an altered token opened: {edits:?}"
            );
        }
    }
    // Every single edit on its own, too.
    for edit in &edits {
        let mut one = token.clone().into_bytes();
        apply(&mut one, edit);
        if let Ok(text) = std::str::from_utf8(&one) {
            if text != token {
                assert!(
                    KEYS.open(text).is_err(),
                    "an altered token opened: {edit:?}"
                );
            }
        }
    }

    let rest = u.take_rest();
    if let Ok(raw) = std::str::from_utf8(rest) {
        if let Ok(s) = KEYS.open(raw) {
            // Only a token this process sealed could open, and none was
            // sealed from these bytes.
            panic!("a string from the input opened: {s:?}");
        }
        let _: Result<serde_json::Value, OpenError> = KEYS.open_as("pcs1.", raw);
    }
});

fn apply(token: &mut Vec<u8>, edit: &Edit) {
    let len = token.len();
    match *edit {
        Edit::Flip { at, bit } => {
            let i = usize::from(at) % len.max(1);
            if let Some(b) = token.get_mut(i) {
                *b ^= 1 << (bit % 8);
            }
        }
        Edit::Insert { at, byte } => token.insert(usize::from(at) % (len + 1), byte),
        Edit::Delete { at } => {
            if len > 0 {
                token.remove(usize::from(at) % len);
            }
        }
        Edit::Replace { at, byte } => {
            if let Some(b) = token.get_mut(usize::from(at) % len.max(1)) {
                *b = byte;
            }
        }
    }
}

fn state(u: &mut Unstructured<'_>) -> arbitrary::Result<SealedState> {
    let asked = (0..u.int_in_range(0..=3)?)
        .map(|_| Ok((String::arbitrary(u)?, asked(u)?)))
        .collect::<arbitrary::Result<Vec<_>>>()?;
    Ok(SealedState {
        v: 1,
        upstream_state: Option::<String>::arbitrary(u)?,
        principal: String::arbitrary(u)?,
        upstream: String::arbitrary(u)?,
        method: String::arbitrary(u)?,
        target: Option::<String>::arbitrary(u)?,
        digest: String::arbitrary(u)?,
        operation: String::arbitrary(u)?,
        round: u32::arbitrary(u)?,
        started: u64::arbitrary(u)?,
        started_ms: u64::arbitrary(u)?,
        expires: u64::arbitrary(u)?,
        asked,
        answer_bytes: u64::arbitrary(u)?,
        approval: None,
    })
}

fn asked(u: &mut Unstructured<'_>) -> arbitrary::Result<Asked> {
    Ok(match u.int_in_range(0..=3)? {
        0 => Asked::Form(FormSchema {
            fields: (0..u.int_in_range(0..=3)?)
                .map(|_| {
                    Ok(FormField {
                        name: String::arbitrary(u)?,
                        required: bool::arbitrary(u)?,
                        kind: kind(u)?,
                    })
                })
                .collect::<arbitrary::Result<_>>()?,
        }),
        1 => Asked::Url {
            host: String::arbitrary(u)?,
        },
        2 => Asked::Sampling,
        _ => Asked::Roots,
    })
}

fn kind(u: &mut Unstructured<'_>) -> arbitrary::Result<FieldKind> {
    Ok(match u.int_in_range(0..=3)? {
        0 => FieldKind::Text {
            min_len: Option::arbitrary(u)?,
            max_len: Option::arbitrary(u)?,
            format: None,
        },
        1 => FieldKind::Number {
            integer: bool::arbitrary(u)?,
            // Finite numbers only: JSON has no NaN or infinity.
            min: Option::<i32>::arbitrary(u)?.map(f64::from),
            max: Option::<i32>::arbitrary(u)?.map(|x| f64::from(x) / 4.0),
        },
        2 => FieldKind::Boolean,
        _ => FieldKind::Choice {
            options: Vec::arbitrary(u)?,
        },
    })
}
