//! The real `orrery-plugin-testbed` binary: crash injection aborts the process.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use orrery_plugin_sdk::process::{spawn_plugin, SpawnConfig};
use orrery_plugin_sdk::schema::{CreateRequest, OperationStatus, PropertyMap, Request, Target};
use orrery_plugin_sdk::{Answer, CallError};
use orrery_plugin_testbed::NOOP_THING;

use crate::common::props;

/// The signal `std::process::abort` raises on Linux.
const SIGABRT: i32 = 6;

fn create(config: PropertyMap, name: &str) -> Request {
    Request::Create(CreateRequest {
        request_id: name.into(),
        resource_type: NOOP_THING.into(),
        target: Target {
            name: "crash".into(),
            config,
            ..Default::default()
        },
        properties: props([("name", name.into())]),
        ..Default::default()
    })
}

#[tokio::test]
async fn crash_on_aborts_the_process_on_the_nth_request() {
    let config = SpawnConfig::new(env!("CARGO_BIN_EXE_orrery-plugin-testbed"));
    let mut plugin = spawn_plugin(&config).await.unwrap();
    assert_eq!(plugin.client.announcement().name, "testbed");
    let faults = props([("crash_on", "create".into()), ("crash_after", 2.into())]);
    let timeout = Duration::from_secs(10);

    let first = plugin
        .client
        .request(&create(faults.clone(), "a"), timeout)
        .await;
    match first {
        Ok(Answer::Progress(event)) => assert_eq!(event.status, OperationStatus::Success),
        other => panic!("first create: {other:?}"),
    }
    let second = plugin.client.request(&create(faults, "b"), timeout).await;
    assert!(
        matches!(second, Err(CallError::LinkClosed(_))),
        "{second:?}"
    );
    let status = tokio::time::timeout(timeout, plugin.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.signal(), Some(SIGABRT), "{status:?}");
}
