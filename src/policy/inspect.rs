//! The inspection of one `input_required` result against the policy of the
//! upstream it came from. Protocol validity is always enforced; the policy's
//! own rules (limits, secrets, text, URL, deprecated kinds, injection) refuse
//! in `enforce` mode and are only recorded in `monitor` mode. What passes is
//! returned with its human-facing text made safe and the gateway's
//! provenance under `_meta`.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::config::{Action, Mode, Policy};
use super::form::{read_form_schema, FormSchema, SchemaError, SchemaLimits};
use super::injection::{RuleAction, TextContext};
use super::sanitize::{is_unsafe_machine_value, TextPolicy};
use super::secrets::FieldText;
use crate::jsonrpc::{describe_json_error, parse_strict};
use crate::refusal::{Reason, Refusal};

/// The `_meta` key under which the gateway annotates what it let through.
pub const PROVENANCE_KEY: &str = "dev.portcullis/provenance";

/// The methods whose results may be `input_required`.
pub const MRTR_METHODS: &[&str] = &["tools/call", "prompts/get", "resources/read"];

/// What the client declared in `_meta["io.modelcontextprotocol/clientCapabilities"]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCaps {
    pub elicitation_form: bool,
    pub elicitation_url: bool,
    pub sampling: bool,
    pub sampling_context: bool,
    pub roots: bool,
}

#[derive(Deserialize)]
struct RawCaps {
    elicitation: Option<RawElicitation>,
    sampling: Option<RawSampling>,
    roots: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct RawElicitation {
    form: Option<serde::de::IgnoredAny>,
    url: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct RawSampling {
    context: Option<serde::de::IgnoredAny>,
}

impl ClientCaps {
    /// Read the capabilities object; anything unreadable declares nothing.
    pub fn parse(raw: &str) -> ClientCaps {
        let Ok(c) = serde_json::from_str::<RawCaps>(raw) else {
            return ClientCaps::default();
        };
        let (form, url) = match &c.elicitation {
            None => (false, false),
            // `elicitation: {}` means form only (2025-11-25 compatibility).
            Some(e) if e.form.is_none() && e.url.is_none() => (true, false),
            Some(e) => (e.form.is_some(), e.url.is_some()),
        };
        ClientCaps {
            elicitation_form: form,
            elicitation_url: url,
            sampling: c.sampling.is_some(),
            sampling_context: c.sampling.as_ref().is_some_and(|s| s.context.is_some()),
            roots: c.roots.is_some(),
        }
    }
}

/// The exchange the result belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub method: &'a str,
    pub client: ClientCaps,
    pub upstream_name: &'a str,
    pub upstream_host: &'a str,
}

/// One thing the gateway decided, for provenance, metrics and audit. Never
/// carries a value a user typed (there is none in an `input_required`).
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub rule: &'static str,
    pub action: &'static str,
    pub key: Option<String>,
    pub field: Option<String>,
    pub detail: Option<String>,
}

/// What was asked under one key: kept (sealed into the gateway's
/// requestState) for validating the answer on the retry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Asked {
    Form(FormSchema),
    Url { host: String },
    Sampling,
    Roots,
}

#[derive(Debug, Default)]
pub struct Report {
    pub verdicts: Vec<Verdict>,
    pub asked: Vec<(String, Asked)>,
    /// The upstream's own requestState, when it sent one.
    pub request_state: Option<String>,
}

/// The outcome of inspecting one result.
#[derive(Debug)]
pub enum Decision {
    /// Deliver this (possibly rewritten) `input_required` result.
    Deliver(Value),
    Refuse(Refusal),
}

/// Inspect the `result` member of an upstream response known to be
/// `input_required`.
pub fn inspect(policy: &Policy, subject: &Subject<'_>, result: &[u8]) -> (Decision, Report) {
    let mut run = Run {
        policy,
        subject,
        report: Report::default(),
    };
    let decision = match run.check(result) {
        Ok(value) => Decision::Deliver(value),
        Err(refusal) => Decision::Refuse(refusal),
    };
    (decision, run.report)
}

struct Run<'a> {
    policy: &'a Policy,
    subject: &'a Subject<'a>,
    report: Report,
}

type Checked<T> = Result<T, Refusal>;

