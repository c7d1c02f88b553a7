//! A plugin built against an older protocol, written in another language
//! from docs/protocol.md (tests/fixtures/legacy_plugin.py): its announcement
//! lacks fields the current schema has and carries ones it does not know.
//! A current satellite serves it normally, over NATS.

use crate::common;

use std::time::Duration;

use common::NatsServer;
use orrery_plugin_sdk::schema::{
    CreateRequest, EdgeKind, ErrorCode, OperationStatus, PropertyMap, ReadRequest, Request, Target,
    Value,
};
use orrery_plugin_sdk::Answer;
use orrery_satellite::bus::NatsBus;
use orrery_satellite::plugin_host::{PluginHost, PluginSpec};
use orrery_satellite::relay::{self, RelayConfig};
use orrery_testing::wait_for_async;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_plugin_in_another_language_is_served_normally() {
    let script = common::workspace_root().join("satellite/tests/fixtures/legacy_plugin.py");
    let host = PluginHost::start(PluginSpec::new(&script)).await.unwrap();

    // Fields it lacks took their defaults; the deprecated boolean folded into edge_kind.
    let announced = host.announcement();
    assert_eq!(
        (announced.name.as_str(), announced.version.as_str()),
        ("legacy", "0.9.0")
    );
    assert!(announced.capabilities.is_empty());
    let thing = announced.resource("Legacy::Thing").unwrap();
    assert_eq!(
        thing.field("parent").unwrap().hints.edge_kind,
        EdgeKind::AttachesTo
    );
    assert_eq!(
        thing.field("name").unwrap().hints.edge_kind,
        EdgeKind::Default
    );

    let server = NatsServer::start().await;
    let client = server.client().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let relay_client = server.client().await;
    let hosts = vec![host.clone()];
    let task = tokio::spawn(async move {
        relay::serve(relay_client, hosts, RelayConfig::default(), async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    let bus = NatsBus::new(client);
    let target = Target {
        name: "old-site".into(),
        config: PropertyMap::new(),
        ..Default::default()
    };
    let create = Request::Create(CreateRequest {
        request_id: "legacy-1".into(),
        resource_type: "Legacy::Thing".into(),
        label: "a".into(),
        target: target.clone(),
        properties: PropertyMap::from([
            ("name".to_owned(), Value::from("a")),
            ("value".to_owned(), Value::Int(42)),
        ]),
    });
    // The relay registers asynchronously: retry no-responders, bounded.
    let created = wait_for_async("the legacy plugin served", Duration::from_secs(10), || {
        bus.send("legacy", &create, Duration::from_secs(10))
    })
    .await;
    let Answer::Progress(created) = created else {
        panic!("{created:?}")
    };
    assert_eq!(created.status, OperationStatus::Success, "{created:?}");
    assert_eq!(created.native_id.as_deref(), Some("a"));

    let read = Request::Read(ReadRequest {
        request_id: "legacy-2".into(),
        resource_type: "Legacy::Thing".into(),
        target,
        native_id: "a".into(),
        properties: PropertyMap::new(),
    });
    let Ok(Answer::Progress(read)) = bus.send("legacy", &read, Duration::from_secs(10)).await
    else {
        panic!()
    };
    assert_eq!(read.properties.unwrap().get("value"), Some(&Value::Int(42)));

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_larger_than_nats_carries_is_answered_with_message_too_large() {
    let script = common::workspace_root().join("satellite/tests/fixtures/legacy_plugin.py");
    let host = PluginHost::start(PluginSpec::new(&script)).await.unwrap();
    let server = NatsServer::start().await;
    let client = server.client().await;
    let limit = client.max_payload() - orrery_satellite::bus::HEADER_ROOM;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let relay_client = server.client().await;
    let task = tokio::spawn(async move {
        relay::serve(relay_client, vec![host], RelayConfig::default(), async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    let bus = NatsBus::new(client);
    // The plugin pads its reads past what one NATS message carries.
    let target = Target {
        name: "padded".into(),
        config: PropertyMap::from([(
            "pad_read_bytes".to_owned(),
            Value::from(2 * 1024 * 1024_i64),
        )]),
        ..Default::default()
    };
    let create = Request::Create(CreateRequest {
        request_id: "big-1".into(),
        resource_type: "Legacy::Thing".into(),
        label: "a".into(),
        target: target.clone(),
        properties: PropertyMap::from([("name".to_owned(), Value::from("a"))]),
    });
    wait_for_async("the legacy plugin served", Duration::from_secs(10), || {
        bus.send("legacy", &create, Duration::from_secs(10))
    })
    .await;
    let read = Request::Read(ReadRequest {
        request_id: "big-2".into(),
        resource_type: "Legacy::Thing".into(),
        target,
        native_id: "a".into(),
        properties: PropertyMap::new(),
    });
    let started = tokio::time::Instant::now();
    let answer = bus.send("legacy", &read, Duration::from_secs(20)).await;
    // Answered at once, not dropped and waited for until the deadline.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let Ok(Answer::Progress(read)) = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(read.status, OperationStatus::Failure, "{read:?}");
    assert_eq!(
        read.error_code,
        Some(ErrorCode::MessageTooLarge),
        "{read:?}"
    );
    let message = read.message.unwrap_or_default();
    assert!(message.contains(&limit.to_string()), "{message}");
    assert!(message.contains("is 2097"), "the answer's size: {message}");

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .unwrap()
        .unwrap();
}
