//! Does a secret term found in a text ask for the secret? The words around
//! it decide (see the module documentation of [`super`]).

use super::tables::{flag, Entry, Guard, Tables};
use super::SecretKind;
use crate::policy::detect::{Normalised, Splitting};

/// How much a text must say: a name is a compact identifier; a title or
/// description describes the field it belongs to; a message (and an option
/// label) must also ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Name,
    Text,
    Message,
}

/// How far before a term an asking verb may be ("enter the 6 digit code").
const ASK_REACH: usize = 6;
/// How far after a term an asking verb may be, in the same phrase
/// ("パスワードを入力してください", "Passwort bitte eingeben").
const ASK_AFTER: usize = 4;
/// How far before the verb (or term) a negation may be
/// ("we will never ask you to share your password").
const NEGATION_REACH: usize = 4;
/// How far after a verb a verb-final negation may be ("入力しないで").
const NEGATION_AFTER_REACH: usize = 3;
/// A text clause this short is title-like: a weak term may stand in it alone.
const SHORT_CLAUSE: usize = 4;
/// Longest clause in which "every other word is neutral" is checked.
const NEUTRAL_CLAUSE: usize = 6;
/// How far from `security code` a card word makes it a card security code.
const CARD_REACH: usize = 8;
/// How far from a card-only term its owner may be ("passport expiry date").
const OWNER_REACH: usize = 3;
/// How far from a described noun the place it describes may be ("the long
/// number embossed on the front of your Visa").
const DESCRIBED_REACH: usize = 10;

/// Articles and possessives, skipped when looking for the word before.
const DET: u32 = flag::DETERMINER | flag::POSSESSIVE;
/// Words that may stand next to a weak term (`user_pin`, `your pin`).
const NEUTRAL: u32 = flag::NUMBER | flag::NEUTRAL | DET | flag::ASK;

/// A term found at word indices `start..end`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hit {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: SecretKind,
    pub(crate) guard: Guard,
}

/// One text, normalised, with the terms found in it.
#[derive(Debug)]
pub(super) struct Scan {
    pub(crate) n: Normalised,
    /// The longest term at each start, in text order.
    hits: Vec<Hit>,
    /// A payment card is named.
    pub(crate) card: bool,
    /// Context flags per word (only computed when there is a term).
    flags: Vec<u32>,
}

impl Scan {
    /// `text` normalised and searched, unless the raw text cannot hold any
    /// term (the cheap test of [`crate::policy::detect::PhraseSet::may_match`]).
    pub(crate) fn new(t: &Tables, text: &str, splitting: Splitting) -> Self {
        if !t.phrases.may_match(text) {
            return Scan {
                n: Normalised::default(),
                hits: Vec::new(),
                card: false,
                flags: Vec::new(),
            };
        }
        Self::full(t, text, splitting)
    }

    /// `text` normalised and searched (operator regexes need its words).
    pub(crate) fn full(t: &Tables, text: &str, splitting: Splitting) -> Self {
        Self::of(t, Normalised::new(text, &t.lexicon, splitting))
    }

    pub(crate) fn of(t: &Tables, n: Normalised) -> Self {
        let mut found = Vec::new();
        t.phrases.find(&n, |w| t.is_number(w), &mut found);
        // A card is named by a card word or by any card-number term, even a
        // weak one ("Kreditkarte", "信用卡").
        let card = found.iter().any(|h| {
            matches!(
                h.value,
                Entry::Card | Entry::Term(SecretKind::CardNumber, _)
            )
        });
        let mut hits: Vec<Hit> = found
            .iter()
            .filter_map(|h| match *h.value {
                Entry::Term(kind, guard) => Some(Hit {
                    start: h.start,
                    end: h.end,
                    kind,
                    guard,
                }),
                // Which secret a generic noun is, its clause decides (`kind_of`).
                Entry::Described => Some(Hit {
                    start: h.start,
                    end: h.end,
                    kind: SecretKind::CardNumber,
                    guard: Guard::Described,
                }),
                Entry::Card => None,
            })
            .collect();
        hits.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end)));
        hits.dedup_by_key(|h| h.start);
        let flags = match hits.is_empty() {
            true => Vec::new(),
            false => (0..n.len()).map(|i| t.flags(n.word(i))).collect(),
        };
        Scan {
            n,
            hits,
            card,
            flags,
        }
    }

    /// The first term that asks for its secret, left to right. A rejected
    /// term does not hide a shorter one inside it. `card`: a payment card is
    /// named elsewhere in the field or request.
    pub(crate) fn find(&self, mode: Mode, card: bool) -> Option<SecretKind> {
        self.find_where(mode, card, |_| true)
    }

    /// Like [`Self::find`], only for terms that `keep` accepts.
    pub(crate) fn find_where(
        &self,
        mode: Mode,
        card: bool,
        keep: impl Fn(&Hit) -> bool,
    ) -> Option<SecretKind> {
        let judge = Judge {
            n: &self.n,
            flags: &self.flags,
            card: card || self.card,
        };
        let stats = match mode {
            Mode::Name => judge.name_stats(0..self.n.len()),
            _ => NameStats::default(),
        };
        self.hits
            .iter()
            .filter(|h| keep(h))
            .find(|h| judge.accept(h, mode, stats))
            .map(|h| judge.kind_of(h))
    }
}

