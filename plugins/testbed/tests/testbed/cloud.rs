//! `Testbed::Cloud::Thing`, the thing that can show a duplicate: ids are the
//! plugin's, only the request id deduplicates, and a create lands on the
//! provider's side even when the process that sent it dies.

use std::time::{Duration, Instant};

use orrery_plugin_sdk::process::{spawn_plugin, PluginProcess, SpawnConfig};
use orrery_plugin_sdk::schema::{
    CreateRequest, ErrorCode, ListRequest, OperationStatus, PropertyMap, ReadRequest, Request,
    Target,
};
use orrery_plugin_sdk::Answer;
use orrery_plugin_testbed::store::census;
use orrery_plugin_testbed::CLOUD_THING;

use crate::common::props;

const TIMEOUT: Duration = Duration::from_secs(10);
const CREATE_MS: u64 = 1_500;

fn target(store: &std::path::Path) -> Target {
    Target {
        name: "cloud".into(),
        config: props([
            ("store", store.to_str().unwrap().into()),
            ("create_ms", CREATE_MS.into()),
        ]),
        ..Default::default()
    }
}

fn create(store: &std::path::Path, request_id: &str, name: &str) -> Request {
    Request::Create(CreateRequest {
        request_id: request_id.into(),
        resource_type: CLOUD_THING.into(),
        target: target(store),
        properties: props([("name", name.into()), ("value", 7.into())]),
        ..Default::default()
    })
}

async fn testbed() -> PluginProcess {
    spawn_plugin(&SpawnConfig::new(env!(
        "CARGO_BIN_EXE_orrery-plugin-testbed"
    )))
    .await
    .unwrap()
}

/// The native id a create answers with.
async fn created(plugin: &PluginProcess, request: &Request) -> String {
    match plugin.client.request(request, TIMEOUT).await {
        Ok(Answer::Progress(p)) if p.status == OperationStatus::Success => p.native_id.unwrap(),
        other => panic!("{request:?}: {other:?}"),
    }
}

/// Native ids listed on the target now.
async fn listed(plugin: &PluginProcess, store: &std::path::Path) -> Vec<String> {
    let list = Request::List(ListRequest {
        request_id: "l".into(),
        resource_type: CLOUD_THING.into(),
        target: target(store),
        ..Default::default()
    });
    match plugin.client.request(&list, TIMEOUT).await {
        Ok(Answer::List(page)) => page.resources.into_iter().map(|r| r.native_id).collect(),
        other => panic!("list: {other:?}"),
    }
}

#[tokio::test]
async fn a_create_lands_after_its_sender_died_and_only_its_request_id_deduplicates() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("cloud.sqlite");

    // The first create is accepted, then its process dies before answering.
    let mut first = testbed().await;
    let sent = Instant::now();
    let request = create(&store, "req-1", "web");
    let pending = first.client.request(&request, TIMEOUT);
    let waited = tokio::time::timeout(Duration::from_millis(300), pending).await;
    assert!(
        waited.is_err(),
        "a create answers after create_ms: {waited:?}"
    );
    first.child.kill().await.unwrap();

    // Not visible before it is ready, though the provider holds it.
    let second = testbed().await;
    if sent.elapsed() < Duration::from_millis(CREATE_MS - 200) {
        assert_eq!(listed(&second, &store).await, Vec::<String>::new());
    }
    assert_eq!(census(&store).unwrap().rows.len(), 1);

    // The same request id again is the same thing, answered when it is ready.
    let id = created(&second, &request).await;
    assert!(
        sent.elapsed() >= Duration::from_millis(CREATE_MS),
        "answered when ready"
    );
    assert!(id.starts_with("cloud-"), "{id}");
    assert_eq!(listed(&second, &store).await, vec![id.clone()]);
    let read = Request::Read(ReadRequest {
        request_id: "r".into(),
        resource_type: CLOUD_THING.into(),
        target: target(&store),
        native_id: id.clone(),
        ..Default::default()
    });
    match second.client.request(&read, TIMEOUT).await {
        Ok(Answer::Progress(p)) => assert_eq!(p.status, OperationStatus::Success),
        other => panic!("read: {other:?}"),
    }
    assert_eq!(census(&store).unwrap().duplicates(), 0);

    // Another request id for the same name is another thing: a duplicate.
    let other = created(&second, &create(&store, "req-2", "web")).await;
    assert_ne!(other, id);
    assert_eq!(listed(&second, &store).await.len(), 2);
    assert_eq!(census(&store).unwrap().duplicates(), 1);
}

#[tokio::test]
async fn a_cloud_thing_without_a_store_is_refused() {
    let plugin = testbed().await;
    let request = Request::Create(CreateRequest {
        request_id: "r".into(),
        resource_type: CLOUD_THING.into(),
        target: Target {
            name: "cloud".into(),
            config: PropertyMap::new(),
            ..Default::default()
        },
        properties: props([("name", "x".into())]),
        ..Default::default()
    });
    match plugin.client.request(&request, TIMEOUT).await {
        Ok(Answer::Progress(p)) => {
            assert_eq!(p.error_code, Some(ErrorCode::InvalidRequest), "{p:?}")
        }
        other => panic!("{other:?}"),
    }
}
