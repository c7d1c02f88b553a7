//! # orrery-plugin-jetstream
//!
//! Manages NATS JetStream: `Jetstream::Stream`, `Jetstream::Consumer`,
//! `Jetstream::KvBucket` and `Jetstream::ObjectBucket`, on the servers a
//! target's config names (never the NATS that carries Orrery's own bus).
//!
//! Streams and buckets are all streams underneath ([`streamlike`]); every
//! call goes through the raw JetStream API ([`api`]). A replica change or a
//! placement move answers `InProgress`, and `status` reports success once
//! the replicas are current ([`settle`]).

pub mod api;
pub mod consumer;
pub mod kv;
pub mod mapping;
pub mod object;
pub mod settle;
pub mod stream;
pub mod streamlike;
pub mod target;

use async_nats::jetstream::Context;
use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, FieldSchema, ListRequest, Operation, RateLimit, ReadRequest,
    ResourceSchema, StatusRequest, UpdateRequest,
};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError, PluginInfo, ResourcePlugin};

use kv::KvBucket;
use object::ObjectBucket;
use stream::Stream;
use streamlike::StreamBacked;
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
    Object,
}

fn kind(resource_type: &str) -> Result<Kind, PluginError> {
    match resource_type {
        stream::TYPE => Ok(Kind::Stream),
        consumer::TYPE => Ok(Kind::Consumer),
        kv::TYPE => Ok(Kind::Kv),
        object::TYPE => Ok(Kind::Object),
        other => Err(PluginError::invalid(format!(
            "unknown resource type `{other}`; this plugin manages Jetstream::Stream, \
             Jetstream::Consumer, Jetstream::KvBucket and Jetstream::ObjectBucket"
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
            consumer::schema(),
            KvBucket::schema(),
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
        let properties = &request.properties;
        match kind {
            Kind::Stream => streamlike::create::<Stream>(&js, properties).await,
            Kind::Consumer => consumer::create(&js, properties).await,
            Kind::Kv => streamlike::create::<KvBucket>(&js, properties).await,
            Kind::Object => streamlike::create::<ObjectBucket>(&js, properties).await,
        }
    }

    async fn read(&self, request: ReadRequest) -> OpResult {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        let id = &request.native_id;
        match kind {
            Kind::Stream => streamlike::read::<Stream>(&js, id).await,
            Kind::Consumer => consumer::read(&js, id).await,
            Kind::Kv => streamlike::read::<KvBucket>(&js, id).await,
            Kind::Object => streamlike::read::<ObjectBucket>(&js, id).await,
        }
    }

    async fn update(&self, request: UpdateRequest) -> OpResult {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        let (id, properties) = (&request.native_id, &request.properties);
        match kind {
            Kind::Stream => streamlike::update::<Stream>(&js, id, properties).await,
            Kind::Consumer => consumer::update(&js, id, properties).await,
            Kind::Kv => streamlike::update::<KvBucket>(&js, id, properties).await,
            Kind::Object => streamlike::update::<ObjectBucket>(&js, id, properties).await,
        }
    }

    async fn delete(&self, request: DeleteRequest) -> OpResult {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        let id = &request.native_id;
        match kind {
            Kind::Stream => streamlike::delete::<Stream>(&js, id).await,
            Kind::Consumer => consumer::delete(&js, id).await,
            Kind::Kv => streamlike::delete::<KvBucket>(&js, id).await,
            Kind::Object => streamlike::delete::<ObjectBucket>(&js, id).await,
        }
    }

    async fn status(&self, request: StatusRequest) -> OpResult {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        let id = &request.native_id;
        if !matches!(request.operation, Operation::Create | Operation::Update) {
            return Err(PluginError::invalid(format!(
                "{} `{id}`: only creates and updates are asynchronous, not {}",
                request.resource_type, request.operation
            )));
        }
        let polls = settle::next_poll(&request, &format!("{} `{id}`", request.resource_type))?;
        match kind {
            Kind::Stream => streamlike::status::<Stream>(&js, id, polls).await,
            Kind::Consumer => consumer::status(&js, id, polls).await,
            Kind::Kv => streamlike::status::<KvBucket>(&js, id, polls).await,
            Kind::Object => streamlike::status::<ObjectBucket>(&js, id, polls).await,
        }
    }

    async fn list(&self, request: ListRequest) -> Result<ListPage, PluginError> {
        let (kind, js) = self
            .connect(&request.resource_type, &request.target)
            .await?;
        match kind {
            Kind::Stream => streamlike::list::<Stream>(&js, &request).await,
            Kind::Consumer => {
                // Discovery asks per stream; an older host asks for all.
                let streams = match &request.parent {
                    Some(stream) => vec![stream.native_id.clone()],
                    None => api::names(&js, consumer::TYPE, "STREAM.NAMES", "streams").await?,
                };
                consumer::list(&js, &streams, &request).await
            }
            Kind::Kv => streamlike::list::<KvBucket>(&js, &request).await,
            Kind::Object => streamlike::list::<ObjectBucket>(&js, &request).await,
        }
    }
}
