//! The envelope and one of its members in one pass: [`Message::parse`]
//! keeps `params` and `result` raw, and the phase that reads one then parses
//! it again, strictly. Here the caller's strict seed reads that member where
//! it stands, and its text is located from the member names around it, so a
//! message is walked once.
//!
//! This is an accelerator, never a second opinion: it answers only when
//! [`Message::parse`] followed by the member's own strict pass would answer
//! the same, and gives up (`None`) on anything else — any error, an escaped
//! member name beside the member, a seed that needs the method before the
//! method came. The caller then takes the two passes, which give the error.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::message::{Message, Shape};
use super::strict::{self, Check, Failure, Key, SeenKeys};

/// A message whose member `member` the caller's seed read: the message
/// (that member left out of it) and the seed's value with the member's text.
pub struct Read<'a, T> {
    pub message: Message<'a>,
    pub member: Option<(T, &'a str)>,
}

impl<'a> Message<'a> {
    /// The envelope of `body` with its member `member` read by the seed
    /// `seed_for` makes (given the method read before it, if any; `None`
    /// from it gives up). See the module's words for when this gives up.
    pub fn parse_reading<S, F>(
        body: &'a [u8],
        failure: &Failure,
        member: &'static str,
        seed_for: F,
    ) -> Option<Read<'a, S::Value>>
    where
        S: DeserializeSeed<'a>,
        F: FnOnce(Option<&str>) -> Option<S>,
    {
        let text = std::str::from_utf8(body).ok()?;
        // `run_text` bounds the body's depth as the member's own pass
        // bounds the member's (one level less): deeper gives up.
        let seed = EnvelopeReading {
            text,
            failure,
            member,
            seed_for: Some(seed_for),
            seed: PhantomData,
        };
        let read = strict::run_text(text, failure, seed).ok()?;
        let member = match read.member {
            None => None,
            Some((value, start, end)) => {
                let end = end.or_else(|| last_member_end(text))?;
                Some((value, text.get(start..end)?))
            }
        };
        let env = read.envelope;
        if env.jsonrpc.as_deref() != Some("2.0") {
            return None;
        }
        let shape = Shape {
            method: env.method.is_some(),
            id: env.id,
            result: env.result.is_some() || (member.is_some() && read.name == "result"),
            error: env.error.is_some(),
        };
        let (kind, id) = shape.kind().ok()?;
        let message = Message {
            kind,
            id,
            method: env.method,
            params: env.params,
            result: env.result,
            error: env.error,
        };
        Some(Read { message, member })
    }
}

/// JSON's white space (what may stand between two tokens).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Where a member name borrowed from `text` starts in it (`None` for a name
/// that was unescaped into a copy: its place is unknown). Takes the `Cow`
/// itself: whether it borrows is the answer.
#[allow(clippy::ptr_arg)]
fn offset_of(text: &str, key: &Cow<'_, str>) -> Option<usize> {
    let Cow::Borrowed(key) = key else {
        return None;
    };
    let start = (key.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    (start.checked_add(key.len())? <= text.len()).then_some(start)
}

/// The first byte of the value of the member named `key`: past its closing
/// quote, white space, the colon, white space.
#[allow(clippy::ptr_arg)] // the `Cow` itself: see `offset_of`
fn value_start(text: &str, key: &Cow<'_, str>) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = offset_of(text, key)? + key.len();
    (bytes.get(at) == Some(&b'"')).then_some(())?;
    at += 1;
    while bytes.get(at).copied().is_some_and(is_space) {
        at += 1;
    }
    (bytes.get(at) == Some(&b':')).then_some(())?;
    at += 1;
    while bytes.get(at).copied().is_some_and(is_space) {
        at += 1;
    }
    Some(at)
}

/// The end of the value before the member named `key`: back from its
/// opening quote over white space, the comma, white space.
#[allow(clippy::ptr_arg)] // the `Cow` itself: see `offset_of`
fn end_before(text: &str, key: &Cow<'_, str>) -> Option<usize> {
    let bytes = text.as_bytes();
    let quote = offset_of(text, key)?.checked_sub(1)?;
    (bytes.get(quote) == Some(&b'"')).then_some(())?;
    let comma = trim_back(bytes, quote)?.checked_sub(1)?;
    (bytes.get(comma) == Some(&b',')).then_some(())?;
    trim_back(bytes, comma)
}

/// The end of the envelope's last member's value: back from the envelope's
/// closing brace (the last byte but white space) over white space.
fn last_member_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let brace = trim_back(bytes, bytes.len())?.checked_sub(1)?;
    (bytes.get(brace) == Some(&b'}')).then_some(())?;
    trim_back(bytes, brace)
}

/// `at` moved back over the white space before it.
fn trim_back(bytes: &[u8], mut at: usize) -> Option<usize> {
    while at > 0 && is_space(*bytes.get(at - 1)?) {
        at -= 1;
    }
    Some(at)
}

/// The envelope's members, the method decoded, the read member apart.
#[derive(Default)]
struct Envelope<'a> {
    jsonrpc: Option<Cow<'a, str>>,
    id: Option<&'a RawValue>,
    method: Option<Cow<'a, str>>,
    params: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
}

