//! Generated variants of what a person may type: valid card numbers and
//! token formats written with fullwidth or other-script digits, grouped with
//! spaces, dashes or dots, with invisible characters inside. Every variant is
//! still found; a changed digit still breaks a card. (Only the kind is ever
//! compared; no value is printed by the scanner.)

use proptest::prelude::*;

use super::SecretValueKind as K;
use super::SecretValueScanner;

fn scanner() -> &'static SecretValueScanner {
    static S: std::sync::OnceLock<SecretValueScanner> = std::sync::OnceLock::new();
    S.get_or_init(SecretValueScanner::builtin)
}

/// Issuer prefixes with a length the issuer uses.
const BRANDS: &[(&str, usize)] = &[
    ("4", 16),
    ("4", 13),
    ("4", 19),
    ("51", 16),
    ("55", 16),
    ("2221", 16),
    ("2720", 16),
    ("34", 15),
    ("37", 15),
    ("6011", 16),
    ("65", 16),
    ("644", 19),
    ("3528", 16),
    ("3589", 19),
];

/// The Luhn check digit for `body`.
fn check_digit(body: &[u8]) -> u8 {
    let sum: u32 = body
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 0 {
                let x = d * 2;
                if x > 9 {
                    x - 9
                } else {
                    x
                }
            } else {
                d
            }
        })
        .sum();
    ((10 - sum % 10) % 10) as u8
}

fn card(brand: usize, fill: &[u8]) -> Vec<u8> {
    let (prefix, len) = BRANDS[brand];
    let mut d: Vec<u8> = prefix.bytes().map(|b| b - b'0').collect();
    d.extend(fill.iter().take(len - 1 - d.len()).map(|x| x % 10));
    let c = check_digit(&d);
    d.push(c);
    d
}

/// Zero of a decimal digit set: ASCII, fullwidth, Arabic-Indic, Extended
/// Arabic-Indic, Devanagari, Bengali, Thai.
const ZEROS: &[u32] = &[0x30, 0xFF10, 0x660, 0x6F0, 0x966, 0x9E6, 0xE50];

/// Separators between groups (a zero-width space alone is one too).
const SEPARATORS: &[&str] = &[
    " ", "-", ".", " - ", "  ", "\u{00A0}", "\u{2009}", "\u{2013}", "\u{200B}", "\u{FF0D}", "",
];

fn render(digits: &[u8], script: usize, mixed: bool, groups: &[usize], sep: &str) -> String {
    let mut out = String::new();
    let mut left = groups.iter().copied().cycle();
    let mut in_group = 0;
    let mut size = left.next().unwrap_or(4);
    for (i, &d) in digits.iter().enumerate() {
        if in_group == size {
            out.push_str(sep);
            in_group = 0;
            size = left.next().unwrap_or(4);
        }
        let zero = if mixed {
            ZEROS[(script + i) % ZEROS.len()]
        } else {
            ZEROS[script]
        };
        out.push(char::from_u32(zero + u32::from(d)).unwrap_or('0'));
        in_group += 1;
    }
    out
}

/// How a card of `len` digits is printed in groups (or as one run).
fn grouping(len: usize, grouped: bool) -> Vec<usize> {
    match (grouped, len) {
        (false, _) => vec![len],
        (true, 15) => vec![4, 6, 5],
        (true, 13) => vec![4, 4, 5],
        (true, _) => vec![4],
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A token of a known format built from `seed` (mixed character classes).
fn token(format: usize, seed: &[u8]) -> (String, K) {
    let body = |n: usize| -> String {
        let mut s: String = seed
            .iter()
            .cycle()
            .take(n)
            .map(|&b| ALNUM[b as usize % ALNUM.len()] as char)
            .collect();
        s.replace_range(0..3, "aZ7");
        s
    };
    match format {
        0 => (format!("ghp_{}", body(36)), K::GithubToken),
        1 => (format!("glpat-{}", body(20)), K::GitlabToken),
        2 => (format!("sk_live_{}", body(24)), K::StripeKey),
        3 => (format!("npm_{}", body(36)), K::NpmToken),
        _ => (format!("sk-ant-api03-{}", body(93)), K::AnthropicKey),
    }
}

/// Fullwidth forms of some characters and invisible characters inside
/// (both ends of every range of the one table, `model::Invisible`).
fn disguise(tok: &str, mask: u64, zw: u64) -> String {
    let hidden: Vec<char> = crate::model::Invisible::ranges()
        .flat_map(|(lo, hi, _)| [lo, hi])
        .collect();
    tok.chars()
        .enumerate()
        .map(|(i, c)| {
            let bit = 1u64 << (i % 64);
            let mut s = String::new();
            if zw & bit != 0 && i > 0 {
                s.push(hidden[(i + zw.count_ones() as usize) % hidden.len()]);
            }
            match c {
                '!'..='~' if mask & bit != 0 => {
                    s.push(char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c))
                }
                c => s.push(c),
            }
            s
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn valid_cards_in_any_script_and_grouping_are_found(
        brand in 0..BRANDS.len(),
        fill in prop::collection::vec(0u8..10, 19),
        script in 0..ZEROS.len(),
        mixed in any::<bool>(),
        grouped in any::<bool>(),
        sep in prop::sample::select(SEPARATORS.to_vec()),
        frame in prop::sample::select(vec!["{}", "card: {} exp 12/29", "Number {}.", "{} 123"]),
    ) {
        let digits = card(brand, &fill);
        let groups = grouping(digits.len(), grouped);
        let shown = frame.replace("{}", &render(&digits, script, mixed, &groups, sep));
        prop_assert_eq!(scanner().scan(&shown), Some(K::CardNumber));
    }

    /// (Up to 16 digits: a 19-digit number has a 16-digit prefix that may
    /// pass the Luhn check by itself.)
    #[test]
    fn a_changed_digit_breaks_a_card_in_any_script(
        brand in (0..BRANDS.len()).prop_filter("up to 16 digits", |&b| BRANDS[b].1 <= 16),
        fill in prop::collection::vec(0u8..10, 19),
        script in 0..ZEROS.len(),
        pos in 0usize..13,
        delta in 1u8..10,
        sep in prop::sample::select(vec![" ", "-", "."]),
    ) {
        let mut digits = card(brand, &fill);
        let last = digits.len() - 1;
        let i = last - pos;
        digits[i] = (digits[i] + delta) % 10;
        let groups = grouping(digits.len(), true);
        let shown = render(&digits, script, false, &groups, sep);
        prop_assert_ne!(scanner().scan(&shown), Some(K::CardNumber));
    }

    #[test]
    fn tokens_with_fullwidth_and_invisible_characters_are_found(
        format in 0usize..5,
        seed in prop::collection::vec(any::<u8>(), 8..40),
        mask in any::<u64>(),
        zw in any::<u64>(),
        frame in prop::sample::select(vec!["{}", "my token is {} ok", "key={}"]),
    ) {
        let (tok, kind) = token(format, &seed);
        let shown = frame.replace("{}", &disguise(&tok, mask, zw));
        prop_assert_eq!(scanner().scan(&shown), Some(kind));
    }
}

#[test]
fn decimals_versions_and_addresses_with_dots_are_not_cards() {
    for v in [
        "4.1111111111111111",
        "3.14159265358979323846",
        "version 4.1.11.111.1111.11",
        "10.100.200.300.400.500",
        "4111.11.11.1111.1111",
        "2024.01.15 4111",
    ] {
        assert_ne!(scanner().scan(v), Some(K::CardNumber), "{v}");
    }
}
