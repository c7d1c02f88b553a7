//! Frames over async byte streams: the stdio link between a host and a
//! plugin process (or the in-memory pipe of the harness).

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use orrery_schema::{Envelope, FrameDecoder, FrameError};
use tokio::io::AsyncWrite;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
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

/// Bytes a sink holds unwritten before senders wait: the back-pressure of
/// the whole link (a peer that stops reading stops its senders, one frame
/// past this bound at most).
pub const QUEUE_BYTES: usize = 1024 * 1024;

/// The buffer size a sink keeps between bursts.
const BATCH_BYTES: usize = 64 * 1024;

/// The sink's link has failed: a write returned an error, so no later
/// frame can be delivered.
#[derive(Debug, Clone, thiserror::Error)]
#[error("writing to the link failed: {0}")]
pub struct SinkClosed(pub String);

/// The write half of a link, shared by any number of senders.
///
/// A frame is encoded into the sink's buffer. [`FrameSink::send`] then
/// writes it at once, by the sender itself, when the stream is idle and
/// the runtime has worker threads: no hand-off to a task another thread
/// may have to be woken for. [`FrameSink::enqueue`], any write the stream
/// cannot take at once (a slow peer, a file), and every frame on a
/// one-thread runtime are left to a background task, and frames sent
/// meanwhile join its buffer and go out in one write.
///
/// On one thread that task is a task poll away, not a thread wake-up, and
/// it runs once the sender's task yields: the frames of a burst that
/// arrived together (a batch of requests read from NATS, the answers to
/// them) share one write instead of the first going alone, which split
/// every burst in two at each end of the link (a write, a read and a
/// wake-up more per burst; BENCHMARKS.md relay round 14).
///
/// Sending is cancellation-safe: a frame is appended whole, without an
/// await, or not at all, and whatever is appended is written even if its
/// sender is dropped. When every clone is dropped, the background task
/// writes what is left, flushes and shuts the stream down (the peer sees
/// the end of its input).
#[derive(Clone)]
pub struct FrameSink {
    senders: Arc<Senders>,
}

/// Alive while any [`FrameSink`] clone is; dropping it closes the stream.
struct Senders(Arc<Shared>);

struct Shared {
    state: Mutex<State>,
    /// Made on a one-thread runtime: every frame goes to the background
    /// task (see [`FrameSink`]).
    one_thread: bool,
    /// Wakes the background task: a write to finish, or the end.
    work: Notify,
    /// Wakes senders waiting for room in the buffer.
    room: Notify,
}

struct State {
    writer: Box<dyn AsyncWrite + Send + Unpin>,
    buf: Vec<u8>,
    /// How much of `buf` has been written.
    written: usize,
    /// The background task owns the stream: a write did not complete at
    /// once. Senders then only append, so that one waker at a time is
    /// registered with the stream.
    busy: bool,
    failed: Option<String>,
    closing: bool,
}

