//! A document's tree read into a serde type, as `serde_norway` read YAML
//! before (its scalar resolution, its error messages), so that documents
//! and messages did not change with the reader: a plain scalar is null
//! (`~`, `null`, empty), a boolean (`true`, `False`), an integer
//! (decimal, `0x`, `0o`, `0b`; `007` is text), a float (`1.5`, `1e3`,
//! `.inf`, `.nan`) or text; a quoted one is text. An error names the
//! path to the node it is about (`resources[0].target`), its line and
//! column.

use std::fmt;

use serde::de::{self, DeserializeOwned, IntoDeserializer, Unexpected, Visitor};

use super::{Kind, Node, ReadError};
use crate::error::{Position, Problem};

/// `root` as a `T`.
pub(super) fn from_node<T: DeserializeOwned>(root: &Node<'_>) -> Result<T> {
    T::deserialize(At {
        node: root,
        path: Path::Root,
    })
}

/// A reading error, and the node it is about (its character index and
/// path) once known.
#[derive(Debug)]
pub(super) struct Error {
    message: String,
    at: Option<(usize, String)>,
}

impl Error {
    pub(super) fn custom_at(message: String, at: usize) -> Error {
        Error {
            message,
            at: Some((at, ".".to_owned())),
        }
    }

    /// The error placed at `node`, unless it already has a place.
    fn at(mut self, node: &Node<'_>, path: Path<'_>) -> Error {
        if self.at.is_none() {
            self.at = Some((node.at, path.to_string()));
        }
        self
    }

    /// As a [`ReadError`] of `text`: `path: message at line L column C`,
    /// with the line and the place on it.
    pub(super) fn read_error(self, text: &str) -> ReadError {
        let Some((at, path)) = self.at else {
            return ReadError {
                line: None,
                position: None,
                problem: Problem::Syntax(self.message),
            };
        };
        let byte = text.char_indices().nth(at).map_or(text.len(), |(i, _)| i);
        let line_start = text[..byte].rfind('\n').map_or(0, |i| i + 1);
        let line = text[..byte].matches('\n').count() + 1;
        let column = text[line_start..byte].chars().count() + 1;
        let mut message = String::new();
        if path != "." {
            message.push_str(&path);
            message.push_str(": ");
        }
        message.push_str(&self.message);
        if (line, column) != (1, 1) {
            message.push_str(&format!(" at line {line} column {column}"));
        }
        ReadError {
            line: Some(line),
            position: Some(Box::new(Position {
                column,
                span: byte..byte,
            })),
            problem: Problem::Syntax(message),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<M: fmt::Display>(message: M) -> Self {
        Error {
            message: message.to_string(),
            at: None,
        }
    }
}

type Result<T> = std::result::Result<T, Error>;

/// Where a node is in the document, as errors name it:
/// `resources[0].properties.path`.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Seq {
        parent: &'a Path<'a>,
        index: usize,
    },
    Map {
        parent: &'a Path<'a>,
        key: &'a str,
    },
    /// A value whose key is not a scalar.
    Unknown {
        parent: &'a Path<'a>,
    },
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parent = |f: &mut fmt::Formatter<'_>, p: &Path<'_>| match p {
            Path::Root => Ok(()),
            p => write!(f, "{p}."),
        };
        match self {
            Path::Root => f.write_str("."),
            Path::Seq { parent, index } => write!(f, "{parent}[{index}]"),
            Path::Map { parent: p, key } => {
                parent(f, p)?;
                f.write_str(key)
            }
            Path::Unknown { parent: p } => {
                parent(f, p)?;
                f.write_str("?")
            }
        }
    }
}

/// A node being read, and its path.
struct At<'a, 't> {
    node: &'a Node<'t>,
    path: Path<'a>,
}

impl At<'_, '_> {
    /// The node's text if it is a plain scalar that reads as null.
    fn is_null(&self) -> bool {
        matches!(&self.node.kind, Kind::Scalar(v, true) if null(v))
    }

    /// Whether it is an empty plain scalar (`key:` with nothing after),
    /// which reads as an empty list or map where one is expected.
    fn is_empty(&self) -> bool {
        matches!(&self.node.kind, Kind::Scalar(v, true) if v.is_empty())
    }
}

