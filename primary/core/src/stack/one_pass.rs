//! YAML in one pass: a serde deserializer over YAML events that counts
//! the [`Limits`] as it goes, for documents whose every token it can prove
//! `serde_norway` reads the same way. The events come from
//! [`super::block_scan`] where it takes the text, else from
//! `saphyr-parser`; the checks below apply to both.
//!
//! The YAML path reads a document twice (the limits' scan, then
//! `serde_norway`, which loads every event before it builds anything);
//! this reads it once. It is a fast path in the way [`super::read::json`]
//! is: it gives the value `serde_norway` would give, or steps aside
//! (`None`) and the YAML path answers, errors included. It steps aside for
//! everything where the two parsers or their readings could differ, and
//! for everything it does not need to be fast at:
//!
//! - anchors, aliases and tags;
//! - block scalars (`|`, `>`) and any scalar that spans lines;
//! - a plain scalar that looks like a number but is not a plain decimal
//!   integer within 64 bits (`1.5`, `0x1f`, `+1`, `007`, `-0`, `.inf`);
//! - a mapping key that is empty, not a scalar, longer than 256
//!   characters, or not followed on its line by `:`;
//! - characters YAML 1.1 (`libyaml`) and 1.2 (`saphyr`) read differently
//!   or refuse (tabs, NEL, U+2028, U+2029, U+FEFF, C0 and C1 controls,
//!   DEL, U+FFFE, U+FFFF, a carriage return not before a line feed,
//!   surrogate escapes), and `%` directives;
//! - more than one document, or none;
//! - any limit reached, any syntax error and any error of the type read.
//!
//! Memory stays within the limits: the count is taken before each node is
//! built, and the first limit passed stops the build.

use std::borrow::Cow;
use std::fmt;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, StrInput};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};

use super::block_scan::BlockScan;
use super::limits::Limits;
use super::read;

/// `text` as a `T` in one pass, or `None` where the YAML path must answer.
pub(super) fn read<T: DeserializeOwned>(text: &str, limits: &Limits) -> Option<T> {
    if text.len() > limits.max_document_bytes || !plain_text(text.as_bytes()) {
        return None;
    }
    // The block scanner first: where it steps aside, `saphyr`'s events.
    if let Some(scan) = BlockScan::new(text, limits) {
        if let Some(value) = read_events(text, limits, Events::Scan(scan)) {
            return Some(value);
        }
    }
    read_events(
        text,
        limits,
        Events::Saphyr(Box::new(Parser::new_from_str(text))),
    )
}

/// `text` as a `T` from `events`, the events of `text`.
fn read_events<'a, T: DeserializeOwned>(
    text: &'a str,
    limits: &Limits,
    events: Events<'a>,
) -> Option<T> {
    let mut reader = Reader {
        text,
        events,
        peeked: None,
        limits,
        depth: 0,
        nodes: 0,
        scalar_bytes: 0,
        cursor: (0, 0),
        flow: None,
        ascii: text.is_ascii(),
    };
    reader.expect_start().ok()?;
    let value = T::deserialize(&mut reader).ok()?;
    reader.expect_end().ok()?;
    Some(value)
}

/// Whether `bytes` hold none of the characters the two YAML readers read
/// differently, and no directive.
fn plain_text(bytes: &[u8]) -> bool {
    let mut line_start = true;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\n' => {
                line_start = true;
                i += 1;
                continue;
            }
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => {}
            b'%' if line_start => return false,
            0..=0x1f | 0x7f => return false,
            b'\\' if read::surrogate_escape(&bytes[i + 1..]) => return false,
            _ if read::odd_char(&bytes[i..]) => return false,
            _ => {}
        }
        line_start = false;
        i += 1;
    }
    true
}

/// Whether a plain scalar starts with an indicator, where YAML 1.1 and 1.2
/// tell plain scalars apart differently. `-` is let through before a
/// digit: [`resolve`] decides what that is.
fn odd_start(value: &str) -> bool {
    match value.as_bytes() {
        [b'-', b'0'..=b'9', ..] => false,
        [first, ..] => br#"-?:,[]{}#&*!|>'"%@`"#.contains(first),
        [] => false,
    }
}

/// Why the one pass stopped: the YAML path will say why, or read it.
#[derive(Debug)]
pub(super) struct StepAside;

