//! Detects form fields (and form messages) that ask a person for a secret.
//!
//! The MCP spec says passwords, keys, tokens and payment data must be collected
//! through URL-mode elicitation, never through a form that travels through the
//! model host. This module decides, from the words an upstream used, whether a
//! form-mode property is *asking for* such a secret.
//!
//! # How it works
//!
//! 1. **Normalisation.** Every text (property name, title, description,
//!    message) is split into lowercase words on anything that is not a letter
//!    or digit and on camelCase / PascalCase boundaries, acronym runs included
//!    (`APIKey` → `api key`, `userPIN` → `user pin`, `cardCVV2` → `card cvv2`,
//!    `APIs` stays one word). Digits stay attached to the word they follow
//!    (`cvv2`, `last4`); a word is also compared without its trailing digits,
//!    so `password2` still means `password`. Invisible characters (zero-width
//!    space, soft hyphen) and combining marks stay inside the word, and a
//!    non-ASCII letter that looks like an ASCII one is read as that letter
//!    (Unicode confusable skeleton, per character), so `pass\u{200B}word` and
//!    `pаsswоrd` (Cyrillic) are still `password`. Sentence punctuation starts
//!    a new *clause* (context windows never cross it); a comma starts a new
//!    *phrase* (negation and trailing-metadata checks never cross it).
//! 2. **Terms.** A table of secret terms, each a word sequence (`api key`,
//!    `one time password`, `# digit code` where `#` is any number). Every
//!    multi-word term also matches as one glued word (`apikey`, `ccnum`,
//!    `pincode`), and a few unmistakable terms also match as the tail of a
//!    glued word (`userpassword`, `stripeapikey`). Matching is by whole words,
//!    so `keyboard`, `monkey`, `pinned`, `spinner`, `passenger`, `secretary`
//!    and `tokenizer` never match. The longest term at a position wins
//!    (`one time password` is a one-time code, not a password).
//! 3. **Context.** A term alone is not enough; the words around it decide
//!    whether the text asks for the secret or talks *about* it:
//!    * In a property **name**, any metadata word (`policy`, `url`, `hint`,
//!      `length`, `min`, `expiry`, `count`, `budget`, `name`, `id`, `type`,
//!      `fingerprint`, `public`, …) or flag word (`has`, `is`, `show`,
//!      `enabled`, `required`, `used`, `forgot`, …) anywhere outside the term
//!      turns it into metadata: `password_policy_url`, `api_key_id`,
//!      `token_budget`, `otp_enabled`, `show_password` are not secrets.
//!    * In a **title or description** (free text) only nearby words count: a
//!      metadata word right after the term (`API key name`), a blocking
//!      word right before it (`minimum password length`, `public key`,
//!      `show password`, `reset your password`), an "X of/for the TERM"
//!      construction (`a name for your API key`), or a negation shortly
//!      before it (`do not enter your password`, `never share your API key`).
//!      No asking verb is needed: a title or description that names a secret
//!      describes the field it belongs to.
//!    * In the form **message** the same rules apply, and in addition an
//!      asking verb (`enter`, `type`, `provide`, `paste`, `give`, `share`,
//!      `input`, `submit`, `send`, `tell`, `confirm`, `re-enter`, `what is
//!      your`, …) must come at most a few words before the term in the same
//!      clause (negations before the verb still cancel it). So "Paste your
//!      API key" triggers, while "Your password was changed last week. Which
//!      room?" and "We will never ask you to share your password" do not.
//!    * A few terms are ambiguous words and carry a guard: short acronyms
//!      (`pin`, `pan`, `pat`, `sin`, `tin`, `cid`, `pw`, `credit card`) count
//!      in a name only when every other word is neutral (`user_pin`,
//!      `github_pat`, but not `pin_to_top`), and in text only when written in
//!      capitals, introduced by a possessive, an asking verb or a neutral word
//!      (`your pin`, `enter pin`, `atm pin`, but not `the sin of pride`), or
//!      standing among neutral words in a very short text. A bare `token` /
//!      `bearer` / `jwt` / `credentials` is not counted after words like
//!      `page`, `next`, `max`, `input` (`next_page_token`), and in text needs
//!      such context, an asking verb, or a title-length clause. A bare
//!      `secret` or `mnemonic` counts only as a noun (`secret`, `enter your
//!      secret`), not as an adjective (`secret_santa`, `mnemonic device`).
//!
//! Terms are English. The detector is a safety net for careless or naive
//! servers and for obvious phishing; a determined server can always
//! paraphrase, which is why the values typed into ordinary fields are also
//! scanned for secrets later in the pipeline.
//!
//! # Decisions on ambiguous names
//!
//! * `password_hint` — **not** detected: a hint does not ask for the password,
//!   and signup forms legitimately ask for one. Operators who disagree add an
//!   extra pattern.
//! * `password_min_length`, `password_policy_url`, `password_strength`,
//!   `token_expiry`, `cvv_help_url` — not detected (metadata about a secret).
//! * `otp_enabled`, `has_api_key`, `show_password`, `forgot_password` — not
//!   detected: they are settings/flags, not the secret.
//! * `ssn_last4`, `card_number_last4` — **detected**: a fragment of a
//!   national id or card number is still that data.
//! * `secret_santa_group`, `top secret project` — not detected (`secret` as an
//!   adjective).
//! * `passport_photo_url` and bare `passport` — not detected; only `passport
//!   number` / `passport no` count.
//! * `security_code` without `card` nearby — a one-time code; with `card`
//!   nearby (or `card_security_code`) — a card security code.
//! * `pin_code` — detected as a PIN, although in India a "PIN code" is a
//!   postal code; `postal`, `zip`, `postcode`, `address`, `shipping` or
//!   `delivery` next to it mark it as such, otherwise operators can add
//!   `pin_code` to `allow_names`.
//! * `token` alone, `github_token`, `csrf_token` — detected (a bare token in a
//!   form is a credential); `next_page_token`, `design_token`, `erc20_token`,
//!   `token_symbol` — not.
//! * `password_reset_token` — detected (a reset token is a credential);
//!   `password_reset_url` — not.
//! * `otp_secret`, `totp_seed` — detected as one-time codes (the seed of one).
//! * `credit_card` alone — detected as a card number; "Pay by credit card" in
//!   a title — not (no possessive or asking verb before it).
//! * `ssh_key` — a private key (per policy), `ssh_public_key` / `public_key` —
//!   not detected.
//! * `api_key_id`, `access_key_id`, `api_key_name`, `api_key_prefix` — not
//!   detected: identifiers of a key, not the key.
//! * `credentials` — detected as a password (it asks for a login secret).
//!
//! # Cost
//!
//! The detector is built once. A check normalises each text into one
//! `String` plus one `Vec` of word spans, then does one hash lookup per word
//! and constant-size window checks (binary searches in sorted word lists) per
//! candidate term, so it is linear in the text and compiles nothing per call
//! (6–8 µs measured for a 5-field form with titles, descriptions and a
//! message, in a release build). Operator regexes are one precompiled
//! `RegexSet`, run only over the normalised name, title and description.

use std::collections::{HashMap, HashSet};

use regex::{RegexBuilder, RegexSet, RegexSetBuilder};
use serde::{Deserialize, Serialize};

/// The kind of secret a field asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    Password,
    ApiKey,
    AccessToken,
    RefreshToken,
    ClientSecret,
    PrivateKey,
    SeedPhrase,
    CardNumber,
    CardSecurityCode,
    BankAccount,
    NationalId,
    OneTimeCode,
    Pin,
}

impl SecretKind {
    /// Every kind, in declaration order.
    pub const ALL: [SecretKind; 13] = [
        SecretKind::Password,
        SecretKind::ApiKey,
        SecretKind::AccessToken,
        SecretKind::RefreshToken,
        SecretKind::ClientSecret,
        SecretKind::PrivateKey,
        SecretKind::SeedPhrase,
        SecretKind::CardNumber,
        SecretKind::CardSecurityCode,
        SecretKind::BankAccount,
        SecretKind::NationalId,
        SecretKind::OneTimeCode,
        SecretKind::Pin,
    ];

    /// Stable snake_case name, used in refusal reasons, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::Password => "password",
            SecretKind::ApiKey => "api_key",
            SecretKind::AccessToken => "access_token",
            SecretKind::RefreshToken => "refresh_token",
            SecretKind::ClientSecret => "client_secret",
            SecretKind::PrivateKey => "private_key",
            SecretKind::SeedPhrase => "seed_phrase",
            SecretKind::CardNumber => "card_number",
            SecretKind::CardSecurityCode => "card_security_code",
            SecretKind::BankAccount => "bank_account",
            SecretKind::NationalId => "national_id",
            SecretKind::OneTimeCode => "one_time_code",
            SecretKind::Pin => "pin",
        }
    }
}

/// Where the secret-asking wording was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecretSource {
    Name,
    Title,
    Description,
    Message,
}

impl SecretSource {
    /// Stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretSource::Name => "name",
            SecretSource::Title => "title",
            SecretSource::Description => "description",
            SecretSource::Message => "message",
        }
    }
}

/// A field or message that asks for a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretMatch {
    pub kind: SecretKind,
    pub source: SecretSource,
}

/// An operator-supplied pattern that does not compile.
#[derive(Debug, thiserror::Error)]
pub enum SecretPatternError {
    #[error("bad pattern {pattern:?}: {message}")]
    BadPattern { pattern: String, message: String },
}

