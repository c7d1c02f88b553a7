//! Direct MessagePack readers and writers for the messages every operation
//! carries.
//!
//! serde's generic path costs a visitor per field, every key matched as a
//! string and every value dispatched through `deserialize_any`; going
//! around it saved about 2,000 instructions per relayed operation in the
//! plugin and as many in the caller (callgrind, BENCHMARKS.md relay round
//! 9; the rest of a decode is the strings and maps it builds). The readers
//! here take the shape
//! `rmp_serde::to_vec_named` writes and nothing else: string keys, each
//! field once, scalar values under unknown keys, property values nested at
//! most [`MAX_VALUE_DEPTH`] deep, valid UTF-8, no extension types. Any
//! other input (integer keys, a positional array, a repeated key, a nested
//! unknown field, a truncated message) makes them give up, and serde
//! decides as it always did, with its errors: every input decodes to what
//! it did before. The writers write exactly serde's bytes. `wire/tests.rs`
//! and `tests/it/direct_codec.rs` check both against serde on generated
//! messages and mutated bytes.

mod bodies;
mod reader;

pub(crate) use bodies::{Direct, DirectWrite};
pub(crate) use reader::Reader;

use serde::de::DeserializeOwned;

use crate::codec::{self, DecodeError, EncodeError, MAX_MESSAGE_BYTES};

/// How deep property values may nest for the direct reader; deeper ones
/// are left to serde, whose limit ([`crate::MAX_DEPTH`]) is the protocol's.
pub(crate) const MAX_VALUE_DEPTH: usize = 32;

/// [`codec::decode`] of a message with a direct reader: the same value or
/// the same error for every input, found without serde when the reader
/// takes the bytes.
pub(crate) fn decode<T: Direct + DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    if bytes.len() <= MAX_MESSAGE_BYTES {
        let mut r = Reader::new(bytes);
        if let Some(message) = T::read(&mut r) {
            if r.at() < bytes.len() {
                return Err(DecodeError::TrailingBytes {
                    trailing: bytes.len() - r.at(),
                });
            }
            return Ok(message);
        }
    }
    codec::decode(bytes)
}

/// [`codec::encode`] of a message with a direct writer: the same bytes.
pub(crate) fn encode<T: DirectWrite>(message: &T) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(256);
    message.write(&mut out);
    if out.len() > MAX_MESSAGE_BYTES {
        return Err(EncodeError::TooLarge {
            len: out.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
