//! The tests of `docs/plugin-authoring.md`, verbatim: one per operation of
//! `Local::Fs::Directory`, each written before the code it tests.

use std::path::Path;
use std::time::Duration;

use orrery_plugin_local::LocalPlugin;
use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, ErrorCode, ListRequest, OperationStatus, ProgressEvent,
    PropertyMap, ReadRequest, Request, Target, UpdateRequest, Value,
};
use orrery_plugin_sdk::{harness, Answer, PluginClient};

const DIR: &str = "Local::Fs::Directory";

/// The target: its config names the root directory.
fn target(root: &Path) -> Target {
    let root = Value::from(root.to_str().unwrap());
    Target {
        name: "test".into(),
        config: PropertyMap::from([("root".into(), root)]),
        ..Default::default()
    }
}

/// Sends one request and returns the progress event that answers it.
async fn call(client: &PluginClient, request: Request) -> ProgressEvent {
    match client
        .request(&request, Duration::from_secs(5))
        .await
        .unwrap()
    {
        Answer::Progress(event) => event,
        other => panic!("unexpected answer {other:?}"),
    }
}

fn create(root: &Path, path: &str) -> Request {
    Request::Create(CreateRequest {
        resource_type: DIR.into(),
        target: target(root),
        properties: PropertyMap::from([("path".into(), path.into())]),
        ..Default::default()
    })
}

fn read(root: &Path, native_id: &str) -> Request {
    Request::Read(ReadRequest {
        resource_type: DIR.into(),
        target: target(root),
        native_id: native_id.into(),
        ..Default::default()
    })
}

#[tokio::test]
async fn create_makes_the_directory() {
    let root = tempfile::tempdir().unwrap();
    let client = harness::start(LocalPlugin).await.unwrap();

    let event = call(&client, create(root.path(), "www")).await;
    assert_eq!(event.status, OperationStatus::Success, "{event:?}");
    assert_eq!(event.native_id.as_deref(), Some("www"));
    assert!(root.path().join("www").is_dir());

    let again = call(&client, create(root.path(), "www")).await;
    assert_eq!(again.error_code, Some(ErrorCode::AlreadyExists));
    let escape = call(&client, create(root.path(), "../www")).await;
    assert_eq!(escape.error_code, Some(ErrorCode::InvalidRequest));
}

#[tokio::test]
async fn read_returns_the_directory_or_not_found() {
    let root = tempfile::tempdir().unwrap();
    let client = harness::start(LocalPlugin).await.unwrap();
    let created = call(&client, create(root.path(), "www")).await;

    let event = call(&client, read(root.path(), "www")).await;
    assert_eq!(event.status, OperationStatus::Success, "{event:?}");
    assert_eq!(event.properties, created.properties);
    let missing = call(&client, read(root.path(), "nope")).await;
    assert_eq!(missing.error_code, Some(ErrorCode::NotFound));
}

#[tokio::test]
async fn update_changes_the_mode_but_never_the_path() {
    let root = tempfile::tempdir().unwrap();
    let client = harness::start(LocalPlugin).await.unwrap();
    call(&client, create(root.path(), "www")).await;
    let update = |path: &str| {
        Request::Update(UpdateRequest {
            resource_type: DIR.into(),
            target: target(root.path()),
            native_id: "www".into(),
            properties: PropertyMap::from([
                ("path".into(), path.into()),
                ("mode".into(), 0o700.into()),
            ]),
            ..Default::default()
        })
    };

    let event = call(&client, update("www")).await;
    assert_eq!(event.status, OperationStatus::Success, "{event:?}");
    assert_eq!(event.properties.unwrap()["mode"], Value::from(0o700));
    let moved = call(&client, update("elsewhere")).await;
    assert_eq!(moved.error_code, Some(ErrorCode::NotUpdatable));
}

#[tokio::test]
async fn delete_removes_an_empty_directory() {
    let root = tempfile::tempdir().unwrap();
    let client = harness::start(LocalPlugin).await.unwrap();
    call(&client, create(root.path(), "www")).await;
    let delete = || {
        Request::Delete(DeleteRequest {
            resource_type: DIR.into(),
            target: target(root.path()),
            native_id: "www".into(),
            ..Default::default()
        })
    };

    std::fs::write(root.path().join("www/index.html"), "hi").unwrap();
    let busy = call(&client, delete()).await;
    assert_eq!(busy.error_code, Some(ErrorCode::InvalidRequest));
    std::fs::remove_file(root.path().join("www/index.html")).unwrap();
    let event = call(&client, delete()).await;
    assert_eq!(event.status, OperationStatus::Success, "{event:?}");
    assert!(!root.path().join("www").exists());
    let again = call(&client, delete()).await;
    assert_eq!(again.error_code, Some(ErrorCode::NotFound));
}

#[tokio::test]
async fn list_pages_through_every_directory() {
    let root = tempfile::tempdir().unwrap();
    let client = harness::start(LocalPlugin).await.unwrap();
    for path in ["a", "a/b", "c"] {
        call(&client, create(root.path(), path)).await;
    }
    let list = |page_token: Option<String>| {
        Request::List(ListRequest {
            resource_type: DIR.into(),
            target: target(root.path()),
            page_size: 2,
            page_token,
            ..Default::default()
        })
    };

    let timeout = Duration::from_secs(5);
    let Answer::List(first) = client.request(&list(None), timeout).await.unwrap() else {
        panic!("not a list answer");
    };
    let ids: Vec<_> = first
        .resources
        .iter()
        .map(|r| r.native_id.as_str())
        .collect();
    assert_eq!(ids, ["a", "a/b"]);
    let Answer::List(second) = client
        .request(&list(first.next_page_token), timeout)
        .await
        .unwrap()
    else {
        panic!("not a list answer");
    };
    assert_eq!(second.resources[0].native_id, "c");
    assert_eq!(second.next_page_token, None);
}
