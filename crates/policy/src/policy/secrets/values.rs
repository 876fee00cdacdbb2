//! Outbound secret scan: does a value a person typed into an ordinary form
//! field look like a credential or a payment card number?
//!
//! The spec says secrets must be collected through URL-mode elicitation, never
//! through a form whose answer travels through the model host. The policy
//! engine already refuses forms that *ask* for a secret by name; this scanner
//! is the second line: it looks at what was actually typed, so a server that
//! paraphrases ("paste the string from your settings page") still cannot
//! collect a token through a form unless the policy allows it.
//!
//! # How it works
//!
//! The value is first read the way the policy's detectors read text
//! ([`fold_value`]): NFKC (fullwidth letters and digits become ASCII), every
//! decimal digit as its ASCII digit (Arabic-Indic `٤١١١`, Devanagari, …),
//! dashes as `-`, other spaces as ` `, and invisible format characters
//! (zero-width space inside `ghp_…`, soft hyphen, bidi controls) removed.
//! ASCII values are scanned as they are, without a copy.
//!
//! One [`RegexSet`] over all candidate patterns tells, in a single pass,
//! which kinds may be present. Only those patterns are then run one by one,
//! and every candidate they find is verified cheaply before it counts:
//!
//! * token boundaries: a prefixed token must not be glued to a preceding
//!   letter or digit (`xghp_…` is not a GitHub token), and exact-length
//!   formats (AWS key ids, AWS secret keys) must stand alone;
//! * randomness: prefixed tokens must mix character classes (upper case,
//!   lower case, digits), so prose such as `sk-this-is-not-a-real-key` or
//!   `glpat-tokens-are-described-here` does not count;
//! * structure: a JWT's first segment must decode (base64url) to a JSON
//!   object with an `"alg"` member; a card number must have 13–19 digits
//!   (groups may be separated by up to three spaces, dashes or dots, e.g.
//!   `4111 - 1111`, `4111.1111.1111.1111`; a dot only between groups of at
//!   least three digits, so decimals are not cards), a known issuer prefix
//!   with a length that issuer uses (Visa 4: 13/16/19; Mastercard 51–55 and
//!   2221–2720: 16; Amex 34/37: 15; Discover 6011/65/644–649: 16–19; JCB
//!   3528–3589: 16–19) and pass the Luhn check, and must not be part of a
//!   longer number (a decimal fraction, a `+`-prefixed phone number); every
//!   length that ends between two groups is tried, so trailing digits
//!   (an expiry date, a CVC) do not hide the number;
//! * AWS secret access keys have no prefix: exactly 40 characters of
//!   `[A-Za-z0-9/+]` standing alone, never all hexadecimal (that is a SHA-1
//!   digest). With `aws` or `secret` near it (within 64 bytes before or 24
//!   after, any case), mixed character
//!   classes suffice; without that context the token must look random:
//!   upper case, lower case and digits, a high Shannon entropy
//!   (≥ [`AWS_SECRET_MIN_ENTROPY`] bits per character), a change of
//!   character class at least every 2.5 characters and fewer than 35 %
//!   vowels among its letters. Ordinary 40-character words and camel-case
//!   identifiers fail that; about 2 % of genuine random keys do too, and are
//!   then only caught with context (a deliberate trade against false
//!   refusals).
//!
//! The scanner reports the kind of the *leftmost* verified candidate (ties go
//! to the more specific pattern, e.g. Anthropic before OpenAI). It never
//! returns, stores or logs the value or the matched text.
//!
//! Cost: one RegexSet pass; then each pattern that matched is searched again
//! and a rejected match is skipped as a whole; card numbers are confirmed by a
//! direct byte scan (the regex only prefilters) that tries every candidate
//! start once, at most 19 digits each. The work stays linear in the length of
//! the value (about a millisecond per megabyte of prose, well under a second
//! for a megabyte of adversarial digits).

use regex::{Regex, RegexSet};

use crate::policy::detect::fold_value;

/// A kind of secret the scanner recognises. `as_str` is stable (metrics,
/// audit records, refusal data); add kinds, never rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecretValueKind {
    AwsAccessKey,
    AwsSecretKey,
    GithubToken,
    GitlabToken,
    SlackToken,
    SlackWebhook,
    StripeKey,
    GoogleApiKey,
    OpenAiKey,
    AnthropicKey,
    NpmToken,
    PypiToken,
    HuggingFaceToken,
    SendgridKey,
    Jwt,
    PemPrivateKey,
    CardNumber,
}

