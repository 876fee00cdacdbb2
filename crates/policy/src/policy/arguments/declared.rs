//! The undeclared-members rule, read once from a listed schema: which
//! members each plainly described object declares. A call's arguments are
//! then walked against this small tree, and a JSON pointer is written only
//! for a member that is not declared.

use serde_json::{Map, Value};

use super::contract::{Problem, MAX_PROBLEMS};

/// The keywords with which a schema says which members an object may have
/// other than its `properties`, or composes its shape from other schemas:
/// where one is present, undeclared members are the validator's to judge.
const OPEN_OR_COMPOSED: [&str; 11] = [
    "additionalProperties",
    "patternProperties",
    "unevaluatedProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "$dynamicRef",
    "if",
    "dependentSchemas",
    "dependencies",
];

/// What a schema says about the members an instance may have.
#[derive(Debug)]
pub(super) enum Declared {
    /// Nothing this rule judges: not a schema object, or an open or
    /// composed one.
    Open,
    Plain {
        /// `type` is (or includes) `object`, or it names `properties`
        /// without a type.
        object: bool,
        /// `properties` by name (sorted); `None` when the schema names no
        /// `properties` member (one that is not an object declares none).
        properties: Option<Vec<(Box<str>, Declared)>>,
        /// `items`, when it is a schema object.
        items: Option<Box<Declared>>,
    },
}

/// One step of the path to a member, kept as borrowed names until a
/// problem needs it written.
enum Step<'a> {
    Name(&'a str),
    Index(usize),
}

impl Declared {
    pub(super) fn of(schema: &Value) -> Declared {
        let Value::Object(schema) = schema else {
            return Declared::Open;
        };
        if OPEN_OR_COMPOSED.iter().any(|k| schema.contains_key(*k)) {
            return Declared::Open;
        }
        let properties = schema.get("properties").map(|p| {
            let mut named: Vec<(Box<str>, Declared)> = p
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, sub)| (name.as_str().into(), Declared::of(sub)))
                .collect();
            named.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            named
        });
        let items = schema
            .get("items")
            .filter(|s| s.is_object())
            .map(|s| Box::new(Declared::of(s)));
        Declared::Plain {
            object: is_object_schema(schema),
            properties,
            items,
        }
    }

    /// Members of `instance` the schema does not declare, at any depth it
    /// describes plainly, added to `out` (at most [`MAX_PROBLEMS`] in all).
    pub(super) fn undeclared(&self, instance: &Value, out: &mut Vec<Problem>) {
        self.walk(instance, &mut Vec::new(), out);
    }

    fn walk<'a>(&self, instance: &'a Value, path: &mut Vec<Step<'a>>, out: &mut Vec<Problem>) {
        let Declared::Plain {
            object,
            properties,
            items,
        } = self
        else {
            return;
        };
        if out.len() >= MAX_PROBLEMS {
            return;
        }
        match instance {
            // Below the arguments, an object that names no `properties` is
            // a map whose keys are data (`{"cards": {"Alex": [...]}}`), as
            // JSON Schema reads it; the arguments themselves are the tool's
            // parameter list, whose names are the contract even when it
            // declares none.
            Value::Object(_) if !path.is_empty() && properties.is_none() => {}
            Value::Object(members) if *object => {
                let declared = properties.as_deref().unwrap_or(&[]);
                for (name, value) in members {
                    path.push(Step::Name(name));
                    match declared.binary_search_by(|(n, _)| (**n).cmp(name.as_str())) {
                        Ok(i) => declared[i].1.walk(value, path, out),
                        Err(_) if out.len() < MAX_PROBLEMS => out.push(Problem {
                            path: pointer(path),
                            keyword: "undeclared".to_owned(),
                            why: "is not a property the tool declares".to_owned(),
                        }),
                        Err(_) => {}
                    }
                    path.pop();
                }
            }
            Value::Array(list) => {
                let Some(items) = items else { return };
                for (i, item) in list.iter().enumerate() {
                    path.push(Step::Index(i));
                    items.walk(item, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
}

/// A schema that describes an object: `type` is (or includes) `object`,
/// or it names `properties` without a type.
fn is_object_schema(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        None => schema.contains_key("properties"),
        _ => false,
    }
}

/// The JSON pointer (RFC 6901) of `path`.
fn pointer(path: &[Step<'_>]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Name(name) => super::contract::push_segment(&mut out, name),
            Step::Index(i) => {
                out.push('/');
                out.push_str(&i.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(schema: Value, instance: Value) -> Vec<String> {
        let mut out = Vec::new();
        Declared::of(&schema).undeclared(&instance, &mut out);
        out.into_iter().map(|p| p.path).collect()
    }

    #[test]
    fn a_pointer_is_written_only_for_what_is_undeclared_and_escaped() {
        let schema = json!({"type": "object", "properties": {
            "a/b": {"type": "object", "properties": {"x": {}}},
            "list": {"type": "array", "items": {"properties": {"k": {}}}}
        }});
        let instance =
            json!({"a/b": {"x": 1, "m~n": 2}, "list": [{"k": 1}, {"k": 2, "z": 3}], "top": 1});
        assert_eq!(paths(schema, instance), ["/a~1b/m~0n", "/list/1/z", "/top"]);
    }

    #[test]
    fn a_properties_member_that_is_no_object_declares_nothing() {
        let schema = json!({"properties": "none", "type": "object"});
        assert_eq!(paths(schema, json!({"q": 1})), ["/q"]);
        let open = json!({"type": "object", "additionalProperties": false});
        assert!(paths(open, json!({"q": 1})).is_empty());
    }

    #[test]
    fn no_more_than_the_most_problems_are_reported() {
        let many: Map<String, Value> = (0..20).map(|i| (format!("p{i}"), json!(i))).collect();
        let out = paths(json!({"type": "object"}), Value::Object(many));
        assert_eq!(out.len(), MAX_PROBLEMS);
    }
}