fn null(v: &str) -> bool {
    matches!(v, "" | "~" | "null" | "Null" | "NULL")
}

impl<'de> de::Deserializer<'de> for At<'_, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let (node, path) = (self.node, self.path);
        match &node.kind {
            Kind::Scalar(v, true) => plain(v, visitor),
            Kind::Scalar(v, false) => visitor.visit_str(v),
            Kind::List(items) => visit_list(items, path, visitor),
            Kind::Map(entries) => visit_map(entries, path, visitor),
        }
        .map_err(|e| e.at(node, path))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match &self.node.kind {
            // Any scalar as written: `stack: 12` is the name "12".
            Kind::Scalar(v, _) => visitor
                .visit_str(v)
                .map_err(|e: Error| e.at(self.node, self.path)),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match &self.node.kind {
            _ if self.is_null() => visitor.visit_unit(),
            Kind::Scalar(v, _) => Err(de::Error::invalid_value(Unexpected::Str(v), &"null")),
            _ => return self.deserialize_any(visitor),
        }
        .map_err(|e: Error| e.at(self.node, self.path))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.is_empty() {
            return visit_list(&[], self.path, visitor)
                .map_err(|e: Error| e.at(self.node, self.path));
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match &self.node.kind {
            _ if self.is_empty() => visit_map(&[], self.path, visitor),
            // Not a struct's fields in order, as serde would take them.
            Kind::List(_) => Err(de::Error::invalid_type(Unexpected::Seq, &visitor)),
            _ => return self.deserialize_any(visitor),
        }
        .map_err(|e: Error| e.at(self.node, self.path))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_map(visitor)
    }

    /// A unit variant, named by a scalar.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match &self.node.kind {
            Kind::Scalar(v, _) => {
                visitor.visit_enum(IntoDeserializer::<Error>::into_deserializer(v.as_ref()))
            }
            Kind::List(_) => Err(de::Error::invalid_type(Unexpected::Seq, &visitor)),
            Kind::Map(_) => Err(de::Error::invalid_type(Unexpected::Map, &visitor)),
        }
        .map_err(|e: Error| e.at(self.node, self.path))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 bytes byte_buf
    }
}

