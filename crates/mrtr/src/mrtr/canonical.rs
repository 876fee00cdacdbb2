//! RFC 8785 (JCS) canonical JSON of a parsed value, written straight into a
//! hash: members sorted by their names' UTF-16 code units, numbers in the
//! ECMAScript form (`ryu-js`), strings escaped as JSON's minimum. The bytes
//! are the same as `serde_jcs` writes (a test holds them equal), so sealed
//! digests stay comparable across versions; this one copies nothing and
//! parses no member name again.

use std::cmp::Ordering;
use std::io::{self, Write};

use serde_json::Value;

/// Write the canonical form of `value` to `out`.
pub(crate) fn write_value<W: Write>(value: &Value, out: &mut W) -> io::Result<()> {
    match value {
        Value::Null => out.write_all(b"null"),
        Value::Bool(true) => out.write_all(b"true"),
        Value::Bool(false) => out.write_all(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_value(item, out)?;
            }
            out.write_all(b"]")
        }
        Value::Object(members) => write_object(members.iter(), out),
    }
}

/// Write an object of `members` (any order; each name once) canonically.
pub(crate) fn write_object<'a, W: Write>(
    members: impl Iterator<Item = (&'a String, &'a Value)>,
    out: &mut W,
) -> io::Result<()> {
    let mut sorted: Vec<(&String, &Value)> = members.collect();
    sorted.sort_unstable_by(|a, b| utf16_order(a.0, b.0));
    out.write_all(b"{")?;
    for (i, (name, value)) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_string(name, out)?;
        out.write_all(b":")?;
        write_value(value, out)?;
    }
    out.write_all(b"}")
}

/// RFC 8785 §3.2.3: names compare as arrays of UTF-16 code units.
fn utf16_order(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Every number is an IEEE double in the ECMAScript form (§3.2.2.3): an
/// integer beyond 2^53 is rounded as a JavaScript reader would.
fn write_number<W: Write>(n: &serde_json::Number, out: &mut W) -> io::Result<()> {
    match n.as_f64().filter(|f| f.is_finite()) {
        Some(f) => out.write_all(ryu_js::Buffer::new().format_finite(f).as_bytes()),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a number JSON cannot carry",
        )),
    }
}

/// JSON's own string escapes are RFC 8785's (§3.2.2.2): `"`, `\` and the
/// controls, with lowercase hex.
fn write_string<W: Write>(s: &str, out: &mut W) -> io::Result<()> {
    serde_json::to_writer(out, s).map_err(io::Error::from)
}

/// The canonical bytes of an object's members (tests and callers that want
/// the bytes rather than a hash).
#[cfg(test)]
pub(crate) fn object_bytes(members: &serde_json::Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::new();
    write_object(members.iter(), &mut out).expect("a Vec takes every write");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Map;

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            // Names and texts across the planes: controls, quotes, BMP
            // private use (sorts after astral in UTF-16), astral.
            "[\\x00-\\x20\"\\\\a-z\u{7f}\u{e000}\u{ff61}\u{10000}\u{1f600}é]{0,6}"
                .prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-z\u{e000}\u{1f600}\"\\\\\\x01]{0,4}", inner), 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn the_bytes_are_serde_jcs_bytes(members in prop::collection::vec(("[a-z\u{e000}\u{1f600}]{0,4}", value()), 0..6)) {
            let map: Map<String, Value> = members.into_iter().collect();
            let ours = object_bytes(&map);
            let theirs = serde_jcs::to_vec(&map).expect("finite values");
            prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
        }
    }

    #[test]
    fn names_sort_by_utf16_not_by_utf8() {
        // U+E000 is one code unit (0xE000); U+1F600 is a surrogate pair
        // starting 0xD83D: UTF-16 puts the astral name first, UTF-8 last.
        let map: Map<String, Value> = [("\u{e000}", 1), ("\u{1f600}", 2)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::from(v)))
            .collect();
        assert_eq!(
            String::from_utf8(object_bytes(&map)).unwrap(),
            "{\"\u{1f600}\":2,\"\u{e000}\":1}"
        );
    }

    #[test]
    fn numbers_are_ecmascript_doubles() {
        let v: Value = serde_json::from_str(r#"[1.0, 1e21, 9007199254740993, -0.0, 0.1]"#).unwrap();
        let mut out = Vec::new();
        write_value(&v, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[1,1e+21,9007199254740992,0,0.1]"
        );
    }
}