/// Built once from policy configuration (never on the hot path).
#[derive(Debug, Clone)]
pub struct SecretFieldDetector {
    /// Terms keyed by their first word (or glued form).
    rules: HashMap<Box<str>, Vec<Rule>>,
    /// Operator patterns, one set, with the kind of each pattern by index.
    extra: Option<(RegexSet, Vec<SecretKind>)>,
    /// Normalised property names that are never flagged.
    allow: HashSet<String>,
}

// ---------------------------------------------------------------------------
// Term table
// ---------------------------------------------------------------------------

/// How much context a term needs before it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    /// Unambiguous: counts unless the context says it is metadata.
    Plain,
    /// A short acronym or everyday word (`pin`, `pan`, `credit card`).
    Weak,
    /// A bare `token`-like noun, also a word in paging / LLM / crypto talk.
    Token,
    /// A bare `secret`: a noun only when nothing descriptive follows it.
    Secret,
    /// `security code`: a card code when `card` is near, else a one-time code.
    SecurityCode,
}

use Guard::{Plain, SecurityCode, Token, Weak};
use SecretKind as K;

/// Secret terms. Words are space-separated, `#` stands for any number.
/// Multi-word terms also match glued into one word (`apikey`).
const RULES: &[(&str, SecretKind, Guard)] = &[
    // Passwords.
    ("password", K::Password, Plain),
    ("passwd", K::Password, Plain),
    ("pwd", K::Password, Plain),
    ("pass phrase", K::Password, Plain),
    ("passphrase", K::Password, Plain),
    ("pass code", K::Password, Plain),
    ("passcode", K::Password, Plain),
    ("pw", K::Password, Weak),
    ("credential", K::Password, Token),
    ("credentials", K::Password, Token),
    // API keys.
    ("api key", K::ApiKey, Plain),
    ("api token", K::ApiKey, Plain),
    ("access key", K::ApiKey, Plain),
    ("secret key", K::ApiKey, Plain),
    ("secret access key", K::ApiKey, Plain),
    ("subscription key", K::ApiKey, Plain),
    ("developer key", K::ApiKey, Plain),
    // Tokens.
    ("token", K::AccessToken, Token),
    ("access token", K::AccessToken, Plain),
    ("auth token", K::AccessToken, Plain),
    ("authentication token", K::AccessToken, Plain),
    ("authorization token", K::AccessToken, Plain),
    ("bearer", K::AccessToken, Token),
    ("bearer token", K::AccessToken, Plain),
    ("session token", K::AccessToken, Plain),
    ("security token", K::AccessToken, Plain),
    ("personal access token", K::AccessToken, Plain),
    ("pat", K::AccessToken, Weak),
    ("id token", K::AccessToken, Plain),
    ("oauth token", K::AccessToken, Plain),
    ("jwt", K::AccessToken, Token),
    ("refresh token", K::RefreshToken, Plain),
    // Client secrets.
    ("secret", K::ClientSecret, Guard::Secret),
    ("client secret", K::ClientSecret, Plain),
    ("app secret", K::ClientSecret, Plain),
    ("application secret", K::ClientSecret, Plain),
    ("api secret", K::ClientSecret, Plain),
    ("consumer secret", K::ClientSecret, Plain),
    ("webhook secret", K::ClientSecret, Plain),
    ("signing secret", K::ClientSecret, Plain),
    ("shared secret", K::ClientSecret, Plain),
    // Private keys.
    ("private key", K::PrivateKey, Plain),
    ("privkey", K::PrivateKey, Plain),
    ("ssh key", K::PrivateKey, Plain),
    ("signing key", K::PrivateKey, Plain),
    ("encryption key", K::PrivateKey, Plain),
    ("decryption key", K::PrivateKey, Plain),
    ("master key", K::PrivateKey, Plain),
    // Wallet seeds.
    ("seed phrase", K::SeedPhrase, Plain),
    ("recovery phrase", K::SeedPhrase, Plain),
    ("secret recovery phrase", K::SeedPhrase, Plain),
    ("secret phrase", K::SeedPhrase, Plain),
    ("backup phrase", K::SeedPhrase, Plain),
    ("mnemonic", K::SeedPhrase, Guard::Secret),
    ("mnemonic words", K::SeedPhrase, Plain),
    ("mnemonic phrase", K::SeedPhrase, Plain),
    ("wallet seed", K::SeedPhrase, Plain),
    ("seed words", K::SeedPhrase, Plain),
    ("recovery words", K::SeedPhrase, Plain),
    ("# word phrase", K::SeedPhrase, Plain),
    ("# word seed", K::SeedPhrase, Plain),
    ("# word recovery phrase", K::SeedPhrase, Plain),
    // Card numbers.
    ("card number", K::CardNumber, Plain),
    ("credit card", K::CardNumber, Weak),
    ("debit card", K::CardNumber, Weak),
    ("credit card number", K::CardNumber, Plain),
    ("debit card number", K::CardNumber, Plain),
    ("payment card number", K::CardNumber, Plain),
    ("card no", K::CardNumber, Plain),
    ("card num", K::CardNumber, Plain),
    ("card nr", K::CardNumber, Plain),
    ("cc number", K::CardNumber, Plain),
    ("cc num", K::CardNumber, Plain),
    ("cc no", K::CardNumber, Plain),
    ("ccn", K::CardNumber, Plain),
    ("pan", K::CardNumber, Weak),
    ("primary account number", K::CardNumber, Plain),
    // Card security codes.
    ("cvv", K::CardSecurityCode, Plain),
    ("cvc", K::CardSecurityCode, Plain),
    ("cvv2", K::CardSecurityCode, Plain),
    ("cvc2", K::CardSecurityCode, Plain),
    ("cid", K::CardSecurityCode, Weak),
    ("csc", K::CardSecurityCode, Weak),
    ("card security code", K::CardSecurityCode, Plain),
    ("card verification value", K::CardSecurityCode, Plain),
    ("card verification code", K::CardSecurityCode, Plain),
    ("card code", K::CardSecurityCode, Plain),
    ("security code", K::OneTimeCode, SecurityCode),
    // Bank accounts. BIC / SWIFT are public bank identifiers: only with `account`.
    ("iban", K::BankAccount, Plain),
    ("account number", K::BankAccount, Plain),
    ("account no", K::BankAccount, Plain),
    ("account num", K::BankAccount, Plain),
    ("acct number", K::BankAccount, Plain),
    ("acct no", K::BankAccount, Plain),
    ("bank account", K::BankAccount, Plain),
    ("bank account number", K::BankAccount, Plain),
    ("routing number", K::BankAccount, Plain),
    ("routing no", K::BankAccount, Plain),
    ("aba number", K::BankAccount, Plain),
    ("sort code", K::BankAccount, Plain),
    ("bic account", K::BankAccount, Plain),
    ("swift account", K::BankAccount, Plain),
    ("account bic", K::BankAccount, Plain),
    ("account swift", K::BankAccount, Plain),
    // National identifiers.
    ("ssn", K::NationalId, Plain),
    ("social security number", K::NationalId, Plain),
    ("social security no", K::NationalId, Plain),
    ("social security", K::NationalId, Weak),
    ("social insurance number", K::NationalId, Plain),
    ("national id", K::NationalId, Plain),
    ("national identity number", K::NationalId, Plain),
    ("national identification number", K::NationalId, Plain),
    ("national insurance number", K::NationalId, Plain),
    ("tax id", K::NationalId, Plain),
    ("taxpayer id", K::NationalId, Plain),
    ("tax identification number", K::NationalId, Plain),
    ("tin", K::NationalId, Weak),
    ("sin", K::NationalId, Weak),
    ("passport number", K::NationalId, Plain),
    ("passport no", K::NationalId, Plain),
    ("passport num", K::NationalId, Plain),
    ("driver license number", K::NationalId, Plain),
    ("drivers license number", K::NationalId, Plain),
    ("driver s license number", K::NationalId, Plain),
    ("driving licence number", K::NationalId, Plain),
    ("driving license number", K::NationalId, Plain),
    ("aadhaar", K::NationalId, Plain),
    // One-time codes.
    ("otp", K::OneTimeCode, Plain),
    ("totp", K::OneTimeCode, Plain),
    ("hotp", K::OneTimeCode, Plain),
    ("2fa code", K::OneTimeCode, Plain),
    ("2fa token", K::OneTimeCode, Plain),
    ("mfa code", K::OneTimeCode, Plain),
    ("mfa token", K::OneTimeCode, Plain),
    ("two factor code", K::OneTimeCode, Plain),
    ("two factor authentication code", K::OneTimeCode, Plain),
    ("verification code", K::OneTimeCode, Plain),
    ("one time code", K::OneTimeCode, Plain),
    ("one time password", K::OneTimeCode, Plain),
    ("one time passcode", K::OneTimeCode, Plain),
    ("one time pin", K::OneTimeCode, Plain),
    ("onetime code", K::OneTimeCode, Plain),
    ("onetime password", K::OneTimeCode, Plain),
    ("authenticator code", K::OneTimeCode, Plain),
    ("authenticator app code", K::OneTimeCode, Plain),
    ("authentication code", K::OneTimeCode, Plain),
    ("auth code", K::OneTimeCode, Plain),
    ("sms code", K::OneTimeCode, Plain),
    ("login code", K::OneTimeCode, Plain),
    ("backup code", K::OneTimeCode, Plain),
    ("backup codes", K::OneTimeCode, Plain),
    ("recovery code", K::OneTimeCode, Plain),
    ("recovery codes", K::OneTimeCode, Plain),
    ("# digit code", K::OneTimeCode, Plain),
    ("code we sent", K::OneTimeCode, Plain),
    ("code we just sent", K::OneTimeCode, Plain),
    ("code sent", K::OneTimeCode, Plain),
    ("code we texted", K::OneTimeCode, Plain),
    ("code we emailed", K::OneTimeCode, Plain),
    ("code from your authenticator", K::OneTimeCode, Plain),
    ("code from the authenticator", K::OneTimeCode, Plain),
    ("code from authenticator", K::OneTimeCode, Plain),
    // PINs.
    ("pin", K::Pin, Weak),
    ("pin code", K::Pin, Plain),
    ("pin number", K::Pin, Plain),
    ("pin no", K::Pin, Plain),
    ("# digit pin", K::Pin, Plain),
];

