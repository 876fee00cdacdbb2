//! The parsed document held against the shape of the type it is read
//! into ([`Shape::of`]): every key the type does not have, every required
//! key not given and every value of the wrong kind, found by walking the
//! document once, each a typed [`Problem`] with its path and span. Nothing
//! here reads the text of an error.

use std::ops::Range;

use toml_edit::{Array, ArrayOfTables, InlineTable, Item, Table, Value};

use super::words::{did_you_mean, Found, Kind, TomlProblem};
use crate::model::Shape;

/// One mistake, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Problem {
    /// The full path of what it is about (`upstream[0].http2`).
    pub(crate) path: String,
    pub(crate) span: Range<usize>,
    pub(crate) what: TomlProblem,
}

/// Every mistake of `root` against `shape`, in document order.
pub(super) fn check(root: &Table, shape: &Shape) -> Vec<Problem> {
    let mut out = Vec::new();
    if !matches!(shape, Shape::Table(_)) {
        // A type the recorder could not walk: serde alone judges it.
        return out;
    }
    let keys = root
        .iter()
        .map(|(k, item)| (k, root.key(k).and_then(|k| k.span()), Node::Item(item)));
    table("", keys, 0..0, shape, &mut out);
    out.sort_by_key(|p| p.span.start);
    out
}

