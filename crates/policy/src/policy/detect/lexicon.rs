//! The known words of one detector, and the readings they allow.
//!
//! A word the lexicon knows is left alone. For any other word the lexicon
//! tries, in order, and takes the first that yields a known word:
//!
//! * the **confusable skeleton** (UTS #39) of a word with non-ASCII letters
//!   (`pаsswоrd` → `password`); a word the lexicon knows in its own script
//!   (`пароль`) stays as it is;
//! * the **letter reading** of digits and symbols between letters
//!   (`0→o 1→i/l 3→e 4→a 5→s 7→t 8→b 9→g $→s @→a !→i |→l`), trailing digits
//!   kept (`p4ssw0rd2` → `password2`);
//! * a **dictionary split** of a joined word that contains a joined term
//!   (`userpassword`, `newpin`, `cardnumber`, `benutzerpasswort`): every piece
//!   must be a known word or a number, except that a long, unmistakable term
//!   (`password`, `apikey`) may follow any prefix (`stripeapikey`). So
//!   `spinner`, `passwordless` and `tokenizer` stay whole;
//! * for a run of CJK characters, the **longest-match split** against the
//!   known CJK words, unknown stretches kept as words of their own.

use std::collections::HashSet;

use aho_corasick::{AhoCorasick, MatchKind};

use super::normalize::{shape, Normalised, Word};

/// The ordinary words every detector's lexicon knows (`data/detect/words.txt`),
/// normalised: what decides that `keyboard` or `spinner` stays one word.
pub(crate) fn common_words() -> impl Iterator<Item = String> {
    data_file!("detect/words.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| Normalised::plain(l).text)
}

/// Where the text comes from: names are compact identifiers in which short
/// joined terms are common (`newpin`); in prose only long joined terms are
/// split, so `company` or `patient` are never looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Splitting {
    Names,
    Text,
}

/// A word list could not be compiled (a bug in shipped data or a policy file).
#[derive(Debug, thiserror::Error)]
#[error("word list does not compile: {0}")]
pub(crate) struct LexiconError(String);

/// Joined terms shorter than this are split in names only.
const TEXT_GLUED_MIN_CHARS: usize = 5;
/// Joined terms at least this long may follow an unknown prefix.
const STRONG_GLUED_MIN_CHARS: usize = 6;
/// Longer words are not split (the split is quadratic in the length).
const MAX_SPLIT_BYTES: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Glued {
    /// Any prefix may come before it (a long, unambiguous term).
    strong: bool,
    /// Split in names only.
    short: bool,
}

/// Built once per detector configuration.
#[derive(Debug, Clone)]
pub(crate) struct Lexicon {
    known: HashSet<Box<str>>,
    terms: HashSet<Box<str>>,
    glued: Option<AhoCorasick>,
    glued_info: Vec<Glued>,
    cjk: Option<AhoCorasick>,
    longest: usize,
}

/// What one word becomes.
enum Reading {
    Keep,
    One(String),
    Pieces(Vec<String>),
}

impl Lexicon {
    /// `known`: every word of every list (normalised with
    /// [`Normalised::plain`]); `terms`: the words that make up secret terms;
    /// `glued`: each multi-word term written as one word, and whether it is
    /// unmistakable enough to follow an unknown prefix.
    pub(crate) fn new(
        known: impl IntoIterator<Item = String>,
        terms: impl IntoIterator<Item = String>,
        glued: impl IntoIterator<Item = (String, bool)>,
    ) -> Result<Self, LexiconError> {
        let terms: HashSet<Box<str>> = terms.into_iter().map(Into::into).collect();
        let mut known: HashSet<Box<str>> = known.into_iter().map(Into::into).collect();
        known.extend(terms.iter().cloned());
        let mut seen = HashSet::new();
        let (mut patterns, mut glued_info) = (Vec::new(), Vec::new());
        for (g, strong) in glued {
            let chars = g.chars().count();
            if chars < 3 || !seen.insert(g.clone()) {
                continue;
            }
            glued_info.push(Glued {
                strong: strong && chars >= STRONG_GLUED_MIN_CHARS,
                short: chars < TEXT_GLUED_MIN_CHARS,
            });
            patterns.push(g);
        }
        let build = |kind: MatchKind, p: &[String]| {
            AhoCorasick::builder()
                .match_kind(kind)
                .build(p)
                .map_err(|e| LexiconError(e.to_string()))
        };
        let glued = match patterns.is_empty() {
            true => None,
            false => Some(build(MatchKind::Standard, &patterns)?),
        };
        let cjk_words: Vec<String> = known
            .iter()
            .filter(|w| {
                Normalised::plain(w)
                    .words
                    .iter()
                    .all(|x| x.shape & shape::CJK != 0)
            })
            .map(|w| w.to_string())
            .collect();
        let cjk = match cjk_words.is_empty() {
            true => None,
            false => Some(build(MatchKind::LeftmostLongest, &cjk_words)?),
        };
        let longest = known.iter().map(|w| w.len()).max().unwrap_or(0);
        Ok(Lexicon {
            known,
            terms,
            glued,
            glued_info,
            cjk,
            longest,
        })
    }