/// Unmistakable terms that also count at the end of a glued lowercase word
/// (`userpassword`, `githubaccesstoken`), where camelCase splitting can't help.
const GLUED_SUFFIXES: &[(&str, SecretKind)] = &[
    ("password", K::Password),
    ("passwd", K::Password),
    ("passphrase", K::Password),
    ("passcode", K::Password),
    ("apikey", K::ApiKey),
    ("secretkey", K::ApiKey),
    ("accesstoken", K::AccessToken),
    ("authtoken", K::AccessToken),
    ("refreshtoken", K::RefreshToken),
    ("clientsecret", K::ClientSecret),
    ("privatekey", K::PrivateKey),
    ("seedphrase", K::SeedPhrase),
    ("cardnumber", K::CardNumber),
];

// ---------------------------------------------------------------------------
// Context word lists
// ---------------------------------------------------------------------------

/// Words that turn a secret term into metadata about the secret.
#[rustfmt::skip]
const METADATA: &[&str] = &[
    "address", "age", "algorithm", "amount", "audience", "balance", "bits", "brand", "budget",
    "changed", "channel", "channels", "claim", "claims", "column", "complexity", "contract",
    "count", "counts", "created", "date", "delivery", "description", "digest", "doc", "docs",
    "documentation", "endpoint", "env", "error", "errors", "example", "expiration", "expire",
    "expired", "expires", "expiry", "file", "filename", "fingerprint", "format", "generator",
    "hash", "hashed", "header", "help", "hint", "hints", "history", "holder", "host", "href", "id",
    "identifier", "ids", "indicator", "info", "instructions", "interval", "issued", "issuer",
    "kind", "label", "language", "len", "length", "lifetime", "limit", "limits", "link", "links",
    "locale", "location", "manager", "max", "maximum", "meter", "method", "min", "minimum", "mode",
    "name", "names", "network", "owner", "param", "parameter", "path", "pattern", "placeholder",
    "policies", "policy", "postal", "postcode", "prefix", "price", "provider", "public",
    "publishable", "quota", "regex", "requirement", "requirements", "rotated", "rotation", "rule",
    "rules", "salt", "sample", "scope", "scopes", "shipping", "size", "source", "status",
    "storage", "store", "strength", "supply", "symbol", "template", "thumbprint", "timeout",
    "title", "ttl", "type", "updated", "uri", "url", "urls", "validation", "variable", "version",
    "zip",
];

/// Flag-like words that, in a property name, make it a setting about the secret
/// (`has_password`, `otp_enabled`), not the secret itself.
#[rustfmt::skip]
const NAME_FLAGS: &[&str] = &[
    "allow", "allowed", "can", "disable", "disabled", "dont", "enable", "enabled", "forgot",
    "forgotten", "has", "hide", "is", "needs", "never", "no", "not", "remember", "require",
    "required", "rotate", "save", "should", "show", "use", "used", "uses", "without",
];

/// Words that, right before a term in free text (determiners skipped), make
/// it metadata or an action on it ("minimum password", "reset your password").
#[rustfmt::skip]
const TEXT_PREV_BLOCK: &[&str] = &[
    "delivery", "forgot", "forgotten", "hide", "max", "maximum", "min", "minimum", "postal",
    "postcode", "public", "publishable", "recover", "remember", "reset", "shipping", "show", "zip",
];

/// Function words: they end a noun phrase (used to bound context windows).
#[rustfmt::skip]
const FUNCTION: &[&str] = &[
    "above", "and", "are", "as", "at", "be", "below", "by", "can", "for", "from", "here", "if",
    "in", "into", "is", "it", "may", "must", "not", "of", "on", "or", "please", "should", "so",
    "that", "then", "to", "was", "we", "when", "where", "which", "will", "with", "you",
];

/// Possessives introduce a weak term as the reader's own (`your PIN`); plain
/// articles do not (`the sin of pride`).
#[rustfmt::skip]
const POSSESSIVES: &[&str] = &[
    "her", "his", "my", "our", "their", "ur", "your",
];

#[rustfmt::skip]
const DETERMINERS: &[&str] = &[
    "a", "an", "any", "her", "his", "its", "my", "our", "same", "that", "the", "their", "these",
    "this", "those", "ur", "your",
];

/// Words that say "do not do this" to the reader.
#[rustfmt::skip]
const NEGATIONS: &[&str] = &[
    "avoid", "cannot", "didn", "doesn", "don", "dont", "mustn", "neither", "never", "no", "nor",
    "not", "shouldn", "without", "won",
];

/// Verbs that ask the reader to hand something over.
#[rustfmt::skip]
const ASK_VERBS: &[&str] = &[
    "add", "choose", "confirm", "confirming", "create", "enter", "entering", "fill", "filling",
    "give", "giving", "input", "insert", "log", "login", "need", "needs", "paste", "pasting",
    "pick", "provide", "providing", "put", "reenter", "reply", "require", "requires", "respond",
    "retype", "send", "sending", "set", "share", "sharing", "sign", "signin", "specify", "submit",
    "submitting", "supply", "supplying", "tell", "type", "typing", "upload", "verify", "write",
];

/// Words that may surround a weak term without making it something else
/// (`user_pin`, `atm pin`, `github pat`).
#[rustfmt::skip]
const NEUTRAL: &[&str] = &[
    "access", "account", "admin", "again", "app", "atm", "azure", "backup", "bank", "canada",
    "canadian", "card", "classic", "code", "confirmation", "credit", "current", "customer", "db",
    "debit", "device", "devops", "digit", "digits", "email", "entry", "field", "git", "github",
    "gitlab", "here", "hub", "lab", "last", "login", "mail", "mobile", "new", "no", "nr", "num",
    "number", "old", "personal", "phone", "please", "primary", "re", "repeat", "root", "screen",
    "secondary", "secure", "security", "sim", "tax", "taxpayer", "unlock", "user", "value",
    "verification", "wallet", "wifi",
];

/// Words after which a bare `token` is not a credential (`next_page_token`,
/// `input token`, `erc20 token`).
#[rustfmt::skip]
const TOKEN_LEAD_BLOCK: &[&str] = &[
    "bos", "cancel", "cancellation", "completion", "continuation", "crypto", "css", "cursor",
    "design", "each", "eos", "erc20", "erc721", "every", "game", "governance", "idempotency",
    "input", "lexer", "mask", "max", "min", "native", "next", "nft", "nonce", "num", "output",
    "pad", "page", "pagination", "parser", "per", "prev", "previous", "prompt", "resume", "reward",
    "special", "stop", "string", "sync", "syntax", "theme", "total", "unk", "utility", "vocab",
    "vocabulary", "word",
];

/// Words after a bare `secret` that keep it a noun (`secret_value`, `secret here`).
#[rustfmt::skip]
const SECRET_NOUN_NEXT: &[&str] = &[
    "again", "confirm", "confirmation", "data", "field", "input", "repeat", "string", "text",
    "value", "verify",
];

/// Adjectives that may sit between "name for your" and the term.
#[rustfmt::skip]
const OF_SKIPPABLE: &[&str] = &[
    "current", "existing", "new", "old", "own",
];

#[rustfmt::skip]
const NUMBER_WORDS: &[&str] = &[
    "eight", "eighteen", "five", "four", "nine", "one", "seven", "six", "sixteen", "ten", "three",
    "twelve", "twenty", "two",
];

/// How far before a term an asking verb may be ("enter the 6 digit code").
const ASK_REACH: usize = 6;
/// How far before the verb (or term) a negation may be
/// ("we will never ask you to share your password").
const NEGATION_REACH: usize = 4;
/// A text clause this short is title-like: a weak term may stand in it alone.
const SHORT_CLAUSE: usize = 4;
/// Longest clause in which "every other word is neutral" is checked.
const NEUTRAL_CLAUSE: usize = 6;
/// How far from `security code` a `card` makes it a card security code.
const CARD_REACH: usize = 8;

// ---------------------------------------------------------------------------
// Normalisation
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CharClass {
    Upper,
    Lower,
    Digit,
    /// Ends the current word.
    Sep,
    /// Belongs to the current word but has no case: combining marks and
    /// invisible format characters (zero-width space, soft hyphen), which
    /// must not split `pass\u{200B}word` into two harmless words.
    Join,
}

fn classify(c: char) -> CharClass {
    if c.is_ascii() {
        return match c {
            '0'..='9' => CharClass::Digit,
            'A'..='Z' => CharClass::Upper,
            'a'..='z' => CharClass::Lower,
            _ => CharClass::Sep,
        };
    }
    if c.is_numeric() {
        CharClass::Digit
    } else if c.is_uppercase() {
        CharClass::Upper
    } else if c.is_alphabetic() {
        CharClass::Lower
    } else if c.is_whitespace() || is_visible_punctuation(c) {
        CharClass::Sep
    } else {
        CharClass::Join
    }
}

