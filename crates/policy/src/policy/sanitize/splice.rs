//! A text rewritten at a few places, with the way back from an offset in
//! the rewritten text to the source. The last step of each mode rewrites
//! the text (`&gt;` becomes `>`, a space follows an active `<`), and a
//! markdown renderer reads that final form: `&gt; [r]: …` is a paragraph
//! but `> [r]: …` is a block quote holding a reference definition. So the
//! markdown step parses the final form and edits the source through this
//! map.

use std::ops::Range;

/// One replacement: the source range and what the last step writes there.
pub(super) type Edit = (Range<usize>, &'static str);

/// `s` with `edits` applied (sorted, not overlapping).
pub(super) struct Spliced {
    pub(super) text: String,
    /// Per edit, in order: its range in the source and in `text`.
    map: Vec<(Range<usize>, Range<usize>)>,
}

impl Spliced {
    pub(super) fn new(src: &str, edits: &[Edit]) -> Spliced {
        let mut text = String::with_capacity(src.len() + edits.len());
        let mut map = Vec::with_capacity(edits.len());
        let mut at = 0;
        for (range, with) in edits {
            text.push_str(&src[at..range.start]);
            let start = text.len();
            text.push_str(with);
            map.push((range.clone(), start..text.len()));
            at = range.end;
        }
        text.push_str(&src[at..]);
        Spliced { text, map }
    }

    /// The source range of `range` in `text`; a range that reaches into a
    /// replacement takes it whole.
    pub(super) fn source_range(&self, range: Range<usize>) -> Range<usize> {
        self.to_source(range.start, false)..self.to_source(range.end, true)
    }

    fn to_source(&self, at: usize, is_end: bool) -> usize {
        let n = self.map.partition_point(|(_, view)| view.start <= at);
        let Some((src, view)) = n.checked_sub(1).map(|i| &self.map[i]) else {
            return at;
        };
        if at >= view.end {
            src.end + (at - view.end)
        } else if at == view.start || !is_end {
            src.start
        } else {
            src.end
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_back_across_replacements_and_insertions() {
        let src = "a &gt; b<c";
        let spliced = Spliced::new(src, &[(2..6, ">"), (9..9, " ")]);
        assert_eq!(spliced.text, "a > b< c");
        assert_eq!(spliced.source_range(0..1), 0..1);
        assert_eq!(spliced.source_range(2..3), 2..6);
        assert_eq!(spliced.source_range(4..5), 7..8);
        assert_eq!(spliced.source_range(4..8), 7..10);
        assert_eq!(spliced.source_range(7..8), 9..10);
        let nbsp = Spliced::new("x&nbsp;y", &[(1..7, "\u{a0}")]);
        assert_eq!(nbsp.source_range(1..3), 1..7);
        assert_eq!(nbsp.source_range(3..4), 7..8);
    }
}
