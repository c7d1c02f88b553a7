//! The one reader of YAML (and so of JSON, which is YAML): stack
//! documents, module files, list and map parameters, `--var-file`s.
//!
//! One pass over `saphyr-parser`'s events builds a tree of the document's
//! nodes, each with where it starts, and holds the document to its
//! [`Limits`] as it goes: the count is taken before each node is built, an
//! alias is counted as the size of what it names (aliases of aliases
//! multiply), and the first limit passed stops the read, naming its line,
//! so that memory stays within the limits whatever the text. The tree is
//! then read into the caller's serde type ([`de`]), whose errors name the
//! place (`resources[0].target`), the line and the column of the node
//! they are about.

mod de;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError};
use serde::de::DeserializeOwned;

use super::error::{Position, Problem};
use super::limits::{Limit, Limits};

/// `text`, one YAML document, as a `T`, within `limits`.
pub fn read<T: DeserializeOwned>(text: &str, limits: &Limits) -> Result<T, ReadError> {
    let root = load(text, limits)?;
    de::from_node(&root).map_err(|e| e.read_error(text))
}

/// Why a document could not be read: where, and what
/// ([`Problem::TooLarge`] or [`Problem::Syntax`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    /// The line (1-based), where known.
    pub line: Option<usize>,
    /// The place on it, where known.
    pub position: Option<Box<Position>>,
    /// What is wrong.
    pub problem: Problem,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.problem {
            Problem::TooLarge(limit) => write!(f, "{limit}"),
            Problem::Syntax(message) => f.write_str(message),
            // The reader makes no other.
            other => write!(f, "{other:?}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// A node of the document, and the character index where it starts.
#[derive(Clone, Debug)]
struct Node<'t> {
    at: usize,
    kind: Kind<'t>,
}

#[derive(Clone, Debug)]
enum Kind<'t> {
    /// A scalar's text, and whether it was plain (unquoted): only a plain
    /// scalar is read as null, a boolean or a number.
    Scalar(Cow<'t, str>, bool),
    List(Vec<Node<'t>>),
    Map(Vec<(Node<'t>, Node<'t>)>),
}

/// What one node expands to.
#[derive(Clone, Copy, Default)]
struct Size {
    nodes: u64,
    scalar_bytes: u64,
    /// Lists and maps nested in the node, itself included (0 for a scalar).
    levels: usize,
}

impl Size {
    /// Adds a child's size to its parent's.
    fn add(&mut self, child: Size) {
        self.nodes = self.nodes.saturating_add(child.nodes);
        self.scalar_bytes = self.scalar_bytes.saturating_add(child.scalar_bytes);
        self.levels = self.levels.max(child.levels + 1);
    }
}

/// An open list or map.
struct Open<'t> {
    node: Node<'t>,
    anchor: usize,
    size: Size,
    /// A map's key, until its value comes.
    key: Option<Node<'t>>,
}

/// The tree of `text`, refused where it passes one of `limits`.
fn load<'t>(text: &'t str, limits: &Limits) -> Result<Node<'t>, ReadError> {
    if text.len() > limits.max_document_bytes {
        return Err(ReadError {
            line: None,
            position: None,
            problem: Problem::TooLarge(Limit::DocumentBytes {
                bytes: text.len(),
                max: limits.max_document_bytes,
            }),
        });
    }
    let mut anchors: HashMap<usize, (Node<'t>, Size)> = HashMap::new();
    let mut open: Vec<Open<'t>> = Vec::new();
    let mut total = Size::default();
    let mut aliases = 0u64;
    let mut root = None;
    let mut documents = 0;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(syntax)?;
        let line = span.start.line();
        let refuse = |limit| ReadError {
            line: Some(line),
            position: None,
            problem: Problem::TooLarge(limit),
        };
        let at = span.start.index();
        // The node this event completes, if any: a scalar, or an alias
        // (copied once it is counted).
        let (done, size) = match event {
            Event::Scalar(value, style, anchor, tag) => {
                let plain = match tag.as_deref() {
                    None => style == ScalarStyle::Plain,
                    Some(tag) if tag.is_yaml_core_schema() && tag.suffix == "str" => false,
                    Some(tag) => return Err(unsupported_tag(text, at, tag)),
                };
                let size = Size {
                    nodes: 1,
                    scalar_bytes: value.len() as u64,
                    levels: 0,
                };
                let node = Node {
                    at,
                    kind: Kind::Scalar(value, plain),
                };
                if anchor > 0 {
                    anchors.insert(anchor, (node.clone(), size));
                }
                (Ok(node), size)
            }
            Event::Alias(anchor) => {
                aliases += 1;
                if aliases > limits.max_aliases {
                    return Err(refuse(Limit::Aliases {
                        max: limits.max_aliases,
                    }));
                }
                match anchors.get(&anchor) {
                    Some((_, size)) => (Err(anchor), *size),
                    // The parser refuses unknown anchors, so this one is
                    // still open: the alias is inside the node it names.
                    None => {
                        return Err(ReadError {
                            line: Some(line),
                            position: None,
                            problem: Problem::Syntax(
                                "an alias names a node that contains it".to_owned(),
                            ),
                        })
                    }
                }
            }
            Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                if let Some(tag) = tag {
                    return Err(unsupported_tag(text, at, tag));
                }
                let kind = match event {
                    Event::SequenceStart(..) => Kind::List(Vec::new()),
                    _ => Kind::Map(Vec::new()),
                };
                open.push(Open {
                    node: Node { at, kind },
                    anchor,
                    size: Size {
                        nodes: 1,
                        scalar_bytes: 0,
                        levels: 1,
                    },
                    key: None,
                });
                if open.len() > limits.max_depth {
                    return Err(refuse(Limit::Depth {
                        max: limits.max_depth,
                    }));
                }
                total.nodes += 1;
                if total.nodes > limits.max_nodes {
                    return Err(refuse(Limit::Nodes {
                        max: limits.max_nodes,
                    }));
                }
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(done) = open.pop() else { continue };
                if done.anchor > 0 {
                    anchors.insert(done.anchor, (done.node.clone(), done.size));
                }
                // Counted in the totals already, as its parts came.
                place(&mut open, &mut root, done.node, done.size);
                continue;
            }
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(ReadError {
                        line: Some(line),
                        position: None,
                        problem: Problem::Syntax(format!(
                            "a second document at line {line} column {}: a file holds one",
                            span.start.col() + 1
                        )),
                    });
                }
                continue;
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => continue,
        };
        if open.len() + size.levels > limits.max_depth {
            return Err(refuse(Limit::Depth {
                max: limits.max_depth,
            }));
        }
        total.nodes = total.nodes.saturating_add(size.nodes);
        if total.nodes > limits.max_nodes {
            return Err(refuse(Limit::Nodes {
                max: limits.max_nodes,
            }));
        }
        total.scalar_bytes = total.scalar_bytes.saturating_add(size.scalar_bytes);
        if total.scalar_bytes > limits.max_scalar_bytes {
            return Err(refuse(Limit::ScalarBytes {
                max: limits.max_scalar_bytes,
            }));
        }
        let node = match done {
            Ok(node) => node,
            // What the alias names, placed where the alias is.
            Err(anchor) => Node {
                at,
                ..anchors[&anchor].0.clone()
            },
        };
        place(&mut open, &mut root, node, size);
    }
    // No document at all reads as an empty (plain) scalar: null, or an
    // empty list or map.
    Ok(root.unwrap_or(Node {
        at: 0,
        kind: Kind::Scalar(Cow::Borrowed(""), true),
    }))
}

/// Puts a finished node in the list or map open around it, else makes it
/// the root.
fn place<'t>(open: &mut [Open<'t>], root: &mut Option<Node<'t>>, node: Node<'t>, size: Size) {
    let Some(parent) = open.last_mut() else {
        *root = Some(node);
        return;
    };
    parent.size.add(size);
    match &mut parent.node.kind {
        Kind::List(items) => items.push(node),
        Kind::Map(entries) => match parent.key.take() {
            Some(key) => entries.push((key, node)),
            None => parent.key = Some(node),
        },
        Kind::Scalar(..) => {}
    }
}

fn syntax(e: ScanError) -> ReadError {
    let mark = e.marker();
    ReadError {
        line: Some(mark.line()),
        position: None,
        problem: Problem::Syntax(format!(
            "{} at line {} column {}",
            e.info(),
            mark.line(),
            mark.col() + 1
        )),
    }
}

fn unsupported_tag(text: &str, at: usize, tag: &saphyr_parser::Tag) -> ReadError {
    de::Error::custom_at(
        format!(
            "tags (`{}{}`) are not read; quote a value to make it a string",
            tag.handle, tag.suffix
        ),
        at,
    )
    .read_error(text)
}

#[cfg(test)]
mod tests;
