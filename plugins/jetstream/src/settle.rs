//! When a stream's or consumer's replicas are where its config says: the
//! server answers a replica change or a placement move at once and moves
//! the data afterwards, so the plugin answers `InProgress` until then.

use orrery_plugin_sdk::schema::{ErrorCode, PropertyMap, StatusRequest, Value};
use orrery_plugin_sdk::{in_progress, OpResult, PluginError};

/// How long the runtime waits between status polls.
pub const POLL_AFTER_MS: u64 = 500;

/// Polls before giving up with `NotStabilized` (about ten minutes).
const MAX_POLLS: i64 = 1200;

/// Whether the `cluster` of a stream or consumer `info` matches its
/// `config`: a leader, every other replica current and online, as many as
/// `num_replicas` asks, in the `placement` cluster if one is named.
pub fn settled(info: &serde_json::Value) -> bool {
    let cluster = &info["cluster"];
    let Some(name) = cluster["name"].as_str() else {
        // A server without clustering: nothing moves.
        return true;
    };
    let peers = cluster["replicas"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let all_current = peers
        .iter()
        .all(|p| p["current"].as_bool() == Some(true) && p["offline"].as_bool() != Some(true));
    let has_leader = cluster["leader"].as_str().is_some_and(|l| !l.is_empty());
    let wanted = info["config"]["num_replicas"].as_u64().unwrap_or(0);
    let count_ok = wanted == 0 || peers.len() as u64 + 1 == wanted;
    let placed = match info["config"]["placement"]["cluster"].as_str() {
        Some(want) if !want.is_empty() => want == name,
        _ => true,
    };
    has_leader && all_current && count_ok && placed
}

/// The `InProgress` answer for `native_id` after `polls` polls.
pub fn pending(native_id: &str, polls: i64) -> OpResult {
    let context = PropertyMap::from([("polls".to_owned(), Value::from(polls))]);
    in_progress(native_id, Value::Map(context), POLL_AFTER_MS)
}

/// The poll count in a status request's context, plus this poll;
/// `NotStabilized` once there have been too many.
pub fn next_poll(request: &StatusRequest, what: &str) -> Result<i64, PluginError> {
    let polls = request
        .context
        .as_ref()
        .and_then(Value::as_map)
        .and_then(|c| c.get("polls"))
        .and_then(Value::as_i64)
        .ok_or_else(|| PluginError::invalid("status context must be {polls: <count>}"))?
        + 1;
    if polls > MAX_POLLS {
        return Err(PluginError::new(
            ErrorCode::NotStabilized,
            format!("{what}: its replicas were still not current after {MAX_POLLS} polls"),
        ));
    }
    Ok(polls)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::settled;

    fn info(replicas: u64, peers: serde_json::Value, placement: &str) -> serde_json::Value {
        json!({
            "config": {"num_replicas": replicas, "placement": {"cluster": placement}},
            "cluster": {"name": "c1", "leader": "n0", "replicas": peers},
        })
    }

    #[test]
    fn settled_only_when_every_wanted_replica_is_current_where_placed() {
        let current = json!({"name": "n1", "current": true});
        let behind = json!({"name": "n2", "current": false});
        let offline = json!({"name": "n2", "current": true, "offline": true});
        assert!(settled(&info(1, json!([]), "")));
        assert!(settled(&info(2, json!([current]), "c1")));
        assert!(
            !settled(&info(3, json!([current, behind]), "")),
            "a peer catching up"
        );
        assert!(
            !settled(&info(3, json!([current, offline]), "")),
            "a peer offline"
        );
        assert!(
            !settled(&info(3, json!([current]), "")),
            "a peer not yet added"
        );
        assert!(
            !settled(&info(1, json!([current]), "")),
            "an old peer not yet removed"
        );
        assert!(
            !settled(&info(1, json!([]), "c2")),
            "not yet in the placement cluster"
        );
        let leaderless = json!({"config": {"num_replicas": 1}, "cluster": {"name": "c1"}});
        assert!(!settled(&leaderless));
        assert!(
            settled(&json!({"config": {"num_replicas": 1}, "cluster": {"leader": "n"}})),
            "no clustering"
        );
    }
}
