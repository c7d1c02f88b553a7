//! The one lifecycle every type follows, over the JetStream API: create
//! (after checking it is not there: JetStream creates idempotently), read,
//! update by patching the server's own config (fields left out keep their
//! value), status of replica moves, delete, and list pages.
//!
//! Streams, KV buckets and object buckets are all streams (a bucket's is
//! `KV_<bucket>` or `OBJ_<bucket>`): the trait's defaults speak the stream
//! API. Consumers override the subjects, the body and the identity.

use async_nats::jetstream::Context;
use orrery_plugin_sdk::schema::ErrorCode::{AlreadyExists, NotFound};
use orrery_plugin_sdk::schema::{ListedResource, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{
    check_create_only, deleted, done, paginate, to_properties, ListPage, OpResult, PluginError,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::api::{call, empty};
use crate::mapping::{desired, from_json, object, to_json, Rename};
use crate::settle::{pending, settled};

/// What the API calls are for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Info,
    Create,
    Update,
    Delete,
}

/// A resource type managed through the JetStream API.
pub trait Managed: Serialize + DeserializeOwned {
    /// The Orrery type name.
    const TYPE: &'static str;
    /// A stream's name prefix (`""` for a plain stream).
    const PREFIX: &'static str = "";
    /// The identifier property of a stream-backed type: the native id.
    const ID: &'static str = "name";
    /// Properties whose JetStream key or unit differs.
    const RENAMES: &'static [Rename];

    /// Its schema.
    fn schema() -> ResourceSchema;

    /// The native id of a desired state.
    fn native_id(&self) -> String;

    /// Settings the type always has, under the author's, on create.
    fn fixed(_id: &str) -> Map<String, Value> {
        Map::new()
    }

    /// The `$JS.API.` subject of `verb` on `id`.
    fn subject(verb: Verb, id: &str) -> Result<String, PluginError> {
        let verb = match verb {
            Verb::Info => "INFO",
            Verb::Create => "CREATE",
            Verb::Update => "UPDATE",
            Verb::Delete => "DELETE",
        };
        Ok(format!(
            "STREAM.{verb}.{}{}",
            Self::PREFIX,
            valid_name(Self::TYPE, id, id)?
        ))
    }

    /// The request body carrying `config` for `verb` (create or update).
    fn body(_verb: Verb, id: &str, mut config: Map<String, Value>) -> Result<Value, PluginError> {
        config.remove(Self::ID);
        config.insert("name".into(), format!("{}{id}", Self::PREFIX).into());
        Ok(Value::Object(config))
    }

    /// Whether a listed resource is one of this type (consumers: durable).
    fn listed(_info: &Value) -> bool {
        true
    }

    /// The server's config with the identity properties `id` holds.
    fn identify(id: &str, mut config: Value) -> Result<Value, PluginError> {
        config[Self::ID] = id.into();
        Ok(config)
    }
}

/// `name` when JetStream accepts it as a stream or consumer name.
pub fn valid_name<'a>(ty: &str, id: &str, name: &'a str) -> Result<&'a str, PluginError> {
    if name.is_empty() || name.contains(['.', '*', '>', '/', '\\', ' ', '\t']) {
        return Err(PluginError::invalid(format!(
            "{ty} `{id}`: `{name}` is not a valid name (no spaces, `.`, `*`, `>` or slashes)"
        )));
    }
    Ok(name)
}

fn what<T: Managed>(id: &str) -> String {
    format!("{} `{id}`", T::TYPE)
}

async fn info<T: Managed>(js: &Context, id: &str) -> Result<Value, PluginError> {
    call(js, &what::<T>(id), &T::subject(Verb::Info, id)?, empty()).await
}

fn properties<T: Managed>(id: &str, info: &Value) -> Result<PropertyMap, PluginError> {
    from_json::<T>(
        &T::schema(),
        &T::identify(id, info["config"].clone())?,
        T::RENAMES,
    )
}

/// Sends `config`; done when the replicas are where it says, else (and
/// always after a move on a cluster) `InProgress`.
async fn send<T: Managed>(
    js: &Context,
    verb: Verb,
    id: &str,
    config: Map<String, Value>,
    moving: bool,
) -> OpResult {
    let body = T::body(verb, id, config)?;
    let info = call(js, &what::<T>(id), &T::subject(verb, id)?, body).await?;
    if (moving && info["cluster"]["name"].is_string()) || !settled(&info) {
        return pending(id, 0);
    }
    done(id, properties::<T>(id, &info)?)
}

pub async fn create<T: Managed>(js: &Context, properties: &PropertyMap) -> OpResult {
    let desired: T = desired(properties)?;
    let id = desired.native_id();
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
    let mut config = T::fixed(&id);
    config.extend(to_json(&desired, T::RENAMES)?);
    let replicated = config
        .get("num_replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        > 1;
    send::<T>(js, Verb::Create, &id, config, replicated).await
}

pub async fn read<T: Managed>(js: &Context, id: &str) -> OpResult {
    done(id, properties::<T>(id, &info::<T>(js, id).await?)?)
}

pub async fn update<T: Managed>(js: &Context, id: &str, props: &PropertyMap) -> OpResult {
    let desired: T = desired(props)?;
    let current = info::<T>(js, id).await?;
    let (schema, normalised) = (T::schema(), to_properties(&desired)?);
    check_create_only(
        &schema,
        &what::<T>(id),
        &normalised,
        &properties::<T>(id, &current)?,
        "JetStream refuses it",
    )?;
    let patch = to_json(&desired, T::RENAMES)?;
    let mut config = object(current["config"].clone());
    let moving = ["num_replicas", "placement"]
        .iter()
        .any(|k| patch.get(*k).is_some_and(|v| config.get(*k) != Some(v)));
    let window = config
        .get("duplicate_window")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let age = patch.get("max_age").and_then(Value::as_i64).unwrap_or(0);
    if !patch.contains_key("duplicate_window") && age > 0 && window > age {
        // A shorter max age would otherwise be refused for the old window.
        config.insert("duplicate_window".into(), age.into());
    }
    config.extend(patch);
    send::<T>(js, Verb::Update, id, config, moving).await
}

/// Polled after `InProgress`: done once the replicas are current.
pub async fn status<T: Managed>(js: &Context, id: &str, polls: i64) -> OpResult {
    let info = info::<T>(js, id).await?;
    if settled(&info) {
        return done(id, properties::<T>(id, &info)?);
    }
    pending(id, polls)
}

pub async fn delete<T: Managed>(js: &Context, id: &str) -> OpResult {
    call(js, &what::<T>(id), &T::subject(Verb::Delete, id)?, empty()).await?;
    deleted(id)
}

/// The page of `ids` the request asks for, each read.
pub async fn list<T: Managed>(
    js: &Context,
    ids: Vec<String>,
    size: u32,
    token: Option<&str>,
) -> Result<ListPage, PluginError> {
    let (page, next_page_token) = paginate(ids, |id| id.as_str(), size, token);
    let mut resources = Vec::with_capacity(page.len());
    for id in page {
        match info::<T>(js, &id).await {
            Ok(info) if !T::listed(&info) => {}
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

/// The native ids of `T`'s streams among all `streams`: a plain stream
/// list leaves out the buckets'.
pub fn stream_ids<T: Managed>(streams: &[String]) -> Vec<String> {
    streams
        .iter()
        .filter_map(|n| match T::PREFIX {
            "" => (!n.starts_with("KV_") && !n.starts_with("OBJ_")).then(|| n.clone()),
            prefix => n.strip_prefix(prefix).map(str::to_owned),
        })
        .collect()
}
