//! What streams, key-value buckets and object buckets share: each is a
//! JetStream stream (a bucket's is named `KV_<bucket>` or `OBJ_<bucket>`),
//! created, read, patched, listed and deleted through the stream API.

use async_nats::jetstream::Context;
use orrery_plugin_sdk::schema::ErrorCode::{AlreadyExists, NotFound};
use orrery_plugin_sdk::schema::{ListRequest, ListedResource, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, paginate, ListPage, OpResult, PluginError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::api::{call, empty, names};
use crate::mapping::{check_create_only, desired, from_json, to_json, Rename};
use crate::settle::{pending, settled};

/// A resource type stored as one JetStream stream.
pub trait StreamBacked: Serialize + DeserializeOwned {
    /// The Orrery type name.
    const TYPE: &'static str;
    /// The stream name's prefix (`""` for a plain stream).
    const PREFIX: &'static str;
    /// The identifier property (`name` or `bucket`): the native id.
    const ID: &'static str;
    /// Properties whose JetStream key or unit differs.
    const RENAMES: &'static [Rename];

    /// Its schema.
    fn schema() -> ResourceSchema;

    /// The native id.
    fn id(&self) -> &str;

    /// Stream settings the type always has, under the author's, on create.
    fn fixed(_id: &str) -> Map<String, Value> {
        Map::new()
    }
}

fn what<T: StreamBacked>(id: &str) -> String {
    format!("{} `{id}`", T::TYPE)
}

fn stream_name<T: StreamBacked>(id: &str) -> Result<String, PluginError> {
    if id.is_empty() || id.contains(['.', '*', '>', '/', '\\', ' ', '\t']) {
        return Err(PluginError::invalid(format!(
            "{}: not a valid name (no spaces, `.`, `*`, `>` or slashes)",
            what::<T>(id)
        )));
    }
    Ok(format!("{}{id}", T::PREFIX))
}

async fn info<T: StreamBacked>(js: &Context, id: &str) -> Result<Value, PluginError> {
    let subject = format!("STREAM.INFO.{}", stream_name::<T>(id)?);
    call(js, &what::<T>(id), &subject, empty()).await
}

fn properties<T: StreamBacked>(id: &str, info: &Value) -> Result<PropertyMap, PluginError> {
    let mut config = info["config"].clone();
    config[T::ID] = id.into();
    from_json::<T>(&T::schema(), &config, T::RENAMES)
}

/// Done when the replicas are where the config says, else `InProgress`.
fn answer<T: StreamBacked>(id: &str, info: &Value, moving: bool) -> OpResult {
    if moving || !settled(info) {
        return pending(id, 0);
    }
    done(id, properties::<T>(id, info)?)
}

/// Replicas or placement asked for differ from `current`'s.
fn moves(config: &Map<String, Value>, current: &Value) -> bool {
    ["num_replicas", "placement"]
        .iter()
        .any(|k| config.get(*k).is_some_and(|v| current.get(*k) != Some(v)))
}

pub async fn create<T: StreamBacked>(js: &Context, properties: &PropertyMap) -> OpResult {
    let desired: T = desired(properties)?;
    let id = desired.id().to_owned();
    let name = stream_name::<T>(&id)?;
    let mut config = T::fixed(&id);
    config.extend(to_json(&desired, T::RENAMES)?);
    config.remove(T::ID);
    config.insert("name".into(), name.clone().into());
    let replicated = config
        .get("num_replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        > 1;
    // Creating what exists with the same config succeeds: ask first.
    match info::<T>(js, &id).await {
        Ok(_) => {
            return Err(PluginError::new(
                AlreadyExists,
                format!("{} already exists", what::<T>(&id)),
            ))
        }
        Err(e) if e.code != NotFound => return Err(e),
        Err(_) => {}
    }
    let subject = format!("STREAM.CREATE.{name}");
    let info = call(js, &what::<T>(&id), &subject, Value::Object(config)).await?;
    answer::<T>(
        &id,
        &info,
        replicated && info["cluster"]["name"].is_string(),
    )
}

pub async fn read<T: StreamBacked>(js: &Context, id: &str) -> OpResult {
    done(id, properties::<T>(id, &info::<T>(js, id).await?)?)
}

pub async fn update<T: StreamBacked>(js: &Context, id: &str, props: &PropertyMap) -> OpResult {
    let desired: T = desired(props)?;
    let current = info::<T>(js, id).await?;
    let normalised = orrery_plugin_sdk::to_properties(&desired)?;
    check_create_only(
        &T::schema(),
        &what::<T>(id),
        &normalised,
        &properties::<T>(id, &current)?,
    )?;
    let mut patch = to_json(&desired, T::RENAMES)?;
    patch.remove(T::ID);
    let moving = moves(&patch, &current["config"]);
    let Value::Object(mut config) = current["config"].clone() else {
        return Err(PluginError::invalid(format!(
            "{}: the server sent no config",
            what::<T>(id)
        )));
    };
    if !patch.contains_key("duplicate_window") {
        // A shorter max age would otherwise be refused for the old window.
        let age = patch.get("max_age").and_then(Value::as_i64).unwrap_or(0);
        let window = config
            .get("duplicate_window")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if age > 0 && window > age {
            config.insert("duplicate_window".into(), age.into());
        }
    }
    config.extend(patch);
    let subject = format!("STREAM.UPDATE.{}", stream_name::<T>(id)?);
    let info = call(js, &what::<T>(id), &subject, Value::Object(config)).await?;
    answer::<T>(id, &info, moving && info["cluster"]["name"].is_string())
}

/// Polled after `InProgress`: done once the replicas are current.
pub async fn status<T: StreamBacked>(js: &Context, id: &str, polls: i64) -> OpResult {
    let info = info::<T>(js, id).await?;
    if settled(&info) {
        return done(id, properties::<T>(id, &info)?);
    }
    pending(id, polls)
}

pub async fn delete<T: StreamBacked>(js: &Context, id: &str) -> OpResult {
    let subject = format!("STREAM.DELETE.{}", stream_name::<T>(id)?);
    call(js, &what::<T>(id), &subject, empty()).await?;
    deleted(id)
}

pub async fn list<T: StreamBacked>(
    js: &Context,
    request: &ListRequest,
) -> Result<ListPage, PluginError> {
    let all = names(js, T::TYPE, "STREAM.NAMES", "streams").await?;
    // A plain stream list leaves out the buckets' streams.
    let ids: Vec<String> = all
        .iter()
        .filter_map(|n| match T::PREFIX {
            "" => (!n.starts_with("KV_") && !n.starts_with("OBJ_")).then(|| n.clone()),
            prefix => n.strip_prefix(prefix).map(str::to_owned),
        })
        .collect();
    let token = request.page_token.as_deref();
    let (page, next_page_token) = paginate(ids, |id| id.as_str(), request.page_size, token);
    let mut resources = Vec::with_capacity(page.len());
    for id in page {
        match info::<T>(js, &id).await {
            Ok(info) => resources.push(ListedResource {
                properties: properties::<T>(&id, &info)?,
                native_id: id,
            }),
            // Deleted between the names and its info.
            Err(e) if e.code == NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(ListPage {
        resources,
        next_page_token,
    })
}
