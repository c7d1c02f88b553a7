//! What the schema crate's tests share.

pub mod strategies;