/// Per-name counts, so that "anywhere in the name" checks stay O(1) per hit.
#[derive(Debug, Clone, Copy, Default)]
struct NameStats {
    modifiers: usize,
    non_neutral: usize,
}

struct Judge<'a> {
    n: &'a Normalised,
    flags: &'a [u32],
    card: bool,
}

impl Judge<'_> {
    fn has(&self, i: usize, f: u32) -> bool {
        self.flags.get(i).is_some_and(|&x| x & f != 0)
    }

    /// The index of the previous word in the same clause.
    fn prev(&self, i: usize) -> Option<usize> {
        let p = i.checked_sub(1)?;
        self.n.same_clause(p, i).then_some(p)
    }

    fn name_stats(&self, range: std::ops::Range<usize>) -> NameStats {
        let mut stats = NameStats::default();
        for i in range {
            stats.modifiers += usize::from(self.has(i, flag::METADATA | flag::NAME_FLAG));
            stats.non_neutral += usize::from(!self.has(i, NEUTRAL));
        }
        stats
    }

    fn accept(&self, hit: &Hit, mode: Mode, stats: NameStats) -> bool {
        match mode {
            Mode::Name => self.accept_in_name(hit, stats),
            Mode::Text => self.accept_in_text(hit, false),
            Mode::Message => self.accept_in_text(hit, true),
        }
    }

    fn kind_of(&self, hit: &Hit) -> SecretKind {
        match hit.guard {
            Guard::SecurityCode if self.card || self.card_near(hit) => SecretKind::CardSecurityCode,
            Guard::Described => self.described(hit).unwrap_or(hit.kind),
            _ => hit.kind,
        }
    }

    fn card_near(&self, hit: &Hit) -> bool {
        let lo = hit.start.saturating_sub(CARD_REACH);
        let hi = (hit.end + CARD_REACH).min(self.n.len());
        (lo..hi).any(|j| self.n.same_clause(j, hit.start) && self.has(j, flag::CARD))
    }

    /// A name is a compact noun phrase: any modifier anywhere outside the
    /// term makes the property metadata about the secret.
    fn accept_in_name(&self, hit: &Hit, stats: NameStats) -> bool {
        let inside = self.name_stats(hit.start..hit.end);
        if stats.modifiers > inside.modifiers {
            return false;
        }
        match hit.guard {
            Guard::Weak => stats.non_neutral == inside.non_neutral,
            Guard::Token => !self.token_lead_blocked(hit),
            Guard::Secret => self.secret_is_noun(hit),
            Guard::Card => self.card_ok(hit),
            Guard::Plain | Guard::SecurityCode => true,
            // `number`, `code`, `words` name nothing by themselves.
            Guard::Described => false,
        }
    }

    /// Free text: only nearby words count; a message must also ask.
    fn accept_in_text(&self, hit: &Hit, must_ask: bool) -> bool {
        if self.metadata_after(hit) || self.blocked_before(hit) || self.metadata_of_term(hit) {
            return false;
        }
        let verb = self.ask_before(hit.start).or_else(|| self.ask_after(hit));
        if (must_ask && verb.is_none()) || self.negated(hit, verb) {
            return false;
        }
        match hit.guard {
            Guard::Weak => self.weak_context(hit),
            Guard::Token => {
                let short = self.n.short_clause(hit.start, SHORT_CLAUSE).is_some();
                !self.token_lead_blocked(hit) && (verb.is_some() || short || self.weak_context(hit))
            }
            Guard::Secret => self.secret_is_noun(hit),
            Guard::Card => self.card_ok(hit),
            Guard::Plain | Guard::SecurityCode => true,
            Guard::Described => self.described(hit).is_some(),
        }
    }

    fn token_lead_blocked(&self, hit: &Hit) -> bool {
        self.prev(hit.start)
            .is_some_and(|p| self.has(p, flag::TOKEN_LEAD_BLOCK))
    }

    /// "API key name", "password policy url", "パスワードの長さ": a metadata
    /// word in the noun phrase right after the term (not past a comma).
    fn metadata_after(&self, hit: &Hit) -> bool {
        (hit.end..(hit.end + 2).min(self.n.len()))
            .take_while(|&j| self.n.same_phrase(j, hit.start) && !self.has(j, flag::FUNCTION | DET))
            .any(|j| self.has(j, flag::METADATA))
    }

    /// "minimum password", "reset your password", "忘记密码".
    fn blocked_before(&self, hit: &Hit) -> bool {
        let mut i = hit.start;
        for _ in 0..3 {
            let Some(p) = self.prev(i) else { return false };
            if !self.has(p, DET) {
                return self.has(p, flag::PREV_BLOCK);
            }
            i = p;
        }
        false
    }

    /// "a name for your API key", "longitud de la contraseña".
    fn metadata_of_term(&self, hit: &Hit) -> bool {
        let mut i = hit.start;
        for _ in 0..3 {
            let Some(p) = self.prev(i) else { return false };
            if self.has(p, flag::OF_WORD) {
                return self.prev(p).is_some_and(|m| self.has(m, flag::METADATA));
            }
            if !self.has(p, DET | flag::OF_SKIPPABLE) {
                return false;
            }
            i = p;
        }
        false
    }

    /// The nearest asking verb shortly before `start`, in the same clause.
    fn ask_before(&self, start: usize) -> Option<usize> {
        let lo = start.saturating_sub(ASK_REACH);
        (lo..start)
            .rev()
            .take_while(|&i| self.n.same_clause(i, start))
            .find(|&i| self.is_ask_at(i, start))
    }

    /// An asking verb shortly after the term, in the same phrase (verb-final
    /// languages, "Passwort bitte eingeben").
    fn ask_after(&self, hit: &Hit) -> Option<usize> {
        (hit.end..(hit.end + ASK_AFTER).min(self.n.len()))
            .take_while(|&j| self.n.same_phrase(j, hit.start))
            .find(|&j| self.has(j, flag::ASK))
    }

    /// An asking verb, or "what is your / the …" right before the term.
    fn is_ask_at(&self, i: usize, term: usize) -> bool {
        if self.has(i, flag::ASK) {
            return true;
        }
        if !self.has(i, flag::QUESTION) || i + 1 >= term {
            return false;
        }
        let k = if self.has(i + 1, flag::COPULA) {
            i + 2
        } else {
            i + 1
        };
        k == term
            || self.has(k, flag::POSSESSIVE | flag::DEFINITE)
            || (self.has(k, DET) && k + 1 < term && self.has(k + 1, flag::POSSESSIVE))
    }

    /// A negation shortly before the verb (or the term) in the same phrase,
    /// or a verb-final negation right after a following verb.
    fn negated(&self, hit: &Hit, verb: Option<usize>) -> bool {
        let anchor = verb.filter(|&v| v < hit.start).unwrap_or(hit.start);
        // A negated verb refuses its whole list of objects: "do not give us
        // your phone number, pin, or other sensitive info" asks for none.
        let before = (anchor.saturating_sub(NEGATION_REACH)..hit.start)
            .filter(|&i| self.n.same_phrase(i, anchor))
            .any(|i| self.has(i, flag::NEGATION));
        let after_from = verb.filter(|&v| v >= hit.end).unwrap_or(hit.end);
        let after = (after_from..(after_from + NEGATION_AFTER_REACH + 1).min(self.n.len()))
            .take_while(|&j| self.n.same_phrase(j, hit.start))
            .any(|j| self.has(j, flag::NEGATION_AFTER));
        before || after
    }

    /// A weak term in text counts when written as an acronym (`PIN`),
    /// introduced by a possessive, an asking verb or a neutral word (`your
    /// pin`, `enter pin`, `atm pin`), or alone among neutral words in a very
    /// short clause.
    fn weak_context(&self, hit: &Hit) -> bool {
        let caps = self
            .n
            .words
            .get(hit.start..hit.end)
            .is_some_and(|ws| ws.iter().any(|w| w.caps));
        let introduced = self.prev(hit.start).is_some_and(|p| {
            self.has(
                p,
                flag::NUMBER | flag::POSSESSIVE | flag::NEUTRAL | flag::ASK,
            )
        });
        caps || introduced || self.short_and_neutral(hit)
    }

    fn short_and_neutral(&self, hit: &Hit) -> bool {
        let Some(range) = self.n.short_clause(hit.start, NEUTRAL_CLAUSE) else {
            return false;
        };
        range
            .filter(|j| !(hit.start..hit.end).contains(j))
            .all(|j| self.has(j, NEUTRAL))
    }

    /// `secret`, `secret_value`, "enter your secret here" are nouns;
    /// `secret_santa`, "top secret project" are adjectives.
    fn secret_is_noun(&self, hit: &Hit) -> bool {
        if hit.end >= self.n.len() || !self.n.same_clause(hit.end, hit.start) {
            return true;
        }
        self.has(
            hit.end,
            flag::NUMBER | flag::SECRET_NOUN_NEXT | flag::FUNCTION | DET,
        )
    }

    /// A card-only term (`expiry date`) counts with a card named nearby or
    /// elsewhere in the field, unless something else owns it
    /// ("passport expiry date", "expiry date of the contract").
    fn card_ok(&self, hit: &Hit) -> bool {
        if !(self.card || self.card_near(hit)) {
            return false;
        }
        let before = (hit.start.saturating_sub(OWNER_REACH)..hit.start)
            .filter(|&i| self.n.same_phrase(i, hit.start))
            .any(|i| self.has(i, flag::EXPIRY_OWNER));
        let after = (hit.end..(hit.end + OWNER_REACH).min(self.n.len()))
            .take_while(|&j| self.n.same_phrase(j, hit.start))
            .any(|j| self.has(j, flag::EXPIRY_OWNER));
        !(before || after)
    }
}

