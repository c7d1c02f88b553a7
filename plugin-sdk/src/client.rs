//! The host side of the link: send requests to a plugin, correlate answers.
//!
//! Used by the satellite for plugin processes, by the in-process harness and
//! by the conformance suite. When the link breaks (the process exits, or
//! writes bytes that are not frames) every waiting call fails at once with
//! [`CallError::LinkClosed`] instead of waiting for its deadline.
//!
//! Deadlines are kept by one task per link, not a timer per call: a call
//! records its deadline beside its answer's sender, and the sweeper sleeps
//! until the earliest one it was told of, then fails every call past its
//! deadline and sleeps until the next. Arming and cancelling a tokio timer
//! per call took the timer driver's lock twice per request; a call
//! now tells the sweeper only when its deadline is earlier than the one
//! it sleeps until (calls with one timeout arrive in deadline order).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use orrery_schema::{
    Announcement, Cancel, Envelope, ListResult, MessageKind, ProgressEvent, ProtocolError, Request,
    Uuid, PROTOCOL_MAJOR,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{oneshot, watch, Notify};
use tokio::time::Instant;
use tokio_util::codec::FramedRead;

use crate::frame_io::{FrameCodec, FrameSink};

/// Why the handshake failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConnectError {
    /// No announcement arrived in time.
    #[error("plugin sent no announcement within {0:?}")]
    Timeout(Duration),
    /// The link closed before the announcement.
    #[error("plugin closed the link before announcing itself: {0}")]
    Closed(String),
    /// The first frame was not a valid announcement.
    #[error("plugin's first message is not a valid announcement: {0}")]
    BadAnnouncement(String),
    /// The plugin speaks another protocol major.
    #[error("plugin `{name}` speaks protocol {plugin} but this host speaks protocol {host}")]
    UnsupportedProtocol {
        /// The plugin's name.
        name: String,
        /// The plugin's protocol major.
        plugin: u16,
        /// This host's protocol major.
        host: u16,
    },
}

/// Why a call produced no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The link broke while the call was waiting, or before it was sent.
    #[error("plugin link closed: {0}")]
    LinkClosed(String),
    /// The deadline passed; a cancel was sent to the plugin.
    #[error("no answer before the deadline")]
    DeadlineExceeded,
    /// The request could not be encoded.
    #[error("cannot encode request: {0}")]
    Encode(String),
    /// The answer's kind does not fit the request.
    #[error("unexpected answer of kind `{0}`")]
    UnexpectedAnswer(MessageKind),
}

/// A decoded answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The answer to create, read, update, delete or status.
    Progress(ProgressEvent),
    /// The answer to list.
    List(ListResult),
    /// The plugin could not understand the request.
    Error(ProtocolError),
}

/// An answer as it came over the link: decoded, and the frame's bytes
/// (the encoded envelope), which a relay forwards as they are instead of
/// encoding the envelope again.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// The answer, decoded.
    pub envelope: Envelope,
    /// The answer's encoded envelope, exactly as the plugin wrote it.
    pub bytes: Bytes,
}

/// The calls waiting for an answer, and whether the link has closed: one
/// lock decides both, so a call either is registered before the link closes
/// (and then fails with it) or sees that it has closed.
#[derive(Default)]
struct Calls {
    /// Hashed with foldhash, not SipHash: three lookups per message, and
    /// ids a peer chooses can collide only as far as a seeded hash and
    /// the bounded number of calls in flight let them.
    waiting: foldhash::HashMap<Uuid, Waiting>,
    closed: bool,
    /// When the deadline sweeper wakes next; `None` while it waits to be
    /// told of a call.
    armed: Option<Instant>,
}

/// A call waiting for its answer.
struct Waiting {
    /// Where its answer goes; [`CallError::DeadlineExceeded`] from the
    /// sweeper. Dropped when the link closes.
    tx: oneshot::Sender<Result<Answered, CallError>>,
    deadline: Instant,
}

