//! The shape of a settings type as serde sees it: the keys of every table,
//! which of them must be given, and the kind of value each takes.
//!
//! Nothing is typed twice: [`Shape::of`] runs the type's own `Deserialize`
//! against a recording deserializer that hands every struct a map of its
//! own field names (the list serde passes to `deserialize_struct`) and
//! notes the kind each field asks for. Whether a field must be given is
//! learnt the same way: the type is read again with that one field left
//! out, and a field is required when its visitor says `missing_field`.
//! `toml::Spanned` is seen through (it is where a value is, not what).

use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, Deserialize, DeserializeSeed, Visitor};

/// The private struct name `toml::Spanned` deserializes itself as.
const SPANNED: &str = "$__serde_spanned_private_Spanned";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";

/// Deeper than any settings type nests (a guard against recursive types).
const MAX_DEPTH: usize = 32;

/// What a value of a settings type must be.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Bool,
    Integer,
    /// A number (a whole number is one too).
    Float,
    Text,
    /// A list of values of one shape.
    List(Box<Shape>),
    /// A struct: the only keys it has.
    Table(Vec<Field>),
    /// A map: any key, values of one shape.
    Map(Box<Shape>),
    /// An enum: one of these names.
    Choice(&'static [&'static str]),
    /// Whatever the type reads itself (`deserialize_any`): anything goes.
    Any,
}

/// One key of a table, as serde names it (renames applied).
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: &'static str,
    pub shape: Shape,
    /// It must be given (no `Option`, no `#[serde(default)]`).
    pub required: bool,
}

impl Shape {
    /// The shape of `T`, read from its `Deserialize`. A type the recorder
    /// cannot walk (a recursive one) is [`Shape::Any`].
    pub fn of<T: for<'de> Deserialize<'de>>() -> Shape {
        let mut shape = Shape::Any;
        if T::deserialize(Tracer::new(&mut shape, "", None)).is_err() {
            return Shape::Any;
        }
        let mut tables = Vec::new();
        shape.tables("", &mut tables);
        for path in tables {
            // Leave every key of the table out but the required ones found
            // so far: its visitor names the next required key, until none.
            let mut kept: Vec<&'static str> = Vec::new();
            loop {
                let omit = Omit {
                    path: &path,
                    kept: &kept,
                };
                let mut scratch = Shape::Any;
                match T::deserialize(Tracer::new(&mut scratch, "", Some(omit))) {
                    Err(TraceError::Missing(m)) if !kept.contains(&m) => {
                        shape.mark_required(&path, m);
                        kept.push(m);
                    }
                    _ => break,
                }
            }
        }
        shape
    }

    /// The keys of a table (none for any other shape).
    pub fn fields(&self) -> &[Field] {
        match self {
            Shape::Table(fields) => fields,
            _ => &[],
        }
    }