impl fmt::Display for StepAside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the one-pass reader stepped aside")
    }
}

impl std::error::Error for StepAside {}

impl de::Error for StepAside {
    fn custom<M: fmt::Display>(_: M) -> Self {
        StepAside
    }
}

type Result<T> = std::result::Result<T, StepAside>;

/// A scalar as the reader hands it on: its text, and whether it was plain
/// (unquoted), which decides how `deserialize_any` resolves it.
struct Scalar<'a> {
    value: Cow<'a, str>,
    plain: bool,
}

/// The next node's first event, as far as the reader cares.
enum Node<'a> {
    Scalar(Scalar<'a>),
    Sequence,
    Mapping,
    /// The end of the list or map being read.
    End,
}

/// Where the reader's events come from.
enum Events<'a> {
    Scan(BlockScan<'a>),
    Saphyr(Box<Parser<'a, StrInput<'a>>>),
}

struct Reader<'a, 'l> {
    text: &'a str,
    events: Events<'a>,
    peeked: Option<(Node<'a>, Span)>,
    limits: &'l Limits,
    depth: usize,
    nodes: u64,
    scalar_bytes: u64,
    /// A character index and the byte index it is at, moved forward only:
    /// spans count characters, the text is sliced by bytes.
    cursor: (usize, usize),
    /// The depth of the outermost flow (`[…]`, `{…}`) list or map open,
    /// if any: YAML 1.1 and 1.2 read a `:` in a plain scalar there
    /// differently.
    flow: Option<usize>,
    /// Whether every character is one byte, so that no counting is needed.
    ascii: bool,
}

impl<'a> Reader<'a, '_> {
    fn raw(&mut self) -> Result<(Event<'a>, Span)> {
        match &mut self.events {
            Events::Scan(scan) => scan.next_event(),
            Events::Saphyr(parser) => match parser.next() {
                Some(Ok(event)) => Ok(event),
                _ => Err(StepAside),
            },
        }
    }

    fn expect_start(&mut self) -> Result<()> {
        if !matches!(self.raw()?.0, Event::StreamStart) {
            return Err(StepAside);
        }
        match self.raw()?.0 {
            Event::DocumentStart(_) => Ok(()),
            _ => Err(StepAside),
        }
    }

    fn expect_end(&mut self) -> Result<()> {
        if self.peeked.is_some() || !matches!(self.raw()?.0, Event::DocumentEnd) {
            return Err(StepAside);
        }
        match self.raw()?.0 {
            Event::StreamEnd => Ok(()),
            _ => Err(StepAside),
        }
    }

    /// The next node's start, counted against the limits.
    fn peek(&mut self) -> Result<&(Node<'a>, Span)> {
        if self.peeked.is_none() {
            let (event, span) = self.raw()?;
            let node = match event {
                Event::Scalar(value, style, 0, None) => {
                    let plain = match style {
                        ScalarStyle::Plain => true,
                        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => false,
                        ScalarStyle::Literal | ScalarStyle::Folded => return Err(StepAside),
                    };
                    if span.start.line() != span.end.line()
                        || (plain && odd_start(&value))
                        || (plain && self.flow.is_some() && value.contains(':'))
                    {
                        return Err(StepAside);
                    }
                    self.count(1, value.len() as u64)?;
                    Node::Scalar(Scalar { value, plain })
                }
                Event::SequenceStart(0, None) | Event::MappingStart(0, None) => {
                    self.count(1, 0)?;
                    self.depth += 1;
                    if self.depth > self.limits.max_depth {
                        return Err(StepAside);
                    }
                    let at = self.byte_index(span.start.index())?;
                    let opener = self.text.as_bytes().get(at);
                    if self.flow.is_none() && matches!(opener, Some(b'[' | b'{')) {
                        self.flow = Some(self.depth);
                    } else if self.flow.is_some() && !matches!(opener, Some(b'[' | b'{')) {
                        // A single-pair map in a flow list (`[a: b]`).
                        return Err(StepAside);
                    }
                    if matches!(event, Event::SequenceStart(..)) {
                        Node::Sequence
                    } else {
                        Node::Mapping
                    }
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    if self.flow == Some(self.depth) {
                        self.flow = None;
                    }
                    self.depth = self.depth.saturating_sub(1);
                    Node::End
                }
                _ => return Err(StepAside),
            };
            self.peeked = Some((node, span));
        }
        self.peeked.as_ref().ok_or(StepAside)
    }