/// Non-ASCII punctuation and symbols that visibly separate words. Anything
/// else without a letter class (marks, format characters) joins the word.
fn is_visible_punctuation(c: char) -> bool {
    matches!(c,
        '\u{A0}'..='\u{AC}' | '\u{AE}'..='\u{BF}' | '\u{D7}' | '\u{F7}'
        | '\u{2010}'..='\u{2027}' | '\u{2030}'..='\u{205E}' | '\u{2190}'..='\u{2BFF}'
        | '\u{3000}'..='\u{303F}' | '\u{FE10}'..='\u{FE1F}' | '\u{FE30}'..='\u{FE6F}'
        | '\u{FF00}'..='\u{FF0F}' | '\u{FF1A}'..='\u{FF20}' | '\u{FF3B}'..='\u{FF40}'
        | '\u{FF5B}'..='\u{FF65}' | '\u{1F000}'..='\u{1FAFF}')
}

/// Appends `c` lowercased. A non-ASCII character that looks like ASCII
/// (Cyrillic `а`, fullwidth `Ｐ`, the `ﬁ` ligature) is replaced by what it
/// looks like, and an invisible one by nothing, so `pаsswоrd` still reads
/// `password`. Lowercasing comes first because the confusable prototype of
/// `I`-like letters is `l`. ASCII is never remapped (a confusable skeleton of
/// a whole word would turn `m` into `rn`).
fn push_folded(text: &mut String, c: char) {
    if c.is_ascii() {
        text.push(c.to_ascii_lowercase());
        return;
    }
    for lower in c.to_lowercase() {
        let mut buf = [0u8; 4];
        let looks_like: String = unicode_security::skeleton(lower.encode_utf8(&mut buf)).collect();
        if looks_like.is_ascii() {
            text.extend(looks_like.chars().map(|l| l.to_ascii_lowercase()));
        } else {
            text.push(lower);
        }
    }
}

/// One word: a span of `Normalised::text` plus where it sits.
#[derive(Debug, Clone, Copy)]
struct Word {
    start: usize,
    end: usize,
    /// Sentence-like unit; context windows stay inside it.
    clause: usize,
    /// Comma-delimited part of a clause; negation stays inside it.
    phrase: usize,
    /// Written in capitals in the source (`PIN`), a hint for acronyms.
    caps: bool,
}

/// Lowercase words joined by single spaces, with their spans.
#[derive(Debug, Default)]
struct Normalised {
    text: String,
    words: Vec<Word>,
}

/// State while splitting one input into words.
#[derive(Debug, Default)]
struct Splitter {
    out: Normalised,
    /// Start of the open word in `out.text`, and its letter/capital counts.
    open: Option<(usize, usize, usize)>,
    clause: usize,
    phrase: usize,
}

impl Splitter {
    fn push(&mut self, c: char, class: CharClass) {
        let (start, letters, upper) = match self.open {
            Some(open) => open,
            None => {
                if !self.out.text.is_empty() {
                    self.out.text.push(' ');
                }
                (self.out.text.len(), 0, 0)
            }
        };
        let is_letter = matches!(class, CharClass::Upper | CharClass::Lower);
        let is_upper = class == CharClass::Upper;
        self.open = Some((
            start,
            letters + usize::from(is_letter),
            upper + usize::from(is_upper),
        ));
        push_folded(&mut self.out.text, c);
    }

    fn close(&mut self) {
        let Some((start, letters, upper)) = self.open.take() else {
            return;
        };
        if self.out.text.len() == start {
            // Only invisible characters: no word.
            self.out.text.truncate(start.saturating_sub(1));
            return;
        }
        self.out.words.push(Word {
            start,
            end: self.out.text.len(),
            clause: self.clause,
            phrase: self.phrase,
            // One capital letter is just sentence case, not an acronym.
            caps: letters >= 2 && upper == letters,
        });
    }

    /// Sentence punctuation starts a new clause, a comma a new phrase. A dot
    /// inside a token (`github.com`, `user.password`) is a plain separator.
    fn separator(&mut self, c: char, rest: &str) {
        self.close();
        let sentence_dot = c == '.' && rest.chars().next().is_none_or(char::is_whitespace);
        if sentence_dot || matches!(c, '\n' | '\r' | ';' | '!' | '?' | '。' | '！' | '？') {
            self.clause += 1;
            self.phrase += 1;
        } else if matches!(c, ',' | '、' | '，') {
            self.phrase += 1;
        }
    }
}

impl Normalised {
    fn new(input: &str) -> Self {
        let mut s = Splitter {
            out: Normalised {
                text: String::with_capacity(input.len() + 4),
                words: Vec::with_capacity(8),
            },
            ..Splitter::default()
        };
        // The class of the last cased character or digit, for camelCase.
        let mut prev = CharClass::Sep;
        for (idx, c) in input.char_indices() {
            let rest = &input[idx + c.len_utf8()..];
            match classify(c) {
                CharClass::Sep => {
                    s.separator(c, rest);
                    prev = CharClass::Sep;
                }
                // A mark or invisible character never starts a word.
                CharClass::Join if s.open.is_some() => s.push(c, CharClass::Join),
                CharClass::Join => {}
                class => {
                    let has_letter = s.open.is_some_and(|(_, letters, _)| letters > 0);
                    if s.open.is_some() && splits_before(prev, class, rest, has_letter) {
                        s.close();
                    }
                    s.push(c, class);
                    prev = class;
                }
            }
        }
        s.close();
        s.out
    }

    fn len(&self) -> usize {
        self.words.len()
    }

    fn word(&self, i: usize) -> &str {
        self.words
            .get(i)
            .and_then(|w| self.text.get(w.start..w.end))
            .unwrap_or("")
    }

    fn same_clause(&self, a: usize, b: usize) -> bool {
        match (self.words.get(a), self.words.get(b)) {
            (Some(x), Some(y)) => x.clause == y.clause,
            _ => false,
        }
    }

    fn same_phrase(&self, a: usize, b: usize) -> bool {
        match (self.words.get(a), self.words.get(b)) {
            (Some(x), Some(y)) => x.phrase == y.phrase,
            _ => false,
        }
    }

    /// The previous word, if it is in the same clause.
    fn prev(&self, i: usize) -> Option<&str> {
        let p = i.checked_sub(1)?;
        self.same_clause(p, i).then(|| self.word(p))
    }

    /// Word indices of the clause around `i`, if it has at most `max` words.
    /// Looks at no more than `max` words on either side.
    fn short_clause(&self, i: usize, max: usize) -> Option<std::ops::Range<usize>> {
        let mut start = i;
        while start > 0 && self.same_clause(start - 1, i) {
            start -= 1;
            if i - start >= max {
                return None;
            }
        }
        let mut end = i + 1;
        while self.same_clause(end, i) {
            end += 1;
            if end - start > max {
                return None;
            }
        }
        Some(start..end)
    }
}

/// Where camelCase and acronym runs split (`APIKey` → `API|Key`,
/// `userPIN` → `user|PIN`, `cvv2Code` → `cvv2|Code`), keeping plural
/// acronyms whole (`APIs`, `PINs`) and leading digits attached (`2FA`).
fn splits_before(prev: CharClass, cur: CharClass, rest: &str, has_letter: bool) -> bool {
    match (prev, cur) {
        (CharClass::Lower, CharClass::Upper) => true,
        (CharClass::Upper, CharClass::Upper) => {
            let mut next = rest.chars();
            match next.next() {
                Some('s') => next.next().is_some_and(|c| classify(c) == CharClass::Lower),
                Some(c) => classify(c) == CharClass::Lower,
                None => false,
            }
        }
        (CharClass::Digit, CharClass::Upper) => has_letter,
        _ => false,
    }
}

/// The word without trailing digits (`password2` → `password`), unless that
/// would leave nothing (`2024`).
fn base(word: &str) -> &str {
    let trimmed = word.trim_end_matches(|c: char| c.is_ascii_digit());
    if trimmed.is_empty() {
        word
    } else {
        trimmed
    }
}

fn is_number(word: &str) -> bool {
    (!word.is_empty() && word.chars().all(|c| c.is_ascii_digit())) || in_list(NUMBER_WORDS, word)
}

fn word_matches(word: &str, want: &str) -> bool {
    if want == "#" {
        is_number(word)
    } else {
        word == want || base(word) == want
    }
}

/// Word lists are kept sorted (a test checks it), so lookups are binary searches.
fn in_list(list: &[&str], word: &str) -> bool {
    list.binary_search(&word).is_ok()
}

/// Words that may stand next to a weak term in a name.
fn is_neutral(word: &str) -> bool {
    is_number(word)
        || in_list(NEUTRAL, word)
        || in_list(DETERMINERS, word)
        || in_list(ASK_VERBS, word)
}

fn is_name_modifier(word: &str) -> bool {
    in_list(METADATA, word) || in_list(NAME_FLAGS, word)
}

// ---------------------------------------------------------------------------
// Matching
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Rule {
    /// Words after the first (the first is the map key).
    rest: Box<[Box<str>]>,
    kind: SecretKind,
    guard: Guard,
}

/// A term found at `start..end` (word indices).
#[derive(Debug, Clone, Copy)]
struct Hit {
    start: usize,
    end: usize,
    kind: SecretKind,
    guard: Guard,
}

/// Which rules apply: a name is compact; text needs local context; a message
/// must also ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Name,
    Text,
    Message,
}

