//! How much a stack document may make the parser build.
//!
//! YAML anchors (`&name`) and aliases (`*name`) let a small document stand
//! for a huge one: a list of a thousand items aliased a thousand times is a
//! million nodes, and aliases of aliases multiply. The reader
//! ([`super::yaml`]) keeps for each anchor the size its node expands to,
//! counts each node before building it, and refuses the document, naming
//! the line, as soon as one of the [`Limits`] is passed.
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

use std::fmt;

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