fn visit_list<'de, V: Visitor<'de>>(
    items: &[Node<'_>],
    path: Path<'_>,
    visitor: V,
) -> Result<V::Value> {
    let mut list = List {
        items: items.iter(),
        path,
        index: 0,
    };
    let value = visitor.visit_seq(&mut list)?;
    if list.items.len() > 0 {
        let expected = format!("sequence of {} elements", list.index);
        return Err(de::Error::invalid_length(items.len(), &expected.as_str()));
    }
    Ok(value)
}

fn visit_map<'de, V: Visitor<'de>>(
    entries: &[(Node<'_>, Node<'_>)],
    path: Path<'_>,
    visitor: V,
) -> Result<V::Value> {
    let mut map = Map {
        entries: entries.iter(),
        path,
        value: None,
        read: 0,
    };
    let value = visitor.visit_map(&mut map)?;
    if map.entries.len() > 0 {
        let expected = format!("map containing {} entries", map.read);
        return Err(de::Error::invalid_length(entries.len(), &expected.as_str()));
    }
    Ok(value)
}

struct List<'a, 't> {
    items: std::slice::Iter<'a, Node<'t>>,
    path: Path<'a>,
    index: usize,
}

impl<'de> de::SeqAccess<'de> for List<'_, '_> {
    type Error = Error;

    fn next_element_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>> {
        let Some(node) = self.items.next() else {
            return Ok(None);
        };
        let path = Path::Seq {
            parent: &self.path,
            index: self.index,
        };
        self.index += 1;
        seed.deserialize(At { node, path }).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Map<'a, 't> {
    entries: std::slice::Iter<'a, (Node<'t>, Node<'t>)>,
    path: Path<'a>,
    /// The value of the key just read.
    value: Option<&'a (Node<'t>, Node<'t>)>,
    read: usize,
}

impl<'de> de::MapAccess<'de> for Map<'_, '_> {
    type Error = Error;

    fn next_key_seed<S: de::DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>> {
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(entry);
        self.read += 1;
        // A key is read at its map's path.
        seed.deserialize(At {
            node: &entry.0,
            path: self.path,
        })
        .map(Some)
    }

    fn next_value_seed<S: de::DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value> {
        let (key, node) = self
            .value
            .take()
            .ok_or_else(|| de::Error::custom("a value asked for before its key"))?;
        let path = match &key.kind {
            Kind::Scalar(key, _) => Path::Map {
                parent: &self.path,
                key,
            },
            _ => Path::Unknown { parent: &self.path },
        };
        seed.deserialize(At { node, path })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// A plain scalar, resolved as `serde_norway` resolved it.
fn plain<'de, V: Visitor<'de>>(v: &str, visitor: V) -> Result<V::Value> {
    if null(v) {
        return visitor.visit_unit();
    }
    match v {
        "true" | "True" | "TRUE" => return visitor.visit_bool(true),
        "false" | "False" | "FALSE" => return visitor.visit_bool(false),
        _ => {}
    }
    if let Some(int) = unsigned(v, u64::from_str_radix) {
        return visitor.visit_u64(int);
    }
    if let Some(int) = negative(v, i64::from_str_radix) {
        return visitor.visit_i64(int);
    }
    if let Some(int) = unsigned(v, u128::from_str_radix) {
        return visitor.visit_u128(int);
    }
    if let Some(int) = negative(v, i128::from_str_radix) {
        return visitor.visit_i128(int);
    }
    if !digits_but_not_number(v) {
        if let Some(float) = float(v) {
            return visitor.visit_f64(float);
        }
    }
    visitor.visit_str(v)
}

type Radix<T> = fn(&str, u32) -> std::result::Result<T, std::num::ParseIntError>;

/// `0x`, `0o` and `0b` after the sign (not before the digits).
fn prefixed<T>(rest: &str, from_str_radix: Radix<T>, negative: bool) -> Option<T> {
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(digits) = rest.strip_prefix(prefix) {
            if digits.starts_with(['+', '-']) {
                return None;
            }
            let parsed = if negative {
                from_str_radix(&format!("-{digits}"), radix)
            } else {
                from_str_radix(digits, radix)
            };
            if let Ok(int) = parsed {
                return Some(int);
            }
        }
    }
    None
}

fn unsigned<T>(v: &str, from_str_radix: Radix<T>) -> Option<T> {
    let unpositive = v.strip_prefix('+').unwrap_or(v);
    if let Some(int) = prefixed(unpositive, from_str_radix, false) {
        return Some(int);
    }
    if unpositive.starts_with(['+', '-']) || digits_but_not_number(v) {
        return None;
    }
    from_str_radix(unpositive, 10).ok()
}

fn negative<T>(v: &str, from_str_radix: Radix<T>) -> Option<T> {
    if let Some(int) = v
        .strip_prefix('-')
        .and_then(|rest| prefixed(rest, from_str_radix, true))
    {
        return Some(int);
    }
    if digits_but_not_number(v) {
        return None;
    }
    from_str_radix(v, 10).ok()
}

fn float(v: &str) -> Option<f64> {
    let unpositive = match v.strip_prefix('+') {
        Some(rest) if rest.starts_with(['+', '-']) => return None,
        Some(rest) => rest,
        None => v,
    };
    match (unpositive, v) {
        (".inf" | ".Inf" | ".INF", _) => Some(f64::INFINITY),
        (_, "-.inf" | "-.Inf" | "-.INF") => Some(f64::NEG_INFINITY),
        (_, ".nan" | ".NaN" | ".NAN") => Some(f64::NAN),
        _ => unpositive.parse::<f64>().ok().filter(|f| f.is_finite()),
    }
}

/// Leading zeros before digits: text in YAML 1.2 (`007`).
fn digits_but_not_number(v: &str) -> bool {
    let v = v.strip_prefix(['-', '+']).unwrap_or(v);
    v.len() > 1 && v.starts_with('0') && v[1..].bytes().all(|b| b.is_ascii_digit())
}
