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
    // Most messages are a few hundred bytes: starting there saves the six
    // or so reallocations of growing from empty.
    encode_with_capacity(value, 256)
}

/// [`encode`] into a buffer of `capacity` bytes to start with (the same
/// bytes: `rmp_serde::to_vec_named` is `write_named` into a `Vec`).
pub(crate) fn encode_with_capacity<T: Serialize + ?Sized>(
    value: &T,
    capacity: usize,
) -> Result<Vec<u8>, EncodeError> {
    let mut bytes = Vec::with_capacity(capacity.min(MAX_MESSAGE_BYTES));
    rmp_serde::encode::write_named(&mut bytes, value)?;
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
    // Where the one message ends, found without decoding it: the value is
    // then read from exactly its bytes, so bytes after it are reported
    // as trailing. Input that does not hold one whole value is decoded
    // as it is, for the decoder's own error.
    let end = value_end(bytes).unwrap_or(bytes.len());
    // The borrowed-slice reader checks every claimed string or binary
    // length against what is left of the input before taking it, so a
    // claimed length never allocates more than the input holds; and it
    // hands out slices of the input rather than copying each one into a
    // buffer first.
    let mut de = rmp_serde::Deserializer::from_read_ref(&bytes[..end]);
    de.set_max_depth(MAX_DEPTH);
    let value = T::deserialize(&mut de)?;
    if end < bytes.len() {
        return Err(DecodeError::TrailingBytes {
            trailing: bytes.len() - end,
        });
    }
    Ok(value)
}

