//! # orrery-plugin-local
//!
//! The `local` plugin manages directories, files and symlinks under a root
//! directory on the host (the target config's `root`). It is also the worked
//! example of `docs/plugin-authoring.md`: this file dispatches requests by
//! resource type, and each type lives in its own module.

mod beneath;
mod directory;
mod error;
mod file;
mod id;
mod kind;
mod root;
mod symlink;
mod walk;

use orrery_plugin_sdk::schema::{
    Condition, CreateRequest, DeleteRequest, DiscoveryFilter, ErrorCode, ListRequest, MatchOp,
    RateLimit, ReadRequest, ResourceSchema, UpdateRequest,
};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError, PluginInfo, ResourcePlugin};

use kind::Kind;
use root::Root;

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
        // The SDK's handler span gives this line its request and trace ids.
        tracing::debug!(label = %request.label, "creating");
        blocking(move || {
            let root = Root::of(&request.target)?;
            let properties = &request.properties;
            match kind(&request.resource_type)? {
                Kind::Directory => directory::create(&root, properties),
                Kind::File => file::create(&root, properties),
                Kind::Symlink => symlink::create(&root, properties),
            }
        })
        .await
    }

    async fn read(&self, request: ReadRequest) -> OpResult {
        blocking(move || {
            let root = Root::of(&request.target)?;
            let id = &request.native_id;
            match kind(&request.resource_type)? {
                Kind::Directory => directory::read(&root, id),
                Kind::File => file::read(&root, id),
                Kind::Symlink => symlink::read(&root, id),
            }
        })
        .await
    }

    async fn update(&self, request: UpdateRequest) -> OpResult {
        blocking(move || {
            let root = Root::of(&request.target)?;
            let (id, properties) = (&request.native_id, &request.properties);
            match kind(&request.resource_type)? {
                Kind::Directory => directory::update(&root, id, properties),
                Kind::File => file::update(&root, id, properties),
                Kind::Symlink => symlink::update(&root, id, properties),
            }
        })
        .await
    }

    async fn delete(&self, request: DeleteRequest) -> OpResult {
        blocking(move || {
            let root = Root::of(&request.target)?;
            let id = &request.native_id;
            match kind(&request.resource_type)? {
                Kind::Directory => directory::delete(&root, id),
                Kind::File => file::delete(&root, id),
                Kind::Symlink => symlink::delete(&root, id),
            }
        })
        .await
    }

    async fn list(&self, request: ListRequest) -> Result<ListPage, PluginError> {
        blocking(move || {
            let root = Root::of(&request.target)?;
            match kind(&request.resource_type)? {
                Kind::Directory => directory::list(&root, &request),
                Kind::File => file::list(&root, &request),
                Kind::Symlink => symlink::list(&root, &request),
            }
        })
        .await
    }
}

/// Runs a handler's file-system calls on tokio's blocking pool: each of
/// them blocks, and the runtime serving the link must not. The handler's
/// span (request and trace ids) goes along.
async fn blocking<T, F>(work: F) -> Result<T, PluginError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, PluginError> + Send + 'static,
{
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(work)).await {
        Ok(result) => result,
        Err(e) => Err(PluginError::new(
            ErrorCode::InternalFailure,
            format!("file-system work failed: {e}"),
        )),
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
