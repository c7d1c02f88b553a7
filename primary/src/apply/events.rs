//! The one sink of a command's events (`orrery_core::events`): the executor
//! and the command service emit into it, the CLI prints from it, the HTTP
//! API serves it as server-sent events. It numbers events, stamps their
//! time, and keeps the last [`RING`] of them so a reconnecting client can
//! go on after the last one it saw.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use orrery_core::events::{CommandEvent, EventBody, SCHEMA_VERSION};
use tokio::sync::watch;

/// Events kept per command: a 10,000-resource apply emits about 30,000.
pub const RING: usize = 1 << 17;

struct Ring {
    events: VecDeque<Arc<CommandEvent>>,
    next_seq: u64,
}

/// A command's event log. Cheap to clone; every clone is the same log.
#[derive(Clone)]
pub struct EventSink {
    inner: Arc<Inner>,
}

struct Inner {
    command_id: Mutex<String>,
    run: String,
    ring: Mutex<Ring>,
    capacity: usize,
    /// The last sequence number emitted, and whether the run finished.
    latest: watch::Sender<(u64, bool)>,
}

/// What a follower gets: events after the one it asked for.
#[derive(Debug, Default)]
pub struct Batch {
    /// The events, in order.
    pub events: Vec<Arc<CommandEvent>>,
    /// Events between the one asked for and the first returned fell out of
    /// the ring.
    pub gap: bool,
    /// The run finished and nothing follows `events`.
    pub done: bool,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl EventSink {
    /// A new run's log for `command_id`.
    pub fn new(command_id: &str) -> EventSink {
        EventSink::with_capacity(command_id, RING)
    }

    /// A log keeping at most `capacity` events.
    pub fn with_capacity(command_id: &str, capacity: usize) -> EventSink {
        EventSink {
            inner: Arc::new(Inner {
                command_id: Mutex::new(command_id.to_owned()),
                run: uuid::Uuid::now_v7().to_string(),
                ring: Mutex::new(Ring {
                    events: VecDeque::new(),
                    next_seq: 1,
                }),
                capacity: capacity.max(1),
                latest: watch::channel((0, false)).0,
            }),
        }
    }

    /// The run's id (`run` of every event).
    pub fn run(&self) -> &str {
        &self.inner.run
    }

    /// The command's id.
    pub fn command_id(&self) -> String {
        lock(&self.inner.command_id).clone()
    }

    /// Makes the log that of command `id` (the interrupted command a
    /// request goes on with), before anything is emitted.
    pub fn rename(&self, id: &str) {
        *lock(&self.inner.command_id) = id.to_owned();
    }

    /// Appends `body`. Nothing is appended after a `finished` event.
    pub fn emit(&self, body: EventBody) {
        let finished = matches!(body, EventBody::Finished(_));
        let command_id = self.command_id();
        let mut ring = lock(&self.inner.ring);
        if self.is_finished() {
            return;
        }
        let seq = ring.next_seq;
        ring.next_seq += 1;
        ring.events.push_back(Arc::new(CommandEvent {
            schema: SCHEMA_VERSION,
            command_id,
            run: self.inner.run.clone(),
            seq,
            at_ms: now_ms(),
            body,
        }));
        while ring.events.len() > self.inner.capacity {
            ring.events.pop_front();
        }
        // Under the ring's lock, so followers see sequence numbers in order.
        self.inner.latest.send_replace((seq, finished));
    }

    /// Whether the run finished.
    pub fn is_finished(&self) -> bool {
        self.inner.latest.borrow().1
    }

    /// How many events the log holds.
    pub fn held(&self) -> usize {
        lock(&self.inner.ring).events.len()
    }

    /// The events after `after` (0: from the first), at most `limit`.
    pub fn after(&self, after: u64, limit: usize) -> Batch {
        let ring = lock(&self.inner.ring);
        let first = ring.events.front().map_or(ring.next_seq, |e| e.seq);
        let start = after.saturating_add(1).max(first);
        let skip = (start - first) as usize;
        let events: Vec<_> = ring.events.iter().skip(skip).take(limit).cloned().collect();
        let last = events.last().map_or(after, |e| e.seq);
        Batch {
            gap: start > after.saturating_add(1),
            done: self.is_finished() && last + 1 >= ring.next_seq,
            events,
        }
    }

    /// Waits until an event after `after` exists or the run finished.
    pub async fn wait_after(&self, after: u64) {
        let mut rx = self.inner.latest.subscribe();
        let _ = rx.wait_for(|(seq, done)| *seq > after || *done).await;
    }

    /// Follows the log from its start, calling `f` with each event, until
    /// the run finishes.
    pub async fn follow(&self, mut f: impl FnMut(&CommandEvent)) {
        let mut seen = 0;
        loop {
            let batch = self.after(seen, 4096);
            for e in &batch.events {
                f(e);
                seen = e.seq;
            }
            if batch.done {
                return;
            }
            if batch.events.is_empty() {
                self.wait_after(seen).await;
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use orrery_core::events::FinishedEvent;

    fn finished() -> EventBody {
        EventBody::Finished(FinishedEvent::default())
    }

    fn planned() -> EventBody {
        EventBody::Planned(Default::default())
    }

    #[test]
    fn events_are_numbered_from_one_and_nothing_follows_finished() {
        let sink = EventSink::new("c");
        sink.emit(planned());
        sink.emit(finished());
        sink.emit(planned());
        let batch = sink.after(0, 10);
        let seqs: Vec<u64> = batch.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2]);
        assert!(batch.done && !batch.gap);
        assert!(sink.after(1, 10).events[0].body == finished());
    }

    #[test]
    fn a_follower_past_the_ring_is_told_of_the_gap() {
        let sink = EventSink::with_capacity("c", 2);
        for _ in 0..5 {
            sink.emit(planned());
        }
        let batch = sink.after(1, 10);
        assert!(batch.gap);
        assert_eq!(
            batch.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [4, 5]
        );
        assert!(!batch.done);
        assert!(!sink.after(3, 10).gap);
    }

    #[tokio::test]
    async fn follow_sees_every_event_once_until_finished() {
        let sink = EventSink::new("c");
        let emitter = sink.clone();
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            sink.follow(|e| seen.push(e.seq)).await;
            seen
        });
        for _ in 0..100 {
            emitter.emit(planned());
            tokio::task::yield_now().await;
        }
        emitter.emit(finished());
        let seen = tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seen, (1..=101).collect::<Vec<u64>>());
    }
}
