//! The MessagePack reader under the direct readers: every method reads one
//! thing or returns `None`, leaving the caller to hand the input to serde.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::MAX_VALUE_DEPTH;
use crate::value::{PropertyMap, Value};

/// Caps how much a reader preallocates from a length a peer claims (as
/// serde's visitors do).
const MAX_PREALLOC: usize = 1024;

/// A position in the bytes of one message.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    /// How many bytes have been read.
    pub(crate) fn at(&self) -> usize {
        self.at
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn byte(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let taken = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(taken)
    }

    /// A big-endian unsigned integer of `n` bytes.
    fn be(&mut self, n: usize) -> Option<u64> {
        Some(
            self.take(n)?
                .iter()
                .fold(0u64, |v, &b| (v << 8) | u64::from(b)),
        )
    }

    /// A length claimed by the input: never more elements than bytes left,
    /// since each takes at least one.
    fn count(&self, n: u64) -> Option<usize> {
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.bytes.len() - self.at)
    }

    pub(crate) fn map_len(&mut self) -> Option<usize> {
        let n = match self.byte()? {
            m @ 0x80..=0x8f => u64::from(m & 0x0f),
            0xde => self.be(2)?,
            0xdf => self.be(4)?,
            _ => return None,
        };
        self.count(n)
    }

    fn array_len(&mut self) -> Option<usize> {
        let n = match self.byte()? {
            m @ 0x90..=0x9f => u64::from(m & 0x0f),
            0xdc => self.be(2)?,
            0xdd => self.be(4)?,
            _ => return None,
        };
        self.count(n)
    }

    /// A string's bytes, unchecked.
    pub(crate) fn str(&mut self) -> Option<&'a [u8]> {
        let n = match self.byte()? {
            m @ 0xa0..=0xbf => u64::from(m & 0x1f),
            0xd9 => self.be(1)?,
            0xda => self.be(2)?,
            0xdb => self.be(4)?,
            _ => return None,
        };
        self.take(usize::try_from(n).ok()?)
    }

    /// A string that is valid UTF-8.
    pub(crate) fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.str()?).ok()
    }

    pub(crate) fn string(&mut self) -> Option<String> {
        self.text().map(str::to_owned)
    }

    pub(crate) fn bin(&mut self) -> Option<&'a [u8]> {
        let n = match self.byte()? {
            0xc4 => self.be(1)?,
            0xc5 => self.be(2)?,
            0xc6 => self.be(4)?,
            _ => return None,
        };
        self.take(usize::try_from(n).ok()?)
    }

    /// A non-negative integer in an unsigned marker.
    pub(crate) fn uint(&mut self) -> Option<u64> {
        match self.byte()? {
            m @ 0x00..=0x7f => Some(u64::from(m)),
            0xcc => self.be(1),
            0xcd => self.be(2),
            0xce => self.be(4),
            0xcf => self.be(8),
            _ => None,
        }
    }

    pub(crate) fn uuid(&mut self) -> Option<Uuid> {
        Uuid::from_slice(self.bin()?).ok()
    }

    /// `nil` as `None`, else `read`'s value.
    pub(crate) fn option<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if self.peek() == Some(0xc0) {
            self.at += 1;
            return Some(None);
        }
        read(self).map(Some)
    }

    /// Steps over one value that holds no others.
    pub(crate) fn skip_scalar(&mut self) -> Option<()> {
        if matches!(self.peek()?, 0x80..=0x9f | 0xdc..=0xdf) {
            return None;
        }
        self.at += crate::codec::value_end(&self.bytes[self.at..])?;
        Some(())
    }

    /// A property value, as [`Value`]'s `Deserialize` makes it from what
    /// `rmp_serde` reads: unsigned markers through `Value::from(u64)`,
    /// signed ones as `Int`, `float 32` widened, `bin` as bytes.
    pub(crate) fn value(&mut self, depth: usize) -> Option<Value> {
        let marker = self.peek()?;
        Some(match marker {
            0x00..=0x7f | 0xcc..=0xcf => Value::from(self.uint()?),
            0xe0..=0xff => {
                self.at += 1;
                Value::Int(i64::from(marker as i8))
            }
            0xd0..=0xd3 => {
                self.at += 1;
                let n = 1usize << (marker - 0xd0);
                let raw = self.be(n)?;
                // Sign-extend the `n`-byte two's complement value.
                let shift = 64 - 8 * n as u32;
                Value::Int(((raw << shift) as i64) >> shift)
            }
            0xc0 => {
                self.at += 1;
                Value::Null
            }
            0xc2 | 0xc3 => {
                self.at += 1;
                Value::Bool(marker == 0xc3)
            }
            0xca => {
                self.at += 1;
                Value::Float(f64::from(f32::from_bits(self.be(4)? as u32)))
            }
            0xcb => {
                self.at += 1;
                Value::Float(f64::from_bits(self.be(8)?))
            }
            0xa0..=0xbf | 0xd9..=0xdb => Value::String(self.string()?),
            0xc4..=0xc6 => Value::Bytes(self.bin()?.to_vec()),
            0x90..=0x9f | 0xdc | 0xdd => {
                let depth = depth.checked_sub(1)?;
                let n = self.array_len()?;
                let mut items = Vec::with_capacity(n.min(MAX_PREALLOC));
                for _ in 0..n {
                    items.push(self.value(depth)?);
                }
                Value::List(items)
            }
            0x80..=0x8f | 0xde | 0xdf => Value::Map(self.property_map_within(depth)?),
            // Extension types, and 0xc1, which MessagePack never uses.
            _ => return None,
        })
    }

    /// A map of property values.
    pub(crate) fn property_map(&mut self) -> Option<PropertyMap> {
        self.property_map_within(MAX_VALUE_DEPTH)
    }

    fn property_map_within(&mut self, depth: usize) -> Option<PropertyMap> {
        let depth = depth.checked_sub(1)?;
        let mut map = BTreeMap::new();
        for _ in 0..self.map_len()? {
            let key = self.string()?;
            let value = self.value(depth)?;
            // A repeated key: the last one wins, as in serde's map.
            map.insert(key, value);
        }
        Some(map)
    }
}
