//! The definition the gateway listed, as a contract for calls: a tool's
//! `inputSchema` (compiled once, on first use, by the `jsonschema` crate:
//! types, `required`, `enum`, `const`, bounds, `pattern`, `format`,
//! composition and references inside the schema; never a reference out of
//! it), a prompt's `arguments`, a resource template (completions name it).
//!
//! A problem names where (a JSON pointer into the arguments) and which
//! keyword, never the value: the `jsonschema` error's own text quotes the
//! instance, so it is never shown.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{PatternOptions, Validator};
use serde_json::{Map, Value};

use super::declared::Declared;
use super::hosts::is_address_name;
use crate::policy::secrets::{FieldText, SecretFieldDetector, SecretKind};

/// What one listed item promises about the calls it takes.
#[derive(Debug)]
pub struct Contract {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Tool {
        schema: Value,
        compiled: OnceLock<Compiled>,
        /// What the rules read of each listed property, at the first call.
        read: Box<PropertiesRead>,
        /// The behaviour hints it was listed with (approval rules read them).
        hints: portcullis_approval::Annotations,
        /// Listed as a secret store (`secret_store.rs`).
        secret_store: bool,
    },
    Prompt {
        /// (name, required), as listed.
        arguments: Vec<(String, bool)>,
    },
    /// A resource template: nothing to check but that it was listed.
    Template,
}

struct Compiled {
    /// `None` when the schema cannot be compiled (an unknown draft, a
    /// pattern neither regex engine reads, a reference out of the schema):
    /// then only the undeclared-properties rule reads it.
    validator: Option<Validator>,
    /// What the undeclared-members rule reads of the schema.
    declared: Declared,
}

/// What the argument rules read of a tool's properties, once (not per
/// call): boxed, so an unread listing costs one pointer.
#[derive(Debug, Default)]
struct PropertiesRead {
    /// The secret each property says it holds.
    kinds: OnceLock<PropertyKinds>,
    /// Whether each property's name says it holds an address (`hosts.rs`).
    address_names: OnceLock<BTreeMap<String, bool>>,
}

/// What the field detector says each property of a tool's schema holds,
/// by its name and schema (its title, description, …).
#[derive(Debug)]
struct PropertyKinds {
    /// The detector that read them ([`SecretFieldDetector::id`]).
    detector: u64,
    by_name: BTreeMap<String, Option<SecretKind>>,
}

impl PropertyKinds {
    fn of(schema: &Value, detector: &SecretFieldDetector) -> Self {
        let by_name = properties(schema)
            .into_iter()
            .flatten()
            .map(|(name, prop)| {
                let kind = detector.property_kind(FieldText::of_property(name, prop));
                (name.clone(), kind)
            })
            .collect();
        PropertyKinds {
            detector: detector.id(),
            by_name,
        }
    }
}

/// A schema's `properties`, when an object.
fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("validator", &self.validator.is_some())
            .finish()
    }
}

/// Why arguments do not fit: where and which keyword (`required`, `type`,
/// `enum`, `const`, `minimum`, `pattern`, `format`, …, or `undeclared`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// A JSON pointer into the arguments (`""`: the arguments themselves).
    pub path: String,
    pub keyword: String,
    /// What is wrong, in words that never quote the value.
    pub why: String,
}

/// The most problems one check reports (the first is refused; the rest
/// are recorded when monitoring).
pub(super) const MAX_PROBLEMS: usize = 8;

/// The backtracking budget of a schema `pattern` that needs the
/// backtracking engine (lookaround): a server writes the pattern, so its
/// cost per string is bounded.
const BACKTRACK_LIMIT: usize = 10_000;

impl Contract {
    /// A listed tool: its `inputSchema` (none, or not an object: an object
    /// with no properties).
    pub fn tool(item: &Value) -> Contract {
        let schema = match item.get("inputSchema") {
            Some(s @ Value::Object(_)) => s.clone(),
            _ => serde_json::json!({"type": "object"}),
        };
        let hints = portcullis_approval::Annotations::of_listed(item.get("annotations"));
        Contract {
            kind: Kind::Tool {
                schema,
                compiled: OnceLock::new(),
                read: Box::default(),
                hints,
                secret_store: super::secret_store::lists_a_secret_store(item),
            },
        }
    }