    pub(crate) fn knows(&self, word: &str) -> bool {
        self.known.contains(word)
    }

    pub(crate) fn is_term_word(&self, word: &str) -> bool {
        self.terms.contains(word)
    }

    /// Replaces the words the lexicon does not know by their readings.
    /// Allocates nothing when every word stays as it is.
    pub(crate) fn refine(&self, n: Normalised, splitting: Splitting) -> Normalised {
        let glued = self.glued_words(&n, splitting);
        let mut changed: Vec<(usize, Reading)> = Vec::new();
        for (i, w) in n.words.iter().enumerate() {
            let looks = w.shape != 0 || glued.get(i).copied().unwrap_or(false);
            if looks {
                match self.reading(n.word(i), w, splitting) {
                    Reading::Keep => {}
                    r => changed.push((i, r)),
                }
            }
        }
        if changed.is_empty() {
            return n;
        }
        let mut out = Normalised {
            text: String::with_capacity(n.text.len() + 8),
            words: Vec::with_capacity(n.words.len() + 4),
        };
        let mut changed = changed.into_iter().peekable();
        for (i, w) in n.words.iter().enumerate() {
            let reading = changed.next_if(|(j, _)| *j == i).map(|(_, r)| r);
            match reading {
                None | Some(Reading::Keep) => out.push_word(n.word(i), w, w.shape),
                Some(Reading::One(s)) => out.push_word(&s, w, 0),
                Some(Reading::Pieces(pieces)) => {
                    let shape = w.shape & shape::CJK;
                    for p in pieces {
                        out.push_word(&p, w, shape);
                    }
                }
            }
        }
        out
    }

    /// Words (by index) that contain a joined term the mode splits. Words
    /// too short to hold one are not searched.
    fn glued_words(&self, n: &Normalised, splitting: Splitting) -> Vec<bool> {
        let Some(ac) = &self.glued else {
            return Vec::new();
        };
        let shortest = match splitting {
            Splitting::Names => 3,
            Splitting::Text => TEXT_GLUED_MIN_CHARS,
        };
        if !n.words.iter().any(|w| w.end - w.start >= shortest) {
            return Vec::new();
        }
        let mut marks = Vec::new();
        for m in ac.find_overlapping_iter(&n.text) {
            if splitting == Splitting::Text && self.glued_info[m.pattern().as_usize()].short {
                continue;
            }
            if let Some(i) = n.word_containing(m.start()) {
                marks.resize(n.len(), false);
                marks[i] = true;
            }
        }
        marks
    }

    fn reading(&self, word: &str, w: &Word, splitting: Splitting) -> Reading {
        if w.shape & shape::CJK != 0 {
            return self.cjk_pieces(word).map_or(Reading::Keep, Reading::Pieces);
        }
        if self.knows(word) {
            return Reading::Keep;
        }
        let skeleton = (w.shape & shape::NON_ASCII != 0)
            .then(|| skeleton_reading(word))
            .flatten();
        if let Some(s) = &skeleton {
            if self.knows(s) {
                return Reading::One(s.clone());
            }
        }
        for base in std::iter::once(word).chain(skeleton.as_deref()) {
            if let Some(r) = self.leet_reading(base, splitting) {
                return r;
            }
            if let Some(pieces) = self.split(base, splitting) {
                return Reading::Pieces(pieces);
            }
        }
        Reading::Keep
    }

