//! Detects form fields (and form messages) that ask a person for a secret.
//!
//! The MCP spec says passwords, keys, tokens and payment data must be collected
//! through URL-mode elicitation, never through a form that travels through the
//! model host. This module decides, from the words an upstream used, whether a
//! form-mode property is *asking for* such a secret.
//!
//! # How it works
//!
//! 1. **What is read.** Everything a person reads for a field and its
//!    request ([`FieldText`]): the property name, `title`, `description`, a
//!    string `default`, `examples`, option labels (`oneOf`/`anyOf` titles,
//!    `enumNames`), the request's `message`, and the request's key in
//!    `inputRequests` (for fields whose own name says nothing: key `password`,
//!    field `value`). A term split between the title and the description
//!    ("Card" / "Number on the front") is found by reading the end of one and
//!    the start of the other as one text.
//! 2. **Normalisation** ([`crate::policy::detect`]): NFKC, invisible
//!    characters, case and accents folded, camelCase / snake / kebab / dotted
//!    words split, look-alike letters (`pаsswоrd`), digits and symbols for
//!    letters (`p4ssw0rd`, `pa$$word`), joined words (`userpassword`, `newpin`,
//!    `kreditkartennummer`) and CJK runs split against the known words.
//! 3. **Terms** (`data/secrets/terms/*.toml`): word sequences in English,
//!    German, French, Spanish, Portuguese, Italian, Dutch, Polish, Russian,
//!    Japanese, Chinese and Korean for every [`SecretKind`], found among the
//!    words in one Aho-Corasick pass. Matching is by whole words, so
//!    `keyboard`, `monkey`, `pinned`, `spinner`, `passenger`, `secretary` and
//!    `tokenizer` never match. The longest term at a position wins (`one time
//!    password` is a one-time code, not a password). Operators add terms per
//!    kind (`[secret_fields] extra_terms`).
//! 4. **Context** (`data/secrets/context.toml`). A term alone is not enough;
//!    the words around it decide whether the text asks for the secret or
//!    talks *about* it:
//!    * In a property **name**, any metadata word (`policy`, `url`, `hint`,
//!      `length`, `min`, `count`, `name`, `id`, `type`, `fingerprint`,
//!      `public`, …) or flag word (`has`, `is`, `show`, `enabled`, `used`,
//!      `forgot`, …) anywhere outside the term makes it metadata:
//!      `password_policy_url`, `api_key_id`, `token_budget`, `otp_enabled`.
//!    * In a **title, description, default or example** only nearby words
//!      count: a metadata word right after the term (`API key name`,
//!      `パスワードの長さ`), a blocking word right before it (`minimum
//!      password`, `public key`, `reset your password`, `忘记密码`), an "X of
//!      the TERM" construction (`a name for your API key`, `longitud de la
//!      contraseña`), or a negation (`do not enter your password`, `nunca
//!      comparta su contraseña`, `入力しないでください`). No asking verb is
//!      needed: a title that names a secret describes its field.
//!    * In the **message** and an **option label** the same rules apply and
//!      an asking verb must come shortly before the term (`enter`, `paste`,
//!      `geben Sie`, `saisissez`, `введите`, `请输入`, …) or shortly after it
//!      in the same phrase (`パスワードを入力`, `비밀번호를 입력하세요`).
//!    * Guards for ambiguous words (per term in the data): short acronyms
//!      (`pin`, `pan`, `pat`, `sin`, `tin`, `clave`, `암호`) count in a name
//!      only among neutral words and in text only in capitals, after a
//!      possessive, an asking verb or a neutral word, or in a very short text;
//!      a bare `token` not after paging / LLM words (`next_page_token`, `max
//!      tokens`); a bare `secret` or `mnemonic` only as a noun; `security
//!      code` is a card code when a card is named nearby, else a one-time
//!      code; card-only terms (`expiry date`, `MM/YY`, `有効期限`) count only
//!      when a card is named in the field or request and nothing else owns
//!      them (`passport expiry date`).
//! 5. **Described, not named** (`described_*` and the place lists in
//!    `context.toml`). A generic noun in a title, description or message
//!    (`number`, `digits`, `code`, `words`, `Nummer`, `código`, `コード`, …)
//!    asks for a secret when the same clause says where that secret lives,
//!    and the place decides which: an SMS or an authenticator app (a
//!    one-time code: "your one-time code from the SMS", "Код из СМС"), an ATM
//!    (a PIN), the back of a card with a card named (its security code:
//!    "the 3 digits on the back of your card"), the reader's own card (its
//!    number: "the long number embossed on your Visa", "Die lange Nummer auf
//!    Ihrer Visa-Karte"), a wallet (a seed phrase), logging in (a password).
//!    A noun that belongs to something else is not one ("order number",
//!    "promo code", "numéro de commande", "номер заказа"), nor a card that is
//!    not a payment card ("library card", "travel visa"), nor a place that
//!    modifies another noun ("the login page", "wallet transactions"); a card
//!    after the noun must be reached through an article or possessive ("the
//!    number on your Visa", not "the number of cards"). Names never count
//!    this way: a field called `number` says nothing by itself.
//!
//! The detector is a safety net for careless or naive servers and for obvious
//! phishing; a determined server can always paraphrase, which is why the
//! values typed into ordinary fields are also scanned for secrets later in
//! the pipeline (the MRTR boundary's `value_scan`).
//!
//! # Decisions on ambiguous names
//!
//! * `password_hint`, `password_min_length`, `password_policy_url`,
//!   `token_expiry`, `cvv_help_url` — not detected (metadata about a secret).
//! * `otp_enabled`, `has_api_key`, `show_password`, `forgot_password` — not
//!   detected: settings and flags, not the secret.
//! * `ssn_last4`, `card_number_last4` — **detected**: a fragment of a
//!   national id or card number is still that data.
//! * `card_expiry`, "Expiry (MM/YY)" next to a card — **detected**
//!   (`card_expiry`): the expiry date is card data; `expiry_month` alone, or
//!   a passport's expiry, is not.
//! * `secret_santa_group`, `top secret project` — not detected.
//! * `passport_photo_url`, bare `passport` — not detected; `passport number` is.
//! * `pin_code` — a PIN, unless `postal`, `zip`, `shipping`, … is next to it.
//! * `token` alone, `github_token`, `csrf_token`, `password_reset_token` —
//!   detected; `next_page_token`, `design_token`, `token_symbol` — not.
//! * `credit_card` alone — detected as a card number; "Pay by credit card" in
//!   a title — not (no possessive or asking verb before it).
//! * `ssh_key` — a private key; `ssh_public_key` / `public_key` — not.
//! * `api_key_id`, `access_key_id`, `api_key_name` — not detected.
//! * A key `password_reset` whose only field is `email` — not detected: the
//!   key counts only for fields with generic names (`value`, `input`, `code`).
//!
//! # Cost
//!
//! The tables are compiled once (the shipped ones on first use). A check
//! normalises each text once (ASCII text skips NFKC), runs one Aho-Corasick
//! pass for all terms of all languages, and looks at context words only
//! around a term found; a text without any term costs the normalisation and
//! that pass. Operator regexes are one precompiled `RegexSet`, run only over
//! the normalised name, title and description.