/// Secrets described, not named: a generic noun (`described_*` in
/// `context.toml`) and, in the same clause, the place the secret lives.
impl Judge<'_> {
    /// What the noun at `hit` describes, if its clause says where it lives:
    /// an SMS or an authenticator (a one-time code), an ATM (a PIN), the back
    /// of a card (its security code), the reader's own card (its number), a
    /// wallet (a seed phrase), logging in (a password).
    fn described(&self, hit: &Hit) -> Option<SecretKind> {
        let i = hit.start;
        if self.noun_owned(i) {
            return None;
        }
        let lo = i.saturating_sub(DESCRIBED_REACH);
        let hi = (hit.end + DESCRIBED_REACH).min(self.n.len());
        let window = || {
            (lo..hi)
                .filter(move |&j| !(hit.start..hit.end).contains(&j) && self.n.same_clause(j, i))
        };
        // A place that modifies another noun is not where the secret lives
        // ("the login page", "wallet transactions").
        let near = |f: u32| {
            window().any(|j| {
                self.has(j, f)
                    && !(j + 1 < self.n.len()
                        && self.n.same_phrase(j + 1, j)
                        && self.has(j + 1, flag::DESCRIBED_OWNER | flag::METADATA))
            })
        };
        if self.has(i, flag::DESCRIBED_WORDS) {
            return match () {
                _ if near(flag::WALLET) => Some(SecretKind::SeedPhrase),
                _ if near(flag::LOGIN) => Some(SecretKind::Password),
                _ => None,
            };
        }
        if near(flag::SENT) {
            return Some(SecretKind::OneTimeCode);
        }
        if near(flag::ATM) {
            return Some(SecretKind::Pin);
        }
        let card = window().any(|j| self.readers_card(j, i));
        if near(flag::BACK) && (card || self.card) {
            return Some(SecretKind::CardSecurityCode);
        }
        (card && self.has(i, flag::DESCRIBED_NUMBER)).then_some(SecretKind::CardNumber)
    }

    /// "order number", "promo code", "numéro de commande", "номер заказа":
    /// the noun belongs to something else.
    fn noun_owned(&self, i: usize) -> bool {
        let mut p = self.prev(i);
        while let Some(k) = p.filter(|&k| self.has(k, DET | flag::NUMBER)) {
            p = self.prev(k);
        }
        let before = p.is_some_and(|k| self.has(k, flag::DESCRIBED_OWNER));
        let next = |k: usize| (k < self.n.len() && self.n.same_phrase(k, i)).then_some(k);
        let after = next(i + 1).is_some_and(|k| {
            self.has(k, flag::DESCRIBED_OWNER)
                || (self.n.word(k).chars().count() <= 2 || self.has(k, flag::OF_WORD | DET))
                    && next(k + 1).is_some_and(|m| self.has(m, flag::DESCRIBED_OWNER))
        });
        before || after
    }

    /// Word `j` names a payment card that is the reader's: no owner right
    /// before it ("library card", "travel visa"), and after the noun only
    /// through an article or possessive ("the number on your Visa", not
    /// "the number of cards").
    fn readers_card(&self, j: usize, noun: usize) -> bool {
        if !self.has(j, flag::CARD) {
            return false;
        }
        if self
            .prev(j)
            .is_some_and(|p| self.has(p, flag::DESCRIBED_OWNER))
        {
            return false;
        }
        j < noun || (noun + 1..j).any(|k| self.has(k, DET))
    }
}
