//! Helpers shared by the local plugin's tests: a temp root and a harness client.

use std::path::PathBuf;
use std::time::Duration;

use orrery_plugin_local::LocalPlugin;
use orrery_plugin_sdk::harness;
use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, ErrorCode, ListRequest, ListResult, OperationStatus,
    ProgressEvent, PropertyMap, ReadRequest, Request, Target, UpdateRequest, Value,
};
use orrery_plugin_sdk::{Answer, PluginClient};

pub const DIR: &str = "Local::Fs::Directory";
pub const FILE: &str = "Local::Fs::File";
pub const LINK: &str = "Local::Fs::Symlink";

const TIMEOUT: Duration = Duration::from_secs(5);

/// Builds a property map from pairs.
pub fn props<const N: usize>(pairs: [(&str, Value); N]) -> PropertyMap {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// A fresh root directory and a plugin served in-process.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub client: PluginClient,
    pub target: Target,
}

impl Env {
    /// The root is a fresh temporary directory.
    pub async fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        Env::at(dir, root).await
    }

    /// The root is `<tmp>/root`, next to an empty `<tmp>/outside` (see
    /// [`Env::outside`]) that `../outside` from the root reaches.
    pub async fn beside_outside() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(dir.path().join("outside")).unwrap();
        Env::at(dir, root).await
    }

    async fn at(dir: tempfile::TempDir, root: PathBuf) -> Env {
        let target = Target {
            name: "test".into(),
            config: props([("root", root.to_str().unwrap().into())]),
        };
        let client = harness::start(LocalPlugin).await.unwrap();
        Env {
            dir,
            root,
            client,
            target,
        }
    }

    /// The host path of `rel` under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The directory beside the root of [`Env::beside_outside`].
    pub fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    pub async fn send(&self, request: Request) -> ProgressEvent {
        match self.client.request(&request, TIMEOUT).await.unwrap() {
            Answer::Progress(event) => event,
            other => panic!("expected a progress event, got {other:?}"),
        }
    }

    pub async fn create(&self, resource_type: &str, properties: PropertyMap) -> ProgressEvent {
        self.send(Request::Create(CreateRequest {
            request_id: "req".into(),
            resource_type: resource_type.into(),
            label: "test".into(),
            target: self.target.clone(),
            properties,
        }))
        .await
    }

    pub async fn read(&self, resource_type: &str, native_id: &str) -> ProgressEvent {
        self.send(Request::Read(ReadRequest {
            request_id: "req".into(),
            resource_type: resource_type.into(),
            target: self.target.clone(),
            native_id: native_id.into(),
            properties: PropertyMap::new(),
        }))
        .await
    }

    pub async fn update(
        &self,
        resource_type: &str,
        native_id: &str,
        properties: PropertyMap,
    ) -> ProgressEvent {
        self.send(Request::Update(UpdateRequest {
            request_id: "req".into(),
            resource_type: resource_type.into(),
            label: "test".into(),
            target: self.target.clone(),
            native_id: native_id.into(),
            prior_properties: PropertyMap::new(),
            properties,
        }))
        .await
    }

    pub async fn delete(&self, resource_type: &str, native_id: &str) -> ProgressEvent {
        self.send(Request::Delete(DeleteRequest {
            request_id: "req".into(),
            resource_type: resource_type.into(),
            target: self.target.clone(),
            native_id: native_id.into(),
            properties: PropertyMap::new(),
        }))
        .await
    }

    pub async fn list_page(
        &self,
        resource_type: &str,
        page_size: u32,
        page_token: Option<String>,
    ) -> ListResult {
        let request = Request::List(ListRequest {
            request_id: "req".into(),
            resource_type: resource_type.into(),
            target: self.target.clone(),
            page_size,
            page_token,
        });
        match self.client.request(&request, TIMEOUT).await.unwrap() {
            Answer::List(result) => result,
            other => panic!("expected a list result, got {other:?}"),
        }
    }

    /// Every native id of `resource_type`, following pages of `page_size`.
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