    /// A listed tool's behaviour hints (`None` for a prompt or template).
    pub fn hints(&self) -> Option<portcullis_approval::Annotations> {
        match &self.kind {
            Kind::Tool { hints, .. } => Some(*hints),
            _ => None,
        }
    }

    /// Whether the tool was listed as one whose job is to return secrets
    /// (a vault, a password manager: `secret_store.rs`).
    pub fn returns_secrets(&self) -> bool {
        matches!(
            &self.kind,
            Kind::Tool {
                secret_store: true,
                ..
            }
        )
    }

    /// A listed prompt: its `arguments` (name, required).
    pub fn prompt(item: &Value) -> Contract {
        let arguments = item
            .get("arguments")
            .and_then(Value::as_array)
            .map(|args| {
                args.iter()
                    .filter_map(|a| {
                        let name = a.get("name")?.as_str()?.to_owned();
                        let required = a.get("required").and_then(Value::as_bool) == Some(true);
                        Some((name, required))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Contract {
            kind: Kind::Prompt { arguments },
        }
    }

    /// A listed resource template.
    pub fn template() -> Contract {
        Contract {
            kind: Kind::Template,
        }
    }

    /// The tool's schema (`None` for a prompt or template).
    pub fn schema(&self) -> Option<&Value> {
        match &self.kind {
            Kind::Tool { schema, .. } => Some(schema),
            _ => None,
        }
    }

    /// The secret a member named `key` says it holds, by `detector`: by
    /// the listed property of that name (its name and schema), or by the
    /// name alone. A tool's properties are read once, at the first call
    /// (again per call only under another detector, after a reload).
    pub(crate) fn property_kind(
        &self,
        key: &str,
        detector: &SecretFieldDetector,
    ) -> Option<SecretKind> {
        let Kind::Tool { schema, read, .. } = &self.kind else {
            return detector.property_kind(FieldText::named(key));
        };
        let cached = read
            .kinds
            .get_or_init(|| PropertyKinds::of(schema, detector));
        if cached.detector == detector.id() {
            return match cached.by_name.get(key) {
                Some(kind) => *kind,
                None => detector.property_kind(FieldText::named(key)),
            };
        }
        match properties(schema).and_then(|p| p.get(key)) {
            Some(prop) => detector.property_kind(FieldText::of_property(key, prop)),
            None => detector.property_kind(FieldText::named(key)),
        }
    }

    /// Whether a member named `key` holds an address by its name
    /// ([`is_address_name`]): a tool's properties are read once, at the
    /// first call.
    pub(crate) fn names_address(&self, key: &str) -> bool {
        let Kind::Tool { schema, read, .. } = &self.kind else {
            return is_address_name(key);
        };
        let names = read.address_names.get_or_init(|| {
            properties(schema)
                .into_iter()
                .flatten()
                .map(|(name, _)| (name.clone(), is_address_name(name)))
                .collect()
        });
        match names.get(key) {
            Some(addressed) => *addressed,
            None => is_address_name(key),
        }
    }

    /// Compile the schema now (it is otherwise compiled at the first call).
    pub fn compile(&self) {
        if let Kind::Tool {
            schema, compiled, ..
        } = &self.kind
        {
            compiled.get_or_init(|| Compiled::of(schema));
        }
    }

    /// Whether a prompt declares an argument `name`.
    pub fn declares_argument(&self, name: &str) -> bool {
        match &self.kind {
            Kind::Prompt { arguments } => arguments.iter().any(|(n, _)| n == name),
            Kind::Tool { schema, .. } => schema
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.contains_key(name)),
            Kind::Template => true,
        }
    }

    /// The problems of a completion's argument (`{name: partial value}`):
    /// only whether the prompt declares that name. A completion completes
    /// one argument while others are still unwritten, so `required` does
    /// not apply, and the value is a prefix, not yet a value.
    pub fn completion_problems(&self, argument: &Value) -> Vec<Problem> {
        let Some(given) = argument.as_object() else {
            return Vec::new();
        };
        given
            .keys()
            .filter(|name| !self.declares_argument(name))
            .map(|name| Problem {
                path: pointer_join("", name),
                keyword: "undeclared".to_owned(),
                why: "is not an argument the prompt declares".to_owned(),
            })
            .collect()
    }

    /// The problems of `arguments` (a tool's object, a prompt's map)
    /// against the definition, schema keywords first; undeclared
    /// properties are reported with keyword `undeclared`.
    pub fn problems(&self, arguments: &Value) -> Vec<Problem> {
        match &self.kind {
            Kind::Tool {
                schema, compiled, ..
            } => {
                let compiled = compiled.get_or_init(|| Compiled::of(schema));
                let mut out = compiled.schema_problems(arguments);
                compiled.declared.undeclared(arguments, &mut out);
                out
            }
            Kind::Prompt {
                arguments: declared,
            } => prompt_problems(declared, arguments),
            Kind::Template => Vec::new(),
        }
    }
}

impl Compiled {
    fn of(schema: &Value) -> Compiled {
        // The linear-time engine first; a pattern that needs lookaround
        // gets the backtracking one, bounded.
        let linear = jsonschema::options()
            .should_validate_formats(true)
            .with_pattern_options(PatternOptions::regex())
            .build(schema);
        let validator = linear.ok().or_else(|| {
            jsonschema::options()
                .should_validate_formats(true)
                .with_pattern_options(
                    PatternOptions::fancy_regex().backtrack_limit(BACKTRACK_LIMIT),
                )
                .build(schema)
                .ok()
        });
        Compiled {
            validator,
            declared: Declared::of(schema),
        }
    }

    fn schema_problems(&self, arguments: &Value) -> Vec<Problem> {
        let Some(validator) = &self.validator else {
            return Vec::new();
        };
        if validator.is_valid(arguments) {
            return Vec::new();
        }
        validator
            .iter_errors(arguments)
            .take(MAX_PROBLEMS)
            .map(|e| {
                let at = e.instance_path().as_str().to_owned();
                problem_of(at, e.kind())
            })
            .collect()
    }
}

/// A `jsonschema` error in words that name the keyword and, where the
/// schema gives one, its limit, never the value.
fn problem_of(at: String, kind: &ValidationErrorKind) -> Problem {
    use ValidationErrorKind as K;
    let keyword = kind.keyword().to_owned();
    let (path, why) = match kind {
        K::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            (pointer_join(&at, name), "is required".to_owned())
        }
        K::AdditionalProperties { unexpected } | K::UnevaluatedProperties { unexpected } => {
            let first = unexpected.first().map(String::as_str).unwrap_or_default();
            (
                pointer_join(&at, first),
                "is not a property the tool declares".to_owned(),
            )
        }
        K::Type { kind } => (at, format!("must be {}", type_words(kind))),
        K::Enum { .. } => (at, "is not one of the values the tool lists".to_owned()),
        K::Constant { .. } => (at, "is not the value the tool requires".to_owned()),
        K::Minimum { limit } | K::ExclusiveMinimum { limit } => {
            (at, format!("is below the tool's {keyword} ({limit})"))
        }
        K::Maximum { limit } | K::ExclusiveMaximum { limit } => {
            (at, format!("is above the tool's {keyword} ({limit})"))
        }
        K::MinLength { limit } => (
            at,
            format!("is shorter than the tool's minLength ({limit})"),
        ),
        K::MaxLength { limit } => (at, format!("is longer than the tool's maxLength ({limit})")),
        K::MinItems { limit } => (at, format!("has fewer items than minItems ({limit})")),
        K::MaxItems { limit } => (at, format!("has more items than maxItems ({limit})")),
        K::MinProperties { limit } => (
            at,
            format!("has fewer members than minProperties ({limit})"),
        ),
        K::MaxProperties { limit } => {
            (at, format!("has more members than maxProperties ({limit})"))
        }
        K::Pattern { .. } | K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
            (at, "does not match the tool's pattern".to_owned())
        }
        K::Format { format } => (at, format!("is not a valid {}", printable(format))),
        K::MultipleOf { .. } => (at, "is not a multiple the tool allows".to_owned()),
        K::UniqueItems => (at, "has items that repeat".to_owned()),
        _ => (at, format!("does not fit the tool's schema ({keyword})")),
    };
    Problem { path, keyword, why }
}

fn type_words(kind: &jsonschema::error::TypeKind) -> String {
    use jsonschema::error::TypeKind;
    match kind {
        TypeKind::Single(t) => format!("of type {t}"),
        TypeKind::Multiple(set) => {
            let names: Vec<String> = set.iter().map(|t| t.to_string()).collect();
            format!("of type {}", names.join(" or "))
        }
    }
}

/// A schema's word (a format name) as the message may show it.
fn printable(word: &str) -> String {
    crate::model::printable_name(word)
}

/// `at` with one more pointer segment (`~` and `/` escaped, RFC 6901).
pub(crate) fn pointer_join(at: &str, segment: &str) -> String {
    let mut out = String::with_capacity(at.len() + segment.len() + 1);
    out.push_str(at);
    push_segment(&mut out, segment);
    out
}

/// One more pointer segment on `at`, in place (`~` and `/` escaped).
pub(crate) fn push_segment(at: &mut String, segment: &str) {
    at.push('/');
    for c in segment.chars() {
        match c {
            '~' => at.push_str("~0"),
            '/' => at.push_str("~1"),
            c => at.push(c),
        }
    }
}

fn prompt_problems(declared: &[(String, bool)], arguments: &Value) -> Vec<Problem> {
    let empty = Map::new();
    let given = match arguments {
        Value::Object(m) => m,
        Value::Null => &empty,
        _ => {
            return vec![Problem {
                path: String::new(),
                keyword: "type".to_owned(),
                why: "must be an object of strings".to_owned(),
            }]
        }
    };
    let mut out = Vec::new();
    for (name, required) in declared {
        if *required && !given.contains_key(name) {
            out.push(Problem {
                path: pointer_join("", name),
                keyword: "required".to_owned(),
                why: "is required".to_owned(),
            });
        }
    }
    for (name, value) in given {
        let path = pointer_join("", name);
        if !declared.iter().any(|(n, _)| n == name) {
            out.push(Problem {
                path,
                keyword: "undeclared".to_owned(),
                why: "is not an argument the prompt declares".to_owned(),
            });
        } else if !value.is_string() {
            out.push(Problem {
                path,
                keyword: "type".to_owned(),
                why: "must be of type string".to_owned(),
            });
        }
    }
    out.truncate(MAX_PROBLEMS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(schema: Value) -> Contract {
        Contract::tool(&json!({"name": "t", "inputSchema": schema}))
    }

    fn keywords(c: &Contract, args: Value) -> Vec<(String, String)> {
        c.problems(&args)
            .into_iter()
            .map(|p| (p.path, p.keyword))
            .collect()
    }

    #[test]
    fn every_keyword_names_where_and_never_the_value() {
        let c = tool(json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 2, "pattern": "^[A-Z]"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "unit": {"enum": ["c", "f"]},
                "kind": {"const": "forecast"},
                "when": {"type": "string", "format": "date"},
                "mail": {"type": "string", "format": "email"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
            },
            "required": ["city"]
        }));
        assert!(c.problems(&json!({"city": "Paris", "days": 3})).is_empty());
        let cases = [
            (json!({}), "/city", "required"),
            (json!({"city": 5}), "/city", "type"),
            (json!({"city": "p"}), "/city", "minLength"),
            (json!({"city": "paris"}), "/city", "pattern"),
            (json!({"city": "Paris", "days": 0}), "/days", "minimum"),
            (json!({"city": "Paris", "days": 15}), "/days", "maximum"),
            (json!({"city": "Paris", "days": 2.5}), "/days", "type"),
            (json!({"city": "Paris", "unit": "k"}), "/unit", "enum"),
            (json!({"city": "Paris", "kind": "x"}), "/kind", "const"),
            (
                json!({"city": "Paris", "when": "tomorrow"}),
                "/when",
                "format",
            ),
            (
                json!({"city": "Paris", "mail": "not-mail"}),
                "/mail",
                "format",
            ),
            (
                json!({"city": "Paris", "tags": ["a", "b", "c"]}),
                "/tags",
                "maxItems",
            ),
            (json!({"city": "Paris", "tags": [1]}), "/tags/0", "type"),
            (json!({"city": "Paris", "x": 1}), "/x", "undeclared"),
        ];
        for (args, path, keyword) in cases {
            let problems = c.problems(&args);
            assert!(
                problems
                    .iter()
                    .any(|p| p.path == path && p.keyword == keyword),
                "{args}: {problems:?}"
            );
            for p in &problems {
                for v in [
                    "Paris",
                    "paris",
                    "tomorrow",
                    "not-mail",
                    "forecast\"",
                    "\"k\"",
                ] {
                    assert!(!p.why.contains(v), "{p:?} quotes a value");
                }
            }
        }
    }

