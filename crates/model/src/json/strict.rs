//! Strict JSON: a value that cannot mean two things. A member given twice
//! anywhere (parsers resolve that differently: first wins, last wins, error),
//! an escaped spelling of a member already given (`"result\u0054ype"` is
//! `resultType`), a lone surrogate, invalid UTF-8, or nesting deeper than
//! [`MAX_DEPTH`] is an error. [`Check`] walks a value without keeping it;
//! [`parse_value`] builds a `serde_json::Value`. Both are serde visitors, so
//! the extracting visitors of the request and response checks reuse them for
//! the members they do not read.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};
use smallvec::SmallVec;

use super::error::{JsonError, JsonErrorKind};
use super::MAX_DEPTH;
use crate::model::printable_name;

/// Where a strict visitor records the duplicate it failed on, so the error
/// can be classified without reading serde's message.
#[derive(Default)]
pub struct Failure(RefCell<Option<String>>);

impl Failure {
    pub fn duplicate<E: de::Error>(&self, member: &str) -> E {
        *self.0.borrow_mut() = Some(printable_name(member));
        E::custom("duplicate member")
    }

    pub(crate) fn error(&self, e: &serde_json::Error) -> JsonError {
        JsonError::from_serde(e, self.0.borrow_mut().take())
    }
}

/// A member name, borrowed from the input when it has no escapes.
pub struct Key<'de>(pub Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The member names of one object seen so far: inline for the usual few,
/// a hash set past that so a huge object costs linear time.
#[derive(Default)]
pub struct SeenKeys<'de> {
    few: SmallVec<[Cow<'de, str>; 8]>,
    many: Option<HashSet<Cow<'de, str>>>,
}

impl<'de> SeenKeys<'de> {
    /// Record `key`; `false` when it was seen already.
    pub(crate) fn insert(&mut self, key: Cow<'de, str>) -> bool {
        if let Some(many) = &mut self.many {
            return many.insert(key);
        }
        if self.few.contains(&key) {
            return false;
        }
        if self.few.len() < 32 {
            self.few.push(key);
        } else {
            let mut many: HashSet<_> = self.few.drain(..).collect();
            many.insert(key);
            self.many = Some(many);
        }
        true
    }

    /// Record `key` or fail the parse as a duplicate. Takes the `Cow` itself
    /// so the set keeps a borrowed name when the input had no escapes.
    #[allow(clippy::ptr_arg)]
    pub fn note<E: de::Error>(&mut self, key: &Cow<'de, str>, failure: &Failure) -> Result<(), E> {
        if self.insert(key.clone()) {
            Ok(())
        } else {
            Err(failure.duplicate(key))
        }
    }
}

/// Walks one value strictly and keeps nothing.
#[derive(Clone, Copy)]
pub struct Check<'f>(pub &'f Failure);

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = SeenKeys::default();
        while let Some(Key(key)) = map.next_key()? {
            seen.note(&key, self.0)?;
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// Builds a `serde_json::Value` strictly.
#[derive(Clone, Copy)]
pub struct Build<'f>(pub &'f Failure);

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(v) = seq.next_element_seed(self)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        // One hash per member: the entry both finds a duplicate and keeps
        // the slot for the value.
        while let Some(Key(key)) = map.next_key()? {
            match out.entry(key.into_owned()) {
                Entry::Occupied(taken) => return Err(self.0.duplicate(taken.key())),
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(self)?);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// Run `seed` over all of `bytes` (one value, nothing after it but white
/// space), after the depth check.
pub fn run<'de, S, T>(bytes: &'de [u8], failure: &Failure, seed: S) -> Result<T, JsonError>
where
    S: DeserializeSeed<'de, Value = T>,
{
    before_drive(bytes)?;
    drive(bytes, failure, seed)
}

/// [`run`] of text already known to be UTF-8 (a slice the envelope's parse
/// borrowed: `params`, `result`): the same answer without checking the
/// encoding again.
pub fn run_text<'de, S, T>(text: &'de str, failure: &Failure, seed: S) -> Result<T, JsonError>
where
    S: DeserializeSeed<'de, Value = T>,
{
    before_drive(text.as_bytes())?;
    read(serde_json::Deserializer::from_str(text), failure, seed)
}

