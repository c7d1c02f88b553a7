//! The schema crate's integration tests, one binary (issue 41): golden
//! fixtures, mixed versions, map encoding, codec properties, the direct
//! codec against serde, and `docs/protocol.md` kept honest.

mod golden;
mod map_encoding;
mod mixed_version;
mod properties;
mod protocol_doc;
mod support;
