//! Rule: what a server hands back — a tool's result (`content` text,
//! `structuredContent`, resource links, embedded resources), the contents
//! of `resources/read`, the messages of `prompts/get`, the values of
//! `completion/complete`, an error's `message` and `data` — is read by a
//! model or shown to a person like everything else a server says, but it
//! is data: any text at all, code, markup someone asked for. Each part gets
//! what its readers expect:
//!
//! * **Data** (tool results, resource contents, errors, and any other
//!   result): terminal escapes, controls, invisible characters and what a
//!   renderer would fetch or follow on a host not allowed are taken out
//!   (`sanitize::DataPolicy`; verdict `text_safety`, detail
//!   `PART: FINDINGS`), nothing else; base64 `data`/`blob` is not text.
//!   Every string is scanned for prompt injection as listed text is read
//!   (it describes, where a form asks); the verdict is recorded
//!   (`[content] injection = "monitor"`, the presets' value) or, with
//!   `"enforce"`, carried out as the policy's injection rules say.
//! * **Prompt messages** (`prompts/get`) become turns of the conversation:
//!   their text gets the listing rules of a prompt (made safe, scanned, a
//!   blocking rule refuses).
//! * **Completion values** are put into an argument as they are: one that
//!   hides characters is removed, the others are scanned like data.
//!
//! Before any of it, anything under the gateway's own `_meta` namespace,
//! at any depth, is removed (`provenance.rs`), and a `_meta` server
//! identity gets its rules (`server_info.rs`).

use std::sync::LazyLock;

use regex::bytes::Regex;
use serde_json::{Map, Value};

use super::prescan::{disguise_cues, word_cues, Cue};
use super::{Action, Rule};
use super::{Checked, RawScan, Report, Run, Subject, Verdict};
use crate::model::{McpMethod, Reason};
use crate::policy::config::{ContentInjection, Policy};
use crate::policy::detect::CueSet;
use crate::policy::injection::TextContext;
use crate::policy::intent::Place;
use crate::policy::sanitize::{data_needs_work, has_hidden_characters, DataPolicy};
use crate::policy::secret_values::SecretValueScanner;

/// Inspect a result that is neither a question, a list nor the server's
/// description of itself (a tool's result, a resource's contents, a
/// prompt, completions, anything else), already strictly parsed, in place:
/// whether it changed and must be re-encoded. `method` is the request it
/// answers (for a task's result, the request that made the task).
pub fn inspect_content(
    policy: &Policy,
    subject: &Subject<'_>,
    method: McpMethod,
    result: &mut Value,
) -> (Checked<bool>, Report) {
    let mut run = Run::new(policy, subject);
    let outcome = run.content(method, result);
    (outcome, run.report)
}

/// [`inspect_content`], with every check that ran in [`Report::trace`].
pub fn trace_content(
    policy: &Policy,
    subject: &Subject<'_>,
    method: McpMethod,
    result: &mut Value,
) -> (Checked<bool>, Report) {
    let mut run = Run::traced(policy, subject);
    let outcome = run.content(method, result);
    (outcome, run.report)
}

/// Inspect a JSON-RPC `error` object of an upstream response in place
/// (its `message` and `data` are data): whether it changed.
pub fn inspect_error(
    policy: &Policy,
    subject: &Subject<'_>,
    error: &mut Value,
) -> (Checked<bool>, Report) {
    let mut run = Run::new(policy, subject);
    run.strip_namespace(error);
    let outcome = match error {
        Value::Object(map) => {
            let walked =
                ["message", "data"]
                    .into_iter()
                    .try_for_each(|part| match map.get_mut(part) {
                        Some(v) => run.data(part, v),
                        None => Ok(()),
                    });
            walked.map(|()| run.changed())
        }
        _ => Ok(run.changed()),
    };
    (outcome, run.report)
}