impl Calls {
    /// Registers a call; `true` when the sweeper must be told, the call's
    /// deadline being earlier than the one it sleeps until.
    fn register(&mut self, id: Uuid, waiting: Waiting) -> bool {
        let deadline = waiting.deadline;
        self.waiting.insert(id, waiting);
        let earlier = self.armed.is_none_or(|at| deadline < at);
        if earlier {
            self.armed = Some(deadline);
        }
        earlier
    }

    /// Takes out the calls whose deadline is `now` or earlier, and arms
    /// the sweeper for the earliest deadline left.
    fn expire(&mut self, now: Instant) -> Vec<Waiting> {
        let gone = self
            .waiting
            .extract_if(|_, w| w.deadline <= now)
            .map(|(_, w)| w)
            .collect();
        self.armed = self.waiting.values().map(|w| w.deadline).min();
        gone
    }
}

type Pending = Arc<Mutex<Calls>>;

/// A connected plugin link. Cheap to clone; all clones share the link.
#[derive(Clone)]
pub struct PluginClient {
    out: FrameSink,
    pending: Pending,
    /// Wakes the deadline sweeper for a call earlier than its next wake.
    sweeper: Arc<Notify>,
    closed: watch::Receiver<Option<String>>,
    announcement: Arc<Announcement>,
}

impl PluginClient {
    /// Reads the plugin's announcement (within `timeout`), checks its
    /// protocol major and starts correlating answers.
    ///
    /// # Errors
    ///
    /// [`ConnectError::Timeout`] when no frame arrives within `timeout`;
    /// [`ConnectError::Closed`] when the stream ends or fails first;
    /// [`ConnectError::BadAnnouncement`] when the first frame is not an
    /// announcement (often a stray print on the plugin's stdout);
    /// [`ConnectError::UnsupportedProtocol`] when the plugin speaks another
    /// protocol major.
    pub async fn connect<R, W>(
        reader: R,
        writer: W,
        timeout: Duration,
    ) -> Result<Self, ConnectError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let mut frames = FramedRead::new(reader, FrameCodec::default());
        let first = tokio::time::timeout(timeout, frames.next())
            .await
            .map_err(|_| ConnectError::Timeout(timeout))?;
        let bytes = match first {
            None => return Err(ConnectError::Closed("end of stream".into())),
            Some(Err(e)) => return Err(ConnectError::Closed(e.to_string())),
            Some(Ok(Err(e))) => {
                return Err(ConnectError::BadAnnouncement(format!(
                    "{e}; a plugin's stdout must carry only frames (a stray print?)"
                )))
            }
            Some(Ok(Ok(bytes))) => bytes,
        };
        let envelope =
            Envelope::decode(&bytes).map_err(|e| ConnectError::BadAnnouncement(e.to_string()))?;
        if envelope.kind != MessageKind::Announce {
            return Err(ConnectError::BadAnnouncement(format!(
                "expected `announce`, got `{}`",
                envelope.kind
            )));
        }
        let announcement: Announcement = envelope
            .body()
            .map_err(|e| ConnectError::BadAnnouncement(e.to_string()))?;
        let plugin_major = announcement.protocol.max(envelope.protocol);
        if announcement.protocol != PROTOCOL_MAJOR || envelope.protocol != PROTOCOL_MAJOR {
            return Err(ConnectError::UnsupportedProtocol {
                name: announcement.name,
                plugin: plugin_major,
                host: PROTOCOL_MAJOR,
            });
        }

