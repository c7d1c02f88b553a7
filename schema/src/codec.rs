//! The one encode/decode pair every Orrery message goes through.
//!
//! Encoding always writes structs as MessagePack maps keyed by field name
//! (`rmp_serde::to_vec_named`): positional arrays break the moment a field is
//! added. Decoding is for untrusted bytes: it bounds the input size and the
//! nesting depth, rejects trailing bytes and never panics.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Largest message, and largest frame payload, either side accepts.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Deepest nesting of maps and lists a decoder follows before refusing.
pub const MAX_DEPTH: usize = 96;

/// Why a value could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The encoded message would exceed [`MAX_MESSAGE_BYTES`].
    #[error("encoded message is {len} bytes, over the limit of {max} bytes")]
    TooLarge {
        /// Encoded length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The serializer refused the value.
    #[error("cannot encode message: {0}")]
    Serialize(#[from] rmp_serde::encode::Error),
}

/// Why bytes could not be decoded into a message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The input exceeds [`MAX_MESSAGE_BYTES`]; nothing was parsed.
    #[error("message is {len} bytes, over the limit of {max} bytes")]
    TooLarge {
        /// Input length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A whole message decoded but bytes were left over.
    #[error("{trailing} unexpected bytes after the end of the message")]
    TrailingBytes {
        /// How many bytes followed the message.
        trailing: usize,
    },
    /// The bytes are not valid MessagePack for the expected message, or nest
    /// deeper than [`MAX_DEPTH`].
    #[error("malformed message: {0}")]
    Malformed(#[from] rmp_serde::decode::Error),
}

/// Encodes a message as a MessagePack map keyed by field name.
///
/// # Errors
///
/// [`EncodeError::TooLarge`] when the encoded message is over
/// [`MAX_MESSAGE_BYTES`]; [`EncodeError::Serialize`] when the value's
/// `Serialize` implementation fails (e.g. a custom one returning an error).
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeError> {
    let bytes = rmp_serde::to_vec_named(value)?;
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(EncodeError::TooLarge {
            len: bytes.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    Ok(bytes)
}

/// Decodes one whole message from untrusted bytes.
///
/// Unknown fields are ignored, missing fields take their defaults, unknown
/// enum values decode into the enum's `Unknown` variant.
///
/// # Errors
///
/// [`DecodeError::TooLarge`] when `bytes` is over [`MAX_MESSAGE_BYTES`]
/// (nothing is parsed); [`DecodeError::Malformed`] when the bytes are not
/// MessagePack of `T`'s shape or nest deeper than [`MAX_DEPTH`];
/// [`DecodeError::TrailingBytes`] when bytes follow one whole message.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(DecodeError::TooLarge {
            len: bytes.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    // Reading through `&mut &[u8]` (not a borrowed-slice reader) means a
    // claimed string or binary length can never allocate more than what is
    // actually left in the input, and the remaining slice tells us about
    // trailing bytes.
    let mut rest = bytes;
    let mut de = rmp_serde::Deserializer::new(&mut rest);
    de.set_max_depth(MAX_DEPTH);
    let value = T::deserialize(&mut de)?;
    drop(de);
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes {
            trailing: rest.len(),
        });
    }
    Ok(value)
}