/// What [`run`] refuses before reading: nothing but white space, or
/// nesting deeper than [`MAX_DEPTH`].
fn before_drive(bytes: &[u8]) -> Result<(), JsonError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(JsonError::at(JsonErrorKind::Empty, 1, 1));
    }
    if super::depth::exceeds(bytes, MAX_DEPTH) {
        return Err(JsonError::at(JsonErrorKind::TooDeep, 1, 1));
    }
    Ok(())
}

/// Run `seed` over the envelope of a message: no depth pre-check, because
/// the envelope's seed keeps `params`, `result` and `error` raw (serde skips
/// them without recursing) and each is checked, depth included, by the phase
/// that reads it; other members recurse through [`Check`], which serde's own
/// recursion limit stops.
pub fn run_envelope<'de, S, T>(bytes: &'de [u8], failure: &Failure, seed: S) -> Result<T, JsonError>
where
    S: DeserializeSeed<'de, Value = T>,
{
    drive(bytes, failure, seed)
}

/// Run `seed` over `bytes` with serde's deserializer. Text that is UTF-8
/// (every message but a broken one) is checked as such once, whole, and
/// read as text: read as bytes, serde checks every string again as it
/// reads it. Bytes that are not UTF-8 are read as bytes, so they fail
/// where and as they always did.
fn drive<'de, S, T>(bytes: &'de [u8], failure: &Failure, seed: S) -> Result<T, JsonError>
where
    S: DeserializeSeed<'de, Value = T>,
{
    match std::str::from_utf8(bytes) {
        Ok(text) => read(serde_json::Deserializer::from_str(text), failure, seed),
        Err(_) => read(serde_json::Deserializer::from_slice(bytes), failure, seed),
    }
}

fn read<'de, R, S, T>(
    mut de: serde_json::Deserializer<R>,
    failure: &Failure,
    seed: S,
) -> Result<T, JsonError>
where
    R: serde_json::de::Read<'de>,
    S: DeserializeSeed<'de, Value = T>,
{
    let out = seed.deserialize(&mut de).map_err(|e| failure.error(&e))?;
    de.end().map_err(|e| failure.error(&e))?;
    Ok(out)
}

/// Check `bytes` strictly and, when they are an object, return its
/// top-level member `member`, which must then be a string: one pass where
/// reading a member and checking the value would take two. An error here may
/// come before or after the member; callers that must tell which repeat the
/// two steps on failure.
pub fn validate_with_member<'a>(
    text: &'a str,
    member: &str,
) -> Result<Option<Cow<'a, str>>, JsonError> {
    let failure = Failure::default();
    run_text(
        text,
        &failure,
        WithMember {
            failure: &failure,
            member,
        },
    )
}

/// [`Check`] of a value that also takes out one string member of it.
pub struct WithMember<'f, 'm> {
    failure: &'f Failure,
    member: &'m str,
}

impl<'f, 'm> WithMember<'f, 'm> {
    /// The seed [`validate_with_member`] runs, for a caller's own pass.
    pub fn new(failure: &'f Failure, member: &'m str) -> Self {
        WithMember { failure, member }
    }
}

impl<'de> DeserializeSeed<'de> for WithMember<'_, '_> {
    type Value = Option<Cow<'de, str>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for WithMember<'_, '_> {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Check(self.failure).visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = SeenKeys::default();
        let mut found = None;
        while let Some(Key(key)) = map.next_key()? {
            seen.note(&key, self.failure)?;
            if key == self.member {
                found = Some(map.next_value::<Key<'de>>()?.0);
            } else {
                map.next_value_seed(Check(self.failure))?;
            }
        }
        Ok(found)
    }
}

/// Check `bytes` strictly without building anything.
pub fn validate(bytes: &[u8]) -> Result<(), JsonError> {
    let failure = Failure::default();
    run(bytes, &failure, Check(&failure))
}

