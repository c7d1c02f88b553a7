//! `Jetstream::Stream`: a stream, as JetStream's stream config says it.

use std::collections::BTreeMap;

use orrery_plugin_sdk::schema::ResourceSchema;
use orrery_plugin_sdk::{field, resource};
use serde::{Deserialize, Serialize};

use crate::mapping::{renamed, seconds, Rename};
use crate::streamlike::StreamBacked;

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

impl StreamBacked for Stream {
    const TYPE: &'static str = TYPE;
    const PREFIX: &'static str = "";
    const ID: &'static str = "name";
    const RENAMES: &'static [Rename] = &[
        renamed("replicas", "num_replicas"),
        seconds("max_age", "max_age"),
        seconds("duplicate_window", "duplicate_window"),
    ];

    fn schema() -> ResourceSchema {
        let int = |name: &str, what: &str| field::integer(name).provider_default().describe(what);
        let text = |name: &str, what: &str| field::string(name).provider_default().describe(what);
        resource(TYPE)
            .describe("A JetStream stream")
            .identifier(["name"])
            .field(
                field::string("name")
                    .required()
                    .create_only()
                    .describe("Stream name"),
            )
            .field(text("description", "What it is for"))
            .field(
                field::list("subjects")
                    .provider_default()
                    .describe("Subjects it stores"),
            )
            .field(text("storage", "`file` or `memory`").create_only())
            .field(text("retention", "`limits`, `interest` or `workqueue`").create_only())
            .field(int(
                "replicas",
                "Copies kept (1-5); a change is asynchronous",
            ))
            .field(int("max_msgs", "Most messages kept, -1 for no limit"))
            .field(int("max_bytes", "Most bytes kept, -1 for no limit"))
            .field(int("max_age", "Seconds a message is kept, 0 for ever"))
            .field(int("max_msg_size", "Largest message, -1 for no limit"))
            .field(int(
                "max_msgs_per_subject",
                "Most messages per subject, -1 for no limit",
            ))
            .field(int("max_consumers", "Most consumers, -1 for no limit").create_only())
            .field(text(
                "discard",
                "`old` or `new`: what goes when a limit is hit",
            ))
            .field(int(
                "duplicate_window",
                "Seconds publishes are deduplicated for",
            ))
            .field(
                field::map("placement")
                    .provider_default()
                    .describe("{cluster, tags}; a change moves the stream"),
            )
            .field(
                field::map("mirror")
                    .provider_default()
                    .create_only()
                    .describe("{name, filter_subject} of the stream mirrored"),
            )
            .field(
                field::list("sources")
                    .provider_default()
                    .describe("[{name, filter_subject}] of streams sourced"),
            )
            .field(
                field::map("metadata")
                    .provider_default()
                    .describe("String labels"),
            )
            .build()
    }

    fn id(&self) -> &str {
        &self.name
    }
}