mod context;
mod fields;
mod tables;
pub mod values;

#[cfg(test)]
mod corpus_tests;
/// Build the shipped tables of this module's parts now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    tables::warm();
}

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::Arc;

use regex::{RegexBuilder, RegexSet, RegexSetBuilder};
use serde::{Deserialize, Serialize};

pub(crate) use fields::FieldText;
pub(crate) use tables::TableError;

use crate::policy::detect::{Normalised, Splitting};

/// The kind of secret a field asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SecretKind {
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
    CardExpiry,
}

impl SecretKind {
    /// Every kind, in declaration order.
    pub(crate) const ALL: [SecretKind; 14] = [
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
        SecretKind::CardExpiry,
    ];

    /// Stable snake_case name, used in refusal reasons, logs and metrics.
    pub(crate) fn as_str(self) -> &'static str {
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
            SecretKind::CardExpiry => "card_expiry",
        }
    }

    /// The kind with this [`Self::as_str`] name.
    pub(crate) fn from_name(name: &str) -> Option<SecretKind> {
        SecretKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// Where the secret-asking wording was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SecretSource {
    Name,
    Title,
    Description,
    Message,
    /// The input request's key in `inputRequests`.
    Key,
    Default,
    Example,
    OptionLabel,
    /// A term that starts in the title and ends in the description.
    TitleAndDescription,
    /// The request's key and a generic field name together (`card` + `number`).
    KeyAndName,
}

