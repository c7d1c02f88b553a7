//! The envelope's own MessagePack reader and writer.
//!
//! Every hop decodes and encodes envelopes (four decodes and three encodes
//! per relayed operation), and serde's generic path costs several thousand
//! instructions for a dozen fields: a visitor per field, each key validated
//! as UTF-8 and matched as a string, the kind copied into a `String` first.
//! These write exactly the bytes `rmp_serde::to_vec_named` writes (the same
//! `rmp` writers, the same field order and skipped fields) and read the
//! shape it writes.
//!
//! The reader takes only what it fully understands: string keys, the
//! markers this release writes, scalar values under unknown keys, each
//! field once. Anything else (integer keys, a positional array, a nested
//! unknown field, a repeated key, a truncated input) returns `None`, and
//! the caller decodes with serde, so every input decodes to what it always
//! did, with the same errors. `wire_tests.rs` checks both against serde on
//! generated envelopes and mutated bytes.

use uuid::Uuid;

use super::{Envelope, MessageKind, TraceContext};

/// Appends `envelope`, as `rmp_serde::to_vec_named` writes it, to `out`.
pub(super) fn encode_into(envelope: &Envelope, out: &mut Vec<u8>) {
    // Writes into a `Vec` cannot fail.
    let fields = 4
        + usize::from(envelope.correlation.is_some())
        + usize::from(envelope.deadline_ms.is_some())
        + usize::from(envelope.trace.is_some())
        + usize::from(envelope.max_message_bytes.is_some());
    let _ = rmp::encode::write_map_len(out, fields as u32);
    key(out, "protocol");
    let _ = rmp::encode::write_uint(out, u64::from(envelope.protocol));
    key(out, "id");
    let _ = rmp::encode::write_bin(out, envelope.id.as_bytes());
    if let Some(correlation) = &envelope.correlation {
        key(out, "correlation");
        let _ = rmp::encode::write_bin(out, correlation.as_bytes());
    }
    key(out, "kind");
    let _ = rmp::encode::write_str(out, envelope.kind.as_str());
    if let Some(deadline) = envelope.deadline_ms {
        key(out, "deadline_ms");
        let _ = rmp::encode::write_uint(out, deadline);
    }
    if let Some(trace) = &envelope.trace {
        key(out, "trace");
        let tracestate = !trace.tracestate.is_empty();
        let _ = rmp::encode::write_map_len(out, 1 + u32::from(tracestate));
        key(out, "traceparent");
        let _ = rmp::encode::write_str(out, &trace.traceparent);
        if tracestate {
            key(out, "tracestate");
            let _ = rmp::encode::write_str(out, &trace.tracestate);
        }
    }
    if let Some(max) = envelope.max_message_bytes {
        key(out, "max_message_bytes");
        let _ = rmp::encode::write_uint(out, max);
    }
    key(out, "body");
    let _ = rmp::encode::write_bin(out, &envelope.body);
}

fn key(out: &mut Vec<u8>, name: &str) {
    let _ = rmp::encode::write_str(out, name);
}

/// Reads the envelope `bytes` start with, and where it ends; `None` when
/// the bytes are not of the shape this reader takes (see the module
/// comment), and serde must decide.
pub(super) fn decode(bytes: &[u8]) -> Option<(Envelope, usize)> {
    let mut r = Reader { bytes, at: 0 };
    let mut envelope = Envelope::default();
    let mut seen = 0u8;
    for _ in 0..r.map_len()? {
        let name = r.str()?;
        let field = match name {
            b"protocol" => 0,
            b"id" => 1,
            b"correlation" => 2,
            b"kind" => 3,
            b"deadline_ms" => 4,
            b"trace" => 5,
            b"max_message_bytes" => 6,
            b"body" => 7,
            _ => {
                r.skip_scalar()?;
                continue;
            }
        };
        if seen & (1 << field) != 0 {
            return None;
        }
        seen |= 1 << field;
        match field {
            0 => envelope.protocol = u16::try_from(r.uint()?).ok()?,
            1 => envelope.id = r.uuid()?,
            2 => envelope.correlation = r.option(Reader::uuid)?,
            3 => envelope.kind = r.kind()?,
            4 => envelope.deadline_ms = r.option(Reader::uint)?,
            5 => envelope.trace = r.option(Reader::trace)?,
            6 => envelope.max_message_bytes = r.option(Reader::uint)?,
            _ => envelope.body = r.bin()?.to_vec(),
        }
    }
    Some((envelope, r.at))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
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

    fn map_len(&mut self) -> Option<usize> {
        let n = match self.byte()? {
            m @ 0x80..=0x8f => u64::from(m & 0x0f),
            0xde => self.be(2)?,
            0xdf => self.be(4)?,
            _ => return None,
        };
        usize::try_from(n).ok()
    }

    fn str(&mut self) -> Option<&'a [u8]> {
        let n = match self.byte()? {
            m @ 0xa0..=0xbf => u64::from(m & 0x1f),
            0xd9 => self.be(1)?,
            0xda => self.be(2)?,
            0xdb => self.be(4)?,
            _ => return None,
        };
        self.take(usize::try_from(n).ok()?)
    }

    fn bin(&mut self) -> Option<&'a [u8]> {
        let marker = self.byte()?;
        let n = match marker {
            0xc4 => self.be(1)?,
            0xc5 => self.be(2)?,
            0xc6 => self.be(4)?,
            _ => return None,
        };
        self.take(usize::try_from(n).ok()?)
    }

    /// A non-negative integer in an unsigned marker.
    fn uint(&mut self) -> Option<u64> {
        match self.byte()? {
            m @ 0x00..=0x7f => Some(u64::from(m)),
            0xcc => self.be(1),
            0xcd => self.be(2),
            0xce => self.be(4),
            0xcf => self.be(8),
            _ => None,
        }
    }

    fn uuid(&mut self) -> Option<Uuid> {
        Uuid::from_slice(self.bin()?).ok()
    }

    fn kind(&mut self) -> Option<MessageKind> {
        let name = std::str::from_utf8(self.str()?).ok()?;
        Some(MessageKind::from_wire(name))
    }

    fn string(&mut self) -> Option<String> {
        std::str::from_utf8(self.str()?).ok().map(str::to_owned)
    }

    fn trace(&mut self) -> Option<TraceContext> {
        let mut trace = TraceContext::default();
        let mut seen = [false; 2];
        for _ in 0..self.map_len()? {
            let field = match self.str()? {
                b"traceparent" => 0,
                b"tracestate" => 1,
                _ => {
                    self.skip_scalar()?;
                    continue;
                }
            };
            if std::mem::replace(&mut seen[field], true) {
                return None;
            }
            let value = self.string()?;
            if field == 0 {
                trace.traceparent = value;
            } else {
                trace.tracestate = value;
            }
        }
        Some(trace)
    }

    /// `nil` as `None`, else `read`'s value.
    fn option<T>(&mut self, read: fn(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.bytes.get(self.at) == Some(&0xc0) {
            self.at += 1;
            return Some(None);
        }
        read(self).map(Some)
    }

    /// Steps over one value that holds no others.
    fn skip_scalar(&mut self) -> Option<()> {
        let marker = *self.bytes.get(self.at)?;
        if matches!(marker, 0x80..=0x9f | 0xdc..=0xdf) {
            return None;
        }
        self.at += crate::codec::value_end(&self.bytes[self.at..])?;
        Some(())
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
