//! A plugin served in-process through the SDK's harness (the same codec as
//! a real link), talking to one target, with a builder per request kind.

use std::time::Duration;

use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, ErrorCode, ListRequest, ListResult, Operation, OperationStatus,
    ProgressEvent, PropertyMap, ReadRequest, Request, StatusRequest, Target, UpdateRequest, Value,
};
use orrery_plugin_sdk::{harness, Answer, PluginClient, ResourcePlugin};

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Most status polls [`PluginEnv::settle`] makes.
const MAX_POLLS: u32 = 100;

/// Builds a property map from pairs.
pub fn props<const N: usize>(pairs: [(&str, Value); N]) -> PropertyMap {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// A plugin in-process and the target its requests name.
pub struct PluginEnv {
    /// The host side of the link.
    pub client: PluginClient,
    /// The target every request names.
    pub target: Target,
}

impl PluginEnv {
    /// Serves `plugin` in-process; requests name target `test` with `config`.
    ///
    /// # Panics
    ///
    /// When the plugin does not complete the handshake.
    pub async fn start(plugin: impl ResourcePlugin, config: PropertyMap) -> PluginEnv {
        let client = harness::start(plugin).await.expect("the plugin starts");
        PluginEnv {
            client,
            target: Target {
                name: "test".into(),
                config,
                ..Default::default()
            },
        }
    }

    /// Sends `request` and returns its progress event.
    ///
    /// # Panics
    ///
    /// When the link fails or the answer is not a progress event.
    pub async fn send(&self, request: Request) -> ProgressEvent {
        match self
            .client
            .request(&request, TIMEOUT)
            .await
            .expect("an answer")
        {
            Answer::Progress(event) => event,
            other => panic!("expected a progress event, got {other:?}"),
        }
    }

    /// `create` of `resource_type` with `properties`.
    pub async fn create(&self, resource_type: &str, properties: PropertyMap) -> ProgressEvent {
        self.send(Request::Create(CreateRequest {
            request_id: "create".into(),
            resource_type: resource_type.into(),
            label: "test".into(),
            target: self.target.clone(),
            properties,
        }))
        .await
    }

    /// `read` of `native_id`.
    pub async fn read(&self, resource_type: &str, native_id: &str) -> ProgressEvent {
        self.send(Request::Read(ReadRequest {
            request_id: "read".into(),
            resource_type: resource_type.into(),
            target: self.target.clone(),
            native_id: native_id.into(),
            properties: PropertyMap::new(),
        }))
        .await
    }

    /// `update` of `native_id` to `properties`.
    pub async fn update(
        &self,
        resource_type: &str,
        native_id: &str,
        properties: PropertyMap,
    ) -> ProgressEvent {
        self.send(Request::Update(UpdateRequest {
            request_id: "update".into(),
            resource_type: resource_type.into(),
            label: "test".into(),
            target: self.target.clone(),
            native_id: native_id.into(),
            prior_properties: PropertyMap::new(),
            properties,
        }))
        .await
    }

    /// `delete` of `native_id`.
    pub async fn delete(&self, resource_type: &str, native_id: &str) -> ProgressEvent {
        self.send(Request::Delete(DeleteRequest {
            request_id: "delete".into(),
            resource_type: resource_type.into(),
            target: self.target.clone(),
            native_id: native_id.into(),
            properties: PropertyMap::new(),
        }))
        .await
    }

    /// Polls the operation that answered `progress`, once.
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

    /// Polls until the operation is no longer in progress; the final event
    /// and the number of polls.
    ///
    /// # Panics
    ///
    /// When it is still in progress after 100 polls.
    pub async fn settle(
        &self,
        operation: Operation,
        mut event: ProgressEvent,
    ) -> (ProgressEvent, u32) {
        let mut polls = 0;
        while event.status == OperationStatus::InProgress {
            assert!(polls < MAX_POLLS, "never settles: {event:?}");
            event = self.status(operation.clone(), &event).await;
            polls += 1;
        }
        (event, polls)
    }

    /// One `list` page.
    ///
    /// # Panics
    ///
    /// When the link fails or the answer is not a list page.
    pub async fn list_page(
        &self,
        resource_type: &str,
        page_size: u32,
        page_token: Option<String>,
    ) -> ListResult {
        let request = Request::List(ListRequest {
            parent: None,
            request_id: "list".into(),
            resource_type: resource_type.into(),
            target: self.target.clone(),
            page_size,
            page_token,
        });
        match self
            .client
            .request(&request, TIMEOUT)
            .await
            .expect("an answer")
        {
            Answer::List(result) => result,
            other => panic!("expected a list result, got {other:?}"),
        }
    }

    /// Every resource of `resource_type`, following pages of `page_size`.
    ///
    /// # Panics
    ///
    /// When a page fails.
    pub async fn list_all(
        &self,
        resource_type: &str,
        page_size: u32,
    ) -> Vec<(String, PropertyMap)> {
        let mut all = Vec::new();
        let mut token = None;
        loop {
            let page = self.list_page(resource_type, page_size, token).await;
            assert_eq!(page.status, OperationStatus::Success, "{page:?}");
            all.extend(
                page.resources
                    .into_iter()
                    .map(|r| (r.native_id, r.properties)),
            );
            match page.next_page_token {
                Some(next) => token = Some(next),
                None => return all,
            }
        }
    }
}

/// Asserts success and returns the properties.
///
/// # Panics
///
/// When `event` is not a success.
#[track_caller]
pub fn ok(event: &ProgressEvent) -> PropertyMap {
    assert_eq!(event.status, OperationStatus::Success, "{event:?}");
    event.properties.clone().unwrap_or_default()
}

/// Asserts a failure with `code` and returns the message.
///
/// # Panics
///
/// When `event` is not a failure with `code`.
#[track_caller]
pub fn failed(event: &ProgressEvent, code: ErrorCode) -> String {
    assert_eq!(event.status, OperationStatus::Failure, "{event:?}");
    assert_eq!(event.error_code.as_ref(), Some(&code), "{event:?}");
    event.message.clone().unwrap_or_default()
}
