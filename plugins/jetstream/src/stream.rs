//! `Jetstream::Stream`: a stream, as JetStream's stream config says it.

use std::collections::BTreeMap;

use orrery_plugin_sdk::resource;
use orrery_plugin_sdk::schema::ResourceSchema;
use serde::{Deserialize, Serialize};

use crate::lifecycle::Managed;
use crate::mapping::fields::{id, int, list, map, text};
use crate::mapping::{renamed, seconds, Rename};

/// The type name.
pub const TYPE: &str = "Jetstream::Stream";

/// A stream's properties; unset ones keep the server's value.
#[derive(Debug, Serialize, Deserialize)]
pub struct Stream {
    name: String,
    description: Option<String>,
    subjects: Option<Vec<String>>,
    storage: Option<String>,
    retention: Option<String>,
    replicas: Option<i64>,
    max_msgs: Option<i64>,
    max_bytes: Option<i64>,
    max_age: Option<i64>,
    max_msg_size: Option<i64>,
    max_msgs_per_subject: Option<i64>,
    max_consumers: Option<i64>,
    discard: Option<String>,
    duplicate_window: Option<i64>,
    placement: Option<Placement>,
    mirror: Option<Origin>,
    sources: Option<Vec<Origin>>,
    metadata: Option<BTreeMap<String, String>>,
}

/// Where a stream's replicas live.
#[derive(Debug, Serialize, Deserialize)]
pub struct Placement {
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<Vec<String>>,
}

/// A stream this one mirrors or sources from.
#[derive(Debug, Serialize, Deserialize)]
pub struct Origin {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter_subject: Option<String>,
}

impl Managed for Stream {
    const TYPE: &'static str = TYPE;
    const RENAMES: &'static [Rename] = &[
        renamed("replicas", "num_replicas"),
        seconds("max_age", "max_age"),
        seconds("duplicate_window", "duplicate_window"),
    ];

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("A JetStream stream")
            .identifier(["name"])
            .field(id("name", "Stream name"))
            .field(text("description", "What it is for"))
            .field(list("subjects", "Subjects it stores"))
            .field(text("storage", "file or memory").create_only())
            .field(text("retention", "limits, interest or workqueue").create_only())
            .field(int("replicas", "Copies (1-5); changes are asynchronous"))
            .field(int("max_msgs", "Most messages, -1: no limit"))
            .field(int("max_bytes", "Most bytes, -1: no limit"))
            .field(int("max_age", "Seconds a message is kept, 0: for ever"))
            .field(int("max_msg_size", "Largest message, -1: no limit"))
            .field(int(
                "max_msgs_per_subject",
                "Most per subject, -1: no limit",
            ))
            .field(int("max_consumers", "Most consumers, -1: no limit").create_only())
            .field(text("discard", "old or new: what goes at a limit"))
            .field(int(
                "duplicate_window",
                "Seconds publishes are deduplicated",
            ))
            .field(map(
                "placement",
                "{cluster, tags}; a change moves the stream",
            ))
            .field(map("mirror", "{name, filter_subject} mirrored").create_only())
            .field(list("sources", "[{name, filter_subject}] sourced"))
            .field(map("metadata", "String labels"))
            .build()
    }

    fn native_id(&self) -> String {
        self.name.clone()
    }
}
