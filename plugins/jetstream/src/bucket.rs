//! What key-value and object store buckets share: each is a stream named
//! `<prefix><bucket>`, identified by `bucket`, with the same limits and the
//! stream settings every NATS client expects of a bucket.

use orrery_plugin_sdk::FieldBuilder;
use serde_json::{json, Map, Value};

use crate::mapping::fields::{id, int, text};
use crate::mapping::{object, renamed, seconds, Rename};

/// `bucket`: the name, the stream's after its prefix.
pub fn name() -> FieldBuilder {
    id("bucket", "Bucket name")
}

/// `description`.
pub fn description() -> FieldBuilder {
    text("description", "What it is for")
}

/// `ttl`: how long `what` (a value, an object) is kept.
pub fn ttl(what: &str) -> FieldBuilder {
    int("ttl", &format!("Seconds {what} is kept, 0: for ever"))
}

/// `max_bytes`.
pub fn max_bytes() -> FieldBuilder {
    int("max_bytes", "Largest bucket, -1: no limit")
}

/// `storage`, fixed once the bucket exists.
pub fn storage() -> FieldBuilder {
    text("storage", "file or memory").create_only()
}

/// `replicas`, changed asynchronously.
pub fn replicas() -> FieldBuilder {
    int("replicas", "Copies (1-5); changes are asynchronous")
}

/// `ttl` is the stream's `max_age`, in seconds.
pub const TTL: Rename = seconds("ttl", "max_age");
/// `replicas` is the stream's `num_replicas`.
pub const REPLICAS: Rename = renamed("replicas", "num_replicas");

/// The settings of a bucket's stream (as the NATS clients make it), on
/// `subjects`.
pub fn fixed(subjects: &[String]) -> Map<String, Value> {
    object(json!({
        "subjects": subjects,
        "allow_rollup_hdrs": true,
        "allow_direct": true,
        "discard": "new",
    }))
}
