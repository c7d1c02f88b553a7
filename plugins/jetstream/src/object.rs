//! `Jetstream::ObjectBucket`: an object store bucket, stored as stream
//! `OBJ_<bucket>`.

use orrery_plugin_sdk::resource;
use orrery_plugin_sdk::schema::ResourceSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::lifecycle::Managed;
use crate::mapping::fields::{id, int, text};
use crate::mapping::{object, renamed, seconds, Rename};

/// The type name.
pub const TYPE: &str = "Jetstream::ObjectBucket";

/// A bucket's properties; unset ones keep the server's value.
#[derive(Debug, Serialize, Deserialize)]
pub struct ObjectBucket {
    bucket: String,
    description: Option<String>,
    ttl: Option<i64>,
    max_bytes: Option<i64>,
    storage: Option<String>,
    replicas: Option<i64>,
}

impl Managed for ObjectBucket {
    const TYPE: &'static str = TYPE;
    const PREFIX: &'static str = "OBJ_";
    const ID: &'static str = "bucket";
    const RENAMES: &'static [Rename] = &[
        seconds("ttl", "max_age"),
        renamed("replicas", "num_replicas"),
    ];

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("A JetStream object store bucket")
            .identifier(["bucket"])
            .field(id("bucket", "Bucket name"))
            .field(text("description", "What it is for"))
            .field(int("ttl", "Seconds an object is kept, 0: for ever"))
            .field(int("max_bytes", "Largest bucket, -1: no limit"))
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
            "subjects": [format!("$O.{bucket}.C.>"), format!("$O.{bucket}.M.>")],
            "allow_rollup_hdrs": true,
            "allow_direct": true,
            "discard": "new",
        }))
    }
}