fn refusal(
    reason: Reason,
    message: String,
    rule: &str,
    key: Option<&str>,
    field: Option<&str>,
) -> Refusal {
    let mut r = Refusal::new(reason, message).with_data("rule", rule.into());
    if let Some(k) = key {
        r = r.with_data("key", k.into());
    }
    if let Some(f) = field {
        r = r.with_data("field", f.into());
    }
    r
}

fn clip(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(64).collect()
}

impl Run<'_> {
    fn enforcing(&self) -> bool {
        self.policy.mode == Mode::Enforce
    }

    fn note(
        &mut self,
        rule: &'static str,
        action: &'static str,
        key: Option<&str>,
        field: Option<&str>,
        detail: Option<String>,
    ) {
        self.report.verdicts.push(Verdict {
            rule,
            action,
            key: key.map(str::to_owned),
            field: field.map(str::to_owned),
            detail,
        });
    }

    /// A protocol violation: refused in every mode.
    fn invalid(
        &mut self,
        reason: Reason,
        rule: &'static str,
        key: Option<&str>,
        field: Option<&str>,
        message: String,
    ) -> Refusal {
        self.note(rule, "block", key, field, None);
        refusal(reason, message, rule, key, field)
    }

    /// A policy rule broken: refused when enforcing, recorded when monitoring.
    fn violation(
        &mut self,
        reason: Reason,
        rule: &'static str,
        key: Option<&str>,
        field: Option<&str>,
        message: String,
    ) -> Checked<()> {
        if self.enforcing() {
            return Err(self.invalid(reason, rule, key, field, message));
        }
        self.note(rule, "monitor", key, field, None);
        Ok(())
    }

    fn limit(
        &mut self,
        limit: &'static str,
        key: Option<&str>,
        field: Option<&str>,
        what: &str,
    ) -> Checked<()> {
        let upstream = self.subject.upstream_name;
        let message = format!("{upstream} sent {what} over the gateway's limit ({limit})");
        let r = self.violation(Reason::LimitExceeded, "limit", key, field, message);
        r.map_err(|e| e.with_data("limit", limit.into()))
    }

    fn check(&mut self, bytes: &[u8]) -> Checked<Value> {
        if bytes.len() > self.policy.limits.max_result_bytes {
            self.limit("max_result_bytes", None, None, "an input_required result")?;
        }
        let mut result = parse_strict(bytes).map_err(|e| {
            let reason = if e.to_string().contains("duplicate member") {
                Reason::DuplicateMember
            } else {
                Reason::InvalidInputRequired
            };
            let message = format!(
                "the input_required result cannot be read unambiguously: {}",
                describe_json_error(&e)
            );
            self.invalid(reason, "parse", None, None, message)
        })?;
        if !MRTR_METHODS.contains(&self.subject.method) {
            let message = format!("input_required is only allowed in answers to tools/call, prompts/get and resources/read, not {}", clip(self.subject.method));
            return Err(self.invalid(
                Reason::InputRequiredNotAllowed,
                "protocol",
                None,
                None,
                message,
            ));
        }
        let obj = result.as_object_mut().ok_or_else(|| {
            self.invalid(
                Reason::InvalidInputRequired,
                "protocol",
                None,
                None,
                "the result is not an object".into(),
            )
        })?;
        self.check_request_state(obj)?;
        let requests = self.check_shape(obj)?;
        if let Some(mut requests) = requests {
            self.check_capabilities(&requests)?;
            for (key, request) in requests.iter_mut() {
                self.check_input_request(key, request)?;
            }
            obj.insert("inputRequests".into(), Value::Object(requests));
        }
        self.annotate(obj);
        Ok(result)
    }

    fn check_request_state(&mut self, obj: &Map<String, Value>) -> Checked<()> {
        match obj.get("requestState") {
            None => Ok(()),
            Some(Value::String(s)) => {
                if s.len() > self.policy.limits.max_request_state_bytes {
                    self.limit("max_request_state_bytes", None, None, "a requestState")?;
                }
                self.report.request_state = Some(s.clone());
                Ok(())
            }
            Some(_) => Err(self.invalid(
                Reason::InvalidInputRequired,
                "protocol",
                None,
                None,
                "requestState must be a string".into(),
            )),
        }
    }

    /// `inputRequests` taken out of the result for checking (put back after).
    fn check_shape(&mut self, obj: &mut Map<String, Value>) -> Checked<Option<Map<String, Value>>> {
        let requests = match obj.remove("inputRequests") {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => {
                return Err(self.invalid(
                    Reason::InvalidInputRequired,
                    "protocol",
                    None,
                    None,
                    "inputRequests must be an object".into(),
                ))
            }
        };
        if requests.is_none() && !obj.contains_key("requestState") {
            let message = "an input_required result needs inputRequests or requestState".to_owned();
            return Err(self.invalid(
                Reason::InvalidInputRequired,
                "protocol",
                None,
                None,
                message,
            ));
        }
        let Some(requests) = requests else {
            return Ok(None);
        };
        if requests.len() > self.policy.limits.max_input_requests {
            self.limit("max_input_requests", None, None, "more input requests")?;
        }
        for (key, request) in &requests {
            if key.is_empty() || key.len() > 128 || key.chars().any(char::is_control) {
                let message =
                    "an inputRequests key must be 1 to 128 printable characters".to_owned();
                return Err(self.invalid(
                    Reason::InvalidInputRequired,
                    "protocol",
                    None,
                    None,
                    message,
                ));
            }
            let ok = request.as_object().is_some_and(|r| {
                r.get("method").is_some_and(Value::is_string)
                    && r.get("params").is_none_or(Value::is_object)
                    && r.keys().all(|k| k == "method" || k == "params")
            });
            if !ok {
                let message = "every input request must be {\"method\", \"params\"}".to_owned();
                return Err(self.invalid(
                    Reason::InvalidInputRequired,
                    "protocol",
                    Some(key),
                    None,
                    message,
                ));
            }
        }
        Ok(Some(requests))
    }

    /// Every kind asked for must be one the client declared: -32021 otherwise.
    fn check_capabilities(&mut self, requests: &Map<String, Value>) -> Checked<()> {
        let caps = self.subject.client;
        let mut needed = Map::new();
        let mut elicitation = Map::new();
        for (key, request) in requests {
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let params = request.get("params");
            match method {
                "elicitation/create" => match params
                    .and_then(|p| p.get("mode"))
                    .and_then(Value::as_str)
                    .unwrap_or("form")
                {
                    "url" if !caps.elicitation_url => {
                        drop(elicitation.insert("url".into(), json!({})))
                    }
                    "form" if !caps.elicitation_form => {
                        drop(elicitation.insert("form".into(), json!({})))
                    }
                    "url" | "form" => {}
                    other => {
                        let message =
                            format!("elicitation mode \"{}\" is not form or url", clip(other));
                        return Err(self.invalid(
                            Reason::InvalidInputRequired,
                            "protocol",
                            Some(key),
                            None,
                            message,
                        ));
                    }
                },
                "sampling/createMessage" => {
                    let context = params
                        .and_then(|p| p.get("includeContext"))
                        .and_then(Value::as_str)
                        .is_some_and(|c| c != "none");
                    if !caps.sampling || (context && !caps.sampling_context) {
                        let sampling = if context {
                            json!({"context": {}})
                        } else {
                            json!({})
                        };
                        needed.insert("sampling".into(), sampling);
                    }
                }
                "roots/list" if !caps.roots => drop(needed.insert("roots".into(), json!({}))),
                "roots/list" => {}
                other => {
                    let message = format!("input request method \"{}\" is not elicitation/create, sampling/createMessage or roots/list", clip(other));
                    return Err(self.invalid(
                        Reason::UnknownInputRequestMethod,
                        "protocol",
                        Some(key),
                        None,
                        message,
                    ));
                }
            }
        }
        if !elicitation.is_empty() {
            needed.insert("elicitation".into(), Value::Object(elicitation));
        }
        if needed.is_empty() {
            return Ok(());
        }
        self.note("client_capability", "block", None, None, None);
        let message = format!(
            "{} needs client capabilities this request did not declare",
            self.subject.upstream_name
        );
        Err(Refusal::new(Reason::MissingClientCapability, message)
            .with_data("requiredCapabilities", Value::Object(needed))
            .with_data("rule", "client_capability".into()))
    }

    fn check_input_request(&mut self, key: &str, request: &mut Value) -> Checked<()> {
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut empty = Map::new();
        let params = match request.get_mut("params") {
            Some(Value::Object(p)) => p,
            _ => &mut empty,
        };
        match method.as_str() {
            "elicitation/create" => match params.get("mode").and_then(Value::as_str) {
                Some("url") => self.check_url_mode(key, params),
                _ => self.check_form(key, params),
            },
            "sampling/createMessage" => self.check_sampling(key, params),
            _ => self.check_roots(key),
        }
    }

    // ---------------------------------------------------------------- form

    fn check_form(&mut self, key: &str, params: &mut Map<String, Value>) -> Checked<()> {
        if let Some(k) = params
            .keys()
            .find(|k| !matches!(k.as_str(), "mode" | "message" | "requestedSchema" | "_meta"))
        {
            let message = format!("member \"{}\" is not part of a form elicitation", clip(k));
            return Err(self.invalid(
                Reason::InvalidInputRequired,
                "protocol",
                Some(key),
                None,
                message,
            ));
        }
        if !params.get("message").is_some_and(Value::is_string) {
            return Err(self.invalid(
                Reason::InvalidInputRequired,
                "protocol",
                Some(key),
                None,
                "a form elicitation needs a message".into(),
            ));
        }
        let limits = &self.policy.limits;
        let schema_limits = SchemaLimits {
            max_properties: limits.max_properties,
            max_enum_options: limits.max_enum_options,
            max_string_max_length: limits.max_string_max_length,
        };
        let schema_value = params
            .get("requestedSchema")
            .cloned()
            .unwrap_or(Value::Null);
        let mut form = match read_form_schema(&schema_value, &schema_limits) {
            Ok(f) => f,
            Err(SchemaError::NotAllowed(p)) => {
                let message = format!(
                    "the form schema is outside what MCP forms allow: {}",
                    p.message
                );
                return Err(self.invalid(
                    Reason::SchemaNotAllowed,
                    "schema",
                    Some(key),
                    p.field.as_deref(),
                    message,
                ));
            }
            Err(SchemaError::Limit { limit, field }) => {
                self.limit(limit, Some(key), field.as_deref(), "a form")?;
                // Monitoring: the schema is over a limit but otherwise fine; read it without limits.
                let open = SchemaLimits {
                    max_properties: usize::MAX,
                    max_enum_options: usize::MAX,
                    max_string_max_length: u64::MAX,
                };
                read_form_schema(&schema_value, &open).map_err(|_| {
                    self.invalid(
                        Reason::SchemaNotAllowed,
                        "schema",
                        Some(key),
                        None,
                        "the form schema is outside what MCP forms allow".into(),
                    )
                })?
            }
        };
        self.check_secrets(key, params, &mut form)?;
        self.check_option_values(key, params)?;
        self.clean_form_text(key, params)?;
        self.report.asked.push((key.to_owned(), Asked::Form(form)));
        Ok(())
    }

    fn check_secrets(
        &mut self,
        key: &str,
        params: &mut Map<String, Value>,
        form: &mut FormSchema,
    ) -> Checked<()> {
        let action = self.policy.secret_fields;
        let upstream = self.subject.upstream_name.to_owned();
        let advice = "sensitive data must be collected through URL mode (an elicitation with mode \"url\"), never a form";
        let props = params
            .get("requestedSchema")
            .and_then(|s| s.get("properties"));
        let texts: Vec<FieldText<'_>> = form
            .fields
            .iter()
            .map(|f| match props.and_then(|p| p.get(&f.name)) {
                Some(prop) => FieldText::of_property(&f.name, prop),
                None => FieldText::named(&f.name),
            })
            .collect();
        let message = params.get("message").and_then(Value::as_str);
        let found = self.policy.secrets.check_form(key, message, &texts);
        if let Some(hit) = found.message {
            let detail = Some(format!("{} in {}", hit.kind.as_str(), hit.source.as_str()));
            if action == Action::Allow {
                self.note("secret_field", "allow", Some(key), None, detail);
            } else {
                let message = format!(
                    "{upstream} asks for a {} in a form message; {advice}",
                    hit.kind.as_str().replace('_', " ")
                );
                self.violation(
                    Reason::SecretFieldRequested,
                    "secret_field",
                    Some(key),
                    None,
                    message,
                )?;
            }
        }
        let mut stripped = Vec::new();
        for (field, hit) in form.fields.iter().zip(found.fields) {
            let Some(hit) = hit else { continue };
            let detail = Some(format!("{} in {}", hit.kind.as_str(), hit.source.as_str()));
            match action {
                Action::Allow => self.note(
                    "secret_field",
                    "allow",
                    Some(key),
                    Some(&field.name),
                    detail,
                ),
                Action::Strip if !field.required && self.enforcing() => {
                    self.note(
                        "secret_field",
                        "strip",
                        Some(key),
                        Some(&field.name),
                        detail,
                    );
                    stripped.push(field.name.clone());
                }
                _ => {
                    let what = hit.kind.as_str().replace('_', " ");
                    let message = format!(
                        "{upstream} asks for a {what} in form field \"{}\"; {advice}",
                        clip(&field.name)
                    );
                    self.violation(
                        Reason::SecretFieldRequested,
                        "secret_field",
                        Some(key),
                        Some(&field.name),
                        message,
                    )?;
                }
            }
        }
        if !stripped.is_empty() {
            remove_fields(params, &stripped);
            form.fields.retain(|f| !stripped.contains(&f.name));
        }
        Ok(())
    }

    /// Enum machine values are never changed; an unsafe one refuses the form.
    fn check_option_values(&mut self, key: &str, params: &Map<String, Value>) -> Checked<()> {
        let Some(props) = params
            .get("requestedSchema")
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
        else {
            return Ok(());
        };
        for (name, prop) in props {
            if option_values(prop).any(is_unsafe_machine_value) {
                let message = format!("an option value of field \"{}\" contains markup or invisible characters; option values are never altered, so the form is refused", clip(name));
                self.violation(
                    Reason::UnsafeOptionValue,
                    "text_safety",
                    Some(key),
                    Some(name),
                    message,
                )?;
            }
        }
        Ok(())
    }

    fn clean_form_text(&mut self, key: &str, params: &mut Map<String, Value>) -> Checked<()> {
        let limits = self.policy.limits;
        self.clean(
            key,
            None,
            "message",
            params.get_mut("message"),
            limits.max_message_chars,
        )?;
        let Some(Value::Object(schema)) = params.get_mut("requestedSchema") else {
            return Ok(());
        };
        self.clean(
            key,
            None,
            "title",
            schema.get_mut("title"),
            limits.max_title_chars,
        )?;
        self.clean(
            key,
            None,
            "description",
            schema.get_mut("description"),
            limits.max_description_chars,
        )?;
        let Some(Value::Object(props)) = schema.get_mut("properties") else {
            return Ok(());
        };
        for (name, prop) in props.iter_mut() {
            let Value::Object(prop) = prop else { continue };
            self.clean(
                key,
                Some(name),
                "title",
                prop.get_mut("title"),
                limits.max_title_chars,
            )?;
            self.clean(
                key,
                Some(name),
                "description",
                prop.get_mut("description"),
                limits.max_description_chars,
            )?;
            for labels in option_labels_mut(prop) {
                self.clean(
                    key,
                    Some(name),
                    "option_title",
                    Some(labels),
                    limits.max_title_chars,
                )?;
            }
            // Also read by a person, never altered: the pre-filled default;
            // and a request split between the title and the description.
            let text = |k: &str| prop.get(k).and_then(Value::as_str);
            let default = text("default").map(str::to_owned);
            let joined = match (text("title"), text("description")) {
                (Some(t), Some(d)) => Some(format!("{t} {d}")),
                _ => None,
            };
            for read in default.into_iter().chain(joined) {
                self.scan_injection(key, Some(name), &read, TextContext::Form)?;
            }
        }
        Ok(())
    }

    /// Sanitise one human-facing string in place (when enforcing) and scan it
    /// for injection.
    fn clean(
        &mut self,
        key: &str,
        field: Option<&str>,
        part: &'static str,
        slot: Option<&mut Value>,
        max_chars: usize,
    ) -> Checked<()> {
        self.clean_in(key, field, part, slot, max_chars, TextContext::Form)
    }

    fn clean_in(
        &mut self,
        key: &str,
        field: Option<&str>,
        part: &'static str,
        slot: Option<&mut Value>,
        max_chars: usize,
        context: TextContext,
    ) -> Checked<()> {
        let Some(Value::String(text)) = slot else {
            return Ok(());
        };
        let cleaner = TextPolicy {
            html: self.policy.html,
            max_chars,
        };
        let cleaned = cleaner.sanitize(text);
        if !cleaned.findings.is_empty() {
            let findings: Vec<&str> = cleaned.findings.iter().map(|f| f.as_str()).collect();
            let action = if self.enforcing() {
                "sanitize"
            } else {
                "monitor"
            };
            self.note(
                "text_safety",
                action,
                Some(key),
                field,
                Some(format!("{part}: {}", findings.join(","))),
            );
        }
        let scanned = self.scan_injection(key, field, &cleaned.text, context);
        if self.enforcing() {
            if let std::borrow::Cow::Owned(new) = cleaned.text {
                *text = new;
            }
        }
        scanned
    }

    fn scan_injection(
        &mut self,
        key: &str,
        field: Option<&str>,
        text: &str,
        context: TextContext,
    ) -> Checked<()> {
        for hit in self.policy.injection.scan_in(text, context) {
            match hit.action {
                RuleAction::Block => {
                    let message = format!(
                        "{} sent text that matches the prompt-injection rule \"{}\"",
                        self.subject.upstream_name, hit.rule
                    );
                    self.violation(
                        Reason::PromptInjection,
                        "prompt_injection",
                        Some(key),
                        field,
                        message,
                    )
                    .map_err(|e| e.with_data("injectionRule", hit.rule.clone().into()))?;
                }
                RuleAction::Flag => {
                    self.note("prompt_injection", "flag", Some(key), field, Some(hit.rule))
                }
                RuleAction::Off => {}
            }
        }
        Ok(())
    }

    // ----------------------------------------------------------------- url

    fn check_url_mode(&mut self, key: &str, params: &mut Map<String, Value>) -> Checked<()> {
        if let Some(k) = params.keys().find(|k| {
            !matches!(
                k.as_str(),
                "mode" | "message" | "url" | "elicitationId" | "_meta"
            )
        }) {
            let message = format!("member \"{}\" is not part of a URL elicitation", clip(k));
            return Err(self.invalid(
                Reason::InvalidInputRequired,
                "protocol",
                Some(key),
                None,
                message,
            ));
        }
        let (Some(Value::String(url)), Some(Value::String(_))) =
            (params.get("url"), params.get("message"))
        else {
            return Err(self.invalid(
                Reason::InvalidInputRequired,
                "protocol",
                Some(key),
                None,
                "a URL elicitation needs url and message".into(),
            ));
        };
        let url = url.clone();
        if self.policy.url_mode == Action::Block {
            let message = format!(
                "{}'s policy does not allow URL-mode elicitation",
                self.subject.upstream_name
            );
            self.violation(
                Reason::UrlModeNotAllowed,
                "url_mode",
                Some(key),
                None,
                message,
            )?;
        }
        match self.policy.url.check(&url) {
            Ok(checked) => {
                self.note(
                    "url_mode",
                    "allow",
                    Some(key),
                    None,
                    Some(checked.host.clone()),
                );
                self.report
                    .asked
                    .push((key.to_owned(), Asked::Url { host: checked.host }));
            }
            Err(why) => {
                let message = format!(
                    "{} asks to send the user to a URL the gateway does not allow: {}",
                    self.subject.upstream_name,
                    why.explain()
                );
                self.violation(Reason::UrlNotAllowed, "url_mode", Some(key), None, message)
                    .map_err(|e| e.with_data("urlReason", why.as_str().into()))?;
                self.report.asked.push((
                    key.to_owned(),
                    Asked::Url {
                        host: String::new(),
                    },
                ));
            }
        }
        let max = self.policy.limits.max_message_chars;
        self.clean_in(
            key,
            None,
            "message",
            params.get_mut("message"),
            max,
            TextContext::UrlMode,
        )
    }

    // ------------------------------------------------------ deprecated kinds

    fn deprecated_kind(&mut self, key: &str, method: &str) -> Checked<()> {
        let message = format!(
            "{} sent a {method} request, a deprecated kind this policy blocks",
            self.subject.upstream_name
        );
        self.violation(
            Reason::DeprecatedRequestKind,
            "deprecated",
            Some(key),
            None,
            message,
        )
    }

    fn check_sampling(&mut self, key: &str, params: &Map<String, Value>) -> Checked<()> {
        if self.policy.sampling == Action::Block {
            self.deprecated_kind(key, "sampling/createMessage")?;
        }
        let context = params
            .get("includeContext")
            .and_then(Value::as_str)
            .unwrap_or("none");
        if context != "none" && self.policy.sampling_include_context == Action::Block {
            let message = format!("{} asks to include context (\"{}\") in a sampling request; this policy blocks that", self.subject.upstream_name, clip(context));
            self.violation(
                Reason::SamplingContextNotAllowed,
                "deprecated",
                Some(key),
                None,
                message,
            )?;
        }
        for text in sampling_texts(params) {
            self.scan_injection(key, None, &text, TextContext::Form)?;
        }
        self.report.asked.push((key.to_owned(), Asked::Sampling));
        Ok(())
    }

    fn check_roots(&mut self, key: &str) -> Checked<()> {
        if self.policy.roots == Action::Block {
            self.deprecated_kind(key, "roots/list")?;
        }
        self.report.asked.push((key.to_owned(), Asked::Roots));
        Ok(())
    }

    // ---------------------------------------------------------- provenance

    /// The gateway's annotation replaces anything the upstream wrote under
    /// the gateway's own `_meta` prefix.
    fn annotate(&mut self, obj: &mut Map<String, Value>) {
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        let Value::Object(meta) = meta else { return };
        meta.retain(|k, _| !k.starts_with("dev.portcullis/"));
        let verdicts: Vec<Value> = self
            .report
            .verdicts
            .iter()
            .map(|v| {
                let mut o = Map::new();
                o.insert("rule".into(), v.rule.into());
                o.insert("action".into(), v.action.into());
                if let Some(k) = &v.key {
                    o.insert("key".into(), k.clone().into());
                }
                if let Some(f) = &v.field {
                    o.insert("field".into(), f.clone().into());
                }
                if let Some(d) = &v.detail {
                    o.insert("detail".into(), d.clone().into());
                }
                Value::Object(o)
            })
            .collect();
        let urls: Map<String, Value> = self
            .report
            .asked
            .iter()
            .filter_map(|(k, a)| match a {
                Asked::Url { host } if !host.is_empty() => {
                    Some((k.clone(), json!({ "host": host })))
                }
                _ => None,
            })
            .collect();
        let mut provenance = json!({
            "upstream": { "name": self.subject.upstream_name, "endpointHost": self.subject.upstream_host },
            "policy": self.policy.name,
            "mode": if self.enforcing() { "enforce" } else { "monitor" },
            "verdicts": verdicts,
        });
        if !urls.is_empty() {
            provenance["urls"] = Value::Object(urls);
        }
        meta.insert(PROVENANCE_KEY.into(), provenance);
    }
}