/// Whether a message's raw JSON (a result, an error) may hold anything
/// these rules, the namespace rule or the `_meta` identity rules act on:
/// `false` only when parsing it could find nothing. Anything not plain
/// ASCII, any `\u` escape (it can spell any character) or escaped control
/// character (`\r`, `\b`, `\f`), the markup an
/// image, a link or an element needs, the names `serverInfo` and
/// `portcullis` in any case, and whatever the injection rules might match
/// send it to the parse.
pub fn may_need_content(policy: &Policy, scan: &RawScan<'_>) -> bool {
    if scan.non_ascii() || scan.escaped_control() || scan.reserved_word() || scan.markup() {
        return true;
    }
    let raw = scan.raw();
    let injection = || {
        scan.cue(Cue::Injection)
            .unwrap_or_else(|| policy.injection.may_match_json(raw))
    };
    match policy.content.injection {
        ContentInjection::Off => false,
        ContentInjection::Confident => {
            injection()
                || scan.cue(Cue::Confident).unwrap_or_else(|| {
                    CONFIDENT_CUES
                        .as_ref()
                        .is_none_or(|re| re.is_match(raw.as_bytes()))
                })
        }
        _ => injection(),
    }
}

/// Scan a result's or an error's raw JSON once for every test the
/// response checks make before they decide to parse it: the word
/// classes, and in the same pass the policy's injection rules, the
/// confident cues and `scanner`'s table (the cue set is built on the
/// policy's first use, and kept).
pub fn scan_raw<'a>(policy: &Policy, scanner: &SecretValueScanner, raw: &'a str) -> RawScan<'a> {
    match cue_set(policy, scanner) {
        Some(set) => RawScan::with_cues(raw, set),
        None => RawScan::of(raw),
    }
}

/// Compile the cue set [`scan_raw`] reads for `policy` now, if it was not
/// yet (the gateway does it when it is built, off the request path).
pub fn prepare_raw_scan(policy: &Policy, scanner: &SecretValueScanner) {
    cue_set(policy, scanner);
}

fn cue_set<'p>(policy: &'p Policy, scanner: &SecretValueScanner) -> Option<&'p CueSet> {
    policy
        .raw_cues
        .get_or_init(|| raw_cues(policy, scanner))
        .as_ref()
}

/// The cue set of `policy`: only the tests its settings make.
fn raw_cues(policy: &Policy, scanner: &SecretValueScanner) -> Option<CueSet> {
    let mut groups = vec![(Cue::Words.bit(), word_cues())];
    if policy.reads_result_secrets() {
        groups.push((Cue::Secret.bit(), scanner.patterns().to_vec()));
    }
    if policy.content.injection == ContentInjection::Confident {
        groups.push((Cue::Confident.bit(), vec![confident_cues()]));
    }
    let mut always = 0;
    if policy.content.injection != ContentInjection::Off {
        match policy.injection.raw_json_cue() {
            Some(cue) if cue.is_empty() => {}
            Some(cue) => {
                groups.push((Cue::Injection.bit(), vec![cue]));
                groups.push((Cue::Disguised.bit(), disguise_cues()));
            }
            None => always = Cue::InjectionUndecided.bit(),
        }
    }
    CueSet::build(groups, always)
}

/// What text that steers the model with certainty needs, cheaply found in
/// raw JSON or one string: a role or authority marker, an override, an
/// order to ignore, a long base64 run, a call spelled out (`run_shell(`).
/// Only a string that has one is read by the intent detector, so data
/// without them costs this scan alone.
static STEERING: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(STEERING_CUES).ok());

/// The pattern of [`STEERING`].
const STEERING_CUES: &str = concat!(
    r"(?i-u)system\s*[:\]>]|\[\s*(?:system|inst)\s*\]|<\s*/?\s*(?:system|important|admin)\b|<\|",
    r"|you are now|admin mode|developer mode|disregard|new instructions",
    r"|ignore (?:all |any |the |your )?(?:previous|prior|above|earlier)",
    r"|[A-Za-z0-9+/]{40,}|\b[a-z]+_[a-z_]+\s*\(",
);