    fn next(&mut self) -> Result<Node<'a>> {
        self.peek()?;
        self.peeked.take().map(|(node, _)| node).ok_or(StepAside)
    }

    fn count(&mut self, nodes: u64, scalar_bytes: u64) -> Result<()> {
        self.nodes += nodes;
        self.scalar_bytes += scalar_bytes;
        if self.nodes > self.limits.max_nodes || self.scalar_bytes > self.limits.max_scalar_bytes {
            return Err(StepAside);
        }
        Ok(())
    }

    /// The byte index of character index `chars`, which is at or after
    /// the last one asked for.
    fn byte_index(&mut self, chars: usize) -> Result<usize> {
        if self.ascii {
            return Ok(chars);
        }
        let (mut at_char, mut at_byte) = self.cursor;
        if chars < at_char {
            return Err(StepAside);
        }
        let rest = self.text.get(at_byte..).ok_or(StepAside)?;
        let mut iter = rest.char_indices();
        while at_char < chars {
            let (_, c) = iter.next().ok_or(StepAside)?;
            at_byte += c.len_utf8();
            at_char += 1;
        }
        self.cursor = (at_char, at_byte);
        Ok(at_byte)
    }

    /// The end of the list or map just read: anything left in it that the
    /// visitor did not take is a length error in `serde_norway`.
    fn close(&mut self) -> Result<()> {
        match self.next()? {
            Node::End => Ok(()),
            _ => Err(StepAside),
        }
    }

    /// Skips one node, counting it.
    fn skip(&mut self) -> Result<()> {
        match self.next()? {
            Node::Scalar(_) => Ok(()),
            Node::Sequence | Node::Mapping => {
                while !matches!(self.peek()?.0, Node::End) {
                    self.skip()?;
                }
                self.close()
            }
            Node::End => Err(StepAside),
        }
    }
}

/// `serde_norway`'s reading of an untagged plain scalar, where it is
/// certain; `Err` where the YAML path must decide.
fn resolve<'de, V: Visitor<'de>>(value: Cow<'_, str>, visitor: V) -> Result<V::Value> {
    match &*value {
        "" | "~" | "null" | "Null" | "NULL" => visitor.visit_unit(),
        "true" | "True" | "TRUE" => visitor.visit_bool(true),
        "false" | "False" | "FALSE" => visitor.visit_bool(false),
        _ => match value.as_bytes() {
            [b'0'] => visitor.visit_u64(0),
            [b'1'..=b'9', rest @ ..] if rest.iter().all(u8::is_ascii_digit) => {
                visitor.visit_u64(value.parse().map_err(|_| StepAside)?)
            }
            [b'-', b'1'..=b'9', rest @ ..] if rest.iter().all(u8::is_ascii_digit) => {
                visitor.visit_i64(value.parse().map_err(|_| StepAside)?)
            }
            [b'0'..=b'9' | b'+' | b'-' | b'.', ..] => Err(StepAside),
            _ => visit_text(value, visitor),
        },
    }
}

/// A scalar's text, moved where the parser already made it a `String`.
fn visit_text<'de, V: Visitor<'de>>(value: Cow<'_, str>, visitor: V) -> Result<V::Value> {
    match value {
        Cow::Borrowed(text) => visitor.visit_str(text),
        Cow::Owned(text) => visitor.visit_string(text),
    }
}

fn is_null(scalar: &Scalar<'_>) -> bool {
    scalar.plain && matches!(&*scalar.value, "" | "~" | "null" | "Null" | "NULL")
}

fn is_empty(scalar: &Scalar<'_>) -> bool {
    scalar.plain && scalar.value.is_empty()
}

