//! # orrery-plugin-jetstream
//!
//! Manages NATS JetStream: `Jetstream::Stream`, `Jetstream::Consumer`,
//! `Jetstream::KvBucket`, `Jetstream::KvEntry` and `Jetstream::ObjectBucket`,
//! on the servers a
//! target's config names (never the NATS that carries Orrery's own bus).
//!
//! Every type follows one [`lifecycle`] (streams and buckets are all
//! streams underneath); every call goes through the raw JetStream API
//! ([`api`]). A replica change or a
//! placement move answers `InProgress`, and `status` reports success once
//! the replicas are current ([`settle`]).

pub mod api;
pub mod bucket;
pub mod consumer;
pub mod kv;
pub mod kv_entry;
pub mod lifecycle;
pub mod mapping;
pub mod object;
pub mod settle;
pub mod stream;
pub mod target;

use async_nats::jetstream::Context;
use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, FieldSchema, ListRequest, Operation, RateLimit, ReadRequest,
    ResourceSchema, StatusRequest, UpdateRequest,
};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError, PluginInfo, ResourcePlugin};

use consumer::Consumer;
use kv::KvBucket;
use lifecycle::Managed;
use object::ObjectBucket;
use stream::Stream;
use target::Connections;

/// The plugin: connections are made on first use and kept per target config.
#[derive(Debug, Default)]
pub struct JetstreamPlugin {
    connections: Connections,
}

/// Which type a request is about.
#[derive(Clone, Copy)]
enum Kind {
    Stream,
    Consumer,
    Kv,
    Entry,
    Object,
}

fn kind(resource_type: &str) -> Result<Kind, PluginError> {
    match resource_type {
        stream::TYPE => Ok(Kind::Stream),
        consumer::TYPE => Ok(Kind::Consumer),
        kv::TYPE => Ok(Kind::Kv),
        kv_entry::TYPE => Ok(Kind::Entry),
        object::TYPE => Ok(Kind::Object),
        other => Err(PluginError::invalid(format!(
            "unknown resource type `{other}`; this plugin manages Jetstream::Stream, \
             Jetstream::Consumer, Jetstream::KvBucket, Jetstream::KvEntry and Jetstream::ObjectBucket"
        ))),
    }
}

impl JetstreamPlugin {
    async fn connect(
        &self,
        resource_type: &str,
        target: &orrery_plugin_sdk::schema::Target,
    ) -> Result<(Kind, Context), PluginError> {
        let kind = kind(resource_type)?;
        Ok((kind, self.connections.get(target).await?))
    }
}

/// Calls `lifecycle::$f::<T>(args)` for the type `kind` stands for (or
/// `kv_entry::$f(args)`: entries are not configs).
macro_rules! each {
    ($kind:expr, $f:ident($($arg:expr),*)) => {
        match $kind {
            Kind::Stream => lifecycle::$f::<Stream>($($arg),*).await,
            Kind::Consumer => lifecycle::$f::<Consumer>($($arg),*).await,
            Kind::Kv => lifecycle::$f::<KvBucket>($($arg),*).await,
            Kind::Entry => kv_entry::$f($($arg),*).await,
            Kind::Object => lifecycle::$f::<ObjectBucket>($($arg),*).await,
        }
    };
}

impl ResourcePlugin for JetstreamPlugin {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "jetstream".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            namespace: "Jetstream".into(),
        }
    }

    fn resources(&self) -> Vec<ResourceSchema> {
        vec![
            Stream::schema(),
            Consumer::schema(),
            KvBucket::schema(),
            kv_entry::schema(),
            ObjectBucket::schema(),
        ]
    }

    fn target_config(&self) -> Vec<FieldSchema> {
        target::fields()
    }

    /// JetStream's API is served by the meta leader: keep a burst modest.
    fn rate_limit(&self) -> RateLimit {
        RateLimit {
            requests_per_second: 1000.0,
            burst: 200,
            max_in_flight: 64,
        }
    }

    async fn create(&self, request: CreateRequest) -> OpResult {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        each!(kind, create(&js, &request.properties))
    }

    async fn read(&self, request: ReadRequest) -> OpResult {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        each!(kind, read(&js, &request.native_id))
    }

    async fn update(&self, request: UpdateRequest) -> OpResult {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        each!(kind, update(&js, &request.native_id, &request.properties))
    }

    async fn delete(&self, request: DeleteRequest) -> OpResult {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        each!(kind, delete(&js, &request.native_id))
    }

    async fn status(&self, request: StatusRequest) -> OpResult {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        let what = format!("{} `{}`", request.resource_type, request.native_id);
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return Err(PluginError::invalid(format!(
                "{what}: only creates and updates are asynchronous, not {}",
                request.operation
            )));
        }
        let polls = settle::next_poll(&request, &what)?;
        each!(kind, status(&js, &request.native_id, polls))
    }

    async fn list(&self, request: ListRequest) -> Result<ListPage, PluginError> {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        let streams = match (kind, &request.parent) {
            // Discovery asks per stream; an older host asks for all.
            (Kind::Consumer, Some(stream)) => vec![stream.native_id.clone()],
            (Kind::Entry, Some(bucket)) => vec![format!("KV_{}", bucket.native_id)],
            _ => api::names(&js, &request.resource_type, "STREAM.NAMES", "streams").await?,
        };
        let ids = match kind {
            Kind::Stream => lifecycle::stream_ids::<Stream>(&streams),
            Kind::Consumer => consumer::ids(&js, &streams).await?,
            Kind::Kv => lifecycle::stream_ids::<KvBucket>(&streams),
            Kind::Entry => kv_entry::ids(&js, &lifecycle::stream_ids::<KvBucket>(&streams)).await?,
            Kind::Object => lifecycle::stream_ids::<ObjectBucket>(&streams),
        };
        let token = request.page_token.as_deref();
        each!(kind, list(&js, ids, request.page_size, token))
    }
}