/// A value as it stands in the document: a whole item, or a value inside
/// an inline table or a list.
#[derive(Clone, Copy)]
enum Node<'a> {
    Item(&'a Item),
    Value(&'a Value),
}

impl<'a> Node<'a> {
    fn span(self) -> Option<Range<usize>> {
        match self {
            Node::Item(Item::Value(v)) | Node::Value(v) => v.span(),
            Node::Item(i) => i.span(),
        }
    }

    /// What the value is, in the words of [`Found`].
    fn found(self) -> Found {
        match self {
            Node::Item(Item::Value(v)) | Node::Value(v) => match v {
                Value::String(s) => Found::Text(s.value().clone()),
                Value::Integer(i) => Found::Number(i.display_repr().into_owned()),
                Value::Float(f) => Found::Number(f.display_repr().into_owned()),
                Value::Boolean(b) => Found::Bool(*b.value()),
                Value::Datetime(_) => Found::Datetime,
                Value::Array(_) => Found::List,
                Value::InlineTable(_) => Found::Table,
            },
            Node::Item(Item::Table(_)) => Found::Table,
            Node::Item(Item::ArrayOfTables(_)) => Found::List,
            Node::Item(Item::None) => Found::Table,
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The keys of one table (`owner` is where a missing key is reported).
fn table<'a>(
    path: &str,
    keys: impl Iterator<Item = (&'a str, Option<Range<usize>>, Node<'a>)>,
    owner: Range<usize>,
    shape: &Shape,
    out: &mut Vec<Problem>,
) {
    let names = shape.names();
    let mut given = Vec::new();
    let mut meant = Vec::new();
    for (key, key_span, node) in keys {
        let here = join(path, key);
        given.push(key);
        match shape.field(key) {
            Some(field) => value(&here, node, &field.shape, out),
            None => {
                let expected: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
                if let Some(m) = did_you_mean(key, &expected) {
                    meant.push(m.to_owned());
                }
                out.push(Problem {
                    path: here,
                    span: key_span.or_else(|| node.span()).unwrap_or(0..0),
                    what: TomlProblem::UnknownKey {
                        key: key.to_owned(),
                        expected,
                    },
                });
            }
        }
    }
    for field in shape.fields().iter().filter(|f| f.required) {
        // A misspelt required key is said once, as misspelt.
        if given.contains(&field.name) || meant.iter().any(|m| m == field.name) {
            continue;
        }
        out.push(Problem {
            path: join(path, field.name),
            span: owner.clone(),
            what: TomlProblem::MissingKey {
                key: field.name.to_owned(),
            },
        });
    }
}

/// One value against the shape it must have.
fn value(path: &str, node: Node<'_>, shape: &Shape, out: &mut Vec<Problem>) {
    let span = node.span().unwrap_or(0..0);
    let wrong = |out: &mut Vec<Problem>| {
        out.push(Problem {
            path: path.to_owned(),
            span: span.clone(),
            what: TomlProblem::WrongType {
                found: node.found(),
                expected: Kind::of(shape),
            },
        });
    };
    let fits = |v: &Value| {
        matches!(
            (shape, v),
            (Shape::Any, _)
                | (Shape::Choice(_) | Shape::Text, Value::String(_))
                | (Shape::Bool, Value::Boolean(_))
                | (Shape::Integer, Value::Integer(_))
                | (Shape::Float, Value::Float(_) | Value::Integer(_))
                | (Shape::List(_), Value::Array(_))
                | (Shape::Table(_) | Shape::Map(_), Value::InlineTable(_))
        )
    };
    match node {
        Node::Item(Item::Value(v)) | Node::Value(v) if fits(v) => match v {
            Value::Array(items) => list(path, items, shape, out),
            Value::InlineTable(t) => inline(path, t, shape, out),
            _ => {}
        },
        Node::Item(Item::Table(t))
            if matches!(shape, Shape::Table(_) | Shape::Map(_) | Shape::Any) =>
        {
            let owner = t.span().unwrap_or(span.clone());
            members(path, t, owner, shape, out);
        }
        Node::Item(Item::ArrayOfTables(a)) if matches!(shape, Shape::List(_) | Shape::Any) => {
            tables(path, a, shape, out);
        }
        Node::Item(Item::None) => {}
        _ => wrong(out),
    }
}

fn element(shape: &Shape) -> &Shape {
    match shape {
        Shape::List(inner) => inner,
        _ => &Shape::Any,
    }
}

fn list(path: &str, items: &Array, shape: &Shape, out: &mut Vec<Problem>) {
    for (i, v) in items.iter().enumerate() {
        value(&format!("{path}[{i}]"), Node::Value(v), element(shape), out);
    }
}

fn tables(path: &str, items: &ArrayOfTables, shape: &Shape, out: &mut Vec<Problem>) {
    for (i, t) in items.iter().enumerate() {
        let owner = t.span().unwrap_or(0..0);
        members(&format!("{path}[{i}]"), t, owner, element(shape), out);
    }
}

/// A `[table]`'s keys, against a struct's fields or a map's values.
fn members(path: &str, t: &Table, owner: Range<usize>, shape: &Shape, out: &mut Vec<Problem>) {
    match shape {
        Shape::Map(values) => {
            for (k, item) in t.iter() {
                value(&join(path, k), Node::Item(item), values, out);
            }
        }
        Shape::Table(_) => {
            let keys = t
                .iter()
                .map(|(k, item)| (k, t.key(k).and_then(|k| k.span()), Node::Item(item)));
            table(path, keys, owner, shape, out);
        }
        _ => {}
    }
}

fn inline(path: &str, t: &InlineTable, shape: &Shape, out: &mut Vec<Problem>) {
    match shape {
        Shape::Map(values) => {
            for (k, v) in t.iter() {
                value(&join(path, k), Node::Value(v), values, out);
            }
        }
        Shape::Table(_) => {
            let keys = t
                .iter()
                .map(|(k, v)| (k, t.key(k).and_then(|k| k.span()), Node::Value(v)));
            table(path, keys, t.span().unwrap_or(0..0), shape, out);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::raw::RawConfig;

    fn required(shape: &Shape) -> Vec<&'static str> {
        shape
            .fields()
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name)
            .collect()
    }

    #[test]
    fn the_config_types_are_walked_whole() {
        let shape = Shape::of::<RawConfig>();
        assert!(shape.names().contains(&"listener"), "{shape:?}");
        assert_eq!(required(&shape), Vec::<&str>::new());
        let element = |path: &str| match shape.at(path) {
            Some(Shape::List(e)) => (**e).clone(),
            other => panic!("{path}: {other:?}"),
        };
        // `url` or `command`: which one is missing is the upstream reader's to say.
        assert_eq!(required(&element("upstream")), ["id", "name"]);
        assert_eq!(required(&element("auth")), ["name", "type"]);
        assert_eq!(required(&element("listener")), ["address"]);
        assert_eq!(shape.at("auth.audience"), Some(&Shape::Any));
        assert_eq!(
            shape.at("rate_limits.per_principal.burst"),
            Some(&Shape::Integer)
        );
        assert_eq!(shape.at("tracing.sample_ratio"), Some(&Shape::Float));
    }

    #[test]
    fn a_config_broken_every_way_is_said_once_per_mistake() {
        let text = "[[listener]]\naddres = \"a\"\n[[upstream]]\nid = 5\nname = \"n\"\n[rate_limits]\nper_principal = { rat = \"1/s\" }\n[limitz]\n";
        let doc = toml_edit::ImDocument::parse(text).expect("toml");
        let found: Vec<(String, &str)> = check(doc.as_table(), &Shape::of::<RawConfig>())
            .into_iter()
            .map(|p| {
                let kind = match p.what {
                    TomlProblem::UnknownKey { .. } => "unknown",
                    TomlProblem::MissingKey { .. } => "missing",
                    TomlProblem::WrongType { .. } => "kind",
                    TomlProblem::Syntax { .. } => "syntax",
                };
                (p.path, kind)
            })
            .collect();
        assert_eq!(
            found,
            [
                ("listener[0].addres".to_owned(), "unknown"),
                ("upstream[0].id".to_owned(), "kind"),
                ("rate_limits.per_principal.rat".to_owned(), "unknown"),
                ("limitz".to_owned(), "unknown"),
            ]
        );
    }
}