/// Parse `bytes` strictly into a `serde_json::Value`.
pub fn parse_value(bytes: &[u8]) -> Result<Value, JsonError> {
    let failure = Failure::default();
    run(bytes, &failure, Build(&failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_anywhere_are_refused_with_their_name() {
        assert!(validate(br#"{"a":{"b":1,"c":[{"d":1}]}}"#).is_ok());
        let e = validate(br#"{"a":{"b":1,"c":[{"d":1,"d":2}]}}"#).unwrap_err();
        assert_eq!(
            e.kind,
            JsonErrorKind::DuplicateMember { member: "d".into() }
        );
        let e = parse_value(br#"{"resultType":"complete","result\u0054ype":"x"}"#).unwrap_err();
        assert!(e.is_duplicate(), "{e}");
    }

    #[test]
    fn many_members_still_catch_a_duplicate() {
        let mut body = String::from("{");
        for i in 0..200 {
            body.push_str(&format!("\"k{i}\":{i},"));
        }
        body.push_str("\"k7\":0}");
        assert!(validate(body.as_bytes()).unwrap_err().is_duplicate());
        assert!(parse_value(body.as_bytes()).unwrap_err().is_duplicate());
    }

    #[test]
    fn depth_surrogates_utf8_and_trailing_bytes() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(validate(ok.as_bytes()).is_ok());
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert_eq!(
            validate(deep.as_bytes()).unwrap_err().kind,
            JsonErrorKind::TooDeep
        );
        assert_eq!(
            validate(br#"{"a":"\ud800"}"#).unwrap_err().kind,
            JsonErrorKind::Syntax
        );
        assert_eq!(
            validate(br#"{"\udc00":1}"#).unwrap_err().kind,
            JsonErrorKind::Syntax
        );
        assert!(validate(b"\"\xff\"").is_err());
        assert!(validate(b"{} {}").is_err());
        assert_eq!(validate(b"  ").unwrap_err().kind, JsonErrorKind::Empty);
        assert!(validate(br#"{"a":"\ud83d\ude00"}"#).is_ok());
    }

    /// Reading UTF-8 text as text answers as reading it as bytes did:
    /// the same value, or the same error at the same place.
    #[test]
    fn text_read_as_text_answers_as_bytes_did() {
        let inputs: [&[u8]; 12] = [
            br#"{"a":[1,{"b":"x\n\u00e9"}],"c":null}"#,
            br#"{"a":1,"a":2}"#,
            br#"{"a":"\ud800"}"#,
            b"{\"a\":\"caf\xc3\xa9\"}",
            b"{\"a\":\"\x01\"}",
            b"{\"a\":1,}",
            b"[1,2] x",
            b"{\"a\":tru}",
            b"\"\xff\"",
            b"{\"\xc3\":1}",
            b"{\"a\":\"ok\"} \xff",
            b"  {\"a\":\n\"b\" ",
        ];
        for bytes in inputs {
            let failure = Failure::default();
            let as_bytes = read(
                serde_json::Deserializer::from_slice(bytes),
                &failure,
                Build(&failure),
            );
            assert_eq!(
                parse_value(bytes),
                as_bytes,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
            // Text the envelope borrowed skips the encoding check, not a verdict.
            if let Ok(text) = std::str::from_utf8(bytes) {
                let failure = Failure::default();
                assert_eq!(
                    run_text(text, &failure, Build(&failure)),
                    as_bytes,
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn one_member_is_taken_out_of_a_checked_object() {
        let got =
            validate_with_member(r#"{"a":[1,{"b":2}],"resultType":"complete"}"#, "resultType");
        assert_eq!(got.unwrap().as_deref(), Some("complete"));
        assert_eq!(
            validate_with_member(r#"{"a":1}"#, "resultType").unwrap(),
            None
        );
        assert_eq!(validate_with_member("[1,2]", "resultType").unwrap(), None);
        let spelled = validate_with_member(r#"{"result\u0054ype":"x"}"#, "resultType");
        assert_eq!(spelled.unwrap().as_deref(), Some("x"));
        for bad in [
            r#"{"resultType":"a","result\u0054ype":"b"}"#,
            r#"{"resultType":"a","x":{"k":1,"k":2}}"#,
            r#"{"resultType":1}"#,
            r#"{"resultType":"a"} x"#,
        ] {
            assert!(validate_with_member(bad, "resultType").is_err());
        }
    }

    #[test]
    fn errors_never_quote_values() {
        let e = validate(br#"{"a":"hunter2"#).unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