/// [`STEERING`] or [`super::redirect::MAY_NAME_TOOL`], as one regex: the
/// raw JSON test of `confident` reads the bytes once for both (each keeps
/// its flags inside its group).
static CONFIDENT_CUES: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&confident_cues()).ok());

/// The pattern of [`CONFIDENT_CUES`].
fn confident_cues() -> String {
    format!("(?:{STEERING_CUES})|(?:{})", super::redirect::NAMES_TOOL)
}

/// The text of a prompt (its description, every message's text) for the
/// intent detector.
fn prompt_strings(value: &Value, out: &mut super::listing::ItemText) {
    match value {
        Value::String(text) => out.push((Place::Description, text.clone())),
        Value::Array(items) => items.iter().for_each(|v| prompt_strings(v, out)),
        Value::Object(map) => prompt_members(map, out),
        _ => {}
    }
}

/// [`prompt_strings`] of every member of an object but its kinds,
/// addresses, roles, `_meta` and base64 payloads.
fn prompt_members(map: &Map<String, Value>, out: &mut super::listing::ItemText) {
    for (member, v) in map {
        let machine = matches!(
            member.as_str(),
            "type" | "uri" | "mimeType" | "_meta" | "role"
        );
        if !machine && !is_binary(map, member) {
            prompt_strings(v, out);
        }
    }
}

/// A member of a content block or resource that is base64, not text.
fn is_binary(map: &Map<String, Value>, member: &str) -> bool {
    match member {
        "blob" => true,
        "data" => matches!(
            map.get("type").and_then(Value::as_str),
            Some("image" | "audio")
        ),
        _ => false,
    }
}

/// Whether a resource of this media type may be rendered as markdown or
/// HTML (`text/markdown`, `text/html`, `image/svg+xml`, and `text/plain`,
/// which chat clients commonly render as markdown), rather than shown as
/// it is (code, JSON, CSV, …).
fn is_rendered(mime: &str) -> bool {
    let essence = mime
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "text/markdown"
            | "text/x-markdown"
            | "text/html"
            | "application/xhtml+xml"
            | "image/svg+xml"
            | "text/plain"
            | ""
    )
}

/// The host of the upstream's own endpoint, without its port.
fn own_host(authority: &str) -> Option<String> {
    url::Url::parse(&format!("http://{authority}/"))
        .ok()?
        .host_str()
        .map(str::to_ascii_lowercase)
}

