//! A long string of data cut into passages for the intent detector: runs
//! of paragraphs (split at blank lines) of about [`PASSAGE_BYTES`], each
//! overlapping the next by one paragraph, so an instruction cut by a
//! passage's end is still read whole in the next one.

/// About this many bytes a passage; a single longer paragraph is one
/// passage of its own.
pub(crate) const PASSAGE_BYTES: usize = 2_048;

/// The passages of `text`, in order; `text` itself when it is short.
pub(crate) fn passages(text: &str) -> Vec<&str> {
    if text.len() <= PASSAGE_BYTES {
        return vec![text];
    }
    let starts = paragraph_starts(text);
    let mut out = Vec::new();
    let mut first = 0;
    while first < starts.len() {
        let begin = starts[first];
        let mut last = first + 1;
        while last < starts.len() && starts[last] - begin < PASSAGE_BYTES {
            last += 1;
        }
        let end = starts.get(last).copied().unwrap_or(text.len());
        out.push(&text[begin..end]);
        if last >= starts.len() {
            break;
        }
        // The next passage begins with this one's last paragraph.
        first = (last - 1).max(first + 1);
    }
    out
}

/// Where each paragraph begins: at 0 and after every blank line.
fn paragraph_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut out = vec![0];
    let mut i = 0;
    while let Some(at) = text[i..].find('\n') {
        let next = i + at + 1;
        let rest = &bytes[next..];
        let blank = rest
            .iter()
            .take_while(|b| **b == b' ' || **b == b'\t' || **b == b'\r')
            .count();
        if rest.get(blank) == Some(&b'\n') {
            let start = next + blank + 1;
            if start < text.len() && out.last() != Some(&start) {
                out.push(start);
            }
            i = start.min(text.len());
        } else {
            i = next;
        }
        if i >= text.len() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_text_is_one_passage() {
        assert_eq!(passages("a\n\nb"), ["a\n\nb"]);
        assert_eq!(passages(""), [""]);
    }

    #[test]
    fn a_long_text_is_cut_at_blank_lines_with_one_paragraph_shared() {
        let para = |c: char| format!("{}\n", c.to_string().repeat(900));
        let text = ['a', 'b', 'c', 'd', 'e'].map(para).join("\n");
        let got = passages(&text);
        assert!(got.len() > 1, "{}", got.len());
        // Every paragraph is read whole in some passage, and neighbours meet.
        for pair in ['a', 'b', 'c', 'd', 'e'].windows(2) {
            let (x, y) = (para(pair[0]), para(pair[1]));
            assert!(
                got.iter().any(|p| p.contains(&x) && p.contains(&y)),
                "{pair:?}"
            );
        }
        for p in &got {
            assert!(p.len() <= 2 * PASSAGE_BYTES, "{}", p.len());
        }
    }

    #[test]
    fn one_long_paragraph_is_one_passage_and_whitespace_lines_are_blank() {
        let long = "x".repeat(5_000);
        assert_eq!(passages(&long), [long.as_str()]);
        let text = format!("{}\n \t\r\n{}", "a".repeat(3_000), "b".repeat(3_000));
        let got = passages(&text);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[1].starts_with('b'));
        let multibyte = "é".repeat(2_000) + "\n\n" + &"ж".repeat(2_000);
        let got = passages(&multibyte);
        assert_eq!(got.len(), 2);
        assert!(got[1].starts_with('ж'), "{}", &got[1][..8]);
    }
}