impl<'de> de::Deserializer<'de> for &mut Reader<'_, '_> {
    type Error = StepAside;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.next()? {
            Node::Scalar(s) if s.plain => resolve(s.value, visitor),
            Node::Scalar(s) => visit_text(s.value, visitor),
            Node::Sequence => {
                let value = visitor.visit_seq(Items { reader: self })?;
                self.close()?;
                Ok(value)
            }
            Node::Mapping => {
                let value = visitor.visit_map(Entries { reader: self })?;
                self.close()?;
                Ok(value)
            }
            Node::End => Err(StepAside),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.next()? {
            Node::Scalar(s) => visit_text(s.value, visitor),
            _ => Err(StepAside),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if let Node::Scalar(s) = &self.peek()?.0 {
            if is_null(s) {
                self.next()?;
                return visitor.visit_none();
            }
        }
        visitor.visit_some(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.next()? {
            Node::Scalar(s) if is_null(&s) => visitor.visit_unit(),
            _ => Err(StepAside),
        }
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
        match &self.peek()?.0 {
            Node::Sequence => self.deserialize_any(visitor),
            Node::Scalar(s) if is_empty(s) => {
                self.next()?;
                visitor.visit_seq(de::value::SeqDeserializer::<_, StepAside>::new(
                    std::iter::empty::<()>(),
                ))
            }
            _ => Err(StepAside),
        }
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
        match &self.peek()?.0 {
            Node::Mapping => self.deserialize_any(visitor),
            Node::Scalar(s) if is_empty(s) => {
                self.next()?;
                visitor.visit_map(de::value::MapDeserializer::<_, StepAside>::new(
                    std::iter::empty::<((), ())>(),
                ))
            }
            _ => Err(StepAside),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        // `serde_norway` reads an untagged enum only from a scalar naming a
        // unit variant.
        match self.next()? {
            Node::Scalar(s) => visitor.visit_enum(
                IntoDeserializer::<StepAside>::into_deserializer(s.value.into_owned()),
            ),
            _ => Err(StepAside),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.skip()?;
        visitor.visit_unit()
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(StepAside)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(StepAside)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char
    }
}

/// The items of a list.
struct Items<'r, 'a, 'l> {
    reader: &'r mut Reader<'a, 'l>,
}

impl<'de> de::SeqAccess<'de> for Items<'_, '_, '_> {
    type Error = StepAside;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if matches!(self.reader.peek()?.0, Node::End) {
            return Ok(None);
        }
        seed.deserialize(&mut *self.reader).map(Some)
    }
}

/// The entries of a map.
struct Entries<'r, 'a, 'l> {
    reader: &'r mut Reader<'a, 'l>,
}

