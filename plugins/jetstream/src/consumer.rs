//! `Jetstream::Consumer`: a durable (pull) consumer of a stream. Its
//! identity is the pair (stream, name); the native id is `<stream>/<name>`
//! (neither name may hold a `/`), e.g. `ORDERS/shipping`.

use std::collections::BTreeMap;

use async_nats::jetstream::Context;
use orrery_plugin_sdk::schema::{
    ErrorCode, ListRequest, ListedResource, PropertyMap, ResourceSchema,
};
use orrery_plugin_sdk::{
    deleted, done, field, paginate, resource, to_properties, ListPage, OpResult, PluginError,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::api::{call, empty, names};
use crate::mapping::{check_create_only, desired, from_json, renamed, seconds, to_json, Rename};
use crate::settle::{pending, settled};

/// The type name.
pub const TYPE: &str = "Jetstream::Consumer";

const RENAMES: &[Rename] = &[
    renamed("replicas", "num_replicas"),
    seconds("ack_wait", "ack_wait"),
];

/// A consumer's properties; unset ones keep the server's value.
#[derive(Debug, Serialize, Deserialize)]
struct Consumer {
    stream: String,
    name: String,
    description: Option<String>,
    ack_policy: Option<String>,
    deliver_policy: Option<String>,
    opt_start_seq: Option<i64>,
    replay_policy: Option<String>,
    filter_subjects: Option<Vec<String>>,
    ack_wait: Option<i64>,
    max_deliver: Option<i64>,
    max_ack_pending: Option<i64>,
    max_waiting: Option<i64>,
    replicas: Option<i64>,
    metadata: Option<BTreeMap<String, String>>,
}

/// Its schema.
pub fn schema() -> ResourceSchema {
    let int = |name: &str, what: &str| field::integer(name).provider_default().describe(what);
    let text = |name: &str, what: &str| field::string(name).provider_default().describe(what);
    resource(TYPE)
        .describe("A durable pull consumer of a JetStream stream")
        .identifier(["stream", "name"])
        .parent(crate::stream::TYPE, [("stream", "name")])
        .field(
            field::string("stream")
                .required()
                .create_only()
                .describe("The stream it reads"),
        )
        .field(
            field::string("name")
                .required()
                .create_only()
                .describe("Durable name"),
        )
        .field(text("description", "What it is for"))
        .field(text("ack_policy", "`explicit`, `none` or `all`").create_only())
        .field(
            text(
                "deliver_policy",
                "`all`, `last`, `new`, `by_start_sequence`, `last_per_subject`",
            )
            .create_only(),
        )
        .field(int("opt_start_seq", "First sequence, with `by_start_sequence`").create_only())
        .field(text("replay_policy", "`instant` or `original`").create_only())
        .field(
            field::list("filter_subjects")
                .provider_default()
                .describe("Subjects it delivers"),
        )
        .field(int(
            "ack_wait",
            "Seconds before an unacknowledged message is redelivered",
        ))
        .field(int(
            "max_deliver",
            "Most deliveries of one message, -1 for no limit",
        ))
        .field(int(
            "max_ack_pending",
            "Most unacknowledged messages, -1 for no limit",
        ))
        .field(int("max_waiting", "Most waiting pull requests").create_only())
        .field(int(
            "replicas",
            "Copies kept, 0 for the stream's; a change is asynchronous",
        ))
        .field(
            field::map("metadata")
                .provider_default()
                .describe("String labels"),
        )
        .build()
}

/// `(stream, name)` from a native id.
fn parse(id: &str) -> Result<(&str, &str), PluginError> {
    let ok = |s: &str| !s.is_empty() && !s.contains(['.', '*', '>', '/', '\\', ' ']);
    match id.split_once('/') {
        Some((stream, name)) if ok(stream) && ok(name) => Ok((stream, name)),
        _ => Err(PluginError::invalid(format!(
            "{TYPE} `{id}`: the id is <stream>/<name>"
        ))),
    }
}

fn what(id: &str) -> String {
    format!("{TYPE} `{id}`")
}

async fn info(js: &Context, id: &str) -> Result<Value, PluginError> {
    let (stream, name) = parse(id)?;
    call(
        js,
        &what(id),
        &format!("CONSUMER.INFO.{stream}.{name}"),
        empty(),
    )
    .await
}

fn properties(id: &str, info: &Value) -> Result<PropertyMap, PluginError> {
    let mut config = info["config"].clone();
    // One filter comes back as `filter_subject`.
    if let Some(one) = config["filter_subject"].as_str().filter(|s| !s.is_empty()) {
        config["filter_subjects"] = json!([one]);
    }
    let (stream, name) = parse(id)?;
    config["stream"] = stream.into();
    config["name"] = name.into();
    from_json::<Consumer>(&schema(), &config, RENAMES)
}

/// Sends a consumer config with `action` (`create` or `update`).
async fn put(
    js: &Context,
    id: &str,
    mut config: serde_json::Map<String, Value>,
    action: &str,
    moving: bool,
) -> OpResult {
    let (stream, name) = parse(id)?;
    for key in ["stream", "filter_subject"] {
        config.remove(key);
    }
    config.insert("name".into(), name.into());
    config.insert("durable_name".into(), name.into());
    let body = json!({ "stream_name": stream, "config": config, "action": action });
    let info = call(
        js,
        &what(id),
        &format!("CONSUMER.CREATE.{stream}.{name}"),
        body,
    )
    .await?;
    if (moving && info["cluster"]["name"].is_string()) || !settled(&info) {
        return pending(id, 0);
    }
    done(id, properties(id, &info)?)
}

pub async fn create(js: &Context, properties: &PropertyMap) -> OpResult {
    let desired: Consumer = desired(properties)?;
    let id = format!("{}/{}", desired.stream, desired.name);
    let config = to_json(&desired, RENAMES)?;
    if let Err(e) = info(js, &id).await {
        if e.code != ErrorCode::NotFound {
            return Err(e);
        }
    } else {
        return Err(PluginError::new(
            ErrorCode::AlreadyExists,
            format!("{} already exists", what(&id)),
        ));
    }
    let replicated = config
        .get("num_replicas")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        > 1;
    put(js, &id, config, "create", replicated).await
}

pub async fn read(js: &Context, id: &str) -> OpResult {
    done(id, properties(id, &info(js, id).await?)?)
}

pub async fn update(js: &Context, id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Consumer = desired(properties)?;
    let current = info(js, id).await?;
    let normalised = to_properties(&desired)?;
    check_create_only(
        &schema(),
        &what(id),
        &normalised,
        &self::properties(id, &current)?,
    )?;
    let patch = to_json(&desired, RENAMES)?;
    let moving = patch
        .get("num_replicas")
        .is_some_and(|r| current["config"].get("num_replicas") != Some(r));
    let mut config = crate::mapping::object(current["config"].clone());
    config.extend(patch);
    put(js, id, config, "update", moving).await
}

/// Polled after `InProgress`: done once the replicas are current.
pub async fn status(js: &Context, id: &str, polls: i64) -> OpResult {
    let info = info(js, id).await?;
    if settled(&info) {
        return done(id, properties(id, &info)?);
    }
    pending(id, polls)
}

pub async fn delete(js: &Context, id: &str) -> OpResult {
    let (stream, name) = parse(id)?;
    call(
        js,
        &what(id),
        &format!("CONSUMER.DELETE.{stream}.{name}"),
        empty(),
    )
    .await?;
    deleted(id)
}

/// One page of the consumers of `streams`.
pub async fn list(
    js: &Context,
    streams: &[String],
    request: &ListRequest,
) -> Result<ListPage, PluginError> {
    let mut ids = Vec::new();
    for stream in streams {
        let subject = format!("CONSUMER.NAMES.{stream}");
        let names = match names(js, &format!("{TYPE}s of `{stream}`"), &subject, "consumers").await
        {
            Err(e) if e.code == ErrorCode::NotFound => continue,
            other => other?,
        };
        ids.extend(names.into_iter().map(|name| format!("{stream}/{name}")));
    }
    let (page, next_page_token) = paginate(
        ids,
        |id| id.as_str(),
        request.page_size,
        request.page_token.as_deref(),
    );
    let mut resources = Vec::with_capacity(page.len());
    for id in page {
        match info(js, &id).await {
            Ok(info) => resources.push(ListedResource {
                properties: properties(&id, &info)?,
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
