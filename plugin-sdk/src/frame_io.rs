//! Frames over async byte streams: the stdio link between a host and a
//! plugin process (or the in-memory pipe of the harness).

use bytes::{Bytes, BytesMut};
use orrery_schema::{Envelope, FrameDecoder, FrameError};
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
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

/// Writes envelopes from `rx` as frames, flushing whenever the queue runs
/// dry so that bursts share one write. Returns when every sender is gone or
/// the stream fails.
pub async fn write_frames<W: AsyncWrite + Unpin>(
    writer: W,
    mut rx: mpsc::Receiver<Envelope>,
) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(64 * 1024, writer);
    while let Some(envelope) = rx.recv().await {
        let mut next = Some(envelope);
        while let Some(envelope) = next.take() {
            match orrery_schema::encode_frame(&envelope) {
                Ok(frame) => out.write_all(&frame).await?,
                Err(e) => {
                    tracing::error!(kind = %envelope.kind, error = %e, "dropping a message that cannot be encoded")
                }
            }
            next = rx.try_recv().ok();
        }
        out.flush().await?;
    }
    out.flush().await?;
    out.into_inner().shutdown().await
}