    fn leet_reading(&self, word: &str, splitting: Splitting) -> Option<Reading> {
        let body = word.trim_end_matches(|c: char| c.is_ascii_digit());
        if body.is_empty() || !word.contains(is_leet_char) {
            return None;
        }
        // The whole word first (`s3nh4`), then with trailing digits kept
        // as digits (`p4ssword2`).
        let tail = &word[body.len()..];
        for one in ['i', 'l'] {
            let whole: String = word.chars().map(|c| leet_letter(c, one)).collect();
            let kept: String = body.chars().map(|c| leet_letter(c, one)).collect();
            if self.knows(&whole) {
                return Some(Reading::One(whole));
            }
            if !tail.is_empty() && self.knows(&kept) {
                return Some(Reading::One(kept + tail));
            }
            if let Some(pieces) = self.split(&whole, splitting) {
                return Some(Reading::Pieces(pieces));
            }
            if let Some(pieces) = self.term_split(&whole) {
                return Some(Reading::Pieces(pieces));
            }
            if !word.contains('1') {
                break;
            }
        }
        None
    }

    /// A split of a joined word that contains a joined term.
    fn split(&self, word: &str, splitting: Splitting) -> Option<Vec<String>> {
        let ac = self.glued.as_ref()?;
        if word.len() > MAX_SPLIT_BYTES {
            return None;
        }
        let hits: Vec<(usize, usize, Glued)> = ac
            .find_overlapping_iter(word)
            .map(|m| (m.start(), m.end(), self.glued_info[m.pattern().as_usize()]))
            .filter(|(_, _, g)| splitting == Splitting::Names || !g.short)
            .collect();
        if hits.is_empty() {
            return None;
        }
        if let Some(pieces) = self.term_split(word) {
            return Some(pieces);
        }
        // An unmistakable term after an unknown prefix (`stripeapikey`).
        hits.iter()
            .filter(|(_, _, g)| g.strong)
            .find_map(|&(s, e, _)| {
                let prefix = &word[..s];
                if !prefix.is_empty() && prefix.chars().count() < 2 {
                    return None;
                }
                let mid = self.dictionary_split(&word[s..e])?;
                let tail = match &word[e..] {
                    "" => Vec::new(),
                    t => self.dictionary_split(t)?,
                };
                let pieces: Vec<String> = std::iter::once(prefix)
                    .filter(|p| !p.is_empty())
                    .chain(mid)
                    .chain(tail)
                    .map(str::to_owned)
                    .collect();
                (pieces.len() > 1).then_some(pieces)
            })
    }

    /// A dictionary split with a term word among the pieces.
    fn term_split(&self, word: &str) -> Option<Vec<String>> {
        let pieces = self.dictionary_split(word)?;
        (pieces.len() > 1 && pieces.iter().any(|p| self.is_term_word(p)))
            .then(|| pieces.into_iter().map(str::to_owned).collect())
    }

    /// The split of `word` into the fewest known words and numbers.
    fn dictionary_split<'w>(&self, word: &'w str) -> Option<Vec<&'w str>> {
        let bounds: Vec<usize> = word
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(word.len()))
            .collect();
        // best[k]: (pieces, previous boundary) for word[..bounds[k]].
        let mut best: Vec<Option<(usize, usize)>> = vec![None; bounds.len()];
        best[0] = Some((0, 0));
        for k in 0..bounds.len() {
            let Some((count, _)) = best[k] else { continue };
            for k2 in k + 1..bounds.len() {
                let piece = &word[bounds[k]..bounds[k2]];
                if piece.len() > self.longest.max(20) {
                    break;
                }
                if self.is_piece(piece, k2 - k) && best[k2].is_none_or(|(c, _)| count + 1 < c) {
                    best[k2] = Some((count + 1, k));
                }
            }
        }
        let mut pieces = Vec::new();
        let mut k = bounds.len() - 1;
        best[k]?;
        while k > 0 {
            let (_, prev) = best[k]?;
            pieces.push(&word[bounds[prev]..bounds[k]]);
            k = prev;
        }
        pieces.reverse();
        Some(pieces)
    }

    fn is_piece(&self, piece: &str, chars: usize) -> bool {
        piece.bytes().all(|b| b.is_ascii_digit()) || (chars >= 2 && self.knows(piece))
    }

    /// The longest-match split of a CJK run; `None` when it stays one word.
    fn cjk_pieces(&self, run: &str) -> Option<Vec<String>> {
        let ac = self.cjk.as_ref()?;
        let mut pieces = Vec::new();
        let mut last = 0;
        for m in ac.find_iter(run) {
            if m.start() > last {
                pieces.push(run[last..m.start()].to_owned());
            }
            pieces.push(run[m.start()..m.end()].to_owned());
            last = m.end();
        }
        if last < run.len() && last > 0 {
            pieces.push(run[last..].to_owned());
        }
        (pieces.len() > 1).then_some(pieces)
    }
}

