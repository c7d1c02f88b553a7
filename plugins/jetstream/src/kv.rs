//! `Jetstream::KvBucket`: a key-value bucket, stored as stream `KV_<bucket>`.

use orrery_plugin_sdk::resource;
use orrery_plugin_sdk::schema::ResourceSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::lifecycle::Managed;
use crate::mapping::fields::{id, int, text};
use crate::mapping::{object, renamed, seconds, Rename};

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

impl Managed for KvBucket {
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
        resource(TYPE)
            .describe("A JetStream key-value bucket")
            .identifier(["bucket"])
            .field(id("bucket", "Bucket name"))
            .field(text("description", "What it is for"))
            .field(int("history", "Values kept per key (1-64)"))
            .field(int("ttl", "Seconds a value is kept, 0: for ever"))
            .field(int("max_bytes", "Largest bucket, -1: no limit"))
            .field(int("max_value_size", "Largest value, -1: no limit"))
            .field(text("storage", "file or memory").create_only())
            .field(int("replicas", "Copies (1-5); changes are asynchronous"))
            .build()
    }

    fn native_id(&self) -> String {
        self.bucket.clone()
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