        let (out, writes) = FrameSink::new(writer);
        let (closed_tx, closed) = watch::channel(None);
        let pending: Pending = Arc::default();
        let closed_tx = Arc::new(closed_tx);
        let on_close = closed_tx.clone();
        let pending_w = pending.clone();
        tokio::spawn(async move {
            let failed = match writes.await {
                Ok(Ok(())) => return,
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            };
            close(
                &on_close,
                &pending_w,
                format!("writing to the plugin failed: {failed}"),
            );
        });
        tokio::spawn(read_answers(frames, pending.clone(), closed_tx));
        let sweeper = Arc::new(Notify::new());
        tokio::spawn(sweep_deadlines(
            pending.clone(),
            sweeper.clone(),
            closed.clone(),
        ));
        Ok(PluginClient {
            out,
            pending,
            sweeper,
            closed,
            announcement: Arc::new(announcement),
        })
    }

    /// What the plugin announced.
    pub fn announcement(&self) -> &Announcement {
        &self.announcement
    }

    /// Why the link closed, if it has.
    pub fn closed_reason(&self) -> Option<String> {
        self.closed.borrow().clone()
    }

    /// Resolves when the link closes, with the reason.
    pub async fn wait_closed(&self) -> String {
        let mut rx = self.closed.clone();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return "link dropped".into();
            }
        }
    }

    /// How many calls are waiting for an answer.
    pub fn in_flight(&self) -> usize {
        lock(&self.pending).waiting.len()
    }

    /// Sends an envelope and waits for the envelope that answers it, at most
    /// `timeout`. On timeout a `cancel` is sent to the plugin.
    ///
    /// # Errors
    ///
    /// [`CallError::LinkClosed`] when the link is or becomes closed before the
    /// answer; [`CallError::DeadlineExceeded`] when `timeout` passes (a cancel
    /// has been sent).
    pub async fn call(&self, envelope: Envelope, timeout: Duration) -> Result<Envelope, CallError> {
        self.call_answered(envelope, timeout)
            .await
            .map(|answered| answered.envelope)
    }

    /// As [`PluginClient::call`], with the answer's bytes as the plugin
    /// wrote them.
    ///
    /// # Errors
    ///
    /// As [`PluginClient::call`].
    pub async fn call_answered(
        &self,
        envelope: Envelope,
        timeout: Duration,
    ) -> Result<Answered, CallError> {
        let id = envelope.id;
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        // A timeout too long to add is a deadline that never comes.
        let deadline = now.checked_add(timeout).unwrap_or(now + NEVER);
        let (alone, earlier) = {
            let mut calls = lock(&self.pending);
            if calls.closed {
                drop(calls);
                return Err(self.link_closed("link closed"));
            }
            let earlier = calls.register(id, Waiting { tx, deadline });
            (calls.waiting.len() == 1, earlier)
        };
        if earlier {
            self.sweeper.notify_one();
        }
        // Removes the call from the map however this future ends (answered,
        // timed out, link closed, or dropped by its caller).
        let registered = Registered {
            pending: &self.pending,
            id,
        };
        // Alone on the link, the call writes its frame itself; with others
        // in flight, frames share the background writer's next write (and
        // on a one-thread runtime always do: see `FrameSink`).
        let sent = if alone {
            self.out.send(&envelope).await
        } else {
            self.out.enqueue(&envelope).await
        };
        if let Err(e) = sent {
            return Err(self.link_closed(&e.to_string()));
        }
        // When the link closes, `close` drops every waiting sender: `rx`
        // then fails at once, without waiting for the deadline.
        let answer = rx.await;
        drop(registered);
        match answer {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                self.cancel(id, "deadline passed").await;
                Err(e)
            }
            Err(_) => Err(self.link_closed("link closed")),
        }
    }

    fn link_closed(&self, otherwise: &str) -> CallError {
        CallError::LinkClosed(self.closed_reason().unwrap_or_else(|| otherwise.into()))
    }

    /// Asks the plugin to cancel the request with message id `id`.
    pub async fn cancel(&self, id: Uuid, reason: &str) {
        let cancel = Cancel {
            reason: reason.to_owned(),
        };
        if let Ok(mut envelope) = Envelope::new(MessageKind::Cancel, &cancel) {
            envelope.correlation = Some(id);
            let _ = self.out.send(&envelope).await;
        }
    }

    /// Sends a typed request and decodes the answer.
    ///
    /// # Errors
    ///
    /// [`CallError::Encode`] when the request cannot be encoded (over the
    /// message limit); then as [`PluginClient::call`] and [`decode_answer`].
    pub async fn request(&self, request: &Request, timeout: Duration) -> Result<Answer, CallError> {
        let envelope = request
            .to_envelope()
            .map_err(|e| CallError::Encode(e.to_string()))?
            .with_deadline_ms(Some(deadline_ms(timeout)));
        let answer = self.call(envelope, timeout).await?;
        decode_answer(&answer)
    }

    /// Sends `ping` and waits for `pong`.
    ///
    /// # Errors
    ///
    /// As [`PluginClient::call`]; [`CallError::UnexpectedAnswer`] when the
    /// answer is not `pong`.
    pub async fn ping(&self, timeout: Duration) -> Result<(), CallError> {
        // A deadline even here: a plugin may bound its own work by it.
        let ping = Envelope::new(MessageKind::Ping, &())
            .map_err(|e| CallError::Encode(e.to_string()))?
            .with_deadline_ms(Some(deadline_ms(timeout)));
        let answer = self.call(ping, timeout).await?;
        match answer.kind {
            MessageKind::Pong => Ok(()),
            other => Err(CallError::UnexpectedAnswer(other)),
        }
    }
}

