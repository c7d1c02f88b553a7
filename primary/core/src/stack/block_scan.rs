//! The events of block YAML as stacks are written, scanned a line at a
//! time: the same events `saphyr-parser` gives for the same text, three to
//! four times faster, or a step aside.
//!
//! [`super::one_pass`] reads its events from here first. The scanner takes
//! only ASCII text and only this much of YAML, and steps aside (the one
//! pass then reads `saphyr`'s events) at anything else:
//!
//! - block mappings and block lists, one entry or item a line, lists
//!   written as a map's value at the key's indent included, and compact
//!   entries (`- key: value`, `- - item`);
//! - keys that are plain or quoted and followed on their line by `:`;
//! - values on the key's or dash's line: plain scalars (up to a comment),
//!   single- or double-quoted scalars closed on their line (double-quoted
//!   with the escapes `\"`, `\\`, `\/`, `\n`, `\t`, `\r` only), and flow
//!   lists and maps closed on their line, without trailing commas;
//! - comments and blank lines.
//!
//! What it does not prove the same (multi-line scalars, `---`, a scalar as
//! the document, a value alone on the line under its key, an odd indent)
//! it leaves to `saphyr`. Its memory is a line's events and the open
//! collections, both bounded by the limits.

use std::borrow::Cow;
use std::collections::VecDeque;

use saphyr_parser::{Event, Marker, ScalarStyle, Span};

use super::limits::Limits;
use super::one_pass::StepAside;

type Result<T> = std::result::Result<T, StepAside>;

/// Most events one line may give before the scanner steps aside: a long
/// flow line is left to `saphyr`, which streams it.
const MAX_LINE_EVENTS: usize = 4096;

#[derive(Clone, Copy, PartialEq)]
enum Block {
    Map,
    List,
}

/// A value announced by a key or a dash that ends its line: the next line
/// indented deeper holds it, or it is empty.
#[derive(Clone, Copy)]
struct Pending {
    /// The indent of the key or dash; `None` for the document itself.
    indent: Option<usize>,
    /// Whether a map's key announced it: its list may start at its indent.
    in_map: bool,
    at: usize,
}

enum State {
    Start,
    Body,
    Done,
}

pub(super) struct BlockScan<'a> {
    text: &'a str,
    bytes: &'a [u8],
    max_depth: usize,
    state: State,
    queue: VecDeque<(Event<'a>, Span)>,
    open: Vec<(Block, usize)>,
    pending: Option<Pending>,
    /// Where the next line starts.
    next_line: usize,
    line: usize,
    line_start: usize,
    /// The depth of flow collections open on this line.
    flow_depth: usize,
}

impl<'a> BlockScan<'a> {
    /// A scanner over `text`, or `None` where it is not ASCII.
    pub(super) fn new(text: &'a str, limits: &Limits) -> Option<Self> {
        text.is_ascii().then(|| BlockScan {
            text,
            bytes: text.as_bytes(),
            max_depth: limits.max_depth,
            state: State::Start,
            queue: VecDeque::new(),
            open: Vec::new(),
            pending: None,
            next_line: 0,
            line: 0,
            line_start: 0,
            flow_depth: 0,
        })
    }

