//! Frames on the plugin stdio link: a 4-byte big-endian length, then that
//! many bytes of an encoded [`Envelope`].
//!
//! [`FrameDecoder`] is sans-IO: feed it bytes as they arrive, take frames out.
//! An oversized frame is reported once and its payload skipped, so one bad
//! frame never desynchronises the stream.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::codec::{EncodeError, MAX_MESSAGE_BYTES};
use crate::envelope::Envelope;

/// Bytes in the length prefix.
pub const FRAME_HEADER_BYTES: usize = 4;

/// Largest frame payload accepted by default.
pub const MAX_FRAME_BYTES: usize = MAX_MESSAGE_BYTES;

/// A frame that could not be taken from the stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length prefix announces more than the limit; the payload is skipped.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes; skipped")]
    TooLarge {
        /// Announced payload length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// Encodes an envelope as one frame.
pub fn encode_frame(envelope: &Envelope) -> Result<Vec<u8>, EncodeError> {
    let body = envelope.encode()?;
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
    out.put_u32(body.len() as u32);
    out.extend_from_slice(&body);
    Ok(out)
}

/// Splits a byte stream into frame payloads.
#[derive(Debug)]
pub struct FrameDecoder {
    max_frame: usize,
    skipping: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(MAX_FRAME_BYTES)
    }
}

impl FrameDecoder {
    /// A decoder that refuses payloads over `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        FrameDecoder {
            max_frame,
            skipping: 0,
        }
    }

    /// Takes the next complete frame payload out of `buf`.
    ///
    /// `Ok(None)` means more bytes are needed. After `Err(TooLarge)` keep
    /// calling: the decoder discards the oversized payload as it arrives.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        if self.skipping > 0 {
            let n = self.skipping.min(buf.len());
            buf.advance(n);
            self.skipping -= n;
            if self.skipping > 0 {
                return Ok(None);
            }
        }
        if buf.len() < FRAME_HEADER_BYTES {
            return Ok(None);
        }
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len > self.max_frame {
            buf.advance(FRAME_HEADER_BYTES);
            self.skipping = len;
            let n = self.skipping.min(buf.len());
            buf.advance(n);
            self.skipping -= n;
            return Err(FrameError::TooLarge {
                len,
                max: self.max_frame,
            });
        }
        if buf.len() < FRAME_HEADER_BYTES + len {
            buf.reserve(FRAME_HEADER_BYTES + len - buf.len());
            return Ok(None);
        }
        buf.advance(FRAME_HEADER_BYTES);
        Ok(Some(buf.split_to(len).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut v = (payload.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn frames_arrive_byte_by_byte() {
        let mut stream = frame(b"hello");
        stream.extend(frame(b""));
        stream.extend(frame(b"world"));
        let mut dec = FrameDecoder::default();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in stream {
            buf.put_u8(b);
            while let Some(f) = dec.decode(&mut buf).unwrap() {
                got.push(f.to_vec());
            }
        }
        assert_eq!(got, vec![b"hello".to_vec(), vec![], b"world".to_vec()]);
    }

    #[test]
    fn oversized_frame_is_reported_once_and_skipped() {
        let mut dec = FrameDecoder::new(8);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&frame(&[7u8; 20])[..10]);
        assert_eq!(
            dec.decode(&mut buf),
            Err(FrameError::TooLarge { len: 20, max: 8 })
        );
        assert_eq!(dec.decode(&mut buf), Ok(None));
        buf.extend_from_slice(&frame(&[7u8; 20])[10..]);
        buf.extend_from_slice(&frame(b"ok"));
        assert_eq!(dec.decode(&mut buf), Ok(Some(Bytes::from_static(b"ok"))));
        assert!(buf.is_empty());
    }
}
