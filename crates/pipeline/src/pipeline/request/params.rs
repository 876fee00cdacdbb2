//! `params` of a client's message, read in one strict pass: the members the
//! gateway decides on are taken out (borrowed where they need no decoding),
//! every other member is checked strictly and skipped, and a member given
//! twice anywhere (`arguments` included) fails the parse.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::json::strict::{Build, Check, Failure, Key, SeenKeys};
use crate::json::JsonError;

/// What the checks need of `params`.
#[derive(Debug, Default)]
pub(super) struct ParamsView<'a> {
    /// The method's target member (`name`, `uri`, `taskId`).
    pub(crate) target: Option<Target<'a>>,
    /// `_meta["io.modelcontextprotocol/protocolVersion"]`.
    pub(crate) meta_version: Option<Cow<'a, str>>,
    /// `_meta["io.modelcontextprotocol/clientCapabilities"]`, raw.
    pub(crate) meta_capabilities: Option<&'a RawValue>,
    /// `protocolVersion` (a 2025-11-25 `initialize`).
    pub(crate) protocol_version: Option<Cow<'a, str>>,
    /// `capabilities` (a 2025-11-25 `initialize`), raw.
    pub(crate) capabilities: Option<&'a RawValue>,
    /// `requestState`, raw (a string, for the gateway's own).
    pub(crate) request_state: Option<&'a RawValue>,
    /// Whether `inputResponses` is present.
    pub(crate) input_responses: bool,
    /// `arguments` (a tool's or a prompt's), or a completion's `argument`,
    /// built strictly in this one pass when the method sends one.
    pub(crate) arguments: Option<serde_json::Value>,
    /// A completion's `ref`, built strictly.
    pub(crate) reference: Option<serde_json::Value>,
    /// Whether `cursor` is present (a list's later page).
    pub(crate) cursor: bool,
}

/// The method's target member: its text when it is a string, decoded in
/// the one pass (the header check compares it), or that it is not one.
#[derive(Debug, PartialEq)]
pub(crate) enum Target<'a> {
    Text(Cow<'a, str>),
    /// Another JSON value (checked strictly like the rest).
    NotText,
}

/// Which members of `params` carry what a call sends its server (read by
/// the argument checks), by method name.
pub(crate) fn sent_members(method: crate::model::McpMethod) -> &'static [&'static str] {
    use crate::model::McpMethod as M;
    match method {
        M::ToolsCall | M::PromptsGet => &["arguments"],
        M::CompletionComplete => &["argument", "ref"],
        _ => &[],
    }
}

/// Read `params` (an object, raw) strictly, taking out the target member
/// named `target`.
pub(super) fn read<'a>(
    params: &'a RawValue,
    target: Option<&str>,
    sent: &[&str],
) -> Result<ParamsView<'a>, JsonError> {
    let failure = Failure::default();
    crate::json::strict::run_text(
        params.get(),
        &failure,
        ParamsSeed {
            failure: &failure,
            target,
            sent,
        },
    )
}

/// The seed [`read`] runs, for `method`'s params, to read them in the
/// envelope's own pass (`json::Message::parse_reading`).
pub(super) fn seed(failure: &Failure, method: crate::model::McpMethod) -> ParamsSeed<'_, 'static> {
    ParamsSeed {
        failure,
        target: method.target().map(|t| t.member),
        sent: sent_members(method),
    }
}

pub(super) struct ParamsSeed<'f, 't> {
    failure: &'f Failure,
    target: Option<&'t str>,
    /// Members built into values ([`sent_members`]).
    sent: &'t [&'t str],
}

impl<'de> DeserializeSeed<'de> for ParamsSeed<'_, '_> {
    type Value = ParamsView<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ParamsView<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ParamsSeed<'_, '_> {
    type Value = ParamsView<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a params object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ParamsView<'de>, A::Error> {
        let mut out = ParamsView::default();
        let mut seen = SeenKeys::default();
        let check = Check(self.failure);
        while let Some(Key(key)) = map.next_key()? {
            seen.note(&key, self.failure)?;
            match key.as_ref() {
                k if Some(k) == self.target => {
                    out.target = Some(map.next_value_seed(TargetSeed(self.failure))?)
                }
                "_meta" => {
                    let meta = map.next_value_seed(MetaSeed(self.failure))?;
                    out.meta_version = meta.0;
                    out.meta_capabilities = meta.1;
                }
                "protocolVersion" => out.protocol_version = Some(map.next_value::<Key<'de>>()?.0),
                "capabilities" => out.capabilities = Some(raw_checked(&mut map, check)?),
                "requestState" => out.request_state = Some(raw_checked(&mut map, check)?),
                "inputResponses" => {
                    out.input_responses = true;
                    map.next_value_seed(check)?;
                }
                "cursor" => {
                    out.cursor = true;
                    map.next_value_seed(check)?;
                }
                k if self.sent.contains(&k) => {
                    let built = map.next_value_seed(Build(self.failure))?;
                    match k {
                        "ref" => out.reference = Some(built),
                        _ => out.arguments = Some(built),
                    }
                }
                _ => map.next_value_seed(check)?,
            }
        }
        Ok(out)
    }
}

/// A member kept raw, after checking it strictly.
fn raw_checked<'de, A: MapAccess<'de>>(
    map: &mut A,
    check: Check<'_>,
) -> Result<&'de RawValue, A::Error> {
    let raw: &'de RawValue = map.next_value()?;
    let mut de = serde_json::Deserializer::from_str(raw.get());
    check
        .deserialize(&mut de)
        .map_err(|_| de::Error::custom("invalid member"))?;
    Ok(raw)
}

