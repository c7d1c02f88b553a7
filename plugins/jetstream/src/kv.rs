//! `Jetstream::KvBucket`: a key-value bucket, stored as stream `KV_<bucket>`.

use orrery_plugin_sdk::schema::ResourceSchema;
use orrery_plugin_sdk::{field, resource};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::mapping::{object, renamed, seconds, Rename};
use crate::streamlike::StreamBacked;

/// The type name.
pub const TYPE: &str = "Jetstream::KvBucket";

/// A bucket's properties; unset ones keep the server's value.
#[derive(Debug, Serialize, Deserialize)]
pub struct KvBucket {
    bucket: String,
    description: Option<String>,
    history: Option<i64>,
    ttl: Option<i64>,
    max_bytes: Option<i64>,
    max_value_size: Option<i64>,
    storage: Option<String>,
    replicas: Option<i64>,
}

impl StreamBacked for KvBucket {
    const TYPE: &'static str = TYPE;
    const PREFIX: &'static str = "KV_";
    const ID: &'static str = "bucket";
    const RENAMES: &'static [Rename] = &[
        renamed("history", "max_msgs_per_subject"),
        seconds("ttl", "max_age"),
        renamed("max_value_size", "max_msg_size"),
        renamed("replicas", "num_replicas"),
    ];

    fn schema() -> ResourceSchema {
        let int = |name: &str, what: &str| field::integer(name).provider_default().describe(what);
        resource(TYPE)
            .describe("A JetStream key-value bucket")
            .identifier(["bucket"])
            .field(
                field::string("bucket")
                    .required()
                    .create_only()
                    .describe("Bucket name"),
            )
            .field(
                field::string("description")
                    .provider_default()
                    .describe("What it is for"),
            )
            .field(int("history", "Values kept per key (1-64)"))
            .field(int("ttl", "Seconds a value is kept, 0 for ever"))
            .field(int("max_bytes", "Largest bucket size, -1 for no limit"))
            .field(int("max_value_size", "Largest value, -1 for no limit"))
            .field(
                field::string("storage")
                    .provider_default()
                    .create_only()
                    .describe("`file` or `memory`"),
            )
            .field(int(
                "replicas",
                "Copies kept (1-5); a change is asynchronous",
            ))
            .build()
    }

    fn id(&self) -> &str {
        &self.bucket
    }

    /// What clients expect of a bucket's stream (as the NATS clients make it).
    fn fixed(bucket: &str) -> Map<String, Value> {
        object(json!({
            "subjects": [format!("$KV.{bucket}.>")],
            "max_msgs_per_subject": 1,
            "allow_rollup_hdrs": true,
            "deny_delete": true,
            "allow_direct": true,
            "discard": "new",
        }))
    }
}
