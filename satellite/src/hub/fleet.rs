//! Which satellites serve which plugin versions, from the NATS service
//! protocol (`$SRV.INFO.orrery-satellite`): every satellite's relay
//! answers with its id and one endpoint per plugin and target, whose
//! metadata carries the plugin's name and announced version.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value as Json;

use crate::relay::SERVICE_NAME;
use orrery_hub::HubError;

/// One service instance of a satellite (a satellite runs one per group of
/// plugins it serves together; hub-installed plugins get one each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceInstance {
    /// The NATS service instance id (unique per process and start).
    pub instance_id: String,
    /// The satellite's id.
    pub satellite_id: String,
    /// `(plugin, version)` pairs it serves.
    pub plugins: BTreeSet<(String, String)>,
    /// How many endpoints it has registered.
    pub endpoints: usize,
}

/// Asks every satellite for its service info and collects the answers
/// that arrive within `wait`.
pub async fn instances(
    client: &async_nats::Client,
    wait: Duration,
) -> Result<Vec<ServiceInstance>, HubError> {
    let inbox = client.new_inbox();
    let mut replies = client
        .subscribe(inbox.clone())
        .await
        .map_err(HubError::storage)?;
    client
        .publish_with_reply(format!("$SRV.INFO.{SERVICE_NAME}"), inbox, "".into())
        .await
        .map_err(HubError::storage)?;
    client.flush().await.map_err(HubError::storage)?;
    let mut found = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(Some(message)) = tokio::time::timeout_at(deadline, replies.next()).await {
        if let Ok(info) = serde_json::from_slice::<Json>(&message.payload) {
            found.push(parse_info(&info));
        }
    }
    let _ = replies.unsubscribe().await;
    Ok(found)
}

fn parse_info(info: &Json) -> ServiceInstance {
    let text = |v: &Json| v.as_str().unwrap_or_default().to_owned();
    let endpoints = info["endpoints"].as_array().cloned().unwrap_or_default();
    let plugins = endpoints
        .iter()
        .map(|e| {
            (
                text(&e["metadata"]["plugin"]),
                text(&e["metadata"]["version"]),
            )
        })
        .filter(|(name, _)| !name.is_empty())
        .collect();
    ServiceInstance {
        instance_id: text(&info["id"]),
        satellite_id: text(&info["metadata"]["satellite_id"]),
        plugins,
        endpoints: endpoints.len(),
    }
}

/// Plugin → version → satellites serving it. More than one version under
/// a plugin means a rollout is in progress (or stuck).
pub fn by_plugin(
    instances: &[ServiceInstance],
) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut map: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for instance in instances {
        for (plugin, version) in &instance.plugins {
            map.entry(plugin.clone())
                .or_default()
                .entry(version.clone())
                .or_default()
                .insert(instance.satellite_id.clone());
        }
    }
    map
}
