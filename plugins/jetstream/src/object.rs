//! `Jetstream::ObjectBucket`: an object store bucket, stored as stream
//! `OBJ_<bucket>`.

use orrery_plugin_sdk::resource;
use orrery_plugin_sdk::schema::ResourceSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::bucket;
use crate::lifecycle::Managed;
use crate::mapping::Rename;

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
    const RENAMES: &'static [Rename] = &[bucket::TTL, bucket::REPLICAS];

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("A JetStream object store bucket")
            .identifier(["bucket"])
            .field(bucket::name())
            .field(bucket::description())
            .field(bucket::ttl("an object"))
            .field(bucket::max_bytes())
            .field(bucket::storage())
            .field(bucket::replicas())
            .build()
    }

    fn native_id(&self) -> String {
        self.bucket.clone()
    }

    /// Chunks and metadata, each under its own subjects.
    fn fixed(bucket: &str) -> Map<String, Value> {
        bucket::fixed(&[format!("$O.{bucket}.C.>"), format!("$O.{bucket}.M.>")])
    }
}
