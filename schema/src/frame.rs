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
///
/// # Errors
///
/// As [`encode_frame_into`].
pub fn encode_frame(envelope: &Envelope) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + 64 + envelope.body.len());
    encode_frame_into(envelope, &mut out)?;
    Ok(out)
}

/// Appends one frame holding `envelope` to `out`: the same bytes as
/// [`encode_frame`], encoded in place behind the length prefix (no second
/// buffer, no copy), so a writer can batch frames in one reused buffer.
/// On error `out` is left as it was.
///
/// # Errors
///
/// [`EncodeError::TooLarge`] when the encoded envelope is over
/// [`MAX_MESSAGE_BYTES`];
/// [`EncodeError::Serialize`] when it cannot be serialized.
pub fn encode_frame_into(envelope: &Envelope, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let start = out.len();
    out.put_u32(0);
    if let Err(e) = envelope.encode_into(out) {
        out.truncate(start);
        return Err(e);
    }
    let len = out.len() - start - FRAME_HEADER_BYTES;
    out[start..start + FRAME_HEADER_BYTES].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
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
    ///
    /// # Errors
    ///
    /// [`FrameError::TooLarge`] when the next length prefix announces more than
    /// the decoder's limit. The prefix is consumed and the payload is discarded
    /// as it arrives; the frames after it decode normally.
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
    fn frames_encode_in_place_to_the_same_bytes() {
        let envelope = Envelope::new(crate::MessageKind::Ping, &"x".repeat(300))
            .unwrap()
            .with_deadline_ms(Some(1_700_000_000_000));
        let payload = envelope.encode().unwrap();
        let expected = frame(&payload);
        assert_eq!(encode_frame(&envelope).unwrap(), expected);
        let mut batch = b"prefix".to_vec();
        encode_frame_into(&envelope, &mut batch).unwrap();
        encode_frame_into(&envelope, &mut batch).unwrap();
        assert_eq!(&batch[..6], b"prefix");
        assert_eq!(&batch[6..6 + expected.len()], &expected[..]);
        assert_eq!(&batch[6 + expected.len()..], &expected[..]);
    }

    #[test]
    fn an_oversized_frame_leaves_the_buffer_as_it_was() {
        let envelope = Envelope {
            body: vec![0; MAX_MESSAGE_BYTES],
            ..Envelope::default()
        };
        let mut batch = b"kept".to_vec();
        assert!(matches!(
            encode_frame_into(&envelope, &mut batch),
            Err(EncodeError::TooLarge { .. })
        ));
        assert_eq!(batch, b"kept");
        assert!(encode_frame(&envelope).is_err());
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