fn is_leet_char(c: char) -> bool {
    matches!(
        c,
        '0' | '1' | '3' | '4' | '5' | '7' | '8' | '9' | '$' | '@' | '!' | '|'
    )
}

fn leet_letter(c: char, one: char) -> char {
    match c {
        '0' => 'o',
        '1' => one,
        '3' => 'e',
        '4' | '@' => 'a',
        '5' | '$' => 's',
        '7' => 't',
        '8' => 'b',
        '9' => 'g',
        '!' => 'i',
        '|' => 'l',
        c => c,
    }
}

/// The word with every non-ASCII letter replaced by the ASCII letters it is
/// confusable with; `None` when some letter has no ASCII look-alike.
fn skeleton_reading(word: &str) -> Option<String> {
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        let mut buf = [0u8; 4];
        for s in unicode_security::skeleton(c.encode_utf8(&mut buf)) {
            if !s.is_ascii() {
                return None;
            }
            out.push(s.to_ascii_lowercase());
        }
    }
    (out != word).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lexicon() -> Lexicon {
        let known = [
            "user", "new", "card", "number", "api", "key", "name", "to", "top", "my", "word",
            "shipping", "benutzer", "请", "输入", "您的", "长度", "board",
        ];
        let terms = [
            "password", "pin", "card", "number", "api", "key", "passwort", "密码",
        ];
        let glued = [
            ("password", true),
            ("pin", false),
            ("cardnumber", true),
            ("apikey", true),
            ("passwort", true),
        ];
        Lexicon::new(
            known.iter().map(|s| s.to_string()),
            terms.iter().map(|s| s.to_string()),
            glued.iter().map(|(g, s)| (g.to_string(), *s)),
        )
        .expect("compiles")
    }

    fn text(lex: &Lexicon, s: &str, splitting: Splitting) -> String {
        Normalised::new(s, lex, splitting).text
    }

    #[test]
    fn readings_that_yield_known_words() {
        let lex = lexicon();
        let names = [
            ("userpassword", "user password"),
            ("newpin", "new pin"),
            ("cardnumber", "card number"),
            ("mycardnumber", "my card number"),
            ("stripeapikey", "stripe api key"),
            ("apikeyname", "api key name"),
            ("pintotop", "pin to top"),
            ("benutzerpasswort", "benutzer passwort"),
            ("p4ssw0rd", "password"),
            ("pa$$word", "password"),
            ("@pi_k3y", "api key"),
            ("p4ssword2", "password2"),
            ("p\u{0430}ssw\u{043E}rd", "password"),
            ("\u{0430}pi_key", "api key"),
            ("请输入您的密码", "请 输入 您的 密码"),
            ("密码长度", "密码 长度"),
        ];
        for (input, want) in names {
            assert_eq!(text(&lex, input, Splitting::Names), want, "{input}");
        }
    }

    #[test]
    fn ordinary_words_stay_whole() {
        let lex = lexicon();
        for word in [
            "spinner",
            "pinned",
            "opinion",
            "happiness",
            "passwordless",
            "keyboard",
            "company",
            "shipping",
            "2fa",
            "cvv2",
            "last4",
            "пароль",
        ] {
            assert_eq!(text(&lex, word, Splitting::Names), word, "{word}");
        }
        // Short joined terms are split in names only.
        assert_eq!(text(&lex, "newpin", Splitting::Text), "newpin");
        assert_eq!(text(&lex, "userpassword", Splitting::Text), "user password");
    }
}
