//! The schema crate's integration tests, one binary: golden fixtures,
//! mixed versions, map encoding, codec properties, and `docs/protocol.md`
//! kept honest.

mod golden;
mod map_encoding;
mod mixed_version;
mod properties;
mod protocol_doc;
mod support;