/// Decodes an answer envelope.
///
/// # Errors
///
/// [`CallError::UnexpectedAnswer`] for a kind other than `progress`,
/// `list_result` or `error`; [`CallError::LinkClosed`] when the body does not
/// decode (a plugin that sends garbage is treated as a broken link).
pub fn decode_answer(answer: &Envelope) -> Result<Answer, CallError> {
    let bad = |e: orrery_schema::DecodeError| {
        CallError::LinkClosed(format!(
            "plugin sent an undecodable `{}` answer: {e}",
            answer.kind
        ))
    };
    match answer.kind {
        MessageKind::Progress => ProgressEvent::decode(&answer.body)
            .map(Answer::Progress)
            .map_err(bad),
        MessageKind::ListResult => answer.body().map(Answer::List).map_err(bad),
        MessageKind::Error => answer.body().map(Answer::Error).map_err(bad),
        ref other => Err(CallError::UnexpectedAnswer(other.clone())),
    }
}

/// Milliseconds since the Unix epoch, `timeout` from now.
pub fn deadline_ms(timeout: Duration) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (now + timeout).as_millis() as u64
}

fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, Calls> {
    pending.lock().unwrap_or_else(|p| p.into_inner())
}

/// A call's place in the map of waiting calls, given up when dropped.
struct Registered<'a> {
    pending: &'a Pending,
    id: Uuid,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        lock(self.pending).waiting.remove(&self.id);
    }
}

/// A deadline far enough away to mean none (about 30 years; tokio's own).
const NEVER: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Fails each call of the link at its deadline (see the module comment),
/// until the link closes.
async fn sweep_deadlines(
    pending: Pending,
    told: Arc<Notify>,
    mut closed: watch::Receiver<Option<String>>,
) {
    loop {
        if closed.borrow_and_update().is_some() {
            return;
        }
        let armed = lock(&pending).armed;
        tokio::select! {
            () = crate::server::sleep_until(armed) => {}
            // An earlier deadline: look again at when to wake.
            () = told.notified() => continue,
            changed = closed.changed() => match changed {
                Ok(()) => continue,
                Err(_) => return,
            },
        }
        let expired = lock(&pending).expire(Instant::now());
        for call in expired {
            let _ = call.tx.send(Err(CallError::DeadlineExceeded));
        }
    }
}

fn close(closed: &watch::Sender<Option<String>>, pending: &Pending, reason: String) {
    // The reason first: a call that finds its sender dropped reads it.
    closed.send_if_modified(|current| {
        if current.is_none() {
            *current = Some(reason);
            true
        } else {
            false
        }
    });
    // Dropping the senders fails every waiting call at once; calls that
    // start from now on fail before registering.
    let waiting = {
        let mut calls = lock(pending);
        calls.closed = true;
        std::mem::take(&mut calls.waiting)
    };
    drop(waiting);
}

