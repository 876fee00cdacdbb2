//! Nesting depth, found without recursion: serde's skipping paths (used for
//! `RawValue`) have no depth limit, and its own limit fails with an error
//! that can only be told apart by its text.

/// True when `bytes` nests arrays/objects deeper than `limit` levels.
/// Brackets inside strings do not count.
pub(crate) fn exceeds(bytes: &[u8], limit: usize) -> bool {
    // A body with no more opening brackets than the limit cannot exceed it.
    if memchr::memchr2_iter(b'[', b'{', bytes).nth(limit).is_none() {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_structure() {
        let deep = "[".repeat(10) + &"]".repeat(10);
        assert!(!exceeds(deep.as_bytes(), 10));
        assert!(exceeds(deep.as_bytes(), 9));
        let quoted = format!("[\"{}\"]", "[".repeat(50));
        assert!(!exceeds(quoted.as_bytes(), 2));
        let escaped = format!("[\"\\\"{}\"]", "[".repeat(50));
        assert!(!exceeds(escaped.as_bytes(), 2));
        assert!(exceeds("[{\"a\":[1]}]".as_bytes(), 2));
    }
}
