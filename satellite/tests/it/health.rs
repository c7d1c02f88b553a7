//! The satellite's health endpoints reflect real state: ready with NATS
//! and healthy plugins, metrics in Prometheus text format.

use crate::common;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use orrery_testing::wait::{wait_for_async, wait_until_async};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn get(port: u16, path: &str) -> Option<(u16, String)> {
    get_at("127.0.0.1", port, path).await
}

async fn get_at(host: &str, port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
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
    wait_ready("127.0.0.1", port).await;
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
    let body = wait_for_async(
        "/readyz 503 once NATS is gone",
        Duration::from_secs(20),
        move || async move {
            match get(port, "/readyz").await {
                Some((503, body)) => Ok(body),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(body.contains("NATS"), "{body}");
    assert_eq!(get(port, "/healthz").await.map(|r| r.0), Some(200));
    let _ = satellite.kill();
    let _ = satellite.wait();
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn satellite_with(nats_url: &str, args: &[&str]) -> std::process::Child {
    Command::new(common::binary("orrery-satellite"))
        .args(["--nats-url", nats_url])
        .args(args)
        .arg("--plugin")
        .arg(common::binary("orrery-plugin-testbed"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

async fn wait_ready(host: &str, port: u16) {
    wait_until_async(
        &format!("/readyz 200 on {host}:{port}"),
        Duration::from_secs(20),
        move || async move { get_at(host, port, "/readyz").await.map(|r| r.0) == Some(200) },
    )
    .await;
}

/// The health port binds 127.0.0.1 unless --health-addr says otherwise: a
/// wildcard bind would also answer on 127.0.0.2 (another local address,
/// standing in for the host's network interfaces), a loopback bind does not.
#[tokio::test]
async fn health_port_binds_loopback_unless_told_otherwise() {
    let server = common::NatsServer::start().await;

    let port = free_port();
    let mut satellite = satellite_with(&server.url, &["--health-port", &port.to_string()]);
    wait_ready("127.0.0.1", port).await;
    assert_eq!(
        get_at("127.0.0.2", port, "/healthz").await,
        None,
        "the default health address answers on an address other than 127.0.0.1"
    );
    let _ = satellite.kill();
    let _ = satellite.wait();

    let port = free_port();
    let mut satellite = satellite_with(
        &server.url,
        &[
            "--health-port",
            &port.to_string(),
            "--health-addr",
            "0.0.0.0",
        ],
    );
    wait_ready("127.0.0.1", port).await;
    assert_eq!(
        get_at("127.0.0.2", port, "/healthz").await.map(|r| r.0),
        Some(200),
        "--health-addr 0.0.0.0 does not answer on every address"
    );
    let _ = satellite.kill();
    let _ = satellite.wait();
}
