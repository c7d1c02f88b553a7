use std::time::Duration;

use futures::StreamExt;
use orrery_schema::{Envelope, MessageKind};
use tokio::io::AsyncRead;
use tokio_util::codec::FramedRead;

use super::{FrameCodec, FrameSink, QUEUE_BYTES};

/// Added to every frame's number so that all frames encode to one size.
const BASE: u64 = 1 << 40;

fn ping(n: u64) -> Envelope {
    Envelope::new(MessageKind::Ping, &())
        .unwrap()
        .with_deadline_ms(Some(BASE + n))
}

/// Every frame the reader yields, decoded, until the stream ends.
async fn read_all(reader: impl AsyncRead + Unpin) -> Vec<u64> {
    let mut frames = FramedRead::new(reader, FrameCodec::default());
    let mut seen = Vec::new();
    while let Some(frame) = frames.next().await {
        let bytes = frame.expect("the stream reads").expect("a whole frame");
        let envelope = Envelope::decode(&bytes).expect("every frame is an envelope");
        seen.push(envelope.deadline_ms.unwrap() - BASE);
    }
    seen
}

#[tokio::test]
async fn frames_arrive_in_order_however_sent_and_the_last_sender_ends_the_stream() {
    let (reader, writer) = tokio::io::duplex(1 << 16);
    let (sink, task) = FrameSink::new(writer);
    let other = sink.clone();
    // Written at once and left to the batch, interleaved: still in order.
    for n in 0..100 {
        if n % 3 == 0 {
            sink.send(&ping(n)).await.unwrap();
        } else {
            other.enqueue(&ping(n)).await.unwrap();
        }
    }
    drop((sink, other));
    let seen = tokio::time::timeout(Duration::from_secs(10), read_all(reader))
        .await
        .expect("the stream ends once every sender is gone");
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_slow_reader_gets_every_frame_whole() {
    // A pipe of 7 bytes: every write is partial, so the background task
    // finishes all of them, with frames joining its buffer meanwhile.
    let (reader, writer) = tokio::io::duplex(7);
    let (sink, task) = FrameSink::new(writer);
    let reading = tokio::spawn(read_all(reader));
    for n in 0..500 {
        sink.send(&ping(n)).await.unwrap();
    }
    drop(sink);
    let seen = tokio::time::timeout(Duration::from_secs(20), reading)
        .await
        .expect("a slow reader still gets everything")
        .unwrap();
    assert_eq!(seen, (0..500).collect::<Vec<_>>());
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_full_sink_holds_its_senders_and_a_dropped_send_leaves_no_half_frame() {
    let (reader, writer) = tokio::io::duplex(64);
    let (sink, task) = FrameSink::new(writer);
    // Nobody reads: sends succeed until the buffer holds QUEUE_BYTES.
    let frame_bytes = orrery_schema::frame::encode_frame(&ping(0)).unwrap().len();
    let mut sent = 0u64;
    loop {
        match tokio::time::timeout(Duration::from_millis(200), sink.send(&ping(sent))).await {
            Ok(result) => {
                result.unwrap();
                sent += 1;
            }
            // Waiting for room, and dropped while waiting.
            Err(_) => break,
        }
        assert!(
            (sent as usize) * frame_bytes <= QUEUE_BYTES + 2 * frame_bytes,
            "a sink that nobody reads keeps taking frames ({sent})"
        );
    }
    assert!((sent as usize) * frame_bytes >= QUEUE_BYTES);
    drop(sink);
    let seen = tokio::time::timeout(Duration::from_secs(30), read_all(reader))
        .await
        .expect("everything sent is delivered once the reader reads");
    assert_eq!(seen, (0..sent).collect::<Vec<_>>());
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_broken_stream_fails_its_senders_and_its_task() {
    let (reader, writer) = tokio::io::duplex(64);
    let (sink, task) = FrameSink::new(writer);
    drop(reader);
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Err(e) = sink.send(&ping(1)).await {
                break e;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("a send fails once the stream is broken");
    assert!(
        failed.to_string().contains("writing to the link failed"),
        "{failed}"
    );
    let ended = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the task ends with the stream")
        .unwrap();
    assert!(ended.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn senders_on_several_threads_lose_and_tear_nothing() {
    // Four tasks on two worker threads, a 1 KiB pipe read as it fills:
    // direct writes, batches and the background task all race.
    let (reader, writer) = tokio::io::duplex(1024);
    let (sink, task) = FrameSink::new(writer);
    let reading = tokio::spawn(read_all(reader));
    let senders: Vec<_> = (0..4u64)
        .map(|t| {
            let sink = sink.clone();
            tokio::spawn(async move {
                for i in 0..500u64 {
                    let frame = ping(t * 1_000_000 + i);
                    if i % 2 == 0 {
                        sink.send(&frame).await.unwrap();
                    } else {
                        sink.enqueue(&frame).await.unwrap();
                    }
                }
            })
        })
        .collect();
    drop(sink);
    for sender in senders {
        sender.await.unwrap();
    }
    let seen = tokio::time::timeout(Duration::from_secs(30), reading)
        .await
        .expect("every frame is delivered")
        .unwrap();
    assert_eq!(seen.len(), 2000);
    for t in 0..4u64 {
        let own: Vec<u64> = seen
            .iter()
            .filter(|n| **n / 1_000_000 == t)
            .map(|n| n % 1_000_000)
            .collect();
        assert_eq!(
            own,
            (0..500).collect::<Vec<_>>(),
            "sender {t}'s frames in order"
        );
    }
    task.await.unwrap().unwrap();
}

/// A stream that takes every write whole and counts the writes.
#[derive(Clone, Default)]
struct CountingWriter(std::sync::Arc<std::sync::Mutex<Vec<usize>>>);

impl tokio::io::AsyncWrite for CountingWriter {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.lock().unwrap().push(buf.len());
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Sends three frames in one turn of the sending task, and returns how
/// many writes carried them.
async fn writes_for_a_burst() -> usize {
    let writer = CountingWriter::default();
    let (sink, task) = FrameSink::new(writer.clone());
    for n in 0..3 {
        sink.send(&ping(n)).await.unwrap();
    }
    drop(sink);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the writer finishes")
        .unwrap()
        .unwrap();
    let writes = writer.0.lock().unwrap().clone();
    let frame = orrery_schema::frame::encode_frame(&ping(0)).unwrap().len();
    assert_eq!(
        writes.iter().sum::<usize>(),
        3 * frame,
        "every byte written"
    );
    writes.len()
}

#[tokio::test(flavor = "current_thread")]
async fn on_one_thread_a_burst_of_frames_shares_one_write() {
    assert_eq!(writes_for_a_burst().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_workers_a_frame_alone_is_written_by_its_sender_at_once() {
    // The first frame finds the stream idle and is written by `send`
    // itself, before the second is queued.
    assert!(writes_for_a_burst().await >= 2);
}