fn remove_fields(params: &mut Map<String, Value>, names: &[String]) {
    let Some(Value::Object(schema)) = params.get_mut("requestedSchema") else {
        return;
    };
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.retain(|k, _| !names.contains(k));
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| r.as_str().is_none_or(|n| !names.iter().any(|x| x == n)));
    }
}

/// The machine values of a property's options (`enum`, `oneOf[].const`,
/// `items.enum`, `items.anyOf[].const`).
fn option_values(prop: &Value) -> impl Iterator<Item = &str> {
    let lists = [
        prop.get("enum"),
        prop.get("items").and_then(|i| i.get("enum")),
    ];
    let titled = [
        prop.get("oneOf"),
        prop.get("items").and_then(|i| i.get("anyOf")),
    ];
    let plain = lists
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_str);
    let consts = titled
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|o| o.get("const"))
        .filter_map(Value::as_str);
    plain.chain(consts)
}

/// Every option label of a property: `oneOf[].title`, `items.anyOf[].title`, `enumNames[]`.
fn option_labels_mut(prop: &mut Map<String, Value>) -> Vec<&mut Value> {
    let mut out = Vec::new();
    let mut titled: Vec<&mut Value> = Vec::new();
    for (k, v) in prop.iter_mut() {
        match k.as_str() {
            "oneOf" => titled.push(v),
            "enumNames" => {
                if let Value::Array(names) = v {
                    out.extend(names.iter_mut());
                }
            }
            "items" => {
                if let Some(any_of) = v.get_mut("anyOf") {
                    titled.push(any_of);
                }
            }
            _ => {}
        }
    }
    for list in titled {
        if let Value::Array(options) = list {
            out.extend(options.iter_mut().filter_map(|o| o.get_mut("title")));
        }
    }
    out
}

/// The text of a sampling request a model would read.
fn sampling_texts(params: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(s) = params.get("systemPrompt").and_then(Value::as_str) {
        out.push(s.to_owned());
    }
    for message in params
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let content = message.get("content");
        let blocks: Vec<&Value> = match content {
            Some(Value::Array(a)) => a.iter().collect(),
            Some(v) => vec![v],
            None => Vec::new(),
        };
        out.extend(
            blocks
                .iter()
                .filter_map(|b| b.get("text"))
                .filter_map(Value::as_str)
                .map(str::to_owned),
        );
    }
    out
}