/// The length of the one MessagePack value `bytes` starts with, from its
/// markers and lengths alone; `None` when the input ends before the value
/// does or holds a marker MessagePack does not use. One pass, no
/// allocation: every value takes at least a byte, so a claimed count
/// larger than what is left ends it at once.
fn value_end(bytes: &[u8]) -> Option<usize> {
    let mut at = 0usize;
    // Values still to skip, children included.
    let mut pending = 1usize;
    while pending > 0 {
        pending -= 1;
        let marker = *bytes.get(at)?;
        at += 1;
        let uint = |at: usize, n: usize| -> Option<usize> {
            let b = bytes.get(at..at.checked_add(n)?)?;
            Some(b.iter().fold(0usize, |v, &x| (v << 8) | usize::from(x)))
        };
        // (bytes of length field, then payload bytes) or children.
        let (skip, children) = match marker {
            0x00..=0x7f | 0xc0 | 0xc2 | 0xc3 | 0xe0..=0xff => (0, 0),
            0x80..=0x8f => (0, 2 * usize::from(marker & 0x0f)),
            0x90..=0x9f => (0, usize::from(marker & 0x0f)),
            0xa0..=0xbf => (usize::from(marker & 0x1f), 0),
            0xc4 | 0xd9 => (1 + uint(at, 1)?, 0),
            0xc5 | 0xda => (2 + uint(at, 2)?, 0),
            0xc6 | 0xdb => (uint(at, 4)?.checked_add(4)?, 0),
            0xc7 => (2 + uint(at, 1)?, 0),
            0xc8 => (3 + uint(at, 2)?, 0),
            0xc9 => (uint(at, 4)?.checked_add(5)?, 0),
            0xca => (4, 0),
            0xcb => (8, 0),
            0xcc | 0xd0 => (1, 0),
            0xcd | 0xd1 => (2, 0),
            0xce | 0xd2 => (4, 0),
            0xcf | 0xd3 => (8, 0),
            0xd4 => (2, 0),
            0xd5 => (3, 0),
            0xd6 => (5, 0),
            0xd7 => (9, 0),
            0xd8 => (17, 0),
            0xdc => (2, uint(at, 2)?),
            0xdd => (4, uint(at, 4)?),
            0xde => (2, 2 * uint(at, 2)?),
            0xdf => (4, uint(at, 4)?.checked_mul(2)?),
            // 0xc1 is never used.
            _ => return None,
        };
        at = at.checked_add(skip)?;
        pending = pending.checked_add(children)?;
        if at > bytes.len() || pending > bytes.len() - at {
            return None;
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Value;

    #[test]
    fn the_buffer_changes_nothing_but_the_allocations() {
        let envelope = crate::Envelope {
            body: vec![9; 1000],
            ..Default::default()
        };
        let named = rmp_serde::to_vec_named(&envelope).unwrap();
        assert_eq!(envelope.encode().unwrap(), named);
        assert_eq!(encode(&envelope).unwrap(), named);
        assert_eq!(crate::Envelope::decode(&named).unwrap(), envelope);
    }

    #[test]
    fn the_typed_entry_points_keep_decodes_bounds() {
        use crate::{Envelope, MessageKind, ProgressEvent, Request, RequestError};

        // Each entry point's reading of `bytes`, as the kind of error.
        fn errors(bytes: &[u8]) -> [String; 3] {
            let kind = |e: DecodeError| match e {
                DecodeError::TooLarge { .. } => "too large".to_owned(),
                DecodeError::TrailingBytes { trailing } => format!("{trailing} trailing"),
                DecodeError::Malformed(_) => "malformed".to_owned(),
            };
            let envelope = Envelope {
                kind: MessageKind::Create,
                body: bytes.to_vec(),
                ..Envelope::default()
            };
            let request = match Request::from_envelope(&envelope) {
                Err(RequestError::Body { source, .. }) => kind(source),
                other => panic!("expected a body error, got {other:?}"),
            };
            [
                kind(Envelope::decode(bytes).unwrap_err()),
                kind(ProgressEvent::decode(bytes).unwrap_err()),
                request,
            ]
        }

        let oversized = vec![0xc0; MAX_MESSAGE_BYTES + 1];
        assert_eq!(errors(&oversized), ["too large"; 3].map(String::from));

        let mut trailing = encode(&Value::Map(Default::default())).unwrap();
        trailing.extend_from_slice(&[0xc0, 0xc0]);
        assert_eq!(errors(&trailing), ["2 trailing"; 3].map(String::from));

        // `{"x": [[[…]]]}`, nested past the limit under a field no
        // message has, and under one whose values nest.
        for key in ["x", "context"] {
            let mut deep = vec![0x81, 0xa0 | key.len() as u8];
            deep.extend_from_slice(key.as_bytes());
            deep.extend(std::iter::repeat_n(0x91, MAX_DEPTH + 10));
            deep.push(0xc0);
            assert_eq!(errors(&deep), ["malformed"; 3].map(String::from), "{key}");
        }
        // A claimed length far beyond the input is refused, not allocated.
        let claimed = [0x81, 0xa1, b'x', 0xdd, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(errors(&claimed), ["malformed"; 3].map(String::from));
    }

    #[test]
    fn the_end_of_a_value_is_found_from_its_markers() {
        let value = Value::Map(
            [
                ("s".into(), Value::from("x".repeat(300))),
                (
                    "l".into(),
                    Value::List(vec![Value::Int(-70_000), Value::Float(0.5)]),
                ),
                ("b".into(), Value::Bytes(vec![7; 70_000])),
                ("n".into(), Value::Null),
                ("u".into(), Value::UInt(u64::MAX)),
            ]
            .into_iter()
            .collect(),
        );
        let bytes = encode(&value).unwrap();
        assert_eq!(value_end(&bytes), Some(bytes.len()));
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0xc0, 0x01, 0x02]);
        assert_eq!(value_end(&longer), Some(bytes.len()));
        for cut in [0, 1, 5, bytes.len() / 2, bytes.len() - 1] {
            assert_eq!(value_end(&bytes[..cut]), None, "cut at {cut}");
        }
        // A claimed count far beyond the input ends the scan at once.
        assert_eq!(value_end(&[0xdf, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(value_end(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x00]), None);
        assert_eq!(value_end(&[0xc6, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(value_end(&[0xc1]), None);
    }
}