    /// The next event, as `saphyr-parser` would give it.
    pub(super) fn next_event(&mut self) -> Result<(Event<'a>, Span)> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Ok(event);
            }
            match self.state {
                State::Start => {
                    self.push(Event::StreamStart, 0, 0);
                    self.push(Event::DocumentStart(false), 0, 0);
                    self.pending = Some(Pending {
                        indent: None,
                        in_map: false,
                        at: 0,
                    });
                    self.state = State::Body;
                }
                State::Body => {
                    if !self.scan_line()? {
                        self.finish()?;
                    }
                    if self.queue.len() > MAX_LINE_EVENTS {
                        return Err(StepAside);
                    }
                }
                State::Done => return Err(StepAside),
            }
        }
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(pending) = self.pending.take() {
            if pending.indent.is_none() {
                // No node at all: an empty document, left to `saphyr`.
                return Err(StepAside);
            }
            self.empty(pending.at);
        }
        while self.close_top() {}
        let end = self.bytes.len();
        self.push(Event::DocumentEnd, end, end);
        self.push(Event::StreamEnd, end, end);
        self.state = State::Done;
        Ok(())
    }

    fn mark(&self, at: usize) -> Marker {
        Marker::new(at, self.line, at.saturating_sub(self.line_start))
    }

    fn push(&mut self, event: Event<'a>, start: usize, end: usize) {
        let span = Span::new(self.mark(start), self.mark(end));
        self.queue.push_back((event, span));
    }

    fn empty(&mut self, at: usize) {
        self.push(
            Event::Scalar(Cow::Borrowed(""), ScalarStyle::Plain, 0, None),
            at,
            at,
        );
    }

    fn open(&mut self, block: Block, indent: usize, at: usize) -> Result<()> {
        if self.open.len() + self.flow_depth >= self.max_depth {
            return Err(StepAside);
        }
        self.open.push((block, indent));
        let event = match block {
            Block::Map => Event::MappingStart(0, None),
            Block::List => Event::SequenceStart(0, None),
        };
        self.push(event, at, at);
        Ok(())
    }

    fn close_top(&mut self) -> bool {
        let Some((block, _)) = self.open.pop() else {
            return false;
        };
        let at = self.line_start;
        let event = match block {
            Block::Map => Event::MappingEnd,
            Block::List => Event::SequenceEnd,
        };
        self.push(event, at, at);
        true
    }

    /// Scans the next line that holds a node; `false` at the end.
    fn scan_line(&mut self) -> Result<bool> {
        let (indent, start, end) = loop {
            let from = self.next_line;
            if from >= self.bytes.len() {
                return Ok(false);
            }
            let newline = self.bytes[from..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(self.bytes.len(), |n| from + n);
            self.next_line = newline + 1;
            self.line += 1;
            self.line_start = from;
            let end = if newline > from && self.bytes[newline - 1] == b'\r' {
                newline - 1
            } else {
                newline
            };
            let start = from + self.spaces(from, end);
            if start < end && self.bytes[start] != b'#' {
                break (start - from, start, end);
            }
        };
        if indent == 0 && self.marker_line(start, end) {
            return Err(StepAside);
        }
        if let Some(pending) = self.pending.take() {
            let deeper = pending.indent.is_none_or(|p| indent > p);
            let list_under_key =
                pending.in_map && pending.indent == Some(indent) && self.dash(start, end);
            if deeper || list_under_key {
                return self.node(indent, start, end).map(|()| true);
            }
            self.empty(pending.at);
        }
        while self.open.last().is_some_and(|&(_, i)| i > indent) {
            self.close_top();
        }
        // A list that was a map's value at the key's indent ends at the
        // map's next key.
        if self.open.last() == Some(&(Block::List, indent)) && !self.dash(start, end) {
            self.close_top();
        }
        match self.open.last() {
            Some(&(Block::Map, i)) if i == indent => self.entry(indent, start, end)?,
            Some(&(Block::List, i)) if i == indent && self.dash(start, end) => {
                self.item(indent, start, end)?;
            }
            _ => return Err(StepAside),
        }
        Ok(true)
    }

    /// Whether the line is `---` or `...`, which `saphyr` reads.
    fn marker_line(&self, start: usize, end: usize) -> bool {
        let line = &self.bytes[start..end];
        (line.starts_with(b"---") || line.starts_with(b"..."))
            && matches!(line.get(3), None | Some(b' '))
    }

    fn spaces(&self, from: usize, end: usize) -> usize {
        self.bytes[from..end]
            .iter()
            .take_while(|&&b| b == b' ')
            .count()
    }

    fn dash(&self, at: usize, end: usize) -> bool {
        self.bytes[at] == b'-' && (at + 1 == end || self.bytes[at + 1] == b' ')
    }

    /// A new block collection whose first line starts at `start`.
    fn node(&mut self, indent: usize, start: usize, end: usize) -> Result<()> {
        if self.dash(start, end) {
            self.open(Block::List, indent, start)?;
            self.item(indent, start, end)
        } else {
            self.open(Block::Map, indent, start)?;
            self.entry(indent, start, end)
        }
    }

    /// A list item: `-`, then nothing, a compact node or a value.
    fn item(&mut self, indent: usize, dash: usize, end: usize) -> Result<()> {
        let at = dash + 1 + self.spaces(dash + 1, end);
        if at == end || self.bytes[at] == b'#' {
            self.pending = Some(Pending {
                indent: Some(indent),
                in_map: false,
                at,
            });
            return Ok(());
        }
        let column = at - self.line_start;
        if self.dash(at, end) {
            self.open(Block::List, column, at)?;
            return self.item(column, at, end);
        }
        if self.key_end(at, end)?.is_some() {
            self.open(Block::Map, column, at)?;
            return self.entry(column, at, end);
        }
        let after = self.value(at, end)?;
        self.line_end(after, end)
    }

    /// Where the key starting at `at` ends and where its `:` is, if the
    /// line starts with one.
    fn key_end(&self, at: usize, end: usize) -> Result<Option<(usize, usize)>> {
        let bytes = self.bytes;
        let key_end = match bytes[at] {
            b'"' | b'\'' => match self.quoted(at, end) {
                Ok((_, after)) => after,
                Err(StepAside) => return Ok(None),
            },
            _ => {
                let mut i = at;
                loop {
                    match bytes.get(i) {
                        _ if i >= end => return Ok(None),
                        Some(b':') if i + 1 == end || bytes[i + 1] == b' ' => break,
                        Some(b'#') if i > at && bytes[i - 1] == b' ' => return Ok(None),
                        _ => i += 1,
                    }
                }
                self.trim_end(at, i)
            }
        };
        let colon = key_end + self.spaces(key_end, end);
        let is_colon =
            colon < end && bytes[colon] == b':' && (colon + 1 == end || bytes[colon + 1] == b' ');
        Ok(is_colon.then_some((key_end, colon)))
    }

    /// A map entry: a key, `:`, then nothing or a value.
    fn entry(&mut self, indent: usize, at: usize, end: usize) -> Result<()> {
        let (key_end, colon) = self.key_end(at, end)?.ok_or(StepAside)?;
        match self.bytes[at] {
            b'"' | b'\'' => {
                let (value, after) = self.quoted(at, end)?;
                self.scalar(value, self.style(at), at, after);
            }
            _ => {
                self.plain_start(at)?;
                self.scalar(
                    Cow::Borrowed(&self.text[at..key_end]),
                    ScalarStyle::Plain,
                    at,
                    key_end,
                );
            }
        }
        let value = colon + 1 + self.spaces(colon + 1, end);
        if value == end || self.bytes[value] == b'#' {
            self.pending = Some(Pending {
                indent: Some(indent),
                in_map: true,
                at: value,
            });
            return Ok(());
        }
        let after = self.value(value, end)?;
        self.line_end(after, end)
    }

    /// Only spaces and a comment may follow a value on its line.
    fn line_end(&self, after: usize, end: usize) -> Result<()> {
        let rest = after + self.spaces(after, end);
        if rest == end || (rest > after && self.bytes[rest] == b'#') {
            Ok(())
        } else {
            Err(StepAside)
        }
    }

    /// A plain scalar may not start with an indicator, where YAML's
    /// versions and parsers tell scalars apart differently; `-` before a
    /// digit is a number.
    fn plain_start(&self, at: usize) -> Result<()> {
        match self.bytes[at] {
            b'-' if self.bytes.get(at + 1).is_some_and(u8::is_ascii_digit) => Ok(()),
            b'-' | b'?' | b':' | b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!'
            | b'|' | b'>' | b'\'' | b'"' | b'%' | b'@' | b'`' => Err(StepAside),
            _ => Ok(()),
        }
    }

    fn style(&self, at: usize) -> ScalarStyle {
        if self.bytes[at] == b'"' {
            ScalarStyle::DoubleQuoted
        } else {
            ScalarStyle::SingleQuoted
        }
    }

    fn scalar(&mut self, value: Cow<'a, str>, style: ScalarStyle, start: usize, end: usize) {
        self.push(Event::Scalar(value, style, 0, None), start, end);
    }

    /// A value on a key's or dash's line; where it ends.
    /// Where `at..stop` ends without its trailing spaces.
    fn trim_end(&self, at: usize, mut stop: usize) -> usize {
        while stop > at && self.bytes[stop - 1] == b' ' {
            stop -= 1;
        }
        stop
    }

    /// The plain scalar `at..stop` less its trailing spaces; returns its end.
    fn plain(&mut self, at: usize, stop: usize) -> usize {
        let stop = self.trim_end(at, stop);
        self.scalar(
            Cow::Borrowed(&self.text[at..stop]),
            ScalarStyle::Plain,
            at,
            stop,
        );
        stop
    }

    fn value(&mut self, at: usize, end: usize) -> Result<usize> {
        match self.bytes[at] {
            b'[' | b'{' => self.flow(at, end),
            b'"' | b'\'' => {
                let (value, after) = self.quoted(at, end)?;
                self.scalar(value, self.style(at), at, after);
                Ok(after)
            }
            _ => {
                self.plain_start(at)?;
                let bytes = self.bytes;
                let mut i = at;
                let mut stop = end;
                while i < end {
                    match bytes[i] {
                        b'#' if bytes[i - 1] == b' ' => {
                            stop = i;
                            break;
                        }
                        // A map on the value's line (`a: b: c`).
                        b':' if i + 1 == end || bytes[i + 1] == b' ' => return Err(StepAside),
                        _ => i += 1,
                    }
                }
                Ok(self.plain(at, stop))
            }
        }
    }

    /// A quoted scalar closed on its line: its value, and where it ends.
    fn quoted(&self, at: usize, end: usize) -> Result<(Cow<'a, str>, usize)> {
        let bytes = self.bytes;
        let quote = bytes[at];
        let from = at + 1;
        let mut owned: Option<String> = None;
        let mut run = from;
        let mut i = from;
        while i < end {
            let b = bytes[i];
            if b == quote {
                if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') && i + 1 < end {
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(&self.text[run..=i]);
                    i += 2;
                    run = i;
                    continue;
                }
                let value = match owned {
                    None => Cow::Borrowed(&self.text[from..i]),
                    Some(mut s) => {
                        s.push_str(&self.text[run..i]);
                        Cow::Owned(s)
                    }
                };
                return Ok((value, i + 1));
            }
            if quote == b'"' && b == b'\\' {
                let c = match bytes.get(i + 1) {
                    Some(b'"') => '"',
                    Some(b'\\') => '\\',
                    Some(b'/') => '/',
                    Some(b'n') => '\n',
                    Some(b't') => '\t',
                    Some(b'r') => '\r',
                    _ => return Err(StepAside),
                };
                if i + 1 >= end {
                    return Err(StepAside);
                }
                let s = owned.get_or_insert_with(String::new);
                s.push_str(&self.text[run..i]);
                s.push(c);
                i += 2;
                run = i;
                continue;
            }
            i += 1;
        }
        Err(StepAside)
    }

    /// A flow list or map closed on its line; where it ends.
    fn flow(&mut self, at: usize, end: usize) -> Result<usize> {
        if self.open.len() + self.flow_depth >= self.max_depth {
            return Err(StepAside);
        }
        self.flow_depth += 1;
        let map = self.bytes[at] == b'{';
        let close = if map { b'}' } else { b']' };
        self.push(
            if map {
                Event::MappingStart(0, None)
            } else {
                Event::SequenceStart(0, None)
            },
            at,
            at,
        );
        let mut i = at + 1;
        i += self.spaces(i, end);
        if i < end && self.bytes[i] == close {
            return Ok(self.flow_end(map, i));
        }
        loop {
            if self.queue.len() > MAX_LINE_EVENTS {
                return Err(StepAside);
            }
            // A collection as a key is left to `saphyr`.
            if map && i < end && matches!(self.bytes[i], b'[' | b'{') {
                return Err(StepAside);
            }
            i = self.flow_node(i, end)?;
            i += self.spaces(i, end);
            if map {
                if i + 1 >= end || self.bytes[i] != b':' || self.bytes[i + 1] != b' ' {
                    return Err(StepAside);
                }
                i += 1;
                i += self.spaces(i, end);
                i = self.flow_node(i, end)?;
                i += self.spaces(i, end);
            }
            match self.bytes.get(i) {
                _ if i >= end => return Err(StepAside),
                Some(b',') => {
                    i += 1;
                    i += self.spaces(i, end);
                    // A trailing comma is left to `saphyr`.
                    if i >= end || self.bytes[i] == close {
                        return Err(StepAside);
                    }
                }
                Some(&b) if b == close => return Ok(self.flow_end(map, i)),
                _ => return Err(StepAside),
            }
        }
    }

    fn flow_end(&mut self, map: bool, close: usize) -> usize {
        self.flow_depth -= 1;
        let event = if map {
            Event::MappingEnd
        } else {
            Event::SequenceEnd
        };
        self.push(event, close, close + 1);
        close + 1
    }

    /// A node inside a flow collection; where it ends.
    fn flow_node(&mut self, at: usize, end: usize) -> Result<usize> {
        if at >= end {
            return Err(StepAside);
        }
        match self.bytes[at] {
            b'[' | b'{' => self.flow(at, end),
            b'"' | b'\'' => {
                let (value, after) = self.quoted(at, end)?;
                self.scalar(value, self.style(at), at, after);
                Ok(after)
            }
            _ => {
                self.plain_start(at)?;
                let bytes = self.bytes;
                let mut i = at;
                while i < end {
                    match bytes[i] {
                        b',' | b'[' | b']' | b'{' | b'}' => break,
                        b':' if i + 1 == end
                            || matches!(bytes[i + 1], b' ' | b',' | b']' | b'}') =>
                        {
                            break
                        }
                        b'#' if i > at && bytes[i - 1] == b' ' => return Err(StepAside),
                        _ => i += 1,
                    }
                }
                if self.trim_end(at, i) == at {
                    return Err(StepAside);
                }
                Ok(self.plain(at, i))
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use saphyr_parser::Parser;

    /// Every event of `text`, without spans: from the scanner, or `None`
    /// where it steps aside.
    pub(crate) fn scanned(text: &str) -> Option<Vec<Event<'_>>> {
        let limits = Limits::default();
        let mut scan = BlockScan::new(text, &limits)?;
        let mut events = Vec::new();
        loop {
            let (event, _) = scan.next_event().ok()?;
            let end = matches!(event, Event::StreamEnd);
            events.push(event);
            if end {
                return Some(events);
            }
        }
    }

    /// Every event of `text` from `saphyr`, or `None` on an error.
    pub(crate) fn saphyr(text: &str) -> Option<Vec<Event<'_>>> {
        Parser::new_from_str(text)
            .map(|e| e.ok().map(|(event, _)| event))
            .collect()
    }

    /// Where the scanner gives events, they are `saphyr`'s.
    pub(crate) fn scans_as_saphyr(text: &str) -> bool {
        match scanned(text) {
            Some(events) => {
                assert_eq!(Some(events), saphyr(text), "{text:?}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn the_forms_stacks_are_written_in_are_scanned_as_saphyr_reads_them() {
        for text in [
            "a: 1\nb: -2\nc: x y\nd: 'q''s'\ne: \"d\\n\\\"\"\nf:\ng: [1, two, 'three']\nh: {}\n",
            "- a\n- - b\n  - c\n- k: v\n  l: w\n",
            "a:\n- 1\n- 2\nb: 3\n",
            "a:\n  - 1\n  -\n  - x: [1, {y: z}]\n    w: ~\n",
            "\"quoted key\": 1\n'single': 2\nkey with spaces: 3\n",
            "a: b # comment\n# comment\n\n   \nc: d\r\ne: f\r\n",
            "a:\n  b:\n    c:\nd: Testbed::Noop::Thing\n",
            "  a: 1\n  b: 2\n",
            "a: http://x.y/z#frag\nb: x#y\n",
            "- \n- x\n",
            "a: []\nb: [[], {}]\nc: { k: v, 'q': \"w\" }\n",
            "- - - x\n    - y\n  - z\n",
            "k:    \n  v: 1\n",
        ] {
            assert!(scans_as_saphyr(text), "stepped aside: {text:?}");
        }
    }

    #[test]
    fn the_rest_is_left_to_saphyr() {
        for text in [
            "",
            "# only a comment\n",
            "scalar\n",
            "a: plain\n  continued\n",
            "a:\n  value below\n",
            "---\na: 1\n",
            "a: 1\n...\n",
            "a: \"two\n  lines\"\n",
            "a: 'open\n",
            "a: [1,\n  2]\n",
            "a: [1, 2, ]\n",
            "a: \"\\u00e9\"\n",
            "a: \"\\x41\"\n",
            "a: b: c\n",
            "a: é\n",
            "a: {b}\n",
            "a: [b c: d]\n",
            "a: 'x' y\n",
            "a: \"x\"#y\n",
            "a: [x] y\n",
            "a: 1\n b: 2\n",
            "- a\nb: 1\n",
            "a: 1\n- b\n",
            "a: [x #y]\n",
            "key\n",
        ] {
            assert_eq!(scanned(text), None, "{text:?}");
        }
    }

    #[test]
    fn nesting_past_the_depth_limit_steps_aside() {
        let limits = Limits {
            max_depth: 3,
            ..Limits::default()
        };
        let scan_all = |text: &str| {
            let mut scan = BlockScan::new(text, &limits).unwrap();
            loop {
                match scan.next_event() {
                    Ok((Event::StreamEnd, _)) => return true,
                    Ok(_) => {}
                    Err(StepAside) => return false,
                }
            }
        };
        assert!(scan_all("a: [[x]]\n"));
        assert!(!scan_all("a: [[[x]]]\n"));
        assert!(!scan_all("- - - - x\n"));
        let deep = format!("a: {}x{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert!(!scan_all(&deep));
        let wide = format!("a: [{}x]\n", "x, ".repeat(10_000));
        assert!(
            !scan_all(&wide),
            "a line of 10,000 events is left to saphyr"
        );
    }
}
