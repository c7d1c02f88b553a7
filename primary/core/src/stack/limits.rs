//! How much a stack document may make the parser build, checked before
//! anything is built.
//!
//! YAML anchors (`&name`) and aliases (`*name`) let a small document stand
//! for a huge one: a list of a thousand items aliased a thousand times is a
//! million nodes, and aliases of aliases multiply. Deserializing such a
//! document builds every copy. [`check`] reads the document's event stream
//! once (with `saphyr-parser`, which holds no tree), keeps for each anchor the
//! size its node expands to, and refuses the document, naming the line,
//! as soon as one of the [`Limits`] is passed. Only then is the document
//! deserialized.
//!
//! The limits, by default:
//!
//! | limit | default | counts |
//! |---|---|---|
//! | [`MAX_DOCUMENT_BYTES`] | 16 MiB | the document's text |
//! | [`MAX_DEPTH`] | 64 | nested lists and maps, aliases expanded |
//! | [`MAX_ALIASES`] | 10,000 | aliases (`*name`) in the document |
//! | [`MAX_NODES`] | 1,000,000 | scalars, lists and maps (keys included) once every alias is replaced by what it names |
//! | [`MAX_SCALAR_BYTES`] | 32 MiB | bytes of scalars (keys included), aliases expanded |
//!
//! A stack of 10,000 resources is about 1.5 MB and 200,000 nodes, nested
//! five or six levels; a document without aliases never has more scalar
//! bytes than text, so within the size limit it is within the scalar limit.

use std::collections::HashMap;
use std::fmt;

use saphyr_parser::{Event, Parser, ScanError};

/// Largest document, in bytes of text.
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;
/// Deepest nesting of lists and maps (the top-level map is 1), aliases
/// expanded.
pub const MAX_DEPTH: usize = 64;
/// Most aliases (`*name`) in one document.
pub const MAX_ALIASES: u64 = 10_000;
/// Most nodes (scalars, lists, maps; mapping keys included) once aliases
/// are expanded.
pub const MAX_NODES: u64 = 1_000_000;
/// Most bytes of scalar values (mapping keys included) once aliases are
/// expanded.
pub const MAX_SCALAR_BYTES: u64 = 32 << 20;

/// Bounds on a document and on what it expands to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest document, in bytes of text.
    pub max_document_bytes: usize,
    /// Deepest nesting of lists and maps, aliases expanded.
    pub max_depth: usize,
    /// Most aliases.
    pub max_aliases: u64,
    /// Most nodes, aliases expanded.
    pub max_nodes: u64,
    /// Most bytes of scalars, aliases expanded.
    pub max_scalar_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_document_bytes: MAX_DOCUMENT_BYTES,
            max_depth: MAX_DEPTH,
            max_aliases: MAX_ALIASES,
            max_nodes: MAX_NODES,
            max_scalar_bytes: MAX_SCALAR_BYTES,
        }
    }
}

/// Which limit a document passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The text is longer than the limit.
    DocumentBytes {
        /// The document's length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// Lists and maps nested deeper than the limit.
    Depth {
        /// The limit.
        max: usize,
    },
    /// More aliases than the limit.
    Aliases {
        /// The limit.
        max: u64,
    },
    /// More nodes than the limit once aliases are expanded.
    Nodes {
        /// The limit.
        max: u64,
    },
    /// More bytes of scalars than the limit once aliases are expanded.
    ScalarBytes {
        /// The limit.
        max: u64,
    },
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::DocumentBytes { bytes, max } => write!(
                f,
                "the document is {bytes} bytes long; at most {max} are accepted"
            ),
            Limit::Depth { max } => write!(
                f,
                "lists and maps are nested more than {max} deep (aliases expanded)"
            ),
            Limit::Aliases { max } => write!(
                f,
                "more than {max} aliases (`*name`); at most {max} are accepted"
            ),
            Limit::Nodes { max } => write!(
                f,
                "the document expands to more than {max} nodes once its aliases are resolved"
            ),
            Limit::ScalarBytes { max } => write!(
                f,
                "the document expands to more than {max} bytes of values once its aliases are resolved"
            ),
        }
    }
}

