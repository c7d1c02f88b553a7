//! The floor of any relay that keeps plugins in their own processes: raw
//! NATS request/reply whose responder sends each request through a child
//! process and back over pipes, doing nothing else. The child is `cat`,
//! which does no work of its own (one `read`, one `write`), so the row is
//! the cost of the process hop alone, as cheap as a hop gets.
//!
//! Frames are a 4-byte big-endian length and the payload. `cat` answers in
//! order, so replies are matched first in, first out. Under load the
//! responder writes what has arrived in one `write`, and the reader answers
//! every frame one `read` brought, the batching a relay does too.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use futures::{FutureExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves `subject` through a `cat` child; returns the child's pid.
pub async fn serve(responder: async_nats::Client, subject: &str) -> u32 {
    let mut child = tokio::process::Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cat");
    let pid = child.id().expect("cat's pid");
    let mut stdin = child.stdin.take().expect("cat's stdin");
    let mut stdout = child.stdout.take().expect("cat's stdout");
    let mut sub = responder
        .queue_subscribe(subject.to_owned(), "q".into())
        .await
        .unwrap();
    let waiting: Arc<Mutex<VecDeque<async_nats::Subject>>> = Arc::default();

    let queued = waiting.clone();
    tokio::spawn(async move {
        let mut out = Vec::new();
        while let Some(msg) = sub.next().await {
            let mut next = Some(msg);
            while let Some(msg) = next.take() {
                if let Some(reply) = msg.reply {
                    out.extend_from_slice(&(msg.payload.len() as u32).to_be_bytes());
                    out.extend_from_slice(&msg.payload);
                    queued.lock().unwrap().push_back(reply);
                }
                next = sub.next().now_or_never().flatten();
            }
            if stdin.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
    });

    tokio::spawn(async move {
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let Ok(n) = stdout.read(&mut chunk).await else {
                return;
            };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            let mut at = 0;
            while buf.len() - at >= 4 {
                let len = u32::from_be_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
                if buf.len() - at - 4 < len {
                    break;
                }
                let payload = bytes::Bytes::copy_from_slice(&buf[at + 4..at + 4 + len]);
                at += 4 + len;
                let reply = waiting
                    .lock()
                    .unwrap()
                    .pop_front()
                    .expect("a waiting reply");
                let _ = responder.publish(reply, payload).await;
            }
            buf.drain(..at);
        }
    });
    // The child lives as long as the runtime: its pipes are held by the tasks.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    pid
}
