//! The character classes no text the gateway shows a person may contain,
//! written out here from the README and DESIGN.md, not taken from the
//! sanitiser.

/// Why a char is forbidden in human-facing text, or `None`.
pub fn class_of(c: char) -> Option<&'static str> {
    let u = c as u32;
    match u {
        0x0a | 0x09 => None,
        0x1b => Some("ansi escape"),
        0x00..=0x1f | 0x7f => Some("C0 control or DEL"),
        0x80..=0x9f => Some("C1 control"),
        0x202a..=0x202e | 0x2066..=0x2069 | 0x200e | 0x200f | 0x061c => Some("bidi control"),
        0x200b..=0x200d
        | 0x2060..=0x2064
        | 0x206a..=0x206f
        | 0xfeff
        | 0x180e
        | 0x00ad
        | 0x034f
        | 0xfff9..=0xfffb => Some("zero-width or invisible"),
        0xe0000..=0xe007f => Some("tag character"),
        _ => None,
    }
}

/// The first forbidden char of `text`, with its class.
pub fn first_forbidden(text: &str) -> Option<(usize, char, &'static str)> {
    text.char_indices()
        .find_map(|(i, c)| class_of(c).map(|why| (i, c, why)))
}

/// Numeric character references decoded (`&#x202E;`, `&#27;`), for checking
/// HTML output: a reference that decodes to a forbidden char is as bad as
/// the char.
pub fn decode_numeric_refs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("&#") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let (hex, digits) = match after.strip_prefix(['x', 'X']) {
            Some(h) => (true, h),
            None => (false, after),
        };
        let n = digits
            .chars()
            .take_while(|c| {
                if hex {
                    c.is_ascii_hexdigit()
                } else {
                    c.is_ascii_digit()
                }
            })
            .count();
        let value = u32::from_str_radix(&digits[..n], if hex { 16 } else { 10 }).ok();
        match value.and_then(char::from_u32) {
            Some(c) if n > 0 => {
                out.push(c);
                let consumed = after.len() - digits.len() + n;
                let tail = &after[consumed..];
                rest = tail.strip_prefix(';').unwrap_or(tail);
            }
            _ => {
                out.push_str("&#");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
