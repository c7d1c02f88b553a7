//! What the schema crate's test binaries share.

pub mod strategies;
