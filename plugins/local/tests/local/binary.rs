//! The real `orrery-plugin-local` binary, over stdio frames.

use std::time::Duration;

use orrery_plugin_sdk::process::{spawn_plugin, SpawnConfig};
use orrery_plugin_sdk::schema::{CreateRequest, OperationStatus, Request, Target};
use orrery_plugin_sdk::Answer;

use crate::common::{props, FILE};

#[tokio::test]
async fn the_binary_serves_the_plugin() {
    let root = tempfile::tempdir().unwrap();
    let config = SpawnConfig::new(env!("CARGO_BIN_EXE_orrery-plugin-local"));
    let plugin = spawn_plugin(&config).await.unwrap();
    assert_eq!(plugin.client.announcement().name, "local");

    let request = Request::Create(CreateRequest {
        request_id: "bin".into(),
        resource_type: FILE.into(),
        target: Target {
            name: "bin".into(),
            config: props([("root", root.path().to_str().unwrap().into())]),
            ..Default::default()
        },
        properties: props([("path", "hello.txt".into()), ("content", "hi".into())]),
        ..Default::default()
    });
    let answer = plugin
        .client
        .request(&request, Duration::from_secs(10))
        .await
        .unwrap();
    let Answer::Progress(event) = answer else {
        panic!("unexpected answer {answer:?}");
    };
    assert_eq!(event.status, OperationStatus::Success, "{event:?}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("hello.txt")).unwrap(),
        "hi"
    );
}
