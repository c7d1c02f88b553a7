//! The protobuf wire forms OTLP's trace messages need, written straight
//! into one buffer (the encoding, not a message model: `otlp_traces.rs`
//! walks the SDK's span data and calls these).
//!
//! Scalar fields follow proto3: a field at its default value is left out,
//! as generated encoders do. Values of a `oneof` are always written; the
//! caller uses [`Proto::key`] and the raw writers for those.

/// Wire types of the protobuf encoding.
#[derive(Clone, Copy)]
pub(super) enum Wire {
    Varint = 0,
    Fixed64 = 1,
    Len = 2,
    Fixed32 = 5,
}

/// A protobuf encoding in progress.
#[derive(Default)]
pub(super) struct Proto {
    pub(super) buf: Vec<u8>,
}

impl Proto {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Proto {
            buf: Vec::with_capacity(capacity),
        }
    }

    pub(super) fn varint(&mut self, value: u64) {
        let (bytes, n) = varint(value);
        self.buf.extend_from_slice(&bytes[..n]);
    }

    pub(super) fn key(&mut self, field: u32, wire: Wire) {
        self.varint(u64::from(field << 3 | wire as u32));
    }

    /// A length-delimited value: `bytes`, `string`.
    pub(super) fn len_value(&mut self, value: &[u8]) {
        self.varint(value.len() as u64);
        self.buf.extend_from_slice(value);
    }

    /// `uint32`, `uint64`, an enum, or an `int64` (negative ones take ten
    /// bytes, two's complement, as protobuf says).
    pub(super) fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.key(field, Wire::Varint);
            self.varint(value);
        }
    }

    pub(super) fn fixed64(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.key(field, Wire::Fixed64);
            self.buf.extend_from_slice(&value.to_le_bytes());
        }
    }

    pub(super) fn fixed32(&mut self, field: u32, value: u32) {
        if value != 0 {
            self.key(field, Wire::Fixed32);
            self.buf.extend_from_slice(&value.to_le_bytes());
        }
    }

    /// `bytes` or `string`.
    pub(super) fn bytes(&mut self, field: u32, value: &[u8]) {
        if !value.is_empty() {
            self.key(field, Wire::Len);
            self.len_value(value);
        }
    }

    /// An embedded message (always written, as a set optional message
    /// field or an element of a repeated one), its body written by `body`.
    ///
    /// The length goes before the body but is known only after it: one
    /// byte is reserved, which is enough below 128 bytes, and the body is
    /// moved along for a longer length.
    pub(super) fn message(&mut self, field: u32, body: impl FnOnce(&mut Self)) {
        self.key(field, Wire::Len);
        let at = self.buf.len();
        self.buf.push(0);
        body(self);
        let len = self.buf.len() - at - 1;
        if len < 0x80 {
            self.buf[at] = len as u8;
            return;
        }
        let (prefix, n) = varint(len as u64);
        let end = self.buf.len();
        self.buf.resize(end + n - 1, 0);
        self.buf.copy_within(at + 1..end, at + n);
        self.buf[at..at + n].copy_from_slice(&prefix[..n]);
    }
}

/// `value` as a varint: seven bits a byte, low first, the high bit set on
/// all but the last; the bytes and how many of them.
fn varint(mut value: u64) -> ([u8; 10], usize) {
    let mut bytes = [0; 10];
    let mut n = 0;
    while value >= 0x80 {
        bytes[n] = value as u8 | 0x80;
        value >>= 7;
        n += 1;
    }
    bytes[n] = value as u8;
    (bytes, n + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_take_seven_bits_a_byte_low_first() {
        let mut p = Proto::default();
        for v in [0, 1, 127, 128, 300, u64::MAX] {
            p.varint(v);
        }
        let mut expected = vec![0, 1, 127, 0x80, 1, 0xac, 2];
        expected.extend([0xff; 9]);
        expected.push(1);
        assert_eq!(p.buf, expected);
    }

    #[test]
    fn defaults_are_left_out() {
        let mut p = Proto::default();
        p.uint(1, 0);
        p.fixed64(2, 0);
        p.fixed32(3, 0);
        p.bytes(4, b"");
        assert!(p.buf.is_empty());
        p.uint(1, 150);
        assert_eq!(p.buf, [0x08, 0x96, 0x01]);
    }

    #[test]
    fn a_message_of_any_length_is_prefixed_with_its_length() {
        for len in [0usize, 1, 127, 128, 16_383, 16_384, 70_000] {
            let mut p = Proto::default();
            p.message(2, |p| p.buf.extend(std::iter::repeat_n(7u8, len)));
            let mut expected = Proto::default();
            expected.key(2, Wire::Len);
            expected.varint(len as u64);
            expected.buf.extend(std::iter::repeat_n(7u8, len));
            assert_eq!(p.buf, expected.buf, "length {len}");
        }
    }

    #[test]
    fn nested_messages_each_get_their_own_length() {
        let mut p = Proto::default();
        p.message(1, |p| {
            p.message(2, |p| p.bytes(3, &[9; 200]));
            p.uint(4, 1);
        });
        // 3: 200 bytes; 2: 203 (3's key, two of length, 200); 1: 208
        // (2's key, two of length, 203, then field 4's two bytes).
        let mut expected = vec![0x0a, 0xd0, 0x01, 0x12, 0xcb, 0x01, 0x1a, 0xc8, 0x01];
        expected.extend([9; 200]);
        expected.extend([0x20, 1]);
        assert_eq!(p.buf, expected);
    }
}
