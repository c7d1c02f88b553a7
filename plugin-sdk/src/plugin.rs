//! The trait a plugin author implements.

use std::future::Future;

use orrery_schema::{
    CreateRequest, DeleteRequest, DiscoveryFilter, ErrorCode, FieldSchema, LabelConfig,
    ListRequest, RateLimit, ReadRequest, ResourceSchema, StatusRequest, UpdateRequest,
};

use crate::result::{ListPage, OpResult, PluginError};

/// Who the plugin is. The SDK adds the protocol version and capabilities.
#[derive(Clone, Debug, Default)]
pub struct PluginInfo {
    /// The plugin's name, e.g. `local`; operations are routed by it.
    pub name: String,
    /// Its semver version, usually `env!("CARGO_PKG_VERSION")`.
    pub version: String,
    /// The namespace of its resource types, e.g. `Local`.
    pub namespace: String,
}

/// A resource plugin: identity, schemas, three pieces of configuration and
/// six operations. This is everything a plugin author writes.
///
/// Each handler receives a request and returns the resource's state
/// ([`crate::done`], [`crate::in_progress`]) or a [`PluginError`] with a code.
/// The SDK fills in the operation, request id and resource type, enforces
/// deadlines and cancellation by dropping the handler's future, and turns a
/// panic into an `InternalFailure` for that request alone.
pub trait ResourcePlugin: Send + Sync + 'static {
    /// Name, version and namespace.
    fn info(&self) -> PluginInfo;

    /// One schema per resource type the plugin manages.
    fn resources(&self) -> Vec<ResourceSchema>;

    /// How fast the runtime may call the plugin, per target.
    fn rate_limit(&self) -> RateLimit {
        RateLimit::default()
    }

    /// Listed resources that discovery should not record as unmanaged.
    fn discovery_filters(&self) -> Vec<DiscoveryFilter> {
        Vec::new()
    }

    /// Where the runtime's labels live on resources.
    fn label_config(&self) -> LabelConfig {
        LabelConfig::default()
    }

    /// The fields of a target's `config`, e.g. a host and a password. Mark
    /// credentials secret ([`crate::FieldBuilder::opaque`] or
    /// `write_only`): the runtime then never records, logs or shows them in
    /// clear. The default declares none, and the runtime falls back to
    /// treating secret-looking names (`password`, `token`, …) as secret.
    fn target_config(&self) -> Vec<FieldSchema> {
        Vec::new()
    }

    /// Creates a resource. A natural identifier that is taken must yield
    /// `AlreadyExists`.
    fn create(&self, request: CreateRequest) -> impl Future<Output = OpResult> + Send;

    /// Reads a resource; `NotFound` if it is gone. Never returns write-only fields.
    fn read(&self, request: ReadRequest) -> impl Future<Output = OpResult> + Send;

    /// Updates a resource in place; the native id must not change. A change
    /// to a create-only field must yield `NotUpdatable`.
    fn update(&self, request: UpdateRequest) -> impl Future<Output = OpResult> + Send;

    /// Deletes a resource; `NotFound` if it is already gone.
    fn delete(&self, request: DeleteRequest) -> impl Future<Output = OpResult> + Send;

    /// Reports on an operation that answered `InProgress`. Plugins whose
    /// operations always finish at once keep this default.
    fn status(&self, request: StatusRequest) -> impl Future<Output = OpResult> + Send {
        async move {
            Err(PluginError::new(
                ErrorCode::UnsupportedOperation,
                format!(
                    "plugin has no asynchronous operations to report on (request {})",
                    request.request_id
                ),
            ))
        }
    }

    /// Lists one page of the resources of a type on a target. Use
    /// [`paginate`](fn@crate::paginate) to cut pages.
    fn list(
        &self,
        request: ListRequest,
    ) -> impl Future<Output = Result<ListPage, PluginError>> + Send;
}