/// Per-name counts, so that "anywhere in the name" checks stay O(1) per hit.
#[derive(Debug, Clone, Copy, Default)]
struct NameStats {
    modifiers: usize,
    non_neutral: usize,
}

impl NameStats {
    fn of(n: &Normalised, range: std::ops::Range<usize>) -> Self {
        let mut stats = NameStats {
            modifiers: 0,
            non_neutral: 0,
        };
        for i in range {
            let w = n.word(i);
            stats.modifiers += usize::from(is_name_modifier(w));
            stats.non_neutral += usize::from(!is_neutral(w));
        }
        stats
    }
}

fn build_rules() -> HashMap<Box<str>, Vec<Rule>> {
    let mut map: HashMap<Box<str>, Vec<Rule>> = HashMap::new();
    for &(phrase, kind, guard) in RULES {
        let words: Vec<&str> = phrase.split(' ').collect();
        let Some((first, rest)) = words.split_first() else {
            continue;
        };
        let rest = rest.iter().map(|w| Box::<str>::from(*w)).collect();
        map.entry((*first).into())
            .or_default()
            .push(Rule { rest, kind, guard });
        // The glued spelling (`apikey`, `ccnum`), except for number patterns.
        if words.len() > 1 && !words.contains(&"#") {
            let glued: Box<str> = words.concat().into();
            map.entry(glued).or_default().push(Rule {
                rest: Box::new([]),
                kind,
                guard,
            });
        }
    }
    map
}

impl SecretFieldDetector {
    /// Builds a detector with the built-in terms plus operator rules.
    ///
    /// `extra`: (kind, regex) pairs, matched case-insensitively against the
    /// normalised "word word word" text of a property's name, title and
    /// description (not the message). `allow_names`: property names that are
    /// never flagged, compared after normalisation (`apiKey` = `api_key`).
    pub fn new(
        extra: &[(SecretKind, String)],
        allow_names: &[String],
    ) -> Result<Self, SecretPatternError> {
        let mut detector = Self::builtin();
        detector.extra = compile_extra(extra)?;
        detector.allow = allow_names
            .iter()
            .map(|n| Normalised::new(n).text)
            .collect();
        Ok(detector)
    }

    /// The built-in rules only.
    pub fn builtin() -> Self {
        SecretFieldDetector {
            rules: build_rules(),
            extra: None,
            allow: HashSet::new(),
        }
    }

    /// Check one form property: its JSON key and (optional) title and description.
    pub fn check_field(
        &self,
        name: &str,
        title: Option<&str>,
        description: Option<&str>,
    ) -> Option<SecretMatch> {
        let name_words = Normalised::new(name);
        if self.allow.contains(&name_words.text) {
            return None;
        }
        let in_name = self.check_words(&name_words, Mode::Name);
        let text = |t: Option<&str>| t.and_then(|t| self.check_text(t));
        in_name
            .map(found_in(SecretSource::Name))
            .or_else(|| text(title).map(found_in(SecretSource::Title)))
            .or_else(|| text(description).map(found_in(SecretSource::Description)))
    }

    /// Check the form's message: it triggers only when it asks for a secret
    /// (an asking verb shortly before a secret term), not when it mentions one.
    pub fn check_message(&self, message: &str) -> Option<SecretMatch> {
        let words = Normalised::new(message);
        self.scan(&words, Mode::Message)
            .map(found_in(SecretSource::Message))
    }

    fn check_text(&self, text: &str) -> Option<SecretKind> {
        self.check_words(&Normalised::new(text), Mode::Text)
    }

    /// Built-in terms first, then the operator's patterns.
    fn check_words(&self, n: &Normalised, mode: Mode) -> Option<SecretKind> {
        self.scan(n, mode).or_else(|| self.extra_match(n))
    }

    fn extra_match(&self, n: &Normalised) -> Option<SecretKind> {
        let (set, kinds) = self.extra.as_ref()?;
        let index = set.matches(&n.text).iter().next()?;
        kinds.get(index).copied()
    }

    /// The first accepted term, left to right. A rejected term does not hide
    /// a shorter one inside it, so scanning moves on one word at a time.
    fn scan(&self, n: &Normalised, mode: Mode) -> Option<SecretKind> {
        let stats = match mode {
            Mode::Name => NameStats::of(n, 0..n.len()),
            Mode::Text | Mode::Message => NameStats::default(),
        };
        (0..n.len())
            .filter_map(|i| self.hit_at(n, i))
            .find(|hit| accept(n, hit, mode, stats))
            .map(|hit| refine_kind(n, &hit))
    }

    /// The longest term starting at word `i`.
    fn hit_at(&self, n: &Normalised, i: usize) -> Option<Hit> {
        let word = n.word(i);
        let stripped = base(word);
        let keys = [
            Some(word),
            (stripped != word).then_some(stripped),
            is_number(word).then_some("#"),
        ];
        let mut best: Option<Hit> = None;
        for rules in keys.into_iter().flatten().filter_map(|k| self.rules.get(k)) {
            for rule in rules {
                let Some(end) = rule_end(n, i, rule) else {
                    continue;
                };
                if best.is_none_or(|b| end > b.end) {
                    best = Some(Hit {
                        start: i,
                        end,
                        kind: rule.kind,
                        guard: rule.guard,
                    });
                }
            }
        }
        best.or_else(|| glued_hit(word, i))
    }
}

fn found_in(source: SecretSource) -> impl Fn(SecretKind) -> SecretMatch {
    move |kind| SecretMatch { kind, source }
}

fn compile_extra(
    extra: &[(SecretKind, String)],
) -> Result<Option<(RegexSet, Vec<SecretKind>)>, SecretPatternError> {
    if extra.is_empty() {
        return Ok(None);
    }
    let bad = |pattern: &str, e: regex::Error| SecretPatternError::BadPattern {
        pattern: pattern.to_owned(),
        message: e.to_string(),
    };
    // Compile one by one first so an error names the offending pattern.
    for (_, pattern) in extra {
        RegexBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .map_err(|e| bad(pattern, e))?;
    }
    let patterns: Vec<&str> = extra.iter().map(|(_, p)| p.as_str()).collect();
    let set = RegexSetBuilder::new(&patterns)
        .case_insensitive(true)
        .build()
        .map_err(|e| bad(&patterns.join(" | "), e))?;
    Ok(Some((set, extra.iter().map(|(k, _)| *k).collect())))
}

/// Where `rule` (whose first word matched at `i`) ends, if all its words match
/// within one clause.
fn rule_end(n: &Normalised, i: usize, rule: &Rule) -> Option<usize> {
    for (k, want) in rule.rest.iter().enumerate() {
        let j = i + 1 + k;
        if !n.same_clause(i, j) || !word_matches(n.word(j), want) {
            return None;
        }
    }
    Some(i + 1 + rule.rest.len())
}

/// `userpassword`, `stripeapikey`: an unmistakable term glued to a prefix.
fn glued_hit(word: &str, i: usize) -> Option<Hit> {
    GLUED_SUFFIXES
        .iter()
        .find(|(suffix, _)| word.len() > suffix.len() && word.ends_with(suffix))
        .map(|&(_, kind)| Hit {
            start: i,
            end: i + 1,
            kind,
            guard: Plain,
        })
}

fn refine_kind(n: &Normalised, hit: &Hit) -> SecretKind {
    if hit.guard != SecurityCode {
        return hit.kind;
    }
    let lo = hit.start.saturating_sub(CARD_REACH);
    let hi = (hit.end + CARD_REACH).min(n.len());
    let card_near = (lo..hi).any(|j| n.same_clause(j, hit.start) && base(n.word(j)) == "card");
    if card_near {
        K::CardSecurityCode
    } else {
        hit.kind
    }
}

// ---------------------------------------------------------------------------
// Context rules
// ---------------------------------------------------------------------------

fn accept(n: &Normalised, hit: &Hit, mode: Mode, stats: NameStats) -> bool {
    match mode {
        Mode::Name => accept_in_name(n, hit, stats),
        Mode::Text => accept_in_text(n, hit, false),
        Mode::Message => accept_in_text(n, hit, true),
    }
}

/// A name is a compact noun phrase: any modifier anywhere outside the term
/// makes the property metadata about the secret.
fn accept_in_name(n: &Normalised, hit: &Hit, stats: NameStats) -> bool {
    let inside = NameStats::of(n, hit.start..hit.end);
    if stats.modifiers > inside.modifiers {
        return false;
    }
    match hit.guard {
        Weak => stats.non_neutral == inside.non_neutral,
        Token => !n
            .prev(hit.start)
            .is_some_and(|p| in_list(TOKEN_LEAD_BLOCK, p)),
        Guard::Secret => secret_is_noun(n, hit),
        Plain | SecurityCode => true,
    }
}

/// Free text: only nearby words count; a message must also ask.
fn accept_in_text(n: &Normalised, hit: &Hit, must_ask: bool) -> bool {
    if metadata_after(n, hit) || blocked_before(n, hit) || metadata_of_term(n, hit) {
        return false;
    }
    let verb = ask_verb_before(n, hit.start);
    if (must_ask && verb.is_none()) || negated(n, hit.start, verb) {
        return false;
    }
    match hit.guard {
        Weak => weak_context(n, hit),
        Token => {
            let lead_blocked = n
                .prev(hit.start)
                .is_some_and(|p| in_list(TOKEN_LEAD_BLOCK, p));
            let short = n.short_clause(hit.start, SHORT_CLAUSE).is_some();
            !lead_blocked && (verb.is_some() || short || weak_context(n, hit))
        }
        Guard::Secret => secret_is_noun(n, hit),
        Plain | SecurityCode => true,
    }
}

