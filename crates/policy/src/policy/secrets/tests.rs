//! Unit tests of secret-field detection (names, texts, messages, settings).

use super::tables::{self, Entry};
use super::*;
use crate::policy::detect::{parse_phrase, Normalised};
use proptest::prelude::*;
use SecretKind as K;

fn detector() -> SecretFieldDetector {
    SecretFieldDetector::builtin().expect("shipped terms compile")
}

fn name_kind(d: &SecretFieldDetector, name: &str) -> Option<SecretKind> {
    d.check_field(name, None, None).map(|m| {
        assert_eq!(m.source, SecretSource::Name, "{name}");
        m.kind
    })
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
    ("card_expiry", K::CardExpiry),
    ("cardExpiryDate", K::CardExpiry),
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
fn invisible_and_lookalike_characters_do_not_hide_a_word() {
    let d = detector();
    let words = |s: &str| {
        let n = Normalised::new(s, &d.tables.lexicon, Splitting::Names);
        (0..n.len())
            .map(|i| n.word(i).to_owned())
            .collect::<Vec<_>>()
    };
    let cases: &[(&str, &[&str])] = &[
        ("pass\u{200B}word", &["password"]),
        ("pass\u{00AD}word", &["password"]),
        ("p\u{0430}ssw\u{043E}rd", &["password"]),
        ("\u{FF30}\u{FF29}\u{FF2E}", &["pin"]),
        ("\u{200B}api_key\u{FEFF}", &["api", "key"]),
        ("\u{200B}", &[]),
        ("\u{3164} pin", &["pin"]),
        ("x \u{0301}", &["x"]),
        ("caf\u{E9}_pin", &["cafe", "pin"]),
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
    assert_eq!(name_kind(&d, "api\u{200B}key"), Some(K::ApiKey));
    assert_eq!(name_kind(&d, "\u{0430}pi_key"), Some(K::ApiKey));
    let title = d.check_field("v", Some("Your pa\u{200D}ssword"), None);
    assert_eq!(title.map(|m| m.kind), Some(K::Password));
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
        // server-everything's elicitation demo: a negated verb over a list.
        "Your favorite integer (do not give us your phone number, pin, or other sensitive info)",
        "Never send us your password, PIN or one-time code; we do not need them.",
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
fn a_field_that_says_not_to_enter_a_secret_asks_for_none() {
    let d = detector();
    let description = Some(
        "Your favorite integer (do not give us your phone number, pin, or other sensitive info)",
    );
    assert_eq!(d.check_field("favoriteNumber", None, description), None);
    // Asking still counts with the same list: the verb is not negated.
    let asked = Some("Give us your phone number, pin, or other details");
    assert!(d.check_field("details", None, asked).is_some());
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
        Ok(_) | Err(SecretPatternError::Terms(_)) => panic!("pattern should not compile"),
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
            "card_expiry",
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
        SecretSource::Key,
        SecretSource::Default,
        SecretSource::Example,
        SecretSource::OptionLabel,
        SecretSource::TitleAndDescription,
        SecretSource::KeyAndName,
    ];
    let sources: Vec<&str> = sources.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        sources,
        [
            "name",
            "title",
            "description",
            "message",
            "key",
            "default",
            "example",
            "option_label",
            "title_and_description",
            "key_and_name"
        ]
    );
    for kind in SecretKind::ALL {
        assert_eq!(SecretKind::from_name(kind.as_str()), Some(kind));
    }
}

#[test]
fn shipped_tables_compile_without_duplicates() {
    let t = tables::builtin().expect("shipped terms compile");
    assert!(
        t.phrases.duplicates().is_empty(),
        "{:?}",
        t.phrases.duplicates()
    );
    assert!(t.phrases.len() > 900, "{} phrases", t.phrases.len());
}

/// Every shipped term is found when it is the whole text (`#` as `6`).
#[test]
fn every_term_is_reachable_by_its_own_words() {
    let t = tables::builtin().expect("shipped terms compile");
    let mut missing = Vec::new();
    for (raw, kind, _) in tables::term_entries(&[]).expect("terms") {
        for p in parse_phrase(&raw).expect("phrase") {
            let mut text = p.text.clone();
            if p.number_lead {
                text = format!("6 {text}");
            }
            if p.stem {
                text.push('x');
            }
            let n = Normalised::new(&text, &t.lexicon, Splitting::Names);
            let mut hits = Vec::new();
            t.phrases.find(&n, |w| t.is_number(w), &mut hits);
            let ok = hits
                .iter()
                .any(|h| h.start == 0 && matches!(*h.value, Entry::Term(k, _) if k == kind));
            if !ok {
                missing.push(format!("{raw:?} as {text:?} → {:?}", n.text));
            }
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
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
        let d = detector();
        let n = Normalised::new(&input, &d.tables.lexicon, Splitting::Names);
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

#[test]
fn the_key_and_a_generic_name_are_read_together() {
    let d = detector();
    let found = |key: &str, name: &str| {
        d.check_form(key, None, &[FieldText::named(name)]).fields[0].map(|m| (m.kind, m.source))
    };
    assert_eq!(
        found("cc", "number"),
        Some((K::CardNumber, SecretSource::KeyAndName))
    );
    assert_eq!(
        found("password", "value"),
        Some((K::Password, SecretSource::Key))
    );
    assert_eq!(found("password_reset", "email"), None);
    assert_eq!(found("contact", "value"), None);
}

/// The compiled shipped tables stay small (they are shared by every policy
/// without extra terms).
#[test]
fn compiled_tables_fit_a_memory_budget() {
    let t = tables::builtin().expect("shipped terms compile");
    let bytes = t.phrases.memory_usage();
    println!("secret phrases: {bytes} bytes");
    assert!(bytes < 4 << 20, "{bytes} bytes");
}

/// Secrets described rather than named (issue 18), in every carrier a person
/// reads (title, description, the form's message with an asking verb), under
/// innocuous field names, in several spellings: each is found, as its kind.
#[test]
fn described_secrets_are_found_in_every_carrier_and_spelling() {
    let d = detector();
    let described = [
        ("the long number embossed on your Visa", K::CardNumber),
        (
            "the 16 digits printed on the front of your debit card",
            K::CardNumber,
        ),
        ("the 3 digits on the back of your card", K::CardSecurityCode),
        ("your one-time code from the SMS", K::OneTimeCode),
        ("the 6 digits we just texted to you", K::OneTimeCode),
        ("the code shown in your authenticator app", K::OneTimeCode),
        ("the 4 digits you type at the ATM", K::Pin),
        ("the 12 words you wrote down for your wallet", K::SeedPhrase),
        ("die lange Nummer auf Ihrer Visa-Karte", K::CardNumber),
        ("le code reçu par SMS", K::OneTimeCode),
        (
            "los tres dígitos del reverso de su tarjeta",
            K::CardSecurityCode,
        ),
        ("код из СМС", K::OneTimeCode),
        ("カード裏面の3桁の数字", K::CardSecurityCode),
    ];
    let spellings: [fn(&str) -> String; 4] = [
        |s| s.to_owned(),
        |s| s.to_uppercase(),
        |s| s.replace(' ', "\u{00a0}"),
        |s| s.replacen(' ', " \u{200b}", 2),
    ];
    for (text, kind) in described {
        for spell in spellings {
            let text = spell(text);
            for name in ["value", "info", "ref", "n", "details"] {
                let as_title = FieldText {
                    title: Some(&text),
                    ..FieldText::named(name)
                };
                let as_description = FieldText {
                    description: Some(&text),
                    ..FieldText::named(name)
                };
                for field in [as_title, as_description] {
                    let got = d
                        .check_form("confirm", None, &[field])
                        .fields
                        .pop()
                        .flatten();
                    assert_eq!(got.map(|m| m.kind), Some(kind), "{name}: {text:?}");
                }
                let message = format!("To go on, please enter {text}.");
                let got = d.check_form("confirm", Some(&message), &[FieldText::named(name)]);
                assert_eq!(
                    got.message.map(|m| m.kind),
                    Some(kind),
                    "message: {message:?}"
                );
            }
            // Only talking about it, not asking: a negated request.
            let told = format!("We will never ask you to share {text}.");
            assert_eq!(d.check_message(&told), None, "{told:?}");
        }
    }
}

/// The same nouns that belong to something else, or places that are not a
/// secret's, stay ordinary in every carrier.
#[test]
fn described_nouns_of_other_things_stay_ordinary() {
    let d = detector();
    for text in [
        "the order number from the SMS we sent",
        "the tracking number in the text we sent you",
        "the number of cards to deal",
        "the room number printed on your key card",
        "the number on the back of your jersey",
        "the words to show on the login page",
        "words to search for in your wallet transactions",
        "your membership number on the front of your library card",
        "le numéro de commande reçu par SMS",
        "номер заказа из СМС",
        "describe the card design you want",
    ] {
        for name in ["value", "info"] {
            let field = FieldText {
                description: Some(text),
                ..FieldText::named(name)
            };
            let got = d
                .check_form("confirm", None, &[field])
                .fields
                .pop()
                .flatten();
            assert_eq!(got, None, "{text:?}");
        }
        let message = format!("Please enter {text}.");
        assert_eq!(d.check_message(&message), None, "{message:?}");
    }
}
