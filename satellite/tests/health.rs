//! The satellite's health endpoints reflect real state: ready with NATS
//! and healthy plugins, metrics in Prometheus text format.

mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

#[tokio::test]
async fn health_readiness_and_metrics_reflect_the_satellite() {
    let server = common::NatsServer::start().await;
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut satellite = Command::new(common::binary("orrery-satellite"))
        .args([
            "--nats-url",
            &server.url,
            "--health-port",
            &port.to_string(),
        ])
        .arg("--plugin")
        .arg(common::binary("orrery-plugin-testbed"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some((200, _)) = get(port, "/readyz").await {
            break;
        }
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(get(port, "/healthz").await.map(|r| r.0), Some(200));
    let (status, metrics) = get(port, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    // Every sample line is `name{labels} value` with a numeric value.
    for line in metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (_, value) = line.rsplit_once(' ').unwrap();
        value
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("not a sample: {line}"));
    }
    assert!(
        metrics.contains("orrery_plugin_up{plugin=\"testbed\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("orrery_nats_connected 1"), "{metrics}");

    // NATS goes away: not ready any more, still alive.
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some((503, body)) = get(port, "/readyz").await {
            assert!(body.contains("NATS"), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "still ready without NATS");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get(port, "/healthz").await.map(|r| r.0), Some(200));
    let _ = satellite.kill();
    let _ = satellite.wait();
}