struct Reading<'a, T> {
    envelope: Envelope<'a>,
    name: &'static str,
    /// The seed's value, where the member's value starts, and where it ends
    /// (`None` while no member followed it: the envelope's end tells).
    member: Option<(T, usize, Option<usize>)>,
}

struct EnvelopeReading<'t, 'f, F, S> {
    text: &'t str,
    failure: &'f Failure,
    member: &'static str,
    seed_for: Option<F>,
    seed: PhantomData<S>,
}

fn give_up<E: de::Error>() -> E {
    E::custom("read in two passes")
}

impl<'de, F, S> DeserializeSeed<'de> for EnvelopeReading<'de, '_, F, S>
where
    S: DeserializeSeed<'de>,
    F: FnOnce(Option<&str>) -> Option<S>,
{
    type Value = Reading<'de, S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, F, S> Visitor<'de> for EnvelopeReading<'de, '_, F, S>
where
    S: DeserializeSeed<'de>,
    F: FnOnce(Option<&str>) -> Option<S>,
{
    type Value = Reading<'de, S::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut env = Envelope::default();
        let mut member: Option<(S::Value, usize, Option<usize>)> = None;
        let mut seen = SeenKeys::default();
        while let Some(Key(key)) = map.next_key()? {
            if let Some((_, _, end @ None)) = &mut member {
                *end = Some(end_before(self.text, &key).ok_or_else(give_up)?);
            }
            seen.note(&key, self.failure)?;
            let slot = match key.as_ref() {
                "jsonrpc" => {
                    env.jsonrpc = Some(map.next_value::<Key<'de>>()?.0);
                    continue;
                }
                "method" => {
                    // Not a string: the two passes say so in their words.
                    env.method = Some(map.next_value::<Key<'de>>()?.0);
                    continue;
                }
                name if name == self.member => {
                    let seed_for = self.seed_for.take().ok_or_else(give_up)?;
                    let seed = seed_for(env.method.as_deref()).ok_or_else(give_up)?;
                    let value = map.next_value_seed(seed)?;
                    let start = value_start(self.text, &key).ok_or_else(give_up)?;
                    member = Some((value, start, None));
                    continue;
                }
                "id" => &mut env.id,
                "params" => &mut env.params,
                "result" => &mut env.result,
                "error" => &mut env.error,
                _ => {
                    map.next_value_seed(Check(self.failure))?;
                    continue;
                }
            };
            *slot = Some(map.next_value()?);
        }
        if env.params.is_some_and(|p| !p.get().starts_with('{')) {
            return Err(give_up());
        }
        Ok(Reading {
            envelope: env,
            name: self.member,
            member,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::strict::validate_with_member;

    /// A seed that takes out `resultType` (or any member) of a checked value.
    fn read_result(body: &[u8]) -> Option<(Option<String>, String)> {
        let failure = Failure::default();
        let read = Message::parse_reading(body, &failure, "result", |_| {
            Some(strict::WithMember::new(&failure, "resultType"))
        })?;
        let (t, text) = read.member?;
        Some((t.map(Cow::into_owned), text.to_owned()))
    }

    /// What the two passes give: the envelope, then the member checked.
    fn two_passes(body: &[u8]) -> Option<(Option<String>, String)> {
        let msg = Message::parse(body).ok()?;
        let text = msg.result?.get();
        let t = validate_with_member(text, "resultType").ok()?;
        Some((t.map(Cow::into_owned), text.to_owned()))
    }

    #[test]
    fn one_pass_answers_as_two_did_or_gives_up() {
        let bodies: [&[u8]; 14] = [
            br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}"#,
            br#"{"jsonrpc":"2.0","result":{"resultType":"complete"},"id":"a"}"#,
            b" { \"jsonrpc\" : \"2.0\" , \"id\" : 1 , \"result\" :\n {\"a\":[1,{\"b\":2}]} \r\n} ",
            br#"{"jsonrpc":"2.0","id":1,"result":5}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":"x" ,"extra":{"k":1}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{},"res\u0075lt":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"res\u0075lt":{"resultType":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"a":1},"\u0065xtra":2}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":2}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":1}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            br#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}}x"#,
        ];
        for body in bodies {
            let one = read_result(body);
            if one.is_some() {
                assert_eq!(one, two_passes(body), "{}", String::from_utf8_lossy(body));
            }
        }
        assert!(read_result(bodies[0]).is_some());
        assert!(read_result(bodies[2]).is_some());
    }

    #[test]
    fn a_seed_needing_the_method_gives_up_without_it() {
        let failure = Failure::default();
        let body = br#"{"jsonrpc":"2.0","params":{},"id":1,"method":"x"}"#;
        let seed_for = |m: Option<&str>| m.map(|_| Check(&failure));
        assert!(Message::parse_reading(body, &failure, "params", seed_for).is_none());
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[1]}}"#;
        let read = Message::parse_reading(body, &failure, "params", seed_for).unwrap();
        assert_eq!(read.member.unwrap().1, r#"{"a":[1]}"#);
        assert_eq!(read.message.method.as_deref(), Some("x"));
    }
}
