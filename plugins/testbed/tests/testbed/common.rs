//! A harness client and request builders for the testbed.

use std::time::Duration;

use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, ErrorCode, ListRequest, ListResult, Operation, OperationStatus,
    ProgressEvent, PropertyMap, ReadRequest, Request, StatusRequest, Target, UpdateRequest, Value,
};
use orrery_plugin_sdk::{harness, Answer, PluginClient};
use orrery_plugin_testbed::TestbedPlugin;

pub use orrery_plugin_testbed::{ASYNC_THING, NOOP_THING};

const TIMEOUT: Duration = Duration::from_secs(5);

/// Builds a property map from pairs.
pub fn props<const N: usize>(pairs: [(&str, Value); N]) -> PropertyMap {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// A fresh testbed served in-process, talking to one target.
pub struct Env {
    pub client: PluginClient,
    pub target: Target,
}

impl Env {
    pub async fn new(config: PropertyMap) -> Env {
        let client = harness::start(TestbedPlugin::default()).await.unwrap();
        let target = Target {
            name: "test".into(),
            config,
        };
        Env { client, target }
    }

    pub async fn send(&self, request: Request) -> ProgressEvent {
        match self.client.request(&request, TIMEOUT).await.unwrap() {
            Answer::Progress(event) => event,
            other => panic!("expected a progress event, got {other:?}"),
        }
    }

    pub async fn create(&self, ty: &str, properties: PropertyMap) -> ProgressEvent {
        self.send(Request::Create(CreateRequest {
            request_id: "create".into(),
            resource_type: ty.into(),
            target: self.target.clone(),
            properties,
            ..Default::default()
        }))
        .await
    }

    pub async fn read(&self, ty: &str, native_id: &str) -> ProgressEvent {
        self.send(Request::Read(ReadRequest {
            request_id: "read".into(),
            resource_type: ty.into(),
            target: self.target.clone(),
            native_id: native_id.into(),
            ..Default::default()
        }))
        .await
    }

    pub async fn update(
        &self,
        ty: &str,
        native_id: &str,
        properties: PropertyMap,
    ) -> ProgressEvent {
        self.send(Request::Update(UpdateRequest {
            request_id: "update".into(),
            resource_type: ty.into(),
            target: self.target.clone(),
            native_id: native_id.into(),
            properties,
            ..Default::default()
        }))
        .await
    }

    pub async fn delete(&self, ty: &str, native_id: &str) -> ProgressEvent {
        self.send(Request::Delete(DeleteRequest {
            request_id: "delete".into(),
            resource_type: ty.into(),
            target: self.target.clone(),
            native_id: native_id.into(),
            ..Default::default()
        }))
        .await
    }

    /// Polls the operation that answered `progress` once.
    pub async fn status(&self, operation: Operation, progress: &ProgressEvent) -> ProgressEvent {
        self.send(Request::Status(StatusRequest {
            request_id: progress.request_id.clone(),
            operation,
            resource_type: progress.resource_type.clone(),
            target: self.target.clone(),
            native_id: progress.native_id.clone().unwrap_or_default(),
            context: progress.context.clone(),
        }))
        .await
    }

    /// Polls until the operation is no longer in progress; returns the
    /// final event and the number of polls.
    pub async fn settle(
        &self,
        operation: Operation,
        mut event: ProgressEvent,
    ) -> (ProgressEvent, u32) {
        let mut polls = 0;
        while event.status == OperationStatus::InProgress {
            assert!(polls < 100, "never settles: {event:?}");
            event = self.status(operation.clone(), &event).await;
            polls += 1;
        }
        (event, polls)
    }

    pub async fn list(&self, ty: &str, page_size: u32, page_token: Option<String>) -> ListResult {
        let request = Request::List(ListRequest {
            request_id: "list".into(),
            resource_type: ty.into(),
            target: self.target.clone(),
            page_size,
            page_token,
        });
        match self.client.request(&request, TIMEOUT).await.unwrap() {
            Answer::List(result) => result,
            other => panic!("expected a list result, got {other:?}"),
        }
    }
}

/// Asserts success and returns the properties.
#[track_caller]
pub fn ok(event: &ProgressEvent) -> PropertyMap {
    assert_eq!(event.status, OperationStatus::Success, "{event:?}");
    event.properties.clone().unwrap_or_default()
}

/// Asserts a failure with `code` and returns the message.
#[track_caller]
pub fn failed(event: &ProgressEvent, code: ErrorCode) -> String {
    assert_eq!(event.status, OperationStatus::Failure, "{event:?}");
    assert_eq!(event.error_code.as_ref(), Some(&code), "{event:?}");
    event.message.clone().unwrap_or_default()
}