impl SecretValueKind {
    #[cfg(test)]
    pub(crate) const ALL: [SecretValueKind; 17] = [
        SecretValueKind::AwsAccessKey,
        SecretValueKind::AwsSecretKey,
        SecretValueKind::GithubToken,
        SecretValueKind::GitlabToken,
        SecretValueKind::SlackToken,
        SecretValueKind::SlackWebhook,
        SecretValueKind::StripeKey,
        SecretValueKind::GoogleApiKey,
        SecretValueKind::OpenAiKey,
        SecretValueKind::AnthropicKey,
        SecretValueKind::NpmToken,
        SecretValueKind::PypiToken,
        SecretValueKind::HuggingFaceToken,
        SecretValueKind::SendgridKey,
        SecretValueKind::Jwt,
        SecretValueKind::PemPrivateKey,
        SecretValueKind::CardNumber,
    ];

    /// Stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretValueKind::AwsAccessKey => "aws_access_key",
            SecretValueKind::AwsSecretKey => "aws_secret_key",
            SecretValueKind::GithubToken => "github_token",
            SecretValueKind::GitlabToken => "gitlab_token",
            SecretValueKind::SlackToken => "slack_token",
            SecretValueKind::SlackWebhook => "slack_webhook",
            SecretValueKind::StripeKey => "stripe_key",
            SecretValueKind::GoogleApiKey => "google_api_key",
            SecretValueKind::OpenAiKey => "openai_key",
            SecretValueKind::AnthropicKey => "anthropic_key",
            SecretValueKind::NpmToken => "npm_token",
            SecretValueKind::PypiToken => "pypi_token",
            SecretValueKind::HuggingFaceToken => "huggingface_token",
            SecretValueKind::SendgridKey => "sendgrid_key",
            SecretValueKind::Jwt => "jwt",
            SecretValueKind::PemPrivateKey => "pem_private_key",
            SecretValueKind::CardNumber => "card_number",
        }
    }

    /// The kind named `name` ([`Self::as_str`]).
    pub fn from_name(name: &str) -> Option<SecretValueKind> {
        RULES.iter().map(|r| r.kind).find(|k| k.as_str() == name)
    }

    /// Words for a person, with the article: "a GitHub token".
    pub fn describe(self) -> &'static str {
        match self {
            SecretValueKind::AwsAccessKey => "an AWS access key ID",
            SecretValueKind::AwsSecretKey => "an AWS secret access key",
            SecretValueKind::GithubToken => "a GitHub token",
            SecretValueKind::GitlabToken => "a GitLab token",
            SecretValueKind::SlackToken => "a Slack token",
            SecretValueKind::SlackWebhook => "a Slack webhook URL",
            SecretValueKind::StripeKey => "a Stripe secret key",
            SecretValueKind::GoogleApiKey => "a Google API key",
            SecretValueKind::OpenAiKey => "an OpenAI API key",
            SecretValueKind::AnthropicKey => "an Anthropic API key",
            SecretValueKind::NpmToken => "an npm token",
            SecretValueKind::PypiToken => "a PyPI token",
            SecretValueKind::HuggingFaceToken => "a Hugging Face token",
            SecretValueKind::SendgridKey => "a SendGrid API key",
            SecretValueKind::Jwt => "a JSON Web Token",
            SecretValueKind::PemPrivateKey => "a private key",
            SecretValueKind::CardNumber => "a payment card number",
        }
    }
}

impl std::fmt::Display for SecretValueKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Minimum Shannon entropy (bits per character) of a context-free AWS secret
/// access key candidate. 40 random characters from a 64-symbol alphabet
/// measure about 4.8; camel-case identifiers and words stay near 4.
pub(crate) const AWS_SECRET_MIN_ENTROPY: f64 = 4.3;

/// How a rule's candidates are confirmed.
#[derive(Clone, Copy)]
enum Check {
    /// Verify each regex match `(haystack, start, end)`; a rejected match is
    /// skipped as a whole, which keeps the search linear.
    Verify(fn(&str, usize, usize) -> bool),
    /// The regex is only a prefilter (in the set); this finds the start of
    /// the first confirmed candidate before a limit.
    Find(fn(&str, usize, usize) -> Option<(usize, usize)>),
}

struct Rule {
    kind: SecretValueKind,
    pattern: &'static str,
    check: Check,
}