impl<'de> de::MapAccess<'de> for Entries<'_, '_, '_> {
    type Error = StepAside;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let reader = &mut *self.reader;
        let (node, span) = reader.peek()?;
        match node {
            Node::End => return Ok(None),
            Node::Scalar(s) if !s.value.is_empty() && span.len() <= 256 => {}
            _ => return Err(StepAside),
        }
        // An implicit key's `:` must follow it on its line: where it does
        // not, the two parsers disagree.
        let end = span.end.index();
        let end = reader.byte_index(end)?;
        let after = reader.text.as_bytes().get(end..).ok_or(StepAside)?;
        let colon = after.iter().position(|b| *b != b' ').ok_or(StepAside)?;
        if after[colon] != b':' || !matches!(after.get(colon + 1), Some(b' ' | b'\n' | b'\r')) {
            return Err(StepAside);
        }
        seed.deserialize(&mut *self.reader).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(&mut *self.reader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_norway::Value;

    /// The one pass and `serde_norway` (after the limits' scan, as the YAML
    /// path reads) on `text`.
    fn both(text: &str, limits: &Limits) -> (Option<Value>, Option<Value>) {
        let slow = super::super::read::read_yaml::<Value>(text, limits).ok();
        (read(text, limits), slow)
    }

    /// Where the one pass reads a value, the YAML path reads the same one;
    /// where the block scanner gives events, they are `saphyr`'s.
    fn agrees(text: &str) -> bool {
        if plain_text(text.as_bytes()) {
            super::super::block_scan::tests::scans_as_saphyr(text);
        }
        match both(text, &Limits::default()) {
            (Some(fast), slow) => {
                assert_eq!(Some(fast), slow, "{text:?}");
                true
            }
            (None, _) => false,
        }
    }

    fn takes_the_one_pass(text: &str) {
        assert!(agrees(text), "stepped aside: {text:?}");
    }

    #[test]
    fn a_generated_stack_is_read_in_one_pass_as_the_yaml_path_reads_it() {
        let mut text =
            String::from("stack: bench\ntargets:\n  - name: t\n    plugin: testbed\nresources:\n");
        for i in 0..200usize {
            text.push_str(&format!(
                "  - label: r{i}\n    type: Testbed::Noop::Thing\n    target: t\n    properties: {{ name: r{i}, value: \"${{r{}.name}}\", n: {i}, on: true, off: ~ }}\n",
                i.saturating_sub(1)
            ));
        }
        takes_the_one_pass(&text);
        assert!(
            super::super::block_scan::tests::scans_as_saphyr(&text),
            "the block scanner stepped aside"
        );
        // And as the stack's own document type.
        let limits = Limits::default();
        let fast: Option<super::super::Document> = read(&text, &limits);
        assert!(fast.is_some());
    }

    #[test]
    fn the_common_forms_are_read_in_one_pass() {
        for text in [
            "a: 1\nb: -2\nc: x y\nd: 'q''s'\ne: \"d\\n\\u00e9\"\nf:\ng: [1, two, 'three']\nh: {}\n",
            "- a\n- - b\n  - c\n- k: v\n  l: w\n",
            "---\na: 1\n...\n",
            "a: 0\nb: 18446744073709551615\nc: -9223372036854775808\n",
            "a: null\nb: Null\nc: NULL\nd: True\ne: FALSE\nf: yes\ng: no\nh: on\n",
            "\"quoted key\": 1\n'single': 2\nkey with spaces: 3\n",
            "a: é\nb: 日本\n日本: 1\n",
            "{\"a\": 1, \"b\": [true, null]}\n",
            "a: inf\nb: nan\nc: Infinity\n",
            "a: b # comment\n# comment\nc: d\r\ne: f\r\n",
        ] {
            takes_the_one_pass(text);
        }
    }

    #[test]
    fn what_could_read_otherwise_goes_down_the_yaml_path() {
        for text in [
            "a: &x 1\nb: *x\n",
            "a: !tag 1\n",
            "a: !!str 1\n",
            "a: |\n  text\n",
            "a: >\n  text\n",
            "a: plain\n  continued\n",
            "a: \"two\n  lines\"\n",
            "a: 1.5\n",
            "a: 0x1f\n",
            "a: +1\n",
            "a: 007\n",
            "a: -0\n",
            "a: .inf\n",
            "a: 1e3\n",
            "a: 18446744073709551616\n",
            "a: -9223372036854775809\n",
            "a: '\t'\n",
            "a: \"\u{85}\"\n",
            "a: \"\u{2028}\"\n",
            "\u{feff}a: 1\n",
            "a: \"\u{7f}\"\n",
            "a: \"\\ud83d\\ude00\"\n",
            "a: \"\\U0000d83d\"\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n---\nb: 2\n",
            "",
            "? a\n: b\n",
            "[1, 2]: x\n",
            ": x\n",
            "{a, b: 1}",
            "a: 1\rb: 2\n",
            "a: [1, 2",
            "[a: b]",
            "{a:1}",
            "a:\n- [b:]\n",
        ] {
            assert_eq!(read::<Value>(text, &Limits::default()), None, "{text:?}");
        }
        let long_key = format!("{}: 1\n", "k".repeat(257));
        assert_eq!(read::<Value>(&long_key, &Limits::default()), None);
    }

    #[test]
    fn a_document_past_a_limit_is_left_to_the_yaml_path_which_refuses_it() {
        use super::super::limits::Refusal;
        use super::super::read::{self as reading, ReadError};
        let limits = Limits {
            max_depth: 4,
            max_nodes: 30,
            max_scalar_bytes: 40,
            ..Limits::default()
        };
        let deep = "a:\n  b:\n    c:\n      d: [e]\n".to_owned();
        let wide = format!("[{}0]", "0, ".repeat(30));
        let long = format!("a: {}\n", "x".repeat(40));
        for text in [deep, wide, long] {
            assert_eq!(read::<Value>(&text, &limits), None, "{text}");
            match reading::read::<Value>(&text, &limits) {
                Err(ReadError::Refused(Refusal::Limit { .. })) => {}
                other => panic!("{text}: {other:?}"),
            }
        }
        // Just within: read in one pass.
        let within = Limits {
            max_depth: 2,
            max_nodes: 5,
            max_scalar_bytes: 4,
            ..Limits::default()
        };
        assert!(read::<Value>("a: [b, c]", &within).is_some());
        assert!(read::<Value>("a: [b, cde]", &within).is_none());
    }

    #[test]
    fn a_shape_error_is_left_to_the_yaml_path() {
        let limits = Limits::default();
        assert!(read::<super::super::Document>("stack: s\nunknown: 1\n", &limits).is_none());
        assert!(read::<super::super::Document>("stack: [1]\n", &limits).is_none());
        // A string field given a plain number: `serde_norway` reads "12";
        // the one pass steps aside, so the answer is the same.
        let (fast, slow) = (
            read::<super::super::Document>("stack: 12\n", &limits),
            super::super::read::read_yaml::<super::super::Document>("stack: 12\n", &limits),
        );
        assert!(slow.is_ok());
        assert_eq!(fast.map(|d| d.stack), Some("12".to_owned()));
    }

    #[test]
    fn every_example_stack_reads_the_same() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
        let mut seen = 0;
        let mut dirs = vec![std::path::PathBuf::from(root)];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "yaml") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    agrees(&text);
                    seen += 1;
                }
            }
        }
        assert!(seen >= 5, "found {seen} examples");
    }

    /// Scalars as a stack author might write them, plain or quoted.
    fn scalar() -> impl Strategy<Value = String> {
        let word = prop_oneof![
            "[a-zA-Z_/$][a-zA-Z0-9_./:${}-]{0,8}",
            "-?[0-9]{1,21}",
            "[0-9.eE+-]{1,6}",
            Just("~".to_owned()),
            Just("null".to_owned()),
            Just("True".to_owned()),
            Just("false".to_owned()),
            Just("0x1F".to_owned()),
            Just("0o17".to_owned()),
            Just(".inf".to_owned()),
            Just("".to_owned()),
            "\\PC{0,6}",
        ];
        (word, 0..4u8).prop_map(|(w, style)| match style {
            0 => format!("'{}'", w.replace('\'', "''")),
            1 => serde_json::to_string(&w).unwrap(),
            _ => w,
        })
    }

    fn node(indent: usize) -> BoxedStrategy<String> {
        let leaf = scalar().boxed();
        if indent > 6 {
            return leaf;
        }
        let pad = " ".repeat(indent + 2);
        prop_oneof![
            3 => leaf,
            1 => prop::collection::vec(scalar(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            1 => prop::collection::vec((scalar(), scalar()), 0..4).prop_map(|v| {
                let items: Vec<String> = v.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", items.join(", "))
            }),
            1 => prop::collection::vec(node(indent + 2), 1..4).prop_map(move |v| {
                v.into_iter().map(|n| format!("\n{pad}- {n}")).collect::<String>()
            }),
            1 => prop::collection::vec((scalar(), node(indent + 2)), 1..4).prop_map({
                let pad = " ".repeat(indent + 2);
                move |v| v.into_iter().map(|(k, n)| format!("\n{pad}{k}: {n}")).collect::<String>()
            }),
        ]
        .boxed()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Generated documents of every common form: what the one pass
        /// reads, the YAML path reads the same.
        #[test]
        fn generated_documents_read_as_the_yaml_path_reads_them(
            entries in prop::collection::vec((scalar(), node(0)), 1..5),
        ) {
            let text: String = entries.iter().map(|(k, n)| format!("{k}: {n}\n")).collect();
            if plain_text(text.as_bytes()) {
                super::super::block_scan::tests::scans_as_saphyr(&text);
            }
            if let (Some(fast), slow) = both(&text, &Limits::default()) {
                prop_assert_eq!(Some(fast), slow, "{:?}", text);
            }
        }

        /// Any text at all: no panic, and what the one pass reads, the YAML
        /// path reads the same.
        #[test]
        fn any_text_is_read_safely(
            body in prop::collection::vec(
                prop_oneof![
                    Just(b'"'), Just(b'\''), Just(b'\\'), Just(b':'), Just(b'{'), Just(b'}'),
                    Just(b'['), Just(b']'), Just(b','), Just(b'\n'), Just(b'-'), Just(b' '),
                    Just(b'#'), Just(b'?'), Just(b'a'), Just(b'0'), Just(b'u'), any::<u8>(),
                ],
                0..64,
            ),
        ) {
            if let Ok(text) = std::str::from_utf8(&body) {
                agrees(text);
            }
        }
    }
}
