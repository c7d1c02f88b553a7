//! `Jetstream::KvBucket`: a key-value bucket, stored as stream `KV_<bucket>`.

use orrery_plugin_sdk::resource;
use orrery_plugin_sdk::schema::ResourceSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::bucket;
use crate::lifecycle::Managed;
use crate::mapping::fields::int;
use crate::mapping::{renamed, Rename};

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
        bucket::TTL,
        renamed("max_value_size", "max_msg_size"),
        bucket::REPLICAS,
    ];

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("A JetStream key-value bucket")
            .identifier(["bucket"])
            .field(bucket::name())
            .field(bucket::description())
            .field(int("history", "Values kept per key (1-64)"))
            .field(bucket::ttl("a value"))
            .field(bucket::max_bytes())
            .field(int("max_value_size", "Largest value, -1: no limit"))
            .field(bucket::storage())
            .field(bucket::replicas())
            .build()
    }

    fn native_id(&self) -> String {
        self.bucket.clone()
    }

    /// A key keeps one value unless `history` says more, and values are
    /// not deleted through the API.
    fn fixed(bucket: &str) -> Map<String, Value> {
        let mut fixed = bucket::fixed(&[format!("$KV.{bucket}.>")]);
        fixed.insert("max_msgs_per_subject".into(), 1.into());
        fixed.insert("deny_delete".into(), true.into());
        fixed
    }
}
