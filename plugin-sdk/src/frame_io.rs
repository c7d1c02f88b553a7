//! Frames over async byte streams: the stdio link between a host and a
//! plugin process (or the in-memory pipe of the harness).

use bytes::{Bytes, BytesMut};
use orrery_schema::{Envelope, FrameDecoder, FrameError};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::codec::Decoder;

/// A `tokio_util` decoder that yields frame payloads. An oversized frame is
/// yielded as `Err` *inside* the item, so the stream keeps going after it.
#[derive(Debug, Default)]
pub struct FrameCodec(FrameDecoder);

impl FrameCodec {
    /// A codec refusing payloads over `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        FrameCodec(FrameDecoder::new(max_frame))
    }
}

impl Decoder for FrameCodec {
    type Item = Result<Bytes, FrameError>;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        match self.0.decode(src) {
            Ok(Some(frame)) => Ok(Some(Ok(frame))),
            Ok(None) => Ok(None),
            Err(e) => Ok(Some(Err(e))),
        }
    }
}

/// Capacity of the queue in front of a link's writer. Senders wait when it
/// is full, which is the back-pressure of the whole link.
pub const WRITE_QUEUE: usize = 1024;

/// Bytes a writer gathers before writing them out, and the buffer size it
/// keeps between batches.
const BATCH_BYTES: usize = 64 * 1024;

/// Writes envelopes from `rx` as frames, flushing whenever the queue runs
/// dry so that bursts share one write. Returns when every sender is gone or
/// the stream fails.
///
/// # Errors
///
/// The first I/O error of `writer` (the link is broken). An envelope that
/// cannot be encoded is logged and dropped, not an error: answers never
/// get here too large, the server measures them first and answers
/// `MessageTooLarge` instead.
pub async fn write_frames<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<Envelope>,
) -> std::io::Result<()> {
    // Frames are encoded straight into one reused buffer (no per-frame
    // allocation or copy) and written with one call per batch.
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    let mut queued = Vec::with_capacity(64);
    while rx.recv_many(&mut queued, 64).await > 0 {
        loop {
            for envelope in queued.drain(..) {
                if let Err(e) = orrery_schema::frame::encode_frame_into(&envelope, &mut batch) {
                    tracing::error!(kind = %envelope.kind, error = %e, "dropping a message that cannot be encoded");
                }
                if batch.len() >= BATCH_BYTES {
                    writer.write_all(&batch).await?;
                    batch.clear();
                }
            }
            // Whatever arrived meanwhile joins this batch.
            match rx.try_recv() {
                Ok(envelope) => queued.push(envelope),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            writer.write_all(&batch).await?;
            batch.clear();
        }
        writer.flush().await?;
        if batch.capacity() > 4 * BATCH_BYTES {
            // One huge frame (an announcement, a big list) need not pin
            // megabytes for the link's lifetime.
            batch = Vec::with_capacity(BATCH_BYTES);
        }
    }
    writer.flush().await?;
    writer.shutdown().await
}