impl SecretSource {
    /// Stable lowercase name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SecretSource::Name => "name",
            SecretSource::Title => "title",
            SecretSource::Description => "description",
            SecretSource::Message => "message",
            SecretSource::Key => "key",
            SecretSource::Default => "default",
            SecretSource::Example => "example",
            SecretSource::OptionLabel => "option_label",
            SecretSource::TitleAndDescription => "title_and_description",
            SecretSource::KeyAndName => "key_and_name",
        }
    }
}

/// A field or message that asks for a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SecretMatch {
    pub(crate) kind: SecretKind,
    pub(crate) source: SecretSource,
}

/// Operator (or shipped) detection settings that cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretPatternError {
    #[error("bad pattern {pattern:?}: {message}")]
    BadPattern { pattern: String, message: String },
    #[error(transparent)]
    Terms(#[from] TableError),
}

/// Built once from policy configuration (never on the hot path).
#[derive(Debug, Clone)]
pub(crate) struct SecretFieldDetector {
    tables: Arc<tables::Tables>,
    /// Operator patterns, one set, with the kind of each pattern by index.
    extra: Option<(RegexSet, Vec<SecretKind>)>,
    /// Normalised property names (and request keys) that are never flagged.
    allow: HashSet<String>,
    /// Which detector this is, for answers cached beside a listing
    /// (`arguments/contract.rs`): unique per build, shared by a clone.
    id: u64,
}

/// The next [`SecretFieldDetector::id`].
static NEXT_DETECTOR: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl SecretFieldDetector {
    /// The shipped terms plus operator rules.
    ///
    /// `extra`: (kind, regex) pairs, matched case-insensitively against the
    /// normalised "word word word" text of a property's name, title and
    /// description (not the message). `allow_names`: property names that are
    /// never flagged, compared after normalisation (`apiKey` = `api_key`).
    #[cfg(test)]
    pub(crate) fn new(
        extra: &[(SecretKind, String)],
        allow_names: &[String],
    ) -> Result<Self, SecretPatternError> {
        Self::with_terms(extra, &[], allow_names)
    }

    /// Like [`Self::new`], with extra terms per kind (phrases in the syntax
    /// of the shipped term files, counted as unambiguous).
    pub(crate) fn with_terms(
        extra: &[(SecretKind, String)],
        extra_terms: &[(SecretKind, String)],
        allow_names: &[String],
    ) -> Result<Self, SecretPatternError> {
        let tables = match extra_terms.is_empty() {
            true => tables::builtin()?,
            false => Arc::new(tables::build(extra_terms)?),
        };
        let allow = allow_names
            .iter()
            .map(|n| Normalised::new(n, &tables.lexicon, Splitting::Names).text)
            .collect();
        Ok(SecretFieldDetector {
            tables,
            extra: compile_extra(extra)?,
            allow,
            id: NEXT_DETECTOR.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// The shipped terms only.
    #[cfg(test)]
    pub(crate) fn builtin() -> Result<Self, SecretPatternError> {
        Self::new(&[], &[])
    }

    /// Checks one form property by its name, title and description.
    #[cfg(test)]
    pub(crate) fn check_field(
        &self,
        name: &str,
        title: Option<&str>,
        description: Option<&str>,
    ) -> Option<SecretMatch> {
        let field = FieldText {
            title,
            description,
            ..FieldText::named(name)
        };
        self.check_form("", None, &[field]).fields.pop().flatten()
    }

    /// Checks a form's message: it triggers only when it asks for a secret
    /// (an asking verb near a secret term), not when it mentions one.
    #[cfg(test)]
    pub(crate) fn check_message(&self, message: &str) -> Option<SecretMatch> {
        self.check_form("", Some(message), &[]).message
    }

    /// The secret a property says it holds, by its name (and its schema's
    /// title and description, when given): for a call's arguments and a
    /// result's members.
    pub(crate) fn property_kind(&self, field: FieldText<'_>) -> Option<SecretKind> {
        self.check_form("", None, &[field])
            .fields
            .pop()
            .flatten()
            .map(|m| m.kind)
    }

    /// Which detector this is: two with the same id answer alike.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    fn extra_match(&self, n: &Normalised) -> Option<SecretKind> {
        let (set, kinds) = self.extra.as_ref()?;
        let index = set.matches(&n.text).iter().next()?;
        kinds.get(index).copied()
    }
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
