//! The plugins a request works with. Embedded mode: started in-process on
//! demand, by the names the submitted stacks' targets use, then kept running
//! and shared by every later request. Distributed mode: served by satellites
//! over NATS, their schemas asked for (`orrery.describe.<plugin>`) per request
//! so a fleet upgrade is seen at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use orrery_bus::plugin_host::{PluginHost, PluginSpec};
use orrery_bus::transport::{LocalBus, Transport};

use super::error::ApiError;
use crate::engine::{find_plugin, EngineError};
use crate::stack::Catalog;

/// How long a replaced or stopping plugin may take to finish its requests.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long satellites get to describe a plugin.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a request works with: the plugins it needs, their announcements.
pub struct Plugins {
    /// Sends operations to the running plugins.
    pub transport: Arc<dyn Transport>,
    /// Their announcements.
    pub catalog: Catalog,
}

#[derive(Clone, Default)]
struct Snapshot {
    /// Running plugins by announced name.
    hosts: BTreeMap<String, PluginHost>,
    catalog: Catalog,
}

/// Plugins started on demand and kept.
pub struct PluginPool {
    search: Vec<PathBuf>,
    current: RwLock<Arc<Snapshot>>,
    /// Held while plugins start, so that two requests naming the same new
    /// plugin start it once.
    starting: tokio::sync::Mutex<()>,
    /// Set in distributed mode: plugins are behind satellites.
    nats: Option<async_nats::Client>,
}

/// Whether `name` can be a plugin name: it becomes part of a file name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && !name.starts_with('-')
}

impl PluginPool {
    /// A pool finding plugin binaries in `search`.
    pub fn new(search: Vec<PathBuf>) -> Self {
        PluginPool {
            search,
            current: RwLock::new(Arc::new(Snapshot::default())),
            starting: tokio::sync::Mutex::new(()),
            nats: None,
        }
    }

    /// A pool of plugins served by satellites reached through `client`.
    pub fn distributed(client: async_nats::Client) -> Self {
        PluginPool {
            nats: Some(client),
            ..PluginPool::new(Vec::new())
        }
    }

    /// The satellites' plugins: a plugin no satellite describes is left
    /// out, and stack validation reports it unknown.
    async fn described(client: &async_nats::Client, names: &BTreeSet<String>) -> Plugins {
        let mut catalog = Catalog::new();
        for name in names.iter().filter(|n| valid_name(n)) {
            match orrery_bus::describe::describe(client, name, DESCRIBE_TIMEOUT).await {
                Ok(announcement) => catalog.insert(announcement),
                Err(e) => {
                    tracing::warn!(plugin = %name, error = %e, "no satellite describes the plugin")
                }
            }
        }
        Plugins {
            transport: Arc::new(orrery_bus::bus::NatsBus::new(client.clone())),
            catalog,
        }
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes sure the named plugins run (restarting any that gave up as
    /// unhealthy) and returns every running plugin. A name that is not a
    /// valid plugin name, or whose binary does not exist, is skipped: stack
    /// validation then reports the target's plugin as unknown.
    pub async fn ensure(&self, names: &BTreeSet<String>) -> Result<Plugins, ApiError> {
        if let Some(client) = &self.nats {
            return Ok(Self::described(client, names).await);
        }
        let needs_start = |snap: &Snapshot| {
            names.iter().any(|n| match snap.hosts.get(n) {
                None => valid_name(n) && find_plugin(n, &self.search).is_ok(),
                Some(host) => host.status().state == "unhealthy",
            })
        };
        if needs_start(&self.snapshot()) {
            let _starting = self.starting.lock().await;
            let snap = self.snapshot();
            let mut next = (*snap).clone();
            for name in names {
                if let Some(host) = next.hosts.get(name) {
                    if host.status().state != "unhealthy" {
                        continue;
                    }
                    tracing::warn!(plugin = %name, "restarting a plugin that gave up as unhealthy");
                    host.stop(STOP_GRACE).await;
                    next.hosts.remove(name);
                }
                if !valid_name(name) {
                    continue;
                }
                let path = match find_plugin(name, &self.search) {
                    Ok(path) => path,
                    Err(EngineError::PluginNotFound { .. }) => continue,
                    Err(e) => return Err(ApiError::internal(e.to_string())),
                };
                let host = PluginHost::start(PluginSpec::new(&path))
                    .await
                    .map_err(|e| {
                        ApiError::new(
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!("plugin `{name}` ({}) did not start: {e}", path.display()),
                        )
                    })?;
                if host.name() != name {
                    // Targets name plugins as they announce themselves; a
                    // binary announcing another name cannot serve them.
                    tracing::warn!(plugin = %name, announced = %host.name(), path = %path.display(),
                        "the plugin binary announced another name; not using it");
                    host.stop(STOP_GRACE).await;
                    continue;
                }
                tracing::info!(plugin = %name, version = %host.announcement().version, "plugin started");
                next.catalog.insert(host.announcement().clone());
                next.hosts.insert(host.name().to_owned(), host);
            }
            *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        }
        let snap = self.snapshot();
        Ok(Plugins {
            transport: Arc::new(LocalBus::new(snap.hosts.values().cloned())),
            catalog: snap.catalog.clone(),
        })
    }

    /// The running plugins.
    pub fn hosts(&self) -> Vec<PluginHost> {
        self.snapshot().hosts.values().cloned().collect()
    }

    /// Stops every plugin.
    pub async fn stop(&self) {
        let snap = std::mem::take(&mut *self.current.write().unwrap_or_else(|p| p.into_inner()));
        for host in snap.hosts.values() {
            host.stop(STOP_GRACE).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn plugin_names() {
        assert!(valid_name("local"));
        assert!(valid_name("aws_ec2-v2"));
        assert!(!valid_name(""));
        assert!(!valid_name("../bin/sh"));
        assert!(!valid_name("a/b"));
        assert!(!valid_name("-rf"));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"x".repeat(65)));
    }
}