    #[test]
    fn undeclared_members_are_found_where_the_schema_is_plain() {
        let c = tool(json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"k": {}}}}
        }}));
        assert_eq!(
            keywords(
                &c,
                json!({"a": {"b": "x", "c": 1}, "list": [{"k": 1}, {"z": 2}], "top": 1})
            ),
            [
                ("/a/c".to_owned(), "undeclared".to_owned()),
                ("/list/1/z".to_owned(), "undeclared".to_owned()),
                ("/top".to_owned(), "undeclared".to_owned())
            ]
        );
        // Open or composed schemas are the validator's to judge.
        for open in [
            json!({"type": "object", "properties": {}, "additionalProperties": true}),
            json!({"type": "object", "patternProperties": {"^x": {}}}),
            json!({"allOf": [{"properties": {"a": {}}}]}),
        ] {
            assert!(
                tool(open.clone()).problems(&json!({"xa": 1})).is_empty(),
                "{open}"
            );
        }
        // Below the arguments, an object with no properties is a map.
        let c = tool(json!({"type": "object", "properties": {
            "cards": {"type": "object", "description": "cards by player"},
            "by": {"type": "object", "properties": {}}
        }}));
        assert!(c
            .problems(&json!({"cards": {"Alex": ["A of spades"], "Sam": []}}))
            .is_empty());
        assert_eq!(
            keywords(&c, json!({"by": {"k": 1}})),
            [("/by/k".to_owned(), "undeclared".to_owned())]
        );
        // The arguments with no properties declare none.
        assert_eq!(
            keywords(&tool(json!({"type": "object"})), json!({"p": "~/.ssh"})),
            [("/p".to_owned(), "undeclared".to_owned())]
        );
        // A name with / and ~ is escaped in the pointer.
        assert_eq!(
            keywords(
                &tool(json!({"type": "object", "properties": {}})),
                json!({"a/b~": 1})
            ),
            [("/a~1b~0".to_owned(), "undeclared".to_owned())]
        );
    }

    #[test]
    fn a_schema_that_cannot_compile_still_has_its_properties_read() {
        let c = tool(
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}),
        );
        assert_eq!(
            keywords(&c, json!({"a": 1, "b": 2})),
            [("/b".to_owned(), "undeclared".to_owned())]
        );
        // A lookaround pattern compiles with the bounded backtracking engine.
        let c = tool(
            json!({"type": "object", "properties": {"p": {"type": "string", "pattern": "^(?!admin).*$"}}}),
        );
        assert!(c.problems(&json!({"p": "user"})).is_empty());
        assert_eq!(
            keywords(&c, json!({"p": "admin"})),
            [("/p".to_owned(), "pattern".to_owned())]
        );
    }

    #[test]
    fn prompts_take_declared_strings() {
        let c = Contract::prompt(&json!({"name": "p", "arguments": [
            {"name": "topic", "required": true}, {"name": "tone"}]}));
        assert!(c.problems(&json!({"topic": "x"})).is_empty());
        assert_eq!(
            keywords(&c, json!({"tone": 1, "extra": "y"})),
            [
                ("/topic".to_owned(), "required".to_owned()),
                ("/tone".to_owned(), "type".to_owned()),
                ("/extra".to_owned(), "undeclared".to_owned())
            ]
        );
        assert!(c.declares_argument("tone") && !c.declares_argument("extra"));
        // A completion of one argument while a required other is unwritten.
        assert!(c.completion_problems(&json!({"tone": "fr"})).is_empty());
        let undeclared = c.completion_problems(&json!({"extra": "x"}));
        assert_eq!(undeclared.len(), 1);
        assert_eq!(undeclared[0].keyword, "undeclared");
    }
}
