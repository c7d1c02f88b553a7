//! # orrery-plugin-local
//!
//! The `local` plugin manages directories, files and symlinks under a root
//! directory on the host (the target config's `root`). It is also the worked
//! example of `docs/plugin-authoring.md`: this file dispatches requests by
//! resource type, and each type lives in its own module.

mod directory;
mod file;
mod root;
mod symlink;

use orrery_plugin_sdk::schema::{
    Condition, CreateRequest, DeleteRequest, DiscoveryFilter, ErrorCode, ListRequest, MatchOp,
    RateLimit, ReadRequest, ResourceSchema, UpdateRequest,
};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError, PluginInfo, ResourcePlugin};

use root::{Kind, Root};

/// The `local` plugin. It keeps no state: every request names its target,
/// and the target's config names the root.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalPlugin;

impl ResourcePlugin for LocalPlugin {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "local".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            namespace: "Local".into(),
        }
    }

    fn resources(&self) -> Vec<ResourceSchema> {
        vec![directory::schema(), file::schema(), symlink::schema()]
    }

    fn rate_limit(&self) -> RateLimit {
        RateLimit {
            requests_per_second: 200.0,
            burst: 50,
            max_in_flight: 64,
        }
    }

    /// Discovery does not record hidden entries at the root (`.git`, `.cache`).
    fn discovery_filters(&self) -> Vec<DiscoveryFilter> {
        [directory::TYPE, file::TYPE, symlink::TYPE]
            .into_iter()
            .map(|resource_type| DiscoveryFilter {
                resource_type: resource_type.into(),
                exclude_when: vec![Condition {
                    property: "path".into(),
                    op: MatchOp::Prefix,
                    value: ".".into(),
                }],
            })
            .collect()
    }

    async fn create(&self, request: CreateRequest) -> OpResult {
        let root = Root::of(&request.target).await?;
        let properties = &request.properties;
        // The SDK's handler span gives this line its request and trace ids.
        tracing::debug!(label = %request.label, "creating");
        match kind(&request.resource_type)? {
            Kind::Directory => directory::create(&root, properties).await,
            Kind::File => file::create(&root, properties).await,
            Kind::Symlink => symlink::create(&root, properties).await,
        }
    }

    async fn read(&self, request: ReadRequest) -> OpResult {
        let root = Root::of(&request.target).await?;
        let id = &request.native_id;
        match kind(&request.resource_type)? {
            Kind::Directory => directory::read(&root, id).await,
            Kind::File => file::read(&root, id).await,
            Kind::Symlink => symlink::read(&root, id).await,
        }
    }

    async fn update(&self, request: UpdateRequest) -> OpResult {
        let root = Root::of(&request.target).await?;
        let (id, properties) = (&request.native_id, &request.properties);
        match kind(&request.resource_type)? {
            Kind::Directory => directory::update(&root, id, properties).await,
            Kind::File => file::update(&root, id, properties).await,
            Kind::Symlink => symlink::update(&root, id, properties).await,
        }
    }

    async fn delete(&self, request: DeleteRequest) -> OpResult {
        let root = Root::of(&request.target).await?;
        let id = &request.native_id;
        match kind(&request.resource_type)? {
            Kind::Directory => directory::delete(&root, id).await,
            Kind::File => file::delete(&root, id).await,
            Kind::Symlink => symlink::delete(&root, id).await,
        }
    }

    async fn list(&self, request: ListRequest) -> Result<ListPage, PluginError> {
        let root = Root::of(&request.target).await?;
        match kind(&request.resource_type)? {
            Kind::Directory => directory::list(&root, &request).await,
            Kind::File => file::list(&root, &request).await,
            Kind::Symlink => symlink::list(&root, &request).await,
        }
    }
}

/// The kind of entry a resource type manages.
fn kind(resource_type: &str) -> Result<Kind, PluginError> {
    match resource_type {
        directory::TYPE => Ok(Kind::Directory),
        file::TYPE => Ok(Kind::File),
        symlink::TYPE => Ok(Kind::Symlink),
        other => Err(PluginError::invalid(format!(
            "unknown resource type `{other}`; the local plugin manages {}, {} and {}",
            directory::TYPE,
            file::TYPE,
            symlink::TYPE
        ))),
    }
}

/// `NotUpdatable`: the update changes a create-only field.
fn not_updatable(field: &str, current: &str, desired: &str) -> PluginError {
    PluginError::new(
        ErrorCode::NotUpdatable,
        format!("`{field}` is create-only: changing it from `{current}` to `{desired}` requires replacing the resource"),
    )
}
