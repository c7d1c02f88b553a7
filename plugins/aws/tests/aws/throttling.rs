//! Throttling answers, injected by a small proxy in front of moto that
//! answers the first requests itself: IAM's query-protocol `Throttling`
//! (400) and S3's `SlowDown` (503). Each must come back as the
//! retryable `Throttling` with a wait, and the retry must go through.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use orrery_plugin_sdk::schema::{ErrorCode, OperationStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::*;

/// What the proxy answers while it throttles.
#[derive(Clone, Copy)]
enum Refusal {
    IamThrottling,
    S3SlowDown,
}

impl Refusal {
    fn response(self) -> String {
        let (status, body) = match self {
            Refusal::IamThrottling => (
                "400 Bad Request",
                "<ErrorResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\"><Error><Type>Sender</Type>\
                 <Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>1</RequestId></ErrorResponse>",
            ),
            Refusal::S3SlowDown => (
                "503 Slow Down",
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>\
                 <Message>Please reduce your request rate.</Message><RequestId>1</RequestId></Error>",
            ),
        };
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/xml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }
}

/// Reads one request (head and `content-length` body), bounded.
async fn read_request(stream: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while buf.len() < 1 << 20 {
        let Ok(n) = stream.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return;
            }
        }
    }
}

/// A proxy to `upstream` that refuses the first `refuse` connections (the
/// refusal closes the connection, so each request comes on a new one).
/// Returns its URL and the count of refusals made.
async fn proxy(upstream: String, refuse: usize, refusal: Refusal) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let refused = Arc::new(AtomicUsize::new(0));
    let count = refused.clone();
    let upstream = upstream.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            if count.fetch_add(1, Ordering::SeqCst) < refuse {
                read_request(&mut client).await;
                let _ = client.write_all(refusal.response().as_bytes()).await;
                let _ = client.shutdown().await;
                continue;
            }
            count.fetch_sub(1, Ordering::SeqCst);
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    (url, refused)
}

#[tokio::test]
async fn iam_throttling_is_retryable_and_the_retry_goes_through() {
    let Some(moto) = MotoServer::start().await else {
        return;
    };
    let (url, refused) = proxy(moto.url.clone(), 2, Refusal::IamThrottling).await;
    let env = Env::on(url, moto).await;
    let role = props(
        json!({"name": "throttled", "assume_role_policy": {"Version": "2012-10-17", "Statement": []}}),
    );
    for _ in 0..2 {
        let answer = env.create("AWS::IAM::Role", role.clone()).await;
        let message = failed(&answer, ErrorCode::Throttling);
        assert!(message.contains("Throttling"), "{message}");
        assert!(ErrorCode::Throttling.is_retryable());
        assert!(answer.retry_after_ms.is_some_and(|ms| ms > 0), "{answer:?}");
    }
    assert_eq!(refused.load(Ordering::SeqCst), 2);
    let created = env.create("AWS::IAM::Role", role).await;
    assert_eq!(created.status, OperationStatus::Success, "{created:?}");
}

#[tokio::test]
async fn s3_slow_down_is_retryable_and_the_retry_goes_through() {
    let Some(moto) = MotoServer::start().await else {
        return;
    };
    let (url, refused) = proxy(moto.url.clone(), 1, Refusal::S3SlowDown).await;
    let env = Env::on(url, moto).await;
    // A GET, so the 503 has a body to carry `SlowDown` (a HEAD has none).
    let answer = env.read("AWS::S3::BucketPolicy", "any-bucket").await;
    failed(&answer, ErrorCode::Throttling);
    assert!(answer.retry_after_ms.is_some(), "{answer:?}");
    assert_eq!(refused.load(Ordering::SeqCst), 1);
    // Through to moto now: the bucket is not there.
    failed(
        &env.read("AWS::S3::BucketPolicy", "any-bucket").await,
        ErrorCode::NotFound,
    );
}
