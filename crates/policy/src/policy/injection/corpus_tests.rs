//! Measured injection detection: the hostile corpus must match its rule, the
//! benign corpus nothing (rates printed with `--nocapture`); generated
//! variants of the disclosure class are all caught.

use crate::policy::corpus_tally::Tally;

use proptest::prelude::*;
use serde::Deserialize;

use super::{builtin_rules, InjectionRules, RuleAction, TextContext};

const HOSTILE: &str = data_file!("injection/corpus/hostile.toml");
const BENIGN: &str = data_file!("injection/corpus/benign.toml");

/// Hostile cases caught, per rule and per class, at least this share.
const MIN_CAUGHT: f64 = 0.95;
/// Benign cases flagged, per class, at most this share.
const MAX_FALSE_POSITIVES: f64 = 0.02;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    rule: Option<String>,
    class: String,
    lang: String,
    /// Where the text is shown (`listing`: a server's tool, prompt or
    /// resource list; otherwise a form or a sampling request).
    #[serde(rename = "where")]
    member: Option<String>,
    text: String,
    /// `heldout`: written after the word lists were settled.
    set: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

fn rules() -> &'static InjectionRules {
    static RULES: std::sync::OnceLock<InjectionRules> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        InjectionRules::new(builtin_rules(RuleAction::Block).expect("shipped rules"))
            .expect("compile")
    })
}

impl Case {
    fn context(&self) -> TextContext {
        TextContext::Form
    }
}

/// The cases of text a server asks with; what a server lists
/// (`where = "listing" | "prompts"`) is judged by the intent detector,
/// whose tests read those cases (`policy::intent`).
fn corpus(text: &str) -> Vec<Case> {
    let all = toml::from_str::<Corpus>(text).expect("corpus parses").case;
    all.into_iter()
        .filter(|c| !matches!(c.member.as_deref(), Some("listing" | "prompts")))
        .collect()
}

#[test]
fn hostile_corpus_is_caught() {
    let r = rules();
    let (mut by_rule, mut by_class, mut by_lang) =
        (Tally::default(), Tally::default(), Tally::default());
    let mut heldout = Tally::default();
    let mut missed = Vec::new();
    let cases = corpus(HOSTILE);
    for case in &cases {
        let want = case.rule.as_deref().expect("hostile cases name their rule");
        let hits: Vec<String> = r
            .scan_in(&case.text, case.context())
            .into_iter()
            .map(|h| h.rule)
            .collect();
        let hit = hits.iter().any(|h| h == want);
        if !hit {
            missed.push(format!("{:?} → {hits:?} (want {want})", case.text));
        }
        if case.set.as_deref() == Some("heldout") {
            heldout.add("held-out", hit);
        }
        by_rule.add(want, hit);
        by_class.add(&case.class, hit);
        by_lang.add(&case.lang, hit);
    }
    let caught: usize = by_rule.0.values().map(|v| v.0).sum();
    println!(
        "injection, hostile corpus: {caught} / {} caught",
        cases.len()
    );
    println!("{}", by_rule.report("per rule"));
    println!("{}", by_class.report("per class"));
    println!("{}", by_lang.report("per language"));
    println!(
        "{}",
        heldout.report("of which written after the lists were settled")
    );
    println!("missed: {missed:#?}");
    assert!(cases.len() >= 90);
    assert!(
        by_rule
            .shares()
            .chain(by_class.shares())
            .all(|s| s >= MIN_CAUGHT),
        "{missed:#?}"
    );
}

#[test]
fn benign_corpus_passes() {
    let r = rules();
    let (mut by_class, mut by_lang) = (Tally::default(), Tally::default());
    let mut heldout = Tally::default();
    let mut flagged = Vec::new();
    let cases = corpus(BENIGN);
    for case in &cases {
        assert!(case.rule.is_none());
        let hits: Vec<String> = r
            .scan_in(&case.text, case.context())
            .into_iter()
            .map(|h| h.rule)
            .collect();
        if !hits.is_empty() {
            flagged.push(format!("{:?} → {hits:?}", case.text));
        }
        if case.set.as_deref() == Some("heldout") {
            heldout.add("held-out", !hits.is_empty());
        }
        by_class.add(&case.class, !hits.is_empty());
        by_lang.add(&case.lang, !hits.is_empty());
    }
    println!(
        "injection, benign corpus: {} / {} flagged",
        flagged.len(),
        cases.len()
    );
    println!("{}", by_class.report("false positives per class"));
    println!("{}", by_lang.report("false positives per language"));
    println!(
        "{}",
        heldout.report("of which written after the lists were settled")
    );
    println!("flagged: {flagged:#?}");
    assert!(cases.len() >= 90);
    assert!(
        by_class.shares().all(|s| s <= MAX_FALSE_POSITIVES),
        "{flagged:#?}"
    );
}

/// (verb, object, rule) seeds of the disclosure classes.
const VERBS: &[&str] = &[
    "paste", "copy", "share", "include", "send", "type", "show", "reveal", "print", "repeat",
    "output", "dump", "list", "forward", "attach", "upload", "tell me", "give me", "display",
];
const OBJECTS: &[(&str, &str)] = &[
    ("system prompt", "reveal_system_prompt"),
    ("developer message", "reveal_system_prompt"),
    ("hidden instructions", "reveal_system_prompt"),
    ("conversation so far", "disclose_context"),
    ("chat history", "disclose_context"),
    ("previous messages", "disclose_context"),
    ("outputs of other tools", "disclose_context"),
    ("saved memories", "disclose_context"),
    ("local files", "disclose_context"),
    ("environment variables", "disclose_context"),
];

fn cased(s: &str, style: u8) -> String {
    match style {
        0 => s.to_owned(),
        1 => s.to_uppercase(),
        2 => s
            .split(' ')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_uppercase().chain(c).collect::<String>())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => s.replace(' ', "_"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any verb with any object, in either order, with filler words
    /// between, in any case: caught by the object's rule.
    #[test]
    fn generated_disclosure_requests_are_caught(
        v in 0..VERBS.len(),
        o in 0..OBJECTS.len(),
        style in 0u8..4,
        lead in prop::sample::select(vec!["", "Please ", "Now, ", "To continue, "]),
        det in prop::sample::select(vec!["", "your ", "the ", "all of the ", "your full "]),
        tail in prop::sample::select(vec!["", " here", " below", " in the box", " so I can continue."]),
        passive in any::<bool>(),
    ) {
        let (object, rule) = OBJECTS[o];
        let object = cased(object, style);
        let text = if passive {
            format!("{lead}{det}{object}: {}{tail}", VERBS[v])
        } else {
            format!("{lead}{}{} {det}{object}{tail}", VERBS[v], "")
        };
        let hits: Vec<String> = rules().scan(&text).into_iter().map(|h| h.rule).collect();
        prop_assert!(hits.iter().any(|h| h == rule), "{:?} → {:?}", text, hits);
    }
}
