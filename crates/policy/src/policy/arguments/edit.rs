//! Changing a call's arguments where a rule redacts or removes: a secret
//! replaced in its string, a member or element taken out by its pointer.

use serde_json::Value;

use super::super::secret_values::Scanned;
use super::REDACTED;

/// `text` with what the scanner found replaced (the whole value when
/// `whole`, or when it is not ASCII: the spans are in its folded form).
pub(super) fn redact(text: &str, scanned: &Scanned<'_>, whole: bool) -> String {
    if whole || !text.is_ascii() || scanned.found.is_empty() {
        return REDACTED.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for f in &scanned.found {
        out.push_str(&text[last..f.span.start]);
        out.push_str(REDACTED);
        last = f.span.end;
    }
    out.push_str(&text[last..]);
    out
}

/// The value at a JSON pointer (RFC 6901) in `root`.
pub(super) fn pointer_mut<'v>(root: &'v mut Value, path: &str) -> Option<&'v mut Value> {
    if path.is_empty() {
        return Some(root);
    }
    root.pointer_mut(path)
}

/// Remove the member or element at `path`; whether there was one.
pub(super) fn remove_at(root: &mut Value, path: &str) -> bool {
    let Some((parent, last)) = path.rsplit_once('/') else {
        return false;
    };
    let name = last.replace("~1", "/").replace("~0", "~");
    match pointer_mut(root, parent) {
        Some(Value::Object(m)) => m.shift_remove(&name).is_some(),
        Some(Value::Array(a)) => match name.parse::<usize>() {
            Ok(i) if i < a.len() => {
                a.remove(i);
                true
            }
            _ => false,
        },
        _ => false,
    }
}