/// The target member read strictly: a string decoded, anything else
/// walked by [`Check`] and noted as not a string.
struct TargetSeed<'f>(&'f Failure);

impl<'de> DeserializeSeed<'de> for TargetSeed<'_> {
    type Value = Target<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Target<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TargetSeed<'_> {
    type Value = Target<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Target<'de>, E> {
        Ok(Target::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Target<'de>, E> {
        Ok(Target::Text(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Target<'de>, E> {
        Ok(Target::Text(Cow::Owned(v)))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Target<'de>, E> {
        Ok(Target::NotText)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Target<'de>, E> {
        Ok(Target::NotText)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Target<'de>, E> {
        Ok(Target::NotText)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Target<'de>, E> {
        Ok(Target::NotText)
    }
    fn visit_unit<E>(self) -> Result<Target<'de>, E> {
        Ok(Target::NotText)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Target<'de>, A::Error> {
        Check(self.0).visit_seq(seq).map(|()| Target::NotText)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Target<'de>, A::Error> {
        Check(self.0).visit_map(map).map(|()| Target::NotText)
    }
}

/// `_meta`: the two members the transport rules read; the rest checked.
struct MetaSeed<'f>(&'f Failure);

type Meta<'de> = (Option<Cow<'de, str>>, Option<&'de RawValue>);

impl<'de> DeserializeSeed<'de> for MetaSeed<'_> {
    type Value = Meta<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Meta<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed<'_> {
    type Value = Meta<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a _meta object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Meta<'de>, A::Error> {
        let (mut version, mut caps) = (None, None);
        let mut seen = SeenKeys::default();
        let check = Check(self.0);
        while let Some(Key(key)) = map.next_key()? {
            seen.note(&key, self.0)?;
            match key.as_ref() {
                "io.modelcontextprotocol/protocolVersion" => {
                    version = Some(map.next_value::<Key<'de>>()?.0)
                }
                "io.modelcontextprotocol/clientCapabilities" => {
                    caps = Some(raw_checked(&mut map, check)?)
                }
                _ => map.next_value_seed(check)?,
            }
        }
        Ok((version, caps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn takes_out_what_the_checks_need() {
        let p = raw(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":1},"name":"book\u005froom","arguments":{"a":[1,{"b":2}]},"requestState":"s","inputResponses":{}}"#,
        );
        let v = read(&p, Some("name"), &["arguments"]).unwrap();
        assert_eq!(v.arguments, Some(serde_json::json!({"a": [1, {"b": 2}]})));
        assert_eq!(v.target, Some(Target::Text("book_room".into())));
        assert_eq!(v.meta_version.as_deref(), Some("2026-07-28"));
        assert_eq!(v.meta_capabilities.unwrap().get(), r#"{"elicitation":{}}"#);
        assert_eq!(v.request_state.unwrap().get(), r#""s""#);
        assert!(v.input_responses);
    }

    #[test]
    fn duplicates_anywhere_in_params_are_refused() {
        for body in [
            r#"{"name":"a","name":"b"}"#,
            r#"{"name":"a","n\u0061me":"b"}"#,
            r#"{"arguments":{"amount":1,"amount":1000}}"#,
            r#"{"arguments":{"x":[{"k":1,"k":2}]}}"#,
            r#"{"_meta":{"progressToken":1,"progressToken":2}}"#,
            r#"{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{},"roots":{}}}}"#,
            r#"{"inputResponses":{"a":{"action":"accept"},"a":{"action":"decline"}}}"#,
        ] {
            let e = read(&raw(body), Some("name"), &["arguments"]).unwrap_err();
            assert!(e.is_duplicate(), "{body}: {e}");
        }
    }

    #[test]
    fn lone_surrogates_are_refused_in_arguments() {
        assert!(read(
            &raw(r#"{"arguments":{"a":"\udead"}}"#),
            Some("name"),
            &["arguments"]
        )
        .is_err());
        assert!(read(
            &raw(r#"{"arguments":{"\ud800":1}}"#),
            Some("name"),
            &["arguments"]
        )
        .is_err());
    }
}