    /// The key names of a table, in declaration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.fields().iter().map(|f| f.name).collect()
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields().iter().find(|f| f.name == name)
    }

    /// The shape at a dotted path of keys (`limits.max_result_bytes`);
    /// list elements are walked through.
    pub fn at(&self, path: &str) -> Option<&Shape> {
        path.split('.').try_fold(self, |shape, key| {
            let mut s = shape;
            while let Shape::List(inner) = s {
                s = inner;
            }
            s.field(key).map(|f| &f.shape)
        })
    }

    /// The path of every table, in the recorder's path words.
    fn tables(&self, path: &str, out: &mut Vec<String>) {
        match self {
            Shape::Table(fields) => {
                out.push(path.to_owned());
                for f in fields {
                    f.shape.tables(&join(path, f.name), out);
                }
            }
            Shape::List(inner) => inner.tables(&format!("{path}[]"), out),
            Shape::Map(inner) => inner.tables(&join(path, "*"), out),
            _ => {}
        }
    }

    fn mark_required(&mut self, path: &str, name: &str) {
        let mut shape = self;
        let mut rest = path;
        loop {
            if let Some(after) = rest.strip_prefix("[]") {
                let Shape::List(inner) = shape else { return };
                shape = inner;
                rest = after.strip_prefix('.').unwrap_or(after);
                continue;
            }
            if rest.is_empty() {
                break;
            }
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            let (key, after) = rest.split_at(end);
            rest = after.strip_prefix('.').unwrap_or(after);
            shape = match shape {
                Shape::Table(fields) => match fields.iter_mut().find(|f| f.name == key) {
                    Some(f) => &mut f.shape,
                    None => return,
                },
                Shape::Map(inner) if key == "*" => inner,
                _ => return,
            };
        }
        if let Shape::Table(fields) = shape {
            if let Some(f) = fields.iter_mut().find(|f| f.name == name) {
                f.required = true;
            }
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

/// Why a recording stopped: a struct's visitor said a field is missing, or
/// anything else a `Deserialize` said.
#[derive(Debug)]
enum TraceError {
    Missing(&'static str),
    Other(String),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Missing(name) => write!(f, "missing {name}"),
            TraceError::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for TraceError {}

impl de::Error for TraceError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        TraceError::Other(msg.to_string())
    }

    fn missing_field(field: &'static str) -> Self {
        TraceError::Missing(field)
    }
}

/// The keys to leave out: all of the table at `path` but `kept`.
#[derive(Clone, Copy)]
struct Omit<'a> {
    path: &'a str,
    kept: &'a [&'static str],
}

/// A deserializer that answers every request with a neutral value and
/// writes the kind asked for into `out`.
struct Tracer<'a> {
    out: &'a mut Shape,
    path: String,
    /// The keys to leave out, when learning which are required.
    omit: Option<Omit<'a>>,
    depth: usize,
}

impl<'a> Tracer<'a> {
    fn new(out: &'a mut Shape, path: &str, omit: Option<Omit<'a>>) -> Self {
        Tracer {
            out,
            path: path.to_owned(),
            omit,
            depth: 0,
        }
    }

    fn inner<'b>(&self, out: &'b mut Shape, path: String) -> Result<Tracer<'b>, TraceError>
    where
        'a: 'b,
    {
        if self.depth >= MAX_DEPTH {
            return Err(TraceError::Other("nested too deep".into()));
        }
        Ok(Tracer {
            out,
            path,
            omit: self.omit,
            depth: self.depth + 1,
        })
    }
}

/// One element of a list, or the fields of a struct, handed to a visitor.
struct Entries<'a, 'p> {
    parent: &'p Tracer<'a>,
    keys: Vec<&'static str>,
    next: usize,
    /// The shapes recorded, one per key handed out.
    shapes: Vec<Shape>,
    /// A map's or a list's element path word, instead of the key.
    element: Option<&'static str>,
    /// `toml::Spanned`: its value field is the parent's own value.
    spanned: bool,
}

impl<'a, 'p> Entries<'a, 'p> {
    fn new(parent: &'p Tracer<'a>, keys: Vec<&'static str>) -> Self {
        let shapes = vec![Shape::Any; keys.len()];
        Entries {
            parent,
            keys,
            next: 0,
            shapes,
            element: None,
            spanned: false,
        }
    }

    fn value_seed<'de, S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, TraceError> {
        let i = self.next.saturating_sub(1);
        let key = self.keys.get(i).copied().unwrap_or_default();
        let path = match self.element {
            Some("[]") => format!("{}[]", self.parent.path),
            Some(word) => join(&self.parent.path, word),
            None if self.spanned => self.parent.path.clone(),
            None => join(&self.parent.path, key),
        };
        let Some(slot) = self.shapes.get_mut(i) else {
            return Err(TraceError::Other("value before key".into()));
        };
        if self.spanned && key != SPANNED_VALUE {
            // The span's own numbers.
            let mut ignored = Shape::Any;
            return seed.deserialize(self.parent.inner(&mut ignored, path)?);
        }
        seed.deserialize(self.parent.inner(slot, path)?)
    }
}

