//! `Jetstream::ObjectBucket`: an object store bucket, stored as stream
//! `OBJ_<bucket>`.

use orrery_plugin_sdk::schema::ResourceSchema;
use orrery_plugin_sdk::{field, resource};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::mapping::{object, renamed, seconds, Rename};
use crate::streamlike::StreamBacked;

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

impl StreamBacked for ObjectBucket {
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
            .field(
                field::integer("ttl")
                    .provider_default()
                    .describe("Seconds an object is kept, 0 for ever"),
            )
            .field(
                field::integer("max_bytes")
                    .provider_default()
                    .describe("Largest bucket size, -1 for no limit"),
            )
            .field(
                field::string("storage")
                    .provider_default()
                    .create_only()
                    .describe("`file` or `memory`"),
            )
            .field(
                field::integer("replicas")
                    .provider_default()
                    .describe("Copies kept (1-5); a change is asynchronous"),
            )
            .build()
    }

    fn id(&self) -> &str {
        &self.bucket
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