/// Why [`check`] refused a document, and the line (1-based) where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A limit was passed (at `line`, except for the document's length).
    Limit {
        /// The line where the limit was passed.
        line: Option<usize>,
        /// The limit.
        limit: Limit,
    },
    /// The document is not YAML, or an alias names a node that contains it.
    Syntax {
        /// The line of the problem.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// What one node expands to.
#[derive(Clone, Copy, Default)]
struct Size {
    nodes: u64,
    scalar_bytes: u64,
    /// Lists and maps nested in the node, itself included (0 for a scalar).
    levels: usize,
}

/// An open list or map.
struct Open {
    anchor: usize,
    size: Size,
}

/// Reads the event stream of `text` and refuses it where it passes one of
/// `limits`, before anything is built. Memory is bounded by the number of
/// anchors and the nesting depth, not by what the document expands to.
pub fn check(text: &str, limits: &Limits) -> Result<(), Refusal> {
    if text.len() > limits.max_document_bytes {
        return Err(Refusal::Limit {
            line: None,
            limit: Limit::DocumentBytes {
                bytes: text.len(),
                max: limits.max_document_bytes,
            },
        });
    }
    let mut anchors: HashMap<usize, Size> = HashMap::new();
    let mut open: Vec<Open> = Vec::new();
    let mut total = Size::default();
    let mut aliases = 0u64;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(syntax)?;
        let line = span.start.line();
        let refuse = |limit| Refusal::Limit {
            line: Some(line),
            limit,
        };
        // The node this event completes, if any.
        let done = match event {
            Event::Scalar(value, _, anchor, _) => {
                let size = Size {
                    nodes: 1,
                    scalar_bytes: value.len() as u64,
                    levels: 0,
                };
                if anchor > 0 {
                    anchors.insert(anchor, size);
                }
                Some(size)
            }
            Event::Alias(anchor) => {
                aliases += 1;
                if aliases > limits.max_aliases {
                    return Err(refuse(Limit::Aliases {
                        max: limits.max_aliases,
                    }));
                }
                match anchors.get(&anchor) {
                    Some(size) => Some(*size),
                    // The parser refuses unknown anchors, so this one is
                    // still open: the alias is inside the node it names.
                    None => {
                        return Err(Refusal::Syntax {
                            line,
                            message: "an alias names a node that contains it".to_owned(),
                        })
                    }
                }
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                open.push(Open {
                    anchor,
                    size: Size {
                        nodes: 1,
                        scalar_bytes: 0,
                        levels: 1,
                    },
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
                None
            }
            Event::SequenceEnd | Event::MappingEnd => match open.pop() {
                Some(node) => {
                    if node.anchor > 0 {
                        anchors.insert(node.anchor, node.size);
                    }
                    // Counted in the totals already, as its parts came.
                    if let Some(parent) = open.last_mut() {
                        add(&mut parent.size, node.size);
                    }
                    None
                }
                None => None,
            },
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd => None,
        };
        let Some(size) = done else { continue };
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
        if let Some(parent) = open.last_mut() {
            add(&mut parent.size, size);
        }
    }
    Ok(())
}

/// Adds a child's size to its parent's.
fn add(parent: &mut Size, child: Size) {
    parent.nodes = parent.nodes.saturating_add(child.nodes);
    parent.scalar_bytes = parent.scalar_bytes.saturating_add(child.scalar_bytes);
    parent.levels = parent.levels.max(child.levels + 1);
}

fn syntax(e: ScanError) -> Refusal {
    let mark = e.marker();
    Refusal::Syntax {
        line: mark.line(),
        message: format!(
            "{} at line {} column {}",
            e.info(),
            mark.line(),
            mark.col() + 1
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_document_bytes: 1 << 20,
            max_depth: 8,
            max_aliases: 10,
            max_nodes: 100,
            max_scalar_bytes: 1000,
        }
    }

    fn limit(text: &str, limits: &Limits) -> Option<(Option<usize>, Limit)> {
        match check(text, limits) {
            Ok(()) => None,
            Err(Refusal::Limit { line, limit }) => Some((line, limit)),
            Err(e) => panic!("not a limit: {e:?}"),
        }
    }

    /// `n` aliases of an anchored scalar, one a line, after the anchor on
    /// line 1: the document is `2 + n` nodes (the list, the anchor, `n`
    /// copies).
    fn aliases(n: usize) -> String {
        let mut text = String::from("- &a x\n");
        for _ in 0..n {
            text.push_str("- *a\n");
        }
        text
    }

    #[test]
    fn real_documents_pass_the_defaults() {
        let mut text = String::from(
            "stack: big\ntargets:\n  - name: home\n    plugin: local\n    config: &cfg { root: /srv, create_root: true }\nresources:\n",
        );
        for i in 0..10_000 {
            text.push_str(&format!(
                "  - label: r{i}\n    type: Local::Fs::File\n    target: home\n    properties: {{ path: \"f{i}\", content: hello, mode: 420, tags: [a, b] }}\n"
            ));
        }
        assert_eq!(check(&text, &Limits::default()), Ok(()));
    }

    #[test]
    fn aliases_at_the_limit_pass_and_one_more_is_refused_on_its_line() {
        let limits = limits();
        assert_eq!(limit(&aliases(10), &limits), None);
        assert_eq!(
            limit(&aliases(11), &limits),
            Some((Some(12), Limit::Aliases { max: 10 }))
        );
    }

    #[test]
    fn expanded_nodes_at_the_limit_pass_and_one_more_is_refused() {
        // An anchored list of 9 scalars is 10 nodes; the outer list, the
        // anchored list and 9 aliases of it are 1 + 10 + 9 × 10 = 101.
        let limits = Limits {
            max_aliases: 100,
            ..limits()
        };
        let items = ["x"; 9].join(", ");
        let mut at = format!("- &a [{items}]\n");
        for _ in 0..8 {
            at.push_str("- *a\n");
        }
        // 1 + 10 + 8 × 10 = 91 nodes; 9 more scalars make 100.
        for _ in 0..9 {
            at.push_str("- y\n");
        }
        assert_eq!(limit(&at, &limits), None);
        let over = format!("{at}- z\n");
        assert_eq!(
            limit(&over, &limits),
            Some((Some(19), Limit::Nodes { max: 100 }))
        );
        // The alias that passes the limit is named, not the end.
        let mut bomb = format!("- &a [{items}]\n");
        for _ in 0..9 {
            bomb.push_str("- *a\n");
        }
        bomb.push_str("- end\n");
        assert_eq!(
            limit(&bomb, &limits),
            Some((Some(10), Limit::Nodes { max: 100 }))
        );
    }

    #[test]
    fn aliases_of_aliases_multiply() {
        // Each level aliases the previous one 4 times: 4^5 = 1024 scalars
        // from a few lines and 20 aliases.
        let limits = Limits {
            max_nodes: 1000,
            max_aliases: 100,
            max_scalar_bytes: 1 << 20,
            ..limits()
        };
        let mut text = String::from("a0: &a0 [x]\n");
        for i in 1..=5 {
            let p = i - 1;
            text.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}]\n"));
        }
        assert_eq!(
            limit(&text, &limits),
            Some((Some(6), Limit::Nodes { max: 1000 }))
        );
    }

    #[test]
    fn expanded_scalar_bytes_at_the_limit_pass_and_one_more_is_refused() {
        let limits = Limits {
            max_scalar_bytes: 1000,
            ..limits()
        };
        // 100 bytes anchored, then 9 aliases: 1000 bytes.
        let value = "v".repeat(100);
        let mut at = format!("- &a {value}\n");
        for _ in 0..9 {
            at.push_str("- *a\n");
        }
        assert_eq!(limit(&at, &limits), None);
        let over = format!("{at}- w\n");
        assert_eq!(
            limit(&over, &limits),
            Some((Some(11), Limit::ScalarBytes { max: 1000 }))
        );
    }

    #[test]
    fn depth_at_the_limit_passes_and_one_more_is_refused() {
        let limits = limits();
        let at = format!("{}x{}", "[".repeat(8), "]".repeat(8));
        assert_eq!(limit(&at, &limits), None);
        let over = format!("\n{}x{}", "[".repeat(9), "]".repeat(9));
        assert_eq!(
            limit(&over, &limits),
            Some((Some(2), Limit::Depth { max: 8 }))
        );
    }

    #[test]
    fn depth_counts_what_an_alias_expands_to() {
        let limits = limits();
        // The anchored node is 4 deep; aliased 4 levels down it would be 8.
        let at = "a: &a [[[[x]]]]\nb: [[[*a]]]\n";
        assert_eq!(limit(at, &limits), None);
        let over = "a: &a [[[[x]]]]\nb: [[[[*a]]]]\n";
        assert_eq!(
            limit(over, &limits),
            Some((Some(2), Limit::Depth { max: 8 }))
        );
    }

    #[test]
    fn document_length_at_the_limit_passes_and_one_byte_more_is_refused() {
        let limits = Limits {
            max_document_bytes: 64,
            ..limits()
        };
        let at = format!("a: {}", "b".repeat(61));
        assert_eq!(at.len(), 64);
        assert_eq!(limit(&at, &limits), None);
        assert_eq!(
            limit(&format!("{at}c"), &limits),
            Some((None, Limit::DocumentBytes { bytes: 65, max: 64 }))
        );
    }

    #[test]
    fn an_alias_inside_the_node_it_names_is_refused() {
        match check("a: &a [x, *a]\n", &limits()) {
            Err(Refusal::Syntax { line, message }) => {
                assert_eq!(line, 1);
                assert!(message.contains("contains it"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn syntax_errors_name_their_line() {
        match check("a: b\nc: [unclosed\n", &limits()) {
            Err(Refusal::Syntax { line, message }) => {
                assert!(line >= 2, "{line}: {message}");
                assert!(message.contains(&format!("line {line}")), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
