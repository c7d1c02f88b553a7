//! `Jetstream::KvEntry`: one key of a key-value bucket and its (UTF-8)
//! value. Identity (bucket, key); the native id is `<bucket>/<key>`
//! (bucket names never hold a `/`, keys may), e.g. `settings/ui/colour`.

use async_nats::jetstream::kv::{CreateErrorKind, Operation, Store};
use async_nats::jetstream::Context;
use futures::TryStreamExt;
use orrery_plugin_sdk::schema::{ErrorCode, ListedResource, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{
    deleted, done, field, paginate, resource, to_properties, ListPage, OpResult, PluginError,
};
use serde::{Deserialize, Serialize};

use crate::api::{call, empty};
use crate::lifecycle::valid_name;
use crate::mapping::{desired, fields::id};

/// The type name.
pub const TYPE: &str = "Jetstream::KvEntry";

#[derive(Debug, Serialize, Deserialize)]
struct KvEntry {
    bucket: String,
    key: String,
    value: String,
}

/// Its schema.
pub fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("A key of a JetStream key-value bucket and its value")
        .identifier(["bucket", "key"])
        .parent(crate::kv::TYPE, [("bucket", "bucket")])
        .field(id("bucket", "The bucket"))
        .field(id("key", "The key, e.g. ui.colour"))
        .field(
            field::string("value")
                .required()
                .describe("The value (UTF-8)"),
        )
        .build()
}

fn what(id: &str) -> String {
    format!("{TYPE} `{id}`")
}

/// The bucket (after checking it exists, for a proper error) and the key.
async fn open<'a>(js: &Context, id: &'a str) -> Result<(Store, &'a str), PluginError> {
    let invalid = || PluginError::invalid(format!("{}: the id is <bucket>/<key>", what(id)));
    let (bucket, key) = id.split_once('/').ok_or_else(invalid)?;
    valid_name(TYPE, id, bucket)?;
    if key.is_empty() || key.starts_with('.') || key.ends_with('.') || key.contains([' ', '*', '>'])
    {
        return Err(invalid());
    }
    call(js, &what(id), &format!("STREAM.INFO.KV_{bucket}"), empty()).await?;
    let store = js.get_key_value(bucket).await.map_err(failed(id))?;
    Ok((store, key))
}

fn failed<E: std::fmt::Display>(id: &str) -> impl Fn(E) -> PluginError + '_ {
    move |e| {
        PluginError::new(
            ErrorCode::GeneralServiceException,
            format!("{}: {e}", what(id)),
        )
    }
}

/// The entry's properties, `NotFound` when it has none (or a tombstone).
async fn current(store: &Store, id: &str, key: &str) -> Result<PropertyMap, PluginError> {
    match store.entry(key).await.map_err(failed(id))? {
        Some(entry) if entry.operation == Operation::Put => to_properties(&KvEntry {
            bucket: store.name.clone(),
            key: key.into(),
            value: String::from_utf8_lossy(&entry.value).into_owned(),
        }),
        _ => Err(PluginError::not_found(format!("{}: no such key", what(id)))),
    }
}

pub async fn create(js: &Context, properties: &PropertyMap) -> OpResult {
    let entry: KvEntry = desired(properties)?;
    let id = format!("{}/{}", entry.bucket, entry.key);
    let (store, key) = open(js, &id).await?;
    match store.create(key, entry.value.into()).await {
        Err(e) if e.kind() == CreateErrorKind::AlreadyExists => Err(PluginError::new(
            ErrorCode::AlreadyExists,
            format!("{} already exists", what(&id)),
        )),
        other => other.map_err(failed(&id)).map(drop),
    }?;
    done(&id, current(&store, &id, key).await?)
}

pub async fn read(js: &Context, id: &str) -> OpResult {
    let (store, key) = open(js, id).await?;
    done(id, current(&store, id, key).await?)
}

pub async fn update(js: &Context, id: &str, properties: &PropertyMap) -> OpResult {
    let entry: KvEntry = desired(properties)?;
    if format!("{}/{}", entry.bucket, entry.key) != id {
        let message = format!(
            "{}: `bucket` and `key` cannot change; replace the entry",
            what(id)
        );
        return Err(PluginError::new(ErrorCode::NotUpdatable, message));
    }
    let (store, key) = open(js, id).await?;
    current(&store, id, key).await?;
    store
        .put(key, entry.value.into())
        .await
        .map_err(failed(id))?;
    done(id, current(&store, id, key).await?)
}

pub async fn delete(js: &Context, id: &str) -> OpResult {
    let (store, key) = open(js, id).await?;
    current(&store, id, key).await?;
    store.delete(key).await.map_err(failed(id))?;
    deleted(id)
}

/// Never asynchronous: an entry is written at once.
pub async fn status(_js: &Context, id: &str, _polls: i64) -> OpResult {
    Err(PluginError::invalid(format!(
        "{}: entries finish at once; nothing to poll",
        what(id)
    )))
}

/// The native ids of the entries of `buckets` (one deleted meanwhile has none).
pub async fn ids(js: &Context, buckets: &[String]) -> Result<Vec<String>, PluginError> {
    let mut ids = Vec::new();
    for bucket in buckets {
        let Ok(store) = js.get_key_value(bucket).await else {
            continue;
        };
        let keys = store.keys().await.map_err(failed(bucket))?;
        let keys: Vec<String> = keys.try_collect().await.map_err(failed(bucket))?;
        ids.extend(keys.into_iter().map(|k| format!("{bucket}/{k}")));
    }
    Ok(ids)
}

/// The page of `ids` asked for, each read.
pub async fn list(
    js: &Context,
    ids: Vec<String>,
    size: u32,
    token: Option<&str>,
) -> Result<ListPage, PluginError> {
    let (page, next_page_token) = paginate(ids, |id| id.as_str(), size, token);
    let mut resources = Vec::with_capacity(page.len());
    for id in page {
        match read(js, &id).await {
            Ok(event) => resources.push(ListedResource {
                properties: event.properties.unwrap_or_default(),
                native_id: id,
            }),
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(ListPage {
        resources,
        next_page_token,
    })
}
