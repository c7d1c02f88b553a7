//! The persistent backend: things in an SQLite file outlive the process
//! that made them, are seen by every process sharing the file, and a
//! retried create finds the thing it made instead of making a second.

use std::time::Duration;

use orrery_plugin_sdk::process::{spawn_plugin, PluginProcess, SpawnConfig};
use orrery_plugin_sdk::schema::{
    CreateRequest, ErrorCode, ListRequest, OperationStatus, PropertyMap, Request, Target,
};
use orrery_plugin_sdk::Answer;
use orrery_plugin_testbed::store::census;
use orrery_plugin_testbed::ASYNC_THING;

use crate::common::props;

const TIMEOUT: Duration = Duration::from_secs(10);

fn target() -> Target {
    Target {
        name: "persistent".into(),
        config: PropertyMap::new(),
        ..Default::default()
    }
}

fn create(request_id: &str, name: &str) -> Request {
    Request::Create(CreateRequest {
        request_id: request_id.into(),
        resource_type: ASYNC_THING.into(),
        target: target(),
        properties: props([("name", name.into()), ("value", 7.into())]),
        ..Default::default()
    })
}

/// A testbed process keeping its things in `store` (`ORRERY_TESTBED_STORE`),
/// announcing the rate limit `ORRERY_TESTBED_RATE_LIMIT` gives it.
async fn testbed(store: &std::path::Path) -> PluginProcess {
    let mut config = SpawnConfig::new(env!("CARGO_BIN_EXE_orrery-plugin-testbed"));
    config
        .env
        .push(("ORRERY_TESTBED_STORE".into(), store.as_os_str().to_owned()));
    config
        .env
        .push(("ORRERY_TESTBED_RATE_LIMIT".into(), "50:5:8".into()));
    let plugin = spawn_plugin(&config).await.unwrap();
    let limit = &plugin.client.announcement().rate_limit;
    assert_eq!(
        (limit.requests_per_second, limit.burst, limit.max_in_flight),
        (50.0, 5, 8)
    );
    plugin
}

async fn status_of(
    plugin: &PluginProcess,
    request: &Request,
) -> (OperationStatus, Option<ErrorCode>) {
    match plugin.client.request(request, TIMEOUT).await {
        Ok(Answer::Progress(event)) => (event.status, event.error_code),
        other => panic!("{request:?}: {other:?}"),
    }
}

async fn names(plugin: &PluginProcess) -> Vec<String> {
    let list = Request::List(ListRequest {
        request_id: "l".into(),
        resource_type: ASYNC_THING.into(),
        target: target(),
        ..Default::default()
    });
    match plugin.client.request(&list, TIMEOUT).await {
        Ok(Answer::List(page)) => page.resources.into_iter().map(|r| r.native_id).collect(),
        other => panic!("list: {other:?}"),
    }
}

#[tokio::test]
async fn things_outlive_the_process_and_a_retried_create_makes_no_second() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("things.sqlite");

    let mut first = testbed(&store).await;
    let (status, _) = status_of(&first, &create("req-a", "a")).await;
    assert_eq!(status, OperationStatus::InProgress);
    first.child.kill().await.unwrap();

    // Another process (a restarted plugin, another satellite's) sees it.
    let second = testbed(&store).await;
    let other = testbed(&store).await;
    assert_eq!(names(&second).await, ["a"]);
    assert_eq!(names(&other).await, ["a"]);

    // The same request again is the same create; another request for the
    // same name is refused.
    let (again, _) = status_of(&second, &create("req-a", "a")).await;
    assert_eq!(
        again,
        OperationStatus::InProgress,
        "a retry answers as the first attempt"
    );
    let (status, code) = status_of(&other, &create("req-b", "a")).await;
    assert_eq!(
        (status, code),
        (OperationStatus::Failure, Some(ErrorCode::AlreadyExists))
    );
    let (status, _) = status_of(&other, &create("req-c", "c")).await;
    assert_eq!(status, OperationStatus::InProgress);

    let counted = census(&store).unwrap();
    assert_eq!(counted.rows.len(), 2, "{counted:?}");
    assert_eq!(counted.duplicates(), 0, "{counted:?}");
}