impl FrameSink {
    /// A sink writing to `writer`, and the background task that finishes
    /// its writes; the task ends with the stream's first I/O error, or
    /// `Ok` once every clone of the sink is dropped and the stream is shut
    /// down. Must be called inside a Tokio runtime.
    pub fn new<W>(writer: W) -> (FrameSink, JoinHandle<io::Result<()>>)
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let one_thread = tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::CurrentThread;
        let shared = Arc::new(Shared {
            one_thread,
            state: Mutex::new(State {
                writer: Box::new(writer),
                buf: Vec::with_capacity(BATCH_BYTES),
                written: 0,
                busy: false,
                failed: None,
                closing: false,
            }),
            work: Notify::new(),
            room: Notify::new(),
        });
        let task = tokio::spawn(finish_writes(shared.clone()));
        let sink = FrameSink {
            senders: Arc::new(Senders(shared)),
        };
        (sink, task)
    }

    /// Queues `envelope` as a frame and writes it now if the stream is
    /// idle (on a one-thread runtime, once this task yields); waits only
    /// while the buffer holds [`QUEUE_BYTES`]. The path for a frame with
    /// nothing else in flight: its latency is the link's.
    ///
    /// An envelope that cannot be encoded is logged and dropped, not an
    /// error: answers never get here too large, the server measures them
    /// first and answers `MessageTooLarge` instead.
    ///
    /// # Errors
    ///
    /// [`SinkClosed`] once a write to the stream has failed.
    pub async fn send(&self, envelope: &Envelope) -> Result<(), SinkClosed> {
        self.put(envelope, true).await
    }

    /// As [`FrameSink::send`], but the frame is left to the background
    /// task, so that frames sent by other work before it runs share one
    /// write: the path under load, where a write per frame would cost more
    /// than the task's wake-up.
    ///
    /// # Errors
    ///
    /// As [`FrameSink::send`].
    pub async fn enqueue(&self, envelope: &Envelope) -> Result<(), SinkClosed> {
        self.put(envelope, false).await
    }

    async fn put(&self, envelope: &Envelope, now: bool) -> Result<(), SinkClosed> {
        let shared = &self.senders.0;
        loop {
            // Created before the check, so a drain between the check and
            // the wait is not missed.
            let room = shared.room.notified();
            {
                let mut state = shared.lock();
                if let Some(reason) = &state.failed {
                    return Err(SinkClosed(reason.clone()));
                }
                if state.buf.len() - state.written < QUEUE_BYTES {
                    if let Err(e) =
                        orrery_schema::frame::encode_frame_into(envelope, &mut state.buf)
                    {
                        tracing::error!(kind = %envelope.kind, error = %e, "dropping a message that cannot be encoded");
                        return Ok(());
                    }
                    if state.busy {
                        // The background task writes it with the rest.
                        return Ok(());
                    }
                    let written = if now && !shared.one_thread {
                        state.poll_out(&mut Context::from_waker(Waker::noop()))
                    } else {
                        Poll::Pending
                    };
                    match written {
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(e)) => {
                            let reason = state.fail(&e);
                            drop(state);
                            shared.work.notify_one();
                            return Err(SinkClosed(reason));
                        }
                        Poll::Pending => {
                            state.busy = true;
                            shared.work.notify_one();
                        }
                    }
                    return Ok(());
                }
            }
            room.await;
        }
    }
}

impl Drop for Senders {
    fn drop(&mut self) {
        self.0.lock().closing = true;
        self.0.work.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change to the state is complete before the lock is
        // released, so a panic elsewhere leaves it consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    /// Writes what is buffered and flushes; `Pending` leaves the rest for
    /// the next poll (nothing is lost, `written` says where to go on).
    fn poll_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.buf.len() {
            match Pin::new(&mut self.writer).poll_write(cx, &self.buf[self.written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.buf.clear();
        self.written = 0;
        if self.buf.capacity() > 4 * BATCH_BYTES {
            // One huge frame (an announcement, a big list) need not pin
            // megabytes for the link's lifetime.
            self.buf = Vec::with_capacity(BATCH_BYTES);
        }
        Pin::new(&mut self.writer).poll_flush(cx)
    }

    fn fail(&mut self, e: &io::Error) -> String {
        let reason = e.to_string();
        self.failed = Some(reason.clone());
        reason
    }
}

/// The background half of a [`FrameSink`]: finishes the writes senders
/// could not, and shuts the stream down once they are all gone.
async fn finish_writes(shared: Arc<Shared>) -> io::Result<()> {
    loop {
        shared.work.notified().await;
        let step = poll_fn(|cx| {
            let mut state = shared.lock();
            if let Some(reason) = &state.failed {
                return Poll::Ready(Err(io::Error::other(reason.clone())));
            }
            if state.busy {
                match state.poll_out(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => {
                        state.fail(&e);
                        return Poll::Ready(Err(e));
                    }
                    Poll::Ready(Ok(())) => state.busy = false,
                }
            }
            Poll::Ready(Ok(state.closing))
        })
        .await;
        shared.room.notify_waiters();
        if step? {
            break;
        }
    }
    poll_fn(|cx| {
        let mut state = shared.lock();
        std::task::ready!(state.poll_out(cx))?;
        Pin::new(&mut state.writer).poll_shutdown(cx)
    })
    .await
}

#[cfg(test)]
#[path = "frame_io_tests.rs"]
mod tests;