/// "API key name", "password policy url", "password reset url": a metadata
/// word in the noun phrase right after the term (not past a comma:
/// "your SSN, date of birth").
fn metadata_after(n: &Normalised, hit: &Hit) -> bool {
    (hit.end..(hit.end + 2).min(n.len()))
        .take_while(|&j| {
            let w = n.word(j);
            n.same_phrase(j, hit.start) && !in_list(FUNCTION, w) && !in_list(DETERMINERS, w)
        })
        .any(|j| in_list(METADATA, n.word(j)))
}

/// "minimum password", "public key", "show password", "reset your password".
fn blocked_before(n: &Normalised, hit: &Hit) -> bool {
    let mut i = hit.start;
    for _ in 0..3 {
        let Some(w) = n.prev(i) else { return false };
        if !in_list(DETERMINERS, w) {
            return in_list(TEXT_PREV_BLOCK, w);
        }
        i -= 1;
    }
    false
}

/// "a name for your API key", "the length of the password".
fn metadata_of_term(n: &Normalised, hit: &Hit) -> bool {
    let mut i = hit.start;
    for _ in 0..3 {
        let Some(w) = n.prev(i) else { return false };
        i -= 1;
        if in_list(DETERMINERS, w) || in_list(OF_SKIPPABLE, w) {
            continue;
        }
        return matches!(w, "of" | "for" | "about" | "on")
            && n.prev(i).is_some_and(|m| in_list(METADATA, m));
    }
    false
}

/// The nearest asking verb shortly before `start`, in the same clause.
fn ask_verb_before(n: &Normalised, start: usize) -> Option<usize> {
    let lo = start.saturating_sub(ASK_REACH);
    (lo..start)
        .rev()
        .take_while(|&i| n.same_clause(i, start))
        .find(|&i| is_ask_at(n, i, start))
}

/// An asking verb, or "what is your / the …" right before the term.
fn is_ask_at(n: &Normalised, i: usize, term: usize) -> bool {
    let w = n.word(i);
    if in_list(ASK_VERBS, w) {
        return true;
    }
    let copula = matches!(n.word(i + 1), "is" | "s" | "are" | "was");
    let object = i + 2 == term || matches!(n.word(i + 2), "your" | "the" | "ur");
    w == "what" && i + 1 < term && copula && object
}

/// A negation shortly before the verb (or the term), in the same
/// comma-delimited phrase: "do not enter your password", "never share it".
fn negated(n: &Normalised, start: usize, verb: Option<usize>) -> bool {
    let anchor = verb.unwrap_or(start);
    let Some(phrase) = n.words.get(start).map(|w| w.phrase) else {
        return false;
    };
    (anchor.saturating_sub(NEGATION_REACH)..start)
        .filter(|&i| n.words.get(i).is_some_and(|w| w.phrase == phrase))
        .any(|i| in_list(NEGATIONS, n.word(i)))
}

/// A weak term in text counts when written as an acronym (`PIN`), introduced
/// by a possessive, an asking verb or a neutral word (`your pin`, `enter pin`,
/// `atm pin`), or alone among neutral words in a very short clause.
fn weak_context(n: &Normalised, hit: &Hit) -> bool {
    let caps = n
        .words
        .get(hit.start..hit.end)
        .is_some_and(|ws| ws.iter().any(|w| w.caps));
    let introduced = n.prev(hit.start).is_some_and(|p| {
        is_number(p) || in_list(POSSESSIVES, p) || in_list(NEUTRAL, p) || in_list(ASK_VERBS, p)
    });
    caps || introduced || short_and_neutral(n, hit)
}

fn short_and_neutral(n: &Normalised, hit: &Hit) -> bool {
    let Some(range) = n.short_clause(hit.start, NEUTRAL_CLAUSE) else {
        return false;
    };
    range
        .filter(|j| !(hit.start..hit.end).contains(j))
        .all(|j| is_neutral(n.word(j)))
}