/// The table, most specific first: on a tie (two candidates starting at the
/// same place) the earlier rule wins.
const RULES: &[Rule] = &[
    Rule {
        kind: SecretValueKind::PemPrivateKey,
        pattern: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        check: Check::Verify(|_, _, _| true),
    },
    Rule {
        kind: SecretValueKind::AwsAccessKey,
        pattern: r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16,}",
        check: Check::Verify(aws_access_key),
    },
    Rule {
        kind: SecretValueKind::GithubToken,
        pattern: r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{50,})",
        check: Check::Verify(|h, s, e| {
            let tok = &h[s..e];
            let body = tok.strip_prefix("github_pat_").unwrap_or(&tok[4..]);
            free_before(h, s) && mixed(body, 2)
        }),
    },
    Rule {
        kind: SecretValueKind::GitlabToken,
        pattern: r"gl(?:pat|dt|rt|ptt|soat)-[A-Za-z0-9_-]{20,}",
        check: Check::Verify(|h, s, e| free_before(h, s) && mixed(after_first(&h[s..e], '-'), 2)),
    },
    Rule {
        kind: SecretValueKind::SlackWebhook,
        pattern: r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}",
        check: Check::Verify(|_, _, _| true),
    },
    Rule {
        kind: SecretValueKind::SlackToken,
        pattern: r"(?:xox[abeoprs]-|xapp-[0-9]-)[A-Za-z0-9-]{10,}",
        check: Check::Verify(|h, s, e| {
            free_before(h, s) && h[s + 5..e].bytes().any(|b| b.is_ascii_digit())
        }),
    },
    Rule {
        kind: SecretValueKind::StripeKey,
        pattern: r"[rs]k_live_[A-Za-z0-9]{20,}",
        check: Check::Verify(|h, s, e| free_before(h, s) && mixed(&h[s + 8..e], 2)),
    },
    Rule {
        kind: SecretValueKind::GoogleApiKey,
        pattern: r"AIza[0-9A-Za-z_-]{35,}",
        check: Check::Verify(|h, s, e| free_before(h, s) && mixed(&h[s + 4..e], 2)),
    },
    Rule {
        kind: SecretValueKind::AnthropicKey,
        pattern: r"sk-ant-[a-z0-9]{2,12}-[A-Za-z0-9_-]{32,}",
        check: Check::Verify(|h, s, e| {
            free_before(h, s) && mixed(after_first(&h[s + 7..e], '-'), 3)
        }),
    },
    Rule {
        kind: SecretValueKind::OpenAiKey,
        pattern: r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}",
        check: Check::Verify(|h, s, e| {
            let tok = &h[s..e];
            free_before(h, s) && !tok.starts_with("sk-ant-") && mixed(&tok[3..], 3)
        }),
    },
    Rule {
        kind: SecretValueKind::NpmToken,
        pattern: r"npm_[A-Za-z0-9]{36,}",
        check: Check::Verify(|h, s, e| free_before(h, s) && mixed(&h[s + 4..e], 2)),
    },
    Rule {
        kind: SecretValueKind::PypiToken,
        pattern: r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        check: Check::Verify(|h, s, _| free_before(h, s)),
    },
    Rule {
        kind: SecretValueKind::HuggingFaceToken,
        pattern: r"hf_[A-Za-z]{34,}",
        check: Check::Verify(|h, s, e| free_before(h, s) && mixed(&h[s + 3..e], 2)),
    },
    Rule {
        kind: SecretValueKind::SendgridKey,
        pattern: r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        check: Check::Verify(|h, s, _| free_before(h, s)),
    },
    Rule {
        kind: SecretValueKind::Jwt,
        pattern: r"ey[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{8,}",
        check: Check::Verify(jwt),
    },
    Rule {
        kind: SecretValueKind::CardNumber,
        pattern: r"[0-9](?:[ .\-]{0,3}[0-9]){12,18}",
        check: Check::Find(find_card_number),
    },
    Rule {
        kind: SecretValueKind::AwsSecretKey,
        pattern: r"[A-Za-z0-9/+]{40,}",
        check: Check::Verify(aws_secret_key),
    },
];

/// Recognises secret-looking values. Build once ([`SecretValueScanner::builtin`])
/// and share (it is `Send + Sync`).
pub struct SecretValueScanner {
    set: RegexSet,
    regexes: Vec<Regex>,
}

impl std::fmt::Debug for SecretValueScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretValueScanner")
            .field("patterns", &self.regexes.len())
            .finish()
    }
}

impl SecretValueScanner {
    /// The built-in table of well-known token formats and card numbers.
    pub fn builtin() -> Self {
        let set = RegexSet::new(RULES.iter().map(|r| r.pattern))
            .expect("built-in secret patterns compile");
        let regexes = RULES
            .iter()
            .map(|r| Regex::new(r.pattern).expect("built-in secret pattern compiles"))
            .collect();
        SecretValueScanner { set, regexes }
    }

    /// The regexes [`Self::may_match`] runs, for a caller that folds the
    /// test into a pass of its own.
    pub fn patterns(&self) -> &[String] {
        self.set.patterns()
    }

    /// Whether raw text (a message's JSON, say) may hold a secret the
    /// scanner finds: one pass of the pattern set, no verification. A
    /// `false` is final for ASCII text without escapes.
    pub fn may_match(&self, raw: &str) -> bool {
        self.set.is_match(raw)
    }

    /// The kind of the first secret-looking substring of `value`, if any.
    /// Never returns or logs the value.
    pub fn scan(&self, value: &str) -> Option<SecretValueKind> {
        let folded = fold_value(value);
        self.leftmost(folded.as_ref(), 0).map(|f| f.kind)
    }

