//! The `orrery-satellite` binary's JSON log lines inside a relayed request
//! carry the request's fields, traced or not.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{binary, NatsServer};
use orrery_plugin_sdk::schema::{CreateRequest, PropertyMap, Request, Target, Value};
use orrery_satellite::bus::NatsBus;
use orrery_testing::wait_for_async;

fn create(i: usize) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("logs-{i}"),
        resource_type: "Testbed::Noop::Thing".into(),
        label: format!("thing-{i}"),
        target: Target {
            name: "t".into(),
            config: PropertyMap::new(),
            ..Default::default()
        },
        properties: PropertyMap::from([("name".to_owned(), Value::from(format!("thing-{i}")))]),
    })
}

/// An untraced request's `satellite.relay` span is never exported, but
/// its JSON lines must still name the relay, the plugin, the operation and
/// the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untraced_requests_json_lines_carry_the_relays_fields() {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("satellite.log");
    let mut satellite = Command::new(binary("orrery-satellite"))
        .args(["--nats-url", &server.url, "--id", "logger", "--log-json"])
        .arg("--plugin")
        .arg(binary("orrery-plugin-testbed"))
        .env("RUST_LOG", "info,orrery_satellite::relay=debug")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let bus = NatsBus::new(server.client().await);
    let mut sent = 0;
    wait_for_async("a request served", Duration::from_secs(20), || {
        let (bus, request) = (&bus, create(sent));
        sent += 1;
        async move {
            let answer = bus.send("testbed", &request, Duration::from_secs(5)).await;
            answer.map(drop)
        }
    })
    .await;

    let line = wait_for_async("a relaying line", Duration::from_secs(10), || {
        let text = std::fs::read_to_string(&log).unwrap();
        let found = text
            .lines()
            .find(|l| l.contains("relaying to the plugin"))
            .map(str::to_owned);
        std::future::ready(found.ok_or_else(|| format!("the log:\n{text}")))
    })
    .await;
    let _ = satellite.kill();
    let _ = satellite.wait();
    let line: serde_json::Value = serde_json::from_str(&line).unwrap();
    let span = &line["span"];
    assert_eq!(span["name"], "satellite.relay", "{line}");
    assert_eq!(span["plugin"], "testbed", "{line}");
    assert_eq!(span["satellite"], "logger", "{line}");
    assert_eq!(span["operation"], "create", "{line}");
    let id = span["message_id"].as_str().expect("a message id");
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{line}");
    assert_eq!(line["spans"][0], *span, "{line}");
}