async fn read_answers<R: AsyncRead + Unpin>(
    mut frames: FramedRead<R, FrameCodec>,
    pending: Pending,
    closed: Arc<watch::Sender<Option<String>>>,
) {
    let reason = loop {
        let bytes = match frames.next().await {
            None => break "plugin closed its output (process exited?)".to_owned(),
            Some(Err(e)) => break format!("reading from the plugin failed: {e}"),
            // A length prefix over the limit on a stdio link means the stream
            // is not frames at all (typically a stray print on stdout): the
            // link cannot resynchronise, so it is closed.
            Some(Ok(Err(e))) => {
                break format!(
                    "plugin wrote bytes that are not frames on stdout ({e}); a stray print?"
                )
            }
            Some(Ok(Ok(bytes))) => bytes,
        };
        let envelope = match Envelope::decode(&bytes) {
            Ok(envelope) => envelope,
            Err(e) => break format!("plugin wrote a frame that is not an envelope: {e}"),
        };
        let Some(id) = envelope.correlation else {
            tracing::warn!(kind = %envelope.kind, "plugin sent an uncorrelated message; ignored");
            continue;
        };
        let waiting = lock(&pending).waiting.remove(&id);
        match waiting {
            Some(call) => {
                let _ = call.tx.send(Ok(Answered { envelope, bytes }));
            }
            None => tracing::debug!(%id, "answer for a call no longer waiting"),
        }
    };
    close(&closed, &pending, reason);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A host-side client and the plugin's ends of its pipes: the plugin
    /// has announced itself and answers nothing.
    async fn silent_plugin() -> (
        PluginClient,
        tokio::io::ReadHalf<tokio::io::DuplexStream>,
        tokio::io::WriteHalf<tokio::io::DuplexStream>,
    ) {
        let (host_side, plugin_side) = tokio::io::duplex(1 << 16);
        let (plugin_read, mut plugin_write) = tokio::io::split(plugin_side);
        let (host_read, host_write) = tokio::io::split(host_side);
        let hello = Envelope::new(
            MessageKind::Announce,
            &Announcement {
                protocol: PROTOCOL_MAJOR,
                name: "silent".into(),
                ..Default::default()
            },
        )
        .unwrap();
        plugin_write
            .write_all(&orrery_schema::encode_frame(&hello).unwrap())
            .await
            .unwrap();
        let client = PluginClient::connect(host_read, host_write, Duration::from_secs(5))
            .await
            .unwrap();
        (client, plugin_read, plugin_write)
    }

    async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        for _ in 0..500 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{what} did not happen within 5 s");
    }

    #[tokio::test]
    async fn a_closed_link_fails_every_waiting_call_at_once_and_every_later_one() {
        let (client, mut plugin_read, mut plugin_write) = silent_plugin().await;
        let calls: Vec<_> = (0..5)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    let ping = Envelope::new(MessageKind::Ping, &()).unwrap();
                    client.call(ping, Duration::from_secs(60)).await
                })
            })
            .collect();
        wait_for("five calls waiting", || client.in_flight() == 5).await;
        // Every request reached the plugin before it went away.
        let mut seen = vec![0u8; 1];
        plugin_read.read_exact(&mut seen).await.unwrap();
        // The plugin's output ends (as when its process exits).
        plugin_write.shutdown().await.unwrap();
        let started = std::time::Instant::now();
        for call in calls {
            let result = call.await.unwrap();
            assert!(
                matches!(result, Err(CallError::LinkClosed(_))),
                "{result:?}"
            );
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(client.in_flight(), 0);
        assert!(client.closed_reason().is_some());
        let ping = Envelope::new(MessageKind::Ping, &()).unwrap();
        let later = client.call(ping, Duration::from_secs(60)).await;
        assert!(matches!(later, Err(CallError::LinkClosed(_))), "{later:?}");
    }

    /// A call with a short timeout sent while one with a long timeout
    /// waits: the sweeper, asleep until the long one's deadline, wakes for
    /// the short one's.
    #[tokio::test]
    async fn an_earlier_deadline_is_kept_while_a_later_call_waits() {
        let (client, _plugin_read, _plugin_write) = silent_plugin().await;
        let long = Envelope::new(MessageKind::Ping, &()).unwrap();
        let waiting = tokio::spawn({
            let client = client.clone();
            async move { client.call(long, Duration::from_secs(60)).await }
        });
        wait_for("the long call registered", || client.in_flight() == 1).await;
        let started = std::time::Instant::now();
        let short = Envelope::new(MessageKind::Ping, &()).unwrap();
        let result = client.call(short, Duration::from_millis(100)).await;
        assert_eq!(result, Err(CallError::DeadlineExceeded));
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "failed at its own deadline, not the long call's"
        );
        assert_eq!(client.in_flight(), 1, "the long call still waits");
        waiting.abort();
    }

    fn waiting(deadline: Instant) -> (Waiting, oneshot::Receiver<Result<Answered, CallError>>) {
        let (tx, rx) = oneshot::channel();
        (Waiting { tx, deadline }, rx)
    }

    #[test]
    fn the_sweeper_is_told_only_of_an_earlier_deadline_and_expires_what_is_due() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut calls = Calls::default();
        let ids: Vec<Uuid> = (0..4).map(|_| Uuid::now_v7()).collect();
        let (w, _r0) = waiting(at(100));
        assert!(calls.register(ids[0], w), "nothing armed: told");
        let (w, _r1) = waiting(at(200));
        assert!(!calls.register(ids[1], w), "later: not told");
        let (w, _r2) = waiting(at(50));
        assert!(calls.register(ids[2], w), "earlier: told");
        assert_eq!(calls.armed, Some(at(50)));
        let (w, _r3) = waiting(at(300));
        calls.register(ids[3], w);

        assert!(calls.expire(at(49)).is_empty());
        assert_eq!(calls.armed, Some(at(50)));
        let due: Vec<Instant> = calls.expire(at(100)).iter().map(|w| w.deadline).collect();
        assert_eq!(due.len(), 2, "the 50 and 100 ms calls: {due:?}");
        assert_eq!(calls.armed, Some(at(200)));
        assert_eq!(calls.waiting.len(), 2);
        calls.waiting.clear();
        assert!(calls.expire(at(1_000)).is_empty());
        assert_eq!(calls.armed, None, "nothing left: asleep until told");
    }

    #[tokio::test]
    async fn a_call_that_times_out_or_is_dropped_stops_waiting_and_a_deadline_sends_cancel() {
        let (client, plugin_read, _plugin_write) = silent_plugin().await;
        let mut frames = FramedRead::new(plugin_read, FrameCodec::default());

        let ping = Envelope::new(MessageKind::Ping, &()).unwrap();
        let id = ping.id;
        let result = client.call(ping, Duration::from_millis(50)).await;
        assert_eq!(result, Err(CallError::DeadlineExceeded));
        assert_eq!(client.in_flight(), 0);
        let sent = Envelope::decode(&frames.next().await.unwrap().unwrap().unwrap()).unwrap();
        assert_eq!(sent.id, id);
        let cancel = Envelope::decode(&frames.next().await.unwrap().unwrap().unwrap()).unwrap();
        assert_eq!(cancel.kind, MessageKind::Cancel);
        assert_eq!(cancel.correlation, Some(id));

        let ping = Envelope::new(MessageKind::Ping, &()).unwrap();
        let dropped = tokio::time::timeout(
            Duration::from_millis(50),
            client.call(ping, Duration::from_secs(60)),
        )
        .await;
        assert!(dropped.is_err());
        assert_eq!(client.in_flight(), 0);
    }
}