    /// Every secret-looking substring of `value`, left to right and not
    /// overlapping, in the value as the scanner reads it ([`fold_value`]:
    /// the same text for ASCII, so the spans are the value's own). For
    /// redaction and keyed fingerprints; never logged.
    pub fn find_all<'a>(&self, value: &'a str) -> Scanned<'a> {
        let text = fold_value(value);
        let mut found = Vec::new();
        let mut from = 0;
        while from < text.len() {
            let Some(hit) = self.leftmost(&text, from) else {
                break;
            };
            from = hit.span.end.max(hit.span.start + 1);
            while !text.is_char_boundary(from) {
                from += 1;
            }
            found.push(hit);
        }
        Scanned { text, found }
    }

    /// The leftmost verified candidate starting at or after `from`.
    fn leftmost(&self, value: &str, from: usize) -> Option<Found> {
        let hits = self.set.matches_at(value, from);
        if !hits.matched_any() {
            return None;
        }
        // (start, end, rule index) of the leftmost verified candidate.
        let mut best: Option<(usize, usize, usize)> = None;
        for i in hits.iter() {
            let limit = best.map_or(usize::MAX, |(s, _, _)| s);
            if let Some((start, end)) = self.first_verified(i, value, from, limit) {
                if start < limit {
                    best = Some((start, end, i));
                }
            }
        }
        best.map(|(start, end, i)| Found {
            kind: RULES[i].kind,
            span: start..extend(RULES[i].kind, value, end),
        })
    }

    /// The first candidate of rule `i` at or after `from` that passes its
    /// verification and starts before `limit`.
    fn first_verified(
        &self,
        i: usize,
        hay: &str,
        from: usize,
        limit: usize,
    ) -> Option<(usize, usize)> {
        let verify = match RULES[i].check {
            Check::Find(find) => return find(hay, from, limit),
            Check::Verify(verify) => verify,
        };
        let re = &self.regexes[i];
        let mut pos = from;
        while pos <= hay.len() {
            let m = re.find_at(hay, pos)?;
            if m.start() >= limit {
                return None;
            }
            if verify(hay, m.start(), m.end()) {
                return Some((m.start(), m.end()));
            }
            // Matches are never empty and end on a char boundary.
            pos = m.end().max(m.start() + 1);
        }
        None
    }
}

/// One secret-looking substring: its kind and where it is in
/// [`Scanned::text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: SecretValueKind,
    pub span: std::ops::Range<usize>,
}

/// A value as the scanner read it, and what it found there.
#[derive(Debug)]
pub struct Scanned<'a> {
    /// The value folded ([`fold_value`]); the value itself when ASCII.
    pub text: std::borrow::Cow<'a, str>,
    pub found: Vec<Found>,
}

/// A private key's header is what the pattern finds; the key runs to its
/// footer (or the end of the value, when the footer is missing).
fn extend(kind: SecretValueKind, value: &str, end: usize) -> usize {
    if kind != SecretValueKind::PemPrivateKey {
        return end;
    }
    const FOOTER: &str = "-----END ";
    let Some(at) = value[end..].find(FOOTER) else {
        return value.len();
    };
    let after = end + at + FOOTER.len();
    match value[after..].find("-----") {
        Some(close) => after + close + 5,
        None => value.len(),
    }
}

impl Default for SecretValueScanner {
    fn default() -> Self {
        SecretValueScanner::builtin()
    }
}

// ---- verification helpers -------------------------------------------------

fn char_before(h: &str, at: usize) -> Option<char> {
    h[..at].chars().next_back()
}

fn char_after(h: &str, at: usize) -> Option<char> {
    h[at..].chars().next()
}

/// The token is not glued to a preceding letter or digit.
fn free_before(h: &str, s: usize) -> bool {
    !char_before(h, s).is_some_and(|c| c.is_alphanumeric())
}

/// The part after the first `sep` (the whole string when there is none).
fn after_first(s: &str, sep: char) -> &str {
    s.split_once(sep).map_or(s, |(_, b)| b)
}

/// At least `need` of the classes upper case, lower case, digit occur.
fn mixed(body: &str, need: usize) -> bool {
    let (mut up, mut low, mut dig) = (false, false, false);
    for b in body.bytes() {
        up |= b.is_ascii_uppercase();
        low |= b.is_ascii_lowercase();
        dig |= b.is_ascii_digit();
    }
    usize::from(up) + usize::from(low) + usize::from(dig) >= need
}

fn aws_access_key(h: &str, s: usize, e: usize) -> bool {
    e - s == 20 && free_before(h, s) && !char_after(h, e).is_some_and(|c| c.is_alphanumeric())
}

fn is_b64_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '/' || c == '+' || c == '='
}