impl<'de> de::MapAccess<'de> for Entries<'_, '_> {
    type Error = TraceError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, TraceError> {
        if self.element.is_some() {
            // A map's key: whatever the key type reads (a `Spanned` too).
            if self.next >= self.keys.len() {
                return Ok(None);
            }
            self.next += 1;
            let mut ignored = Shape::Any;
            let path = self.parent.path.clone();
            return seed
                .deserialize(self.parent.inner(&mut ignored, path)?)
                .map(Some);
        }
        while let Some(key) = self.keys.get(self.next).copied() {
            self.next += 1;
            let omitted = !self.spanned
                && self
                    .parent
                    .omit
                    .is_some_and(|o| o.path == self.parent.path && !o.kept.contains(&key));
            if !omitted {
                return seed
                    .deserialize(BorrowedStrDeserializer::new(key))
                    .map(Some);
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, TraceError> {
        self.value_seed(seed)
    }
}

impl<'de> de::SeqAccess<'de> for Entries<'_, '_> {
    type Error = TraceError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, TraceError> {
        if self.next >= self.keys.len() {
            return Ok(None);
        }
        self.next += 1;
        self.value_seed(seed).map(Some)
    }
}

/// An enum read as its first variant, without content.
struct FirstVariant<'a, 'p>(&'p Tracer<'a>, &'static str);

impl<'de, 'a, 'p> de::EnumAccess<'de> for FirstVariant<'a, 'p> {
    type Error = TraceError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self), TraceError> {
        let v = seed.deserialize(BorrowedStrDeserializer::new(self.1))?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for FirstVariant<'_, '_> {
    type Error = TraceError;

    fn unit_variant(self) -> Result<(), TraceError> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, TraceError> {
        let mut ignored = Shape::Any;
        seed.deserialize(self.0.inner(&mut ignored, self.0.path.clone())?)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        visitor.visit_seq(Entries::new(self.0, Vec::new()))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        visitor.visit_map(Entries::new(self.0, fields.to_vec()))
    }
}

macro_rules! record {
    ($($method:ident => $shape:expr, $visit:ident($($value:expr)?);)*) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
            *self.out = $shape;
            visitor.$visit($($value)?)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Tracer<'_> {
    type Error = TraceError;

    record! {
        deserialize_any => Shape::Any, visit_borrowed_str("");
        deserialize_bool => Shape::Bool, visit_bool(false);
        deserialize_i8 => Shape::Integer, visit_i64(0);
        deserialize_i16 => Shape::Integer, visit_i64(0);
        deserialize_i32 => Shape::Integer, visit_i64(0);
        deserialize_i64 => Shape::Integer, visit_i64(0);
        deserialize_i128 => Shape::Integer, visit_i64(0);
        deserialize_u8 => Shape::Integer, visit_u64(0);
        deserialize_u16 => Shape::Integer, visit_u64(0);
        deserialize_u32 => Shape::Integer, visit_u64(0);
        deserialize_u64 => Shape::Integer, visit_u64(0);
        deserialize_u128 => Shape::Integer, visit_u64(0);
        deserialize_f32 => Shape::Float, visit_f64(0.0);
        deserialize_f64 => Shape::Float, visit_f64(0.0);
        deserialize_char => Shape::Text, visit_char(' ');
        deserialize_str => Shape::Text, visit_borrowed_str("");
        deserialize_string => Shape::Text, visit_borrowed_str("");
        deserialize_identifier => Shape::Text, visit_borrowed_str("");
        deserialize_bytes => Shape::Any, visit_borrowed_bytes(b"");
        deserialize_byte_buf => Shape::Any, visit_borrowed_bytes(b"");
        deserialize_unit => Shape::Any, visit_unit();
        deserialize_ignored_any => Shape::Any, visit_unit();
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        *self.out = Shape::Any;
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        self.deserialize_tuple(1, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        let mut elements = Entries::new(&self, vec![""; len]);
        elements.element = Some("[]");
        let value = visitor.visit_seq(&mut elements)?;
        let element = elements.shapes.into_iter().next().unwrap_or(Shape::Any);
        *self.out = Shape::List(Box::new(element));
        Ok(value)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        let mut entries = Entries::new(&self, vec![""]);
        entries.element = Some("*");
        let value = visitor.visit_map(&mut entries)?;
        let values = entries.shapes.into_iter().next().unwrap_or(Shape::Any);
        *self.out = Shape::Map(Box::new(values));
        Ok(value)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        let mut entries = Entries::new(&self, fields.to_vec());
        entries.spanned = name == SPANNED;
        let value = visitor.visit_map(&mut entries)?;
        let spanned = entries.spanned;
        let keys = std::mem::take(&mut entries.keys);
        let shapes = std::mem::take(&mut entries.shapes);
        *self.out = if spanned {
            keys.iter()
                .zip(shapes)
                .find(|(k, _)| **k == SPANNED_VALUE)
                .map_or(Shape::Any, |(_, s)| s)
        } else {
            Shape::Table(
                keys.into_iter()
                    .zip(shapes)
                    .map(|(name, shape)| Field {
                        name,
                        shape,
                        required: false,
                    })
                    .collect(),
            )
        };
        Ok(value)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        let first = variants.first().copied().unwrap_or_default();
        let value = visitor.visit_enum(FirstVariant(&self, first))?;
        *self.out = Shape::Choice(variants);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::BTreeMap;
    use toml::Spanned;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Top {
        name: Spanned<String>,
        #[serde(rename = "type")]
        kind: String,
        count: Option<Spanned<i64>>,
        #[serde(default)]
        items: Vec<Spanned<Item>>,
        ratio: Option<f64>,
        on: bool,
        labels: Option<BTreeMap<String, u32>>,
        #[serde(default)]
        terms: BTreeMap<Spanned<String>, Vec<Spanned<String>>>,
        colour: Option<Colour>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        id: String,
        tags: Option<Vec<String>>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Colour {
        Red,
        DeepBlue,
    }

    #[test]
    fn the_shape_is_read_from_the_type() {
        let shape = Shape::of::<Top>();
        assert_eq!(
            shape.names(),
            ["name", "type", "count", "items", "ratio", "on", "labels", "terms", "colour"]
        );
        let required: Vec<&str> = shape
            .fields()
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name)
            .collect();
        assert_eq!(required, ["name", "type", "on"]);
        assert_eq!(shape.at("name"), Some(&Shape::Text));
        assert_eq!(shape.at("count"), Some(&Shape::Integer));
        assert_eq!(shape.at("ratio"), Some(&Shape::Float));
        assert_eq!(shape.at("on"), Some(&Shape::Bool));
        assert_eq!(
            shape.at("labels"),
            Some(&Shape::Map(Box::new(Shape::Integer)))
        );
        assert_eq!(
            shape.at("terms"),
            Some(&Shape::Map(Box::new(Shape::List(Box::new(Shape::Text)))))
        );
        assert_eq!(
            shape.at("colour"),
            Some(&Shape::Choice(&["red", "deep_blue"]))
        );
        assert_eq!(
            shape.at("items.tags"),
            Some(&Shape::List(Box::new(Shape::Text)))
        );
        let item = shape.at("items").expect("items");
        let Shape::List(item) = item else {
            panic!("{item:?}")
        };
        assert_eq!(item.names(), ["id", "tags"]);
        assert!(item.field("id").is_some_and(|f| f.required));
        assert!(item.field("tags").is_some_and(|f| !f.required));
        assert_eq!(shape.at("nothing"), None);
    }
}