/// `secret`, `secret_value`, "enter your secret here" are nouns;
/// `secret_santa`, "top secret project" are adjectives.
fn secret_is_noun(n: &Normalised, hit: &Hit) -> bool {
    if hit.end >= n.len() || !n.same_clause(hit.end, hit.start) {
        return true;
    }
    let next = n.word(hit.end);
    is_number(next)
        || in_list(SECRET_NOUN_NEXT, next)
        || in_list(FUNCTION, next)
        || in_list(DETERMINERS, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn detector() -> SecretFieldDetector {
        SecretFieldDetector::builtin()
    }

    fn name_kind(d: &SecretFieldDetector, name: &str) -> Option<SecretKind> {
        d.check_field(name, None, None).map(|m| {
            assert_eq!(m.source, SecretSource::Name, "{name}");
            m.kind
        })
    }

    fn words(s: &str) -> Vec<String> {
        let n = Normalised::new(s);
        (0..n.len()).map(|i| n.word(i).to_owned()).collect()
    }

    /// Property names that ask for a secret, with the kind expected.
    const DETECTED: &[(&str, SecretKind)] = &[
        ("password", K::Password),
        ("user_password", K::Password),
        ("newPassword", K::Password),
        ("confirm-password", K::Password),
        ("PASSWORD", K::Password),
        ("password2", K::Password),
        ("password_confirmation", K::Password),
        ("userpassword", K::Password),
        ("passphrase", K::Password),
        ("passcode", K::Password),
        ("pwd", K::Password),
        ("passwd", K::Password),
        ("login_pw", K::Password),
        ("credentials", K::Password),
        ("api_key", K::ApiKey),
        ("apiKey", K::ApiKey),
        ("API-Key", K::ApiKey),
        ("api key", K::ApiKey),
        ("x-api-key", K::ApiKey),
        ("ApiKey", K::ApiKey),
        ("apikey", K::ApiKey),
        ("APIKey", K::ApiKey),
        ("openaiApiKey", K::ApiKey),
        ("stripeapikey", K::ApiKey),
        ("secret_access_key", K::ApiKey),
        ("AWS_ACCESS_KEY", K::ApiKey),
        ("access_token", K::AccessToken),
        ("accessToken", K::AccessToken),
        ("bearer_token", K::AccessToken),
        ("bearer", K::AccessToken),
        ("auth-token", K::AccessToken),
        ("session_token", K::AccessToken),
        ("personal_access_token", K::AccessToken),
        ("github_pat", K::AccessToken),
        ("pat", K::AccessToken),
        ("github_token", K::AccessToken),
        ("token", K::AccessToken),
        ("id_token", K::AccessToken),
        ("jwt", K::AccessToken),
        ("refresh_token", K::RefreshToken),
        ("refreshToken", K::RefreshToken),
        ("client_secret", K::ClientSecret),
        ("clientSecret", K::ClientSecret),
        ("webhook_secret", K::ClientSecret),
        ("secret", K::ClientSecret),
        ("secret_value", K::ClientSecret),
        ("private_key", K::PrivateKey),
        ("privateKey", K::PrivateKey),
        ("ssh_key", K::PrivateKey),
        ("ssh_private_key", K::PrivateKey),
        ("pgp-private-key", K::PrivateKey),
        ("signing_key", K::PrivateKey),
        ("seed_phrase", K::SeedPhrase),
        ("recovery phrase", K::SeedPhrase),
        ("mnemonic", K::SeedPhrase),
        ("wallet_seed", K::SeedPhrase),
        ("recovery_words", K::SeedPhrase),
        ("secret_recovery_phrase", K::SeedPhrase),
        ("twelve_word_phrase", K::SeedPhrase),
        ("credit_card_number", K::CardNumber),
        ("creditCardNumber", K::CardNumber),
        ("debit-card-number", K::CardNumber),
        ("credit_card", K::CardNumber),
        ("card_number", K::CardNumber),
        ("card_no", K::CardNumber),
        ("cardNo", K::CardNumber),
        ("pan", K::CardNumber),
        ("cc_number", K::CardNumber),
        ("ccnum", K::CardNumber),
        ("card_number_last4", K::CardNumber),
        ("cvv", K::CardSecurityCode),
        ("cvc", K::CardSecurityCode),
        ("cvv2", K::CardSecurityCode),
        ("cardCVV2", K::CardSecurityCode),
        ("card_cid", K::CardSecurityCode),
        ("card_security_code", K::CardSecurityCode),
        ("cardCode", K::CardSecurityCode),
        ("iban", K::BankAccount),
        ("IBAN", K::BankAccount),
        ("account_number", K::BankAccount),
        ("accountNumber", K::BankAccount),
        ("routing_number", K::BankAccount),
        ("sort-code", K::BankAccount),
        ("bank_account", K::BankAccount),
        ("bank_account_number", K::BankAccount),
        ("swift_account", K::BankAccount),
        ("ssn", K::NationalId),
        ("SSN", K::NationalId),
        ("social_security_number", K::NationalId),
        ("national_id", K::NationalId),
        ("nationalInsuranceNumber", K::NationalId),
        ("tax_id", K::NationalId),
        ("taxId", K::NationalId),
        ("tin", K::NationalId),
        ("passport_number", K::NationalId),
        ("sin", K::NationalId),
        ("ssn_last4", K::NationalId),
        ("ssnLast4", K::NationalId),
        ("otp", K::OneTimeCode),
        ("totp", K::OneTimeCode),
        ("otp_code", K::OneTimeCode),
        ("2fa_code", K::OneTimeCode),
        ("2FACode", K::OneTimeCode),
        ("mfa-code", K::OneTimeCode),
        ("verification_code", K::OneTimeCode),
        ("verificationCode", K::OneTimeCode),
        ("one_time_code", K::OneTimeCode),
        ("one_time_password", K::OneTimeCode),
        ("authenticator_code", K::OneTimeCode),
        ("sms_code", K::OneTimeCode),
        ("six_digit_code", K::OneTimeCode),
        ("security_code", K::OneTimeCode),
        ("twoFactorCode", K::OneTimeCode),
        ("pin", K::Pin),
        ("PIN", K::Pin),
        ("userPIN", K::Pin),
        ("user_pin", K::Pin),
        ("pin_code", K::Pin),
        ("pinCode", K::Pin),
        ("PIN_NUMBER", K::Pin),
        ("atm_pin", K::Pin),
        ("new-pin", K::Pin),
        ("pin2", K::Pin),
        ("admin_pw", K::Password),
        ("backupCodes", K::OneTimeCode),
        ("otp_secret", K::OneTimeCode),
        ("csrf_token", K::AccessToken),
        ("password_reset_token", K::Password),
    ];

    /// Property names that do not ask for a secret.
    const NOT_DETECTED: &[&str] = &[
        "token_count",
        "max_tokens",
        "maxTokens",
        "tokens_used",
        "token_budget",
        "tokenBudget",
        "password_policy_url",
        "passwordPolicyUrl",
        "password_min_length",
        "max_password_length",
        "password_hint",
        "password_strength",
        "password_expiry",
        "password_rules",
        "password_requirements",
        "show_password",
        "forgot_password",
        "has_api_key",
        "passwordless",
        "author_name",
        "key_name",
        "keyboard_layout",
        "monkey",
        "turkey",
        "primary_key_column",
        "sort_key",
        "api_key_name",
        "apiKeyName",
        "api_key_id",
        "access_key_id",
        "api_key_prefix",
        "api-key-url",
        "public_key",
        "publicKey",
        "public_key_fingerprint",
        "ssh_public_key",
        "ssh_key_fingerprint",
        "public_api_key",
        "card_holder_name",
        "cardholder",
        "card_type",
        "card_brand",
        "credit_card_type",
        "expiry_month",
        "card_expiry",
        "pinned",
        "pin_to_top",
        "pinToTop",
        "shipping_address",
        "spinner",
        "spinning",
        "pink",
        "mapping",
        "opinion",
        "happiness",
        "passenger",
        "passport_photo_url",
        "passport",
        "compass",
        "bypass_cache",
        "secretary",
        "secret_santa_group",
        "otp_enabled",
        "otpEnabled",
        "mfa_enabled",
        "account_name",
        "account_type",
        "accounting_period",
        "description",
        "session_timeout",
        "session_id",
        "token_expiry",
        "tokenExpiry",
        "token_type",
        "refresh_interval",
        "access_level",
        "tokenizer",
        "next_page_token",
        "page_token",
        "cvv_help_url",
        "verification_code_length",
        "pin_code_postal",
        "national_id_type",
        "email",
        "username",
        "display_name",
        "swift_code",
        "bic",
        "card",
        "key",
        "code",
        "pan_speed",
        "sin_wave",
        "password_changed_at",
        "credential_id",
        "otp_channel",
        "jwt_audience",
        "mnemonic_language",
        "shipping_pincode",
        "design_token",
        "erc20_token",
        "token_symbol",
        "private_key_path",
        "signing_key_id",
        "", // degenerate input
        "___",
    ];

    #[test]
    fn table_counts_meet_the_brief() {
        assert!(DETECTED.len() >= 40);
        assert!(NOT_DETECTED.len() >= 40);
    }

    #[test]
    fn detects_secret_names() {
        let d = detector();
        let failures: Vec<String> = DETECTED
            .iter()
            .filter(|(name, kind)| name_kind(&d, name) != Some(*kind))
            .map(|(name, kind)| format!("{name}: want {kind:?}, got {:?}", name_kind(&d, name)))
            .collect();
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn ignores_non_secret_names() {
        let d = detector();
        let failures: Vec<String> = NOT_DETECTED
            .iter()
            .filter_map(|name| name_kind(&d, name).map(|k| format!("{name}: got {k:?}")))
            .collect();
        assert!(failures.is_empty(), "{failures:#?}");
    }

    /// The same words in every common spelling give the same answer.
    #[test]
    fn spelling_variants_agree() {
        let d = detector();
        let cases = [
            ("api_key", Some(K::ApiKey)),
            ("personal_access_token", Some(K::AccessToken)),
            ("credit_card_number", Some(K::CardNumber)),
            ("one_time_password", Some(K::OneTimeCode)),
            ("user_pin", Some(K::Pin)),
            ("api_key_name", None),
            ("token_count", None),
            ("password_policy_url", None),
        ];
        for (snake, want) in cases {
            for variant in spellings(snake) {
                assert_eq!(name_kind(&d, &variant), want, "{variant} (from {snake})");
            }
        }
    }

    /// snake, kebab, spaced, dotted, SCREAMING, camel and Pascal spellings.
    fn spellings(snake: &str) -> Vec<String> {
        let parts: Vec<&str> = snake.split('_').collect();
        let cap = |w: &str| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        };
        let pascal: String = parts.iter().map(|w| cap(w)).collect();
        let camel = parts[0].to_owned() + &parts[1..].iter().map(|w| cap(w)).collect::<String>();
        vec![
            snake.to_owned(),
            parts.join("-"),
            parts.join(" "),
            parts.join("."),
            snake.to_uppercase(),
            camel,
            pascal,
        ]
    }

    #[test]
    fn normalises_names_into_words() {
        let cases: &[(&str, &[&str])] = &[
            ("APIKey", &["api", "key"]),
            ("userPIN", &["user", "pin"]),
            ("cardCVV2", &["card", "cvv2"]),
            ("x-api-key", &["x", "api", "key"]),
            ("api.key name", &["api", "key", "name"]),
            ("2FACode", &["2fa", "code"]),
            ("cvv2Code", &["cvv2", "code"]),
            ("listAPIs", &["list", "apis"]),
            ("userPINs", &["user", "pins"]),
            ("ssnLast4", &["ssn", "last4"]),
            ("HTTPServer", &["http", "server"]),
            ("Größe_Schlüssel", &["größe", "schlüssel"]),
            ("  __  ", &[]),
        ];
        for (input, want) in cases {
            assert_eq!(words(input), *want, "{input}");
        }
    }

    #[test]
    fn invisible_and_lookalike_characters_do_not_hide_a_word() {
        let cases: &[(&str, &[&str])] = &[
            ("pass\u{200B}word", &["password"]),
            ("pass\u{00AD}word", &["password"]),
            ("p\u{0430}ssw\u{043E}rd", &["password"]),
            ("\u{FF30}\u{FF29}\u{FF2E}", &["pin"]),
            ("\u{200B}api_key\u{FEFF}", &["api", "key"]),
            ("\u{200B}", &[]),
            ("\u{3164} pin", &["pin"]),
            ("x \u{0301}", &["x"]),
            ("caf\u{E9}_pin", &["caf\u{E9}", "pin"]),
            // Non-confusable scripts are left as they are (lowercased).
            (
                "\u{30D1}\u{30B9}\u{30EF}\u{30FC}\u{30C9}",
                &["\u{30D1}\u{30B9}\u{30EF}\u{30FC}\u{30C9}"],
            ),
            ("\u{416}\u{414}", &["\u{436}\u{434}"]),
        ];
        for (input, want) in cases {
            assert_eq!(words(input), *want, "{input:?}");
        }
        let d = detector();
        assert_eq!(name_kind(&d, "api\u{200B}key"), Some(K::ApiKey));
        assert_eq!(name_kind(&d, "\u{0430}pi_key"), Some(K::ApiKey));
        let title = d.check_field("v", Some("Your pa\u{200D}ssword"), None);
        assert_eq!(title.map(|m| m.kind), Some(K::Password));
    }

    #[test]
    fn normalised_text_is_space_joined_words() {
        assert_eq!(Normalised::new("X-Api-KEY").text, "x api key");
        assert_eq!(Normalised::new("myAPIKey.v2").text, "my api key v2");
    }

    #[test]
    fn clauses_split_on_sentences_not_dotted_names() {
        let n = Normalised::new("Use github.com. Then go");
        let clauses: Vec<usize> = n.words.iter().map(|w| w.clause).collect();
        assert_eq!(clauses, [0, 0, 0, 1, 1]);
    }

    #[test]
    fn titles_and_descriptions() {
        let d = detector();
        let field = |name, title, desc| d.check_field(name, title, desc);
        let title = |kind| {
            Some(SecretMatch {
                kind,
                source: SecretSource::Title,
            })
        };
        let desc = |kind| {
            Some(SecretMatch {
                kind,
                source: SecretSource::Description,
            })
        };
        assert_eq!(
            field("value", Some("Your password"), None),
            title(K::Password)
        );
        assert_eq!(
            field(
                "value",
                None,
                Some("Paste your GitHub personal access token")
            ),
            desc(K::AccessToken)
        );
        assert_eq!(
            field("count", None, Some("Number of tokens to generate")),
            None
        );
        assert_eq!(field("v", Some("API key name"), None), None);
        assert_eq!(field("v", Some("Minimum password length"), None), None);
        assert_eq!(field("v", None, Some("A name for your API key")), None);
        assert_eq!(
            field("v", None, Some("The length of the password, in characters")),
            None
        );
        assert_eq!(
            field("v", None, Some("Do not enter your password here")),
            None
        );
        assert_eq!(
            field("v", None, Some("Never share your API key with anyone")),
            None
        );
        assert_eq!(field("v", Some("Pin to top"), None), None);
        assert_eq!(
            field("v", None, Some("Pin the note to the top of the list")),
            None
        );
        assert_eq!(field("v", Some("Enter your PIN"), None), title(K::Pin));
        assert_eq!(field("v", Some("PIN"), None), title(K::Pin));
        assert_eq!(field("v", Some("Card PAN"), None), title(K::CardNumber));
        assert_eq!(field("v", Some("Secret Santa group"), None), None);
        assert_eq!(
            field("v", Some("Slack bot token"), None),
            title(K::AccessToken)
        );
        assert_eq!(
            field("v", None, Some("Each token costs one credit today")),
            None
        );
        assert_eq!(
            field("v", None, Some("The page token for the next call")),
            None
        );
        assert_eq!(
            field("v", None, Some("Security code on the back of your card")),
            desc(K::CardSecurityCode)
        );
        assert_eq!(
            field("v", Some("Payment: credit card or invoice"), None),
            None
        );
        assert_eq!(field("v", Some("Show password"), None), None);
        assert_eq!(field("v", Some("Public key"), None), None);
        assert_eq!(
            field("v", Some("Password (at least 8 characters)"), None),
            title(K::Password)
        );
        assert_eq!(
            field("room", Some("Room"), Some("Which room do you want?")),
            None
        );
        assert_eq!(
            field("v", Some("Use your GitHub token"), None),
            title(K::AccessToken)
        );
        assert_eq!(field("v", Some("The sin of pride"), None), None);
        assert_eq!(field("v", Some("Your SIN"), None), title(K::NationalId));
        assert_eq!(field("v", Some("Mnemonic device to remember"), None), None);
        assert_eq!(
            field("v", Some("Your mnemonic"), None),
            title(K::SeedPhrase)
        );
        assert_eq!(field("v", Some("Postal PIN code"), None), None);
        assert_eq!(field("v", Some("Reset your password"), None), None);
        assert_eq!(field("v", Some("Password hint"), None), None);
        assert_eq!(field("v", None, Some("Hint for your new password")), None);
    }

    #[test]
    fn name_is_reported_before_title_and_description() {
        let d = detector();
        let m = d.check_field("api_key", Some("Password"), Some("Your SSN"));
        assert_eq!(
            m,
            Some(SecretMatch {
                kind: K::ApiKey,
                source: SecretSource::Name
            })
        );
        let m = d.check_field("value", Some("Nickname"), Some("Your SSN"));
        assert_eq!(
            m,
            Some(SecretMatch {
                kind: K::NationalId,
                source: SecretSource::Description
            })
        );
    }

    #[test]
    fn messages_that_ask_for_secrets() {
        let d = detector();
        let asks = [
            ("Please enter your password to continue.", K::Password),
            ("Paste your API key below", K::ApiKey),
            (
                "Type the 6-digit code we sent to your phone",
                K::OneTimeCode,
            ),
            ("Provide your credit card number and expiry", K::CardNumber),
            ("What is your PIN?", K::Pin),
            ("What's your SSN", K::NationalId),
            ("Re-enter your passphrase", K::Password),
            (
                "To finish, share the seed phrase of your wallet",
                K::SeedPhrase,
            ),
            ("Don't worry, just enter your password", K::Password),
            (
                "Confirm the CVV on the back of your card",
                K::CardSecurityCode,
            ),
            ("Tell us your IBAN so we can pay you", K::BankAccount),
            ("Enter your SSN, date of birth and address", K::NationalId),
            ("Enter your name, password and email", K::Password),
            ("Enter the code from your authenticator app", K::OneTimeCode),
            ("Please log in with your password", K::Password),
        ];
        for (message, kind) in asks {
            let want = Some(SecretMatch {
                kind,
                source: SecretSource::Message,
            });
            assert_eq!(d.check_message(message), want, "{message}");
        }
    }

    #[test]
    fn messages_that_only_mention_secrets() {
        let d = detector();
        let quiet = [
            "Your password was changed last week. Which room?",
            "We will never ask you to share your password.",
            "Do not paste your API key into this form.",
            "Your API key expires tomorrow. Pick a plan.",
            "How many tokens should the summary use?",
            "Enter a name for your new API key",
            "Enter the minimum password length",
            "Pin this conversation? Enter yes or no.",
            "What is a CVV? It is printed on cards.",
            "Choose your favourite secret santa gift",
            "Enter the number of tokens to generate",
            "Enter your email so we can send you a link to reset your password",
            "Enter your email. We never share your password.",
            "Your session token expired; please log in again",
            "Send us a photo of your passport",
            "",
        ];
        for message in quiet {
            assert_eq!(d.check_message(message), None, "{message}");
        }
    }

    #[test]
    fn allow_names_are_never_flagged() {
        let allow = vec!["pin_code".to_owned(), "apiKey".to_owned()];
        let d = SecretFieldDetector::new(&[], &allow).expect("no patterns");
        assert_eq!(d.check_field("pinCode", Some("Password"), None), None);
        assert_eq!(d.check_field("API_KEY", None, None), None);
        assert!(d.check_field("password", None, None).is_some());
    }

    #[test]
    fn extra_patterns_add_kinds() {
        let extra = vec![
            (K::Password, r"\bpassword hint\b".to_owned()),
            (K::ApiKey, r"^license key$".to_owned()),
        ];
        let d = SecretFieldDetector::new(&extra, &[]).expect("valid patterns");
        let hit = |kind, source| Some(SecretMatch { kind, source });
        assert_eq!(
            d.check_field("passwordHint", None, None),
            hit(K::Password, SecretSource::Name)
        );
        assert_eq!(
            d.check_field("x", Some("License KEY"), None),
            hit(K::ApiKey, SecretSource::Title)
        );
        assert_eq!(d.check_field("license_key_type", None, None), None);
        // Extra patterns apply to fields only, not to the message.
        assert_eq!(d.check_message("Enter your license key"), None);
    }

    #[test]
    fn bad_extra_pattern_is_reported() {
        let extra = vec![(K::Pin, "ok".to_owned()), (K::Pin, "(unclosed".to_owned())];
        match SecretFieldDetector::new(&extra, &[]) {
            Err(SecretPatternError::BadPattern { pattern, message }) => {
                assert_eq!(pattern, "(unclosed");
                assert!(!message.is_empty());
            }
            Ok(_) => panic!("pattern should not compile"),
        }
    }

    #[test]
    fn word_lists_are_sorted_for_binary_search() {
        let lists: &[(&str, &[&str])] = &[
            ("METADATA", METADATA),
            ("NAME_FLAGS", NAME_FLAGS),
            ("TEXT_PREV_BLOCK", TEXT_PREV_BLOCK),
            ("FUNCTION", FUNCTION),
            ("POSSESSIVES", POSSESSIVES),
            ("DETERMINERS", DETERMINERS),
            ("NEGATIONS", NEGATIONS),
            ("ASK_VERBS", ASK_VERBS),
            ("NEUTRAL", NEUTRAL),
            ("TOKEN_LEAD_BLOCK", TOKEN_LEAD_BLOCK),
            ("SECRET_NOUN_NEXT", SECRET_NOUN_NEXT),
            ("NUMBER_WORDS", NUMBER_WORDS),
            ("OF_SKIPPABLE", OF_SKIPPABLE),
        ];
        for (name, list) in lists {
            assert!(
                list.windows(2).all(|w| w[0] < w[1]),
                "{name} must be sorted and unique"
            );
        }
    }

    #[test]
    fn kind_and_source_names_are_stable() {
        let names: Vec<&str> = SecretKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "password",
                "api_key",
                "access_token",
                "refresh_token",
                "client_secret",
                "private_key",
                "seed_phrase",
                "card_number",
                "card_security_code",
                "bank_account",
                "national_id",
                "one_time_code",
                "pin",
            ]
        );
        for kind in SecretKind::ALL {
            let json = serde_json::to_string(&kind).expect("serialises");
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        let sources = [
            SecretSource::Name,
            SecretSource::Title,
            SecretSource::Description,
            SecretSource::Message,
        ];
        let sources: Vec<&str> = sources.iter().map(|s| s.as_str()).collect();
        assert_eq!(sources, ["name", "title", "description", "message"]);
    }

    #[test]
    fn every_rule_is_reachable_by_its_own_words() {
        let d = detector();
        for &(phrase, _, _) in RULES {
            let n = Normalised::new(&phrase.replace('#', "6"));
            assert!(d.hit_at(&n, 0).is_some(), "{phrase}");
        }
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(name in ".{0,64}", text in ".{0,200}") {
            let d = detector();
            let _ = d.check_field(&name, Some(&text), Some(&text));
            let _ = d.check_message(&text);
        }

        #[test]
        fn words_are_lowercase_and_nonempty(input in ".{0,80}") {
            let n = Normalised::new(&input);
            for i in 0..n.len() {
                let w = n.word(i);
                prop_assert!(!w.is_empty());
                prop_assert!(!w.contains(' '));
                prop_assert_eq!(w.to_lowercase(), w);
            }
        }

        #[test]
        fn padding_does_not_change_a_name(
            i in 0..DETECTED.len(),
            pad in prop::sample::select(vec!["_", "-", " ", "__", "."]),
        ) {
            let (name, kind) = DETECTED[i];
            let padded = format!("{pad}{name}{pad}");
            prop_assert_eq!(name_kind(&detector(), &padded), Some(kind));
        }
    }
}