fn aws_secret_key(h: &str, s: usize, e: usize) -> bool {
    // `key=…` is the usual way to write one; a `=` after it would be the
    // padding of a longer base64 string.
    if e - s != 40
        || char_before(h, s).is_some_and(|c| c != '=' && is_b64_char(c))
        || char_after(h, e).is_some_and(is_b64_char)
    {
        return false;
    }
    let tok = &h[s..e];
    if tok.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false; // a SHA-1 digest, not a key
    }
    if has_context(h, s, e) {
        return mixed(tok, 2);
    }
    looks_random(tok)
}

/// "aws" or "secret" (any case) within [`CONTEXT_WINDOW`] bytes before the
/// token or a few bytes after it.
fn has_context(h: &str, s: usize, e: usize) -> bool {
    let b = h.as_bytes();
    let window = &b[s.saturating_sub(CONTEXT_WINDOW)..(e + 24).min(b.len())];
    [&b"aws"[..], &b"secret"[..]].iter().any(|word| {
        window
            .windows(word.len())
            .any(|w| w.eq_ignore_ascii_case(word))
    })
}

/// How far before an AWS secret key candidate its context is looked for.
const CONTEXT_WINDOW: usize = 64;

/// The context-free test for a 40-character token: all three character
/// classes, high entropy, frequent class changes (random text switches
/// between upper case, lower case, digits and symbols about every other
/// character; camel-case words do not) and few vowels (about one letter in
/// five is a vowel in random text, two in five in words). About 2 % of real
/// random keys fail it and are only caught with context; ordinary identifiers
/// and words do not pass it.
fn looks_random(tok: &str) -> bool {
    fn class(b: u8) -> u8 {
        match b {
            b'A'..=b'Z' => 0,
            b'a'..=b'z' => 1,
            b'0'..=b'9' => 2,
            _ => 3,
        }
    }
    let bytes = tok.as_bytes();
    let changes = bytes
        .windows(2)
        .filter(|w| class(w[0]) != class(w[1]))
        .count();
    let letters = bytes.iter().filter(|b| b.is_ascii_alphabetic()).count();
    let vowels = bytes.iter().filter(|b| b"aeiouAEIOU".contains(b)).count();
    mixed(tok, 3)
        && shannon_entropy(tok) >= AWS_SECRET_MIN_ENTROPY
        && changes * 5 >= bytes.len() * 2
        && vowels * 20 < letters * 7
}

/// Shannon entropy of the byte distribution, in bits per byte.
pub(crate) fn shannon_entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

fn jwt(h: &str, s: usize, e: usize) -> bool {
    if char_before(h, s).is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return false;
    }
    let header = h[s..e].split('.').next().unwrap_or_default();
    let Some(bytes) = base64url_decode(header) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .as_ref()
        .and_then(serde_json::Value::as_object)
        .is_some_and(|o| o.get("alg").is_some_and(serde_json::Value::is_string))
}

/// Unpadded base64url → bytes (None on a character outside the alphabet or
/// an impossible length).
fn base64url_decode(s: &str) -> Option<Vec<u8>> {
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in s.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// The start of the first card number before `limit`. Candidates start at a
/// digit not preceded by a digit, a decimal point, a thousands separator or a
/// phone `+`; digit groups may be separated by a short run of spaces, dashes
/// or dots ([`group_gap`]). Every length from 13 to 19 digits that ends at a
/// number boundary (no digit, and no `.5` / `,5`, right after) is tried, so
/// "4111 1111 1111 1111 12/29" still finds the 16-digit number.
fn find_card_number(h: &str, from: usize, limit: usize) -> Option<(usize, usize)> {
    let b = h.as_bytes();
    let end = b.len().min(limit);
    (from..end).find_map(|i| {
        let starts = b[i].is_ascii_digit()
            && !(i > 0 && matches!(b[i - 1], b'0'..=b'9' | b'.' | b',' | b'+'));
        if !starts {
            return None;
        }
        card_at(b, i).map(|e| (i, e))
    })
}

/// Longest run of separators between two digit groups.
const MAX_GAP: usize = 3;
/// A dot separates groups only between groups this long (`4111.1111`, not
/// the decimal `4.111111…`).
const MIN_DOTTED_GROUP: usize = 3;

/// The end of the separator run at `j` when a digit group follows it and the
/// run is allowed after a group of `group` digits.
fn group_gap(b: &[u8], j: usize, group: usize) -> Option<usize> {
    let run = b[j..]
        .iter()
        .take(MAX_GAP)
        .take_while(|c| matches!(c, b' ' | b'-' | b'.'))
        .count();
    let k = j + run;
    if run == 0 || !b.get(k).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    if b[j..k].contains(&b'.') {
        let next_group = b[k..].iter().take_while(|c| c.is_ascii_digit()).count();
        if group < MIN_DOTTED_GROUP || next_group < MIN_DOTTED_GROUP {
            return None;
        }
    }
    Some(k)
}

/// The end of a card number starting at `start`, when one does.
fn card_at(b: &[u8], start: usize) -> Option<usize> {
    let mut digits = [0u8; 19];
    let mut n = 0;
    let mut group = 0;
    let mut j = start;
    loop {
        digits[n] = b[j] - b'0';
        n += 1;
        group += 1;
        j += 1;
        let next = b.get(j).copied();
        let after_next_is_digit = b.get(j + 1).is_some_and(u8::is_ascii_digit);
        let at_boundary = match next {
            Some(c) if c.is_ascii_digit() => false,
            Some(b'.' | b',') => !after_next_is_digit,
            _ => true,
        };
        if n >= 13 && at_boundary && card_brand_fits(&digits[..n]) && luhn(&digits[..n]) {
            return Some(j);
        }
        if n == digits.len() {
            return None;
        }
        match next {
            Some(c) if c.is_ascii_digit() => {}
            Some(_) => match group_gap(b, j, group) {
                Some(k) => {
                    j = k;
                    group = 0;
                }
                None => return None,
            },
            None => return None,
        }
    }
}

/// A known issuer prefix with a length that issuer uses.
fn card_brand_fits(d: &[u8]) -> bool {
    let n = d.len();
    let prefix = |k: usize| d.iter().take(k).fold(0u32, |a, &x| a * 10 + u32::from(x));
    let (p1, p2, p3, p4) = (prefix(1), prefix(2), prefix(3), prefix(4));
    let visa = p1 == 4 && matches!(n, 13 | 16 | 19);
    let mastercard = ((51..=55).contains(&p2) || (2221..=2720).contains(&p4)) && n == 16;
    let amex = (p2 == 34 || p2 == 37) && n == 15;
    let discover = (p4 == 6011 || p2 == 65 || (644..=649).contains(&p3)) && (16..=19).contains(&n);
    let jcb = (3528..=3589).contains(&p4) && (16..=19).contains(&n);
    visa || mastercard || amex || discover || jcb
}

fn luhn(d: &[u8]) -> bool {
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &x)| {
            let x = u32::from(x);
            if i % 2 == 1 {
                let y = x * 2;
                if y > 9 {
                    y - 9
                } else {
                    y
                }
            } else {
                x
            }
        })
        .sum();
    !d.is_empty() && sum.is_multiple_of(10)
}