impl Run<'_> {
    pub(super) fn content(&mut self, method: McpMethod, result: &mut Value) -> Checked<bool> {
        self.strip_namespace(result);
        self.check_meta_server_info(result)?;
        let Value::Object(map) = result else {
            return Ok(self.changed());
        };
        match method {
            McpMethod::PromptsGet => self.prompt(map)?,
            McpMethod::CompletionComplete => self.completion(map)?,
            _ => {
                self.error_result = map.get("isError") == Some(&Value::Bool(true));
                for (member, value) in map.iter_mut() {
                    if member == "_meta" || member == "resultType" {
                        continue;
                    }
                    match value {
                        Value::Array(items) => {
                            for (i, item) in items.iter_mut().enumerate() {
                                self.data(&format!("{member}[{i}]"), item)?;
                            }
                        }
                        other => self.data(member, other)?,
                    }
                }
            }
        }
        Ok(self.changed())
    }

    /// Whether anything recorded so far changes what is delivered.
    fn changed(&self) -> bool {
        self.report.verdicts.iter().any(Verdict::rewrites)
    }

    /// Every string of `value` read as data, at any depth (the strict
    /// parse bounds it), but for `_meta` and base64 payloads.
    fn data(&mut self, key: &str, value: &mut Value) -> Checked<()> {
        self.data_in(key, value, true)
    }

    /// `markup`: whether the strings may be rendered as markdown or HTML.
    fn data_in(&mut self, key: &str, value: &mut Value, markup: bool) -> Checked<()> {
        match value {
            Value::String(_) => self.clean_data(key, value, markup),
            Value::Array(items) => items
                .iter_mut()
                .try_for_each(|v| self.data_in(key, v, markup)),
            Value::Object(map) => {
                let binary: Vec<bool> = map.keys().map(|k| is_binary(map, k)).collect();
                let rendered = map
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .is_none_or(is_rendered);
                for ((member, v), binary) in map.iter_mut().zip(binary) {
                    let markup = markup && (member != "text" || rendered);
                    if member != "_meta" && !binary {
                        self.data_in(key, v, markup)?;
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn clean_data(&mut self, key: &str, slot: &mut Value, markup: bool) -> Checked<()> {
        let Value::String(text) = slot else {
            return Ok(());
        };
        if data_needs_work(text) {
            let own = own_host(self.subject.upstream_host);
            let policy = self.policy;
            let content = &policy.content;
            let allowed = |host: &str| {
                own.as_deref().is_some_and(|o| {
                    host == o || host.strip_suffix(o).is_some_and(|s| s.ends_with('.'))
                }) || content.allowed_hosts.iter().any(|p| p.matches(host))
            };
            let cleaner = DataPolicy {
                markup,
                allow_links: content.allow_links,
                allowed_host: &allowed,
            };
            if cleaner.suspicious_link(text) {
                let detail = "data: suspicious_link".to_owned();
                self.note(
                    Rule::TextSafety,
                    Action::Flag,
                    Some(key),
                    None,
                    Some(detail),
                );
            }
            let cleaned = cleaner.clean(text);
            if !cleaned.findings.is_empty() {
                let findings: Vec<&str> = cleaned.findings.iter().map(|f| f.as_str()).collect();
                let action = if self.enforcing() {
                    Action::Sanitize
                } else {
                    Action::Monitor
                };
                let detail = format!("data: {}", findings.join(","));
                self.note(Rule::TextSafety, action, Some(key), None, Some(detail));
                if self.enforcing() {
                    *text = cleaned.text.into_owned();
                }
            }
        } else {
            self.pass(Rule::TextSafety, Some(key), None, "data");
        }
        self.scan_data(key, text_of(slot))
    }

    /// The injection rules over one string of data, as `[content]
    /// injection` says: off, recorded only, or carried out.
    fn scan_data(&mut self, key: &str, text: &str) -> Checked<()> {
        let setting = self.policy.content.injection;
        if setting == ContentInjection::Off {
            return Ok(());
        }
        let monitor_only = self.monitor_only;
        self.monitor_only |= setting != ContentInjection::Enforce;
        let scanned = match self.spend(key, None, text.len()) {
            Ok(true) => self.scan_injection(key, None, "data", text, TextContext::Data),
            other => other.map(|_| ()),
        };
        self.monitor_only = monitor_only;
        scanned?;
        if setting == ContentInjection::Confident {
            let error = self.error_result || key == "message" || key == "data";
            self.steering(key, text, error)?;
            self.redirect(key, text, error)?;
        }
        Ok(())
    }

    /// `[content] injection = "confident"`: text that steers the model by
    /// the listing rules' reading, refused where certain (see
    /// [`crate::policy::intent::Steering`]), recorded otherwise.
    fn steering(&mut self, key: &str, text: &str, error: bool) -> Checked<()> {
        if STEERING
            .as_ref()
            .is_some_and(|re| !re.is_match(text.as_bytes()))
        {
            return Ok(());
        }
        let Some(found) = self.policy.listing.intent.judge_data(text, error) else {
            return Ok(());
        };
        let detail = format!("{} ({})", found.finding.intent.as_str(), found.finding.cue);
        let said = "sent data with text that steers the model";
        let intent = found.finding.intent.as_str();
        self.steered(key, detail, found.confident, said, intent)
    }

    /// A text that steers the model: refused as `prompt_injection` (with
    /// its `intent`) where `confident`, recorded (monitor) otherwise.
    pub(super) fn steered(
        &mut self,
        key: &str,
        detail: String,
        confident: bool,
        said: &str,
        intent: &'static str,
    ) -> Checked<()> {
        if !confident {
            self.note(
                Rule::PromptInjection,
                Action::Monitor,
                Some(key),
                None,
                Some(detail),
            );
            return Ok(());
        }
        let message = format!("{} {said} ({detail})", self.subject.upstream_name);
        self.violation(
            Reason::PromptInjection,
            Rule::PromptInjection,
            Some(key),
            None,
            message,
        )
        .map_err(|e| e.with_data("intent", intent.into()))
    }

    /// `prompts/get`: the description and every message's text under the
    /// listing rules of a prompt: only invisible characters removed, and
    /// the whole prompt judged as one item by the intent detector (a
    /// prompt's messages are put into the conversation as they are: one
    /// that works against the user is refused, never cut).
    fn prompt(&mut self, map: &mut Map<String, Value>) -> Checked<()> {
        let slot = map.get_mut("description");
        self.clean_in(
            "prompt",
            None,
            "description",
            slot,
            usize::MAX,
            TextContext::Listing,
        )?;
        if let Some(Value::Array(messages)) = map.get_mut("messages") {
            for (i, message) in messages.iter_mut().enumerate() {
                if let Some(content) = message.get_mut("content") {
                    self.prompt_text(&format!("messages[{i}]"), content)?;
                }
            }
        }
        let mut texts = Vec::new();
        prompt_members(map, &mut texts);
        self.judge_whole("prompt", &texts)
    }

    /// Every string of a prompt message's content block but its kind, its
    /// addresses and base64 payloads.
    fn prompt_text(&mut self, key: &str, value: &mut Value) -> Checked<()> {
        match value {
            Value::String(_) => self.clean_in(
                key,
                None,
                "message",
                Some(value),
                usize::MAX,
                TextContext::Listing,
            ),
            Value::Array(items) => items.iter_mut().try_for_each(|v| self.prompt_text(key, v)),
            Value::Object(map) => {
                let binary: Vec<bool> = map.keys().map(|k| is_binary(map, k)).collect();
                for ((member, v), binary) in map.iter_mut().zip(binary) {
                    let machine = matches!(member.as_str(), "type" | "uri" | "mimeType" | "_meta");
                    if !machine && !binary {
                        self.prompt_text(key, v)?;
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// `completion/complete`: a value goes into an argument as it is, so
    /// one that hides characters is removed; each is scanned as data.
    fn completion(&mut self, map: &mut Map<String, Value>) -> Checked<()> {
        let Some(Value::Array(values)) =
            map.get_mut("completion").and_then(|c| c.get_mut("values"))
        else {
            return Ok(());
        };
        let mut keep = Vec::with_capacity(values.len());
        for (i, value) in values.iter().enumerate() {
            let Value::String(text) = value else {
                keep.push(true);
                continue;
            };
            let key = format!("values[{i}]");
            self.scan_data(&key, text)?;
            if has_hidden_characters(text) {
                let detail = "completion value: hidden characters".to_owned();
                keep.push(!self.removal(Rule::TextSafety, &key, detail));
            } else {
                self.pass(Rule::TextSafety, Some(&key), None, "completion value");
                keep.push(true);
            }
        }
        if keep.contains(&false) {
            let mut keep = keep.into_iter();
            values.retain(|_| keep.next().unwrap_or(true));
        }
        Ok(())
    }
}

fn text_of(slot: &Value) -> &str {
    slot.as_str().unwrap_or_default()
}

#[cfg(test)]
mod corpus_tests;
#[cfg(test)]
mod redirect_tests;
#[cfg(test)]
mod steering_tests;
/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&STEERING);
    LazyLock::force(&CONFIDENT_CUES);
}

#[cfg(test)]
mod tests;
