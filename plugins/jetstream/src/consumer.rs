//! `Jetstream::Consumer`: a durable (pull) consumer of a stream. Its
//! identity is the pair (stream, name); the native id is `<stream>/<name>`
//! (neither name may hold a `/`), e.g. `ORDERS/shipping`.

use std::collections::BTreeMap;

use async_nats::jetstream::Context;
use orrery_plugin_sdk::schema::{ErrorCode, ResourceSchema};
use orrery_plugin_sdk::{resource, PluginError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::api::names;
use crate::lifecycle::{valid_name, Managed, Verb};
use crate::mapping::fields::{self, id, int, map, text};
use crate::mapping::{renamed, seconds, Rename};

/// The type name.
pub const TYPE: &str = "Jetstream::Consumer";

/// A consumer's properties; unset ones keep the server's value.
#[derive(Debug, Serialize, Deserialize)]
pub struct Consumer {
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
    resource(TYPE)
        .describe("A durable pull consumer of a JetStream stream")
        .identifier(["stream", "name"])
        .parent(crate::stream::TYPE, [("stream", "name")])
        .field(id("stream", "The stream it reads"))
        .field(id("name", "Durable name"))
        .field(text("description", "What it is for"))
        .field(text("ack_policy", "explicit, none or all").create_only())
        .field(text("deliver_policy", "all, last, new, by_start_sequence...").create_only())
        .field(int("opt_start_seq", "First sequence (by_start_sequence)").create_only())
        .field(text("replay_policy", "instant or original").create_only())
        .field(fields::list("filter_subjects", "Subjects it delivers"))
        .field(int("ack_wait", "Seconds before redelivery"))
        .field(int(
            "max_deliver",
            "Most deliveries of a message, -1: no limit",
        ))
        .field(int("max_ack_pending", "Most unacknowledged, -1: no limit"))
        .field(int("max_waiting", "Most waiting pull requests").create_only())
        .field(int(
            "replicas",
            "Copies, 0: the stream's; changes are asynchronous",
        ))
        .field(map("metadata", "String labels"))
        .build()
}

/// `(stream, name)` from a native id.
fn parse(id: &str) -> Result<(&str, &str), PluginError> {
    match id.split_once('/') {
        Some((stream, name)) => Ok((valid_name(TYPE, id, stream)?, valid_name(TYPE, id, name)?)),
        None => Err(PluginError::invalid(format!(
            "{TYPE} `{id}`: the id is <stream>/<name>"
        ))),
    }
}

impl Managed for Consumer {
    const TYPE: &'static str = TYPE;
    const RENAMES: &'static [Rename] = &[
        renamed("replicas", "num_replicas"),
        seconds("ack_wait", "ack_wait"),
    ];

    fn schema() -> ResourceSchema {
        schema()
    }

    fn native_id(&self) -> String {
        format!("{}/{}", self.stream, self.name)
    }

    fn subject(verb: Verb, id: &str) -> Result<String, PluginError> {
        let (stream, name) = parse(id)?;
        let verb = match verb {
            Verb::Info => "INFO",
            Verb::Create | Verb::Update => "CREATE",
            Verb::Delete => "DELETE",
        };
        Ok(format!("CONSUMER.{verb}.{stream}.{name}"))
    }

    fn body(verb: Verb, id: &str, mut config: Map<String, Value>) -> Result<Value, PluginError> {
        let (stream, name) = parse(id)?;
        for key in ["stream", "filter_subject"] {
            config.remove(key);
        }
        config.insert("name".into(), name.into());
        config.insert("durable_name".into(), name.into());
        let action = if verb == Verb::Create {
            "create"
        } else {
            "update"
        };
        Ok(json!({ "stream_name": stream, "config": config, "action": action }))
    }

    /// Ephemeral consumers (a client's, e.g. a KV watcher's) are not managed.
    fn listed(info: &Value) -> bool {
        info["config"]["durable_name"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    }

    fn identify(id: &str, mut config: Value) -> Result<Value, PluginError> {
        // One filter may come back as `filter_subject`.
        if let Some(one) = config["filter_subject"].as_str().filter(|s| !s.is_empty()) {
            config["filter_subjects"] = json!([one]);
        }
        let (stream, name) = parse(id)?;
        config["stream"] = stream.into();
        config["name"] = name.into();
        Ok(config)
    }
}

/// The native ids of the consumers of `streams` (a stream deleted
/// meanwhile has none).
pub async fn ids(js: &Context, streams: &[String]) -> Result<Vec<String>, PluginError> {
    let mut ids = Vec::new();
    for stream in streams {
        let subject = format!("CONSUMER.NAMES.{stream}");
        match names(js, &format!("{TYPE}s of `{stream}`"), &subject, "consumers").await {
            Ok(names) => ids.extend(names.into_iter().map(|name| format!("{stream}/{name}"))),
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(ids)
}