#[cfg(test)]
#[path = "values_variants.rs"]
mod variant_tests;

#[cfg(test)]
mod tests {
    use super::SecretValueKind as K;
    use super::*;
    use proptest::prelude::*;

    /// Deterministic filler from `charset` (xorshift), so no real-looking
    /// secret is ever written into the source.
    fn fill(n: usize, charset: &str, seed: u64) -> String {
        let cs: Vec<char> = charset.chars().collect();
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                cs[(x % cs.len() as u64) as usize]
            })
            .collect()
    }

    const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const UPDIG: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+";
    const B64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const LETTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

    fn b64url(bytes: &[u8]) -> String {
        let cs: Vec<char> = B64URL.chars().collect();
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let v = chunk
                .iter()
                .enumerate()
                .fold(0u32, |a, (i, &b)| a | u32::from(b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(cs[((v >> (18 - 6 * i)) & 63) as usize]);
            }
        }
        out
    }

    fn jwt_with(header: &str) -> String {
        format!(
            "{}.{}.{}",
            b64url(header.as_bytes()),
            b64url(br#"{"sub":"1234567890","name":"Test","iat":1700000000}"#),
            fill(43, B64URL, 7)
        )
    }

    fn pem(label: &str) -> String {
        format!(
            "-----{} {}-----\n{}\n-----END {}-----",
            "BEGIN",
            label,
            fill(64, B64, 3),
            label
        )
    }

    fn scanner() -> &'static SecretValueScanner {
        static S: std::sync::OnceLock<SecretValueScanner> = std::sync::OnceLock::new();
        S.get_or_init(SecretValueScanner::builtin)
    }

    fn positives() -> Vec<(String, K)> {
        vec![
            (format!("AKIA{}", fill(16, UPDIG, 1)), K::AwsAccessKey),
            (format!("ASIA{}", fill(16, UPDIG, 2)), K::AwsAccessKey),
            (
                format!("key id: AGPA{}, region eu-west-1", fill(16, UPDIG, 3)),
                K::AwsAccessKey,
            ),
            (
                format!("aws_secret_access_key = {}", fill(40, B64, 4)),
                K::AwsSecretKey,
            ),
            (fill(40, B64, 5), K::AwsSecretKey),
            (
                format!("AWS_SECRET_ACCESS_KEY={}", fill(40, B64, 6)),
                K::AwsSecretKey,
            ),
            (format!("ghp_{}", fill(36, ALNUM, 6)), K::GithubToken),
            (format!("gho_{}", fill(36, ALNUM, 7)), K::GithubToken),
            (
                format!("my token is ghs_{} ok", fill(36, ALNUM, 8)),
                K::GithubToken,
            ),
            (
                format!("github_pat_{}_{}", fill(22, ALNUM, 9), fill(59, ALNUM, 10)),
                K::GithubToken,
            ),
            (format!("glpat-{}", fill(20, ALNUM, 11)), K::GitlabToken),
            (
                format!(
                    "xoxb-{}-{}-{}",
                    fill(12, "0123456789", 12),
                    fill(13, "0123456789", 13),
                    fill(24, ALNUM, 14)
                ),
                K::SlackToken,
            ),
            (
                format!(
                    "xoxp-{}-{}",
                    fill(11, "0123456789", 15),
                    fill(32, ALNUM, 16)
                ),
                K::SlackToken,
            ),
            (
                format!("xapp-1-A{}-{}", fill(10, UPDIG, 17), fill(40, ALNUM, 18)),
                K::SlackToken,
            ),
            (
                format!(
                    "https://hooks.slack.com/services/T{}/B{}/{}",
                    fill(8, UPDIG, 19),
                    fill(8, UPDIG, 20),
                    fill(24, ALNUM, 21)
                ),
                K::SlackWebhook,
            ),
            (format!("sk_live_{}", fill(24, ALNUM, 22)), K::StripeKey),
            (format!("rk_live_{}", fill(24, ALNUM, 23)), K::StripeKey),
            (format!("AIza{}", fill(35, B64URL, 24)), K::GoogleApiKey),
            (format!("sk-{}", fill(48, ALNUM, 25)), K::OpenAiKey),
            (format!("sk-proj-{}", fill(120, B64URL, 26)), K::OpenAiKey),
            (
                format!("sk-ant-api03-{}", fill(93, B64URL, 27)),
                K::AnthropicKey,
            ),
            (format!("npm_{}", fill(36, ALNUM, 28)), K::NpmToken),
            (
                format!("pypi-AgEIcHlwaS5vcmc{}", fill(60, B64URL, 29)),
                K::PypiToken,
            ),
            (format!("hf_{}", fill(34, LETTERS, 30)), K::HuggingFaceToken),
            (
                format!("SG.{}.{}", fill(22, B64URL, 31), fill(43, B64URL, 32)),
                K::SendgridKey,
            ),
            (jwt_with(r#"{"alg":"HS256","typ":"JWT"}"#), K::Jwt),
            (
                format!("Bearer {}", jwt_with(r#"{ "alg": "RS256" }"#)),
                K::Jwt,
            ),
            (pem("RSA PRIVATE KEY"), K::PemPrivateKey),
            (pem("OPENSSH PRIVATE KEY"), K::PemPrivateKey),
            (pem("ENCRYPTED PRIVATE KEY"), K::PemPrivateKey),
            (pem("PRIVATE KEY"), K::PemPrivateKey),
            ("4111 1111 1111 1111".into(), K::CardNumber),
            ("5555-5555-5555-4444".into(), K::CardNumber),
            ("2223003122003222".into(), K::CardNumber),
            ("3782 822463 10005".into(), K::CardNumber),
            ("6011111111111117".into(), K::CardNumber),
            ("3530111333300000".into(), K::CardNumber),
            ("4222222222222".into(), K::CardNumber),
            ("card: 4242 4242 4242 4242, exp 12/29".into(), K::CardNumber),
            ("4111 1111 1111 1111 12/29 123".into(), K::CardNumber),
            ("Order ref 5555555555554444.".into(), K::CardNumber),
        ]
    }

    fn negatives() -> Vec<String> {
        let mut v: Vec<String> = [
            "",
            "octocat@github.com",
            "Monalisa Octocat",
            "2026-09-17",
            "2026-09-17T09:30:00+02:00",
            "123e4567-e89b-12d3-a456-426614174000",
            "978-3-16-148410-0",
            "9780306406157",
            "+1 415 555 0132",
            "+44 20 7946 0958",
            "(415) 555-0132",
            "+4915112345678",
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "secret sha: da39a3ee5e6b4b0d3255bfef95601890afd80709",
            // 19 contiguous digits hide no shorter number inside them.
            "4111111111111111123",
            // 16-digit order number failing Luhn (with a Visa prefix).
            "4111111111111112",
            // Luhn-valid, but no card issuer prefix.
            "1234567812345670",
            "9999 9999 9999 9995",
            // Luhn-valid Visa prefix with a length Visa does not use (15).
            "411111111111116",
            "3.14159265358979323846",
            "$1,234,567.89",
            "192.168.100.200",
            "Install it with pip, then import sk-learn; see the task-list.",
            "sk-this-is-not-a-real-key-just-some-words-here",
            "The Stripe key starts with sk_live_ but I will not paste it",
            "AKIA is the prefix AWS uses for access key ids",
            "AKIAIOSFODNN7EXAMPLEXTRA",
            "glpat-tokens-are-described-here",
            "ghp_short",
            "xoxb-not-a-token",
            "ThisIsAVeryLongCamelCaseIdentifierName12",
            "MyFavouriteBookIsTheLordOfTheRings1954ed",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "eyJub3QiOiJqd3QifQ.eyJ4IjoxfQ.c2lnbmF0dXJlc2lnbmF0dXJl",
            "version 1.2.3 released",
            "-----BEGIN PUBLIC KEY-----",
            "-----BEGIN CERTIFICATE-----",
            "Please book the big room for 9am on Thursday, 12 people.",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // A 40-character base64-ish token glued into a longer run is not a key.
        v.push(format!("x{}", fill(40, ALNUM, 40)));
        v.push(format!("xghp_{}", fill(36, ALNUM, 41)));
        v
    }

    #[test]
    fn positives_are_found_with_their_kind() {
        let s = SecretValueScanner::builtin();
        let cases = positives();
        assert!(cases.len() >= 20);
        for (value, kind) in &cases {
            assert_eq!(
                s.scan(value),
                Some(*kind),
                "kind {kind:?} (case len {})",
                value.len()
            );
        }
    }

    #[test]
    fn negatives_are_not_secrets() {
        let s = SecretValueScanner::builtin();
        let cases = negatives();
        assert!(cases.len() >= 20);
        for value in &cases {
            assert_eq!(s.scan(value), None, "false positive on {value:?}");
        }
    }

    #[test]
    fn the_leftmost_secret_wins() {
        let s = SecretValueScanner::builtin();
        let v = format!("4111 1111 1111 1111 then ghp_{}", fill(36, ALNUM, 50));
        assert_eq!(s.scan(&v), Some(K::CardNumber));
        let v = format!("ghp_{} then 4111 1111 1111 1111", fill(36, ALNUM, 50));
        assert_eq!(s.scan(&v), Some(K::GithubToken));
        // A card number hidden after a rejected leading digit is still found.
        assert_eq!(s.scan("1 4111 1111 1111 1111"), Some(K::CardNumber));
        // AWS secret key context counts only near the token.
        let key = fill(40, B64, 77);
        assert_eq!(s.scan(&format!("AWS secret: {key}")), Some(K::AwsSecretKey));
        let far = format!("aws {} {key}", "words ".repeat(20));
        assert_eq!(s.scan(&far).is_some(), looks_random(&key));
    }

    #[test]
    fn randomness_separates_keys_from_words() {
        for word in [
            "ThisIsAVeryLongCamelCaseIdentifierName12",
            "Supercalifragilisticexpialidocious2024AB",
            "getUserAccountSettingsForCurrentTenantV2",
            "MyFavouriteBookIsTheLordOfTheRings1954ed",
            "XmlHttpRequestFactoryBuilderProxyImpl007",
        ] {
            assert_eq!(word.len(), 40);
            assert!(!looks_random(word), "{word}");
        }
        let hits = (0..200u64)
            .filter(|&i| looks_random(&fill(40, B64, 1000 + i)))
            .count();
        assert!(hits >= 190, "only {hits}/200 random keys look random");
    }

    #[test]
    fn kind_names_are_stable_snake_case_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for k in SecretValueKind::ALL {
            let n = k.as_str();
            assert!(
                n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{n}"
            );
            assert!(seen.insert(n));
            assert!(!k.describe().is_empty());
        }
        assert_eq!(K::GithubToken.describe(), "a GitHub token");
    }

    #[test]
    fn luhn_and_base64url_helpers() {
        let d = |s: &str| s.bytes().map(|b| b - b'0').collect::<Vec<_>>();
        assert!(luhn(&d("79927398713")));
        assert!(!luhn(&d("79927398710")));
        assert_eq!(base64url_decode("eyJhIjoxfQ").unwrap(), br#"{"a":1}"#);
        assert_eq!(b64url(br#"{"a":1}"#), "eyJhIjoxfQ");
        assert!(base64url_decode("a").is_none());
        assert!(base64url_decode("ab+c").is_none());
    }

    proptest! {
        #[test]
        fn scan_never_panics(s in "\\PC{0,200}") {
            let _ = scanner().scan(&s);
        }

        #[test]
        fn numbers_without_an_issuer_prefix_are_never_cards(
            first in prop::sample::select(vec!['0', '1', '7', '8', '9']),
            rest in "[0-9]{12,18}",
        ) {
            let v = format!("{first}{rest}");
            prop_assert_ne!(scanner().scan(&v), Some(K::CardNumber));
        }

        #[test]
        fn a_single_changed_digit_breaks_a_card(pos in 0usize..16, delta in 1u8..10) {
            let mut d: Vec<u8> = b"4111111111111111".to_vec();
            d[pos] = b'0' + (d[pos] - b'0' + delta) % 10;
            let v = String::from_utf8(d).unwrap();
            prop_assert_ne!(scanner().scan(&v), Some(K::CardNumber));
        }
    }
}
