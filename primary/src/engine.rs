//! Wiring for a command: the state store, the plugins' catalog and a
//! transport (in-process plugins for the embedded mode, NATS otherwise).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use orrery_bus::plugin_host::{PluginHost, PluginSpec};
use orrery_bus::transport::{LocalBus, Transport};

use crate::nats::NatsAuth;
use crate::stack::Catalog;

/// Environment variable naming a directory of plugin binaries.
pub const PLUGIN_DIR_ENV: &str = "ORRERY_PLUGIN_DIR";

/// Why plugins could not be made available.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No binary `orrery-plugin-<name>` was found.
    #[error("plugin `{name}` not found: looked for `orrery-plugin-{name}` in {searched}")]
    PluginNotFound {
        /// The plugin.
        name: String,
        /// Where it looked.
        searched: String,
    },
    /// The plugin did not start.
    #[error(transparent)]
    Spawn(#[from] orrery_plugin_sdk::process::SpawnError),
    /// NATS could not be reached.
    #[error("cannot connect to NATS at {url}: {reason}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// No satellite describes the plugin.
    #[error("cannot learn the schemas of plugin `{plugin}`: {source}")]
    Describe {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: orrery_bus::bus::BusError,
    },
}

/// Where plugin binaries are looked for: `dir` if given, then
/// `$ORRERY_PLUGIN_DIR`, then the directory of this executable, then `PATH`.
pub fn plugin_search_path(dir: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    out.extend(dir.map(Path::to_path_buf));
    out.extend(std::env::var_os(PLUGIN_DIR_ENV).map(PathBuf::from));
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        out.push(exe_dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        out.extend(std::env::split_paths(&path));
    }
    out
}

/// Finds `orrery-plugin-<name>`.
pub fn find_plugin(name: &str, search: &[PathBuf]) -> Result<PathBuf, EngineError> {
    let file = format!("orrery-plugin-{name}");
    search
        .iter()
        .map(|d| d.join(&file))
        .find(|p| p.is_file())
        .ok_or_else(|| EngineError::PluginNotFound {
            name: name.to_owned(),
            searched: search
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Plugins served by satellites over NATS, for the distributed mode.
pub struct Remote {
    /// The bus to the satellites.
    pub bus: orrery_bus::bus::NatsBus,
    /// The plugins' announcements, as satellites describe them.
    pub catalog: Catalog,
}

impl Remote {
    /// Connects to NATS and asks satellites for the named plugins' schemas.
    pub async fn connect(
        url: &str,
        auth: &NatsAuth,
        plugins: &[String],
    ) -> Result<Remote, EngineError> {
        let client = crate::nats::connect(url, "orrery-primary", auth)
            .await
            .map_err(|e| EngineError::Connect {
                url: url.to_owned(),
                reason: format!("{e:#}"),
            })?;
        let mut catalog = Catalog::new();
        for plugin in plugins {
            let announcement =
                orrery_bus::describe::describe(&client, plugin, Duration::from_secs(10))
                    .await
                    .map_err(|source| EngineError::Describe {
                        plugin: plugin.clone(),
                        source,
                    })?;
            catalog.insert(announcement);
        }
        Ok(Remote {
            bus: orrery_bus::bus::NatsBus::new(client),
            catalog,
        })
    }
}

/// Where plugins run for a command: in-process, or behind satellites.
pub enum Plugins {
    /// In this process's care.
    Embedded(Embedded),
    /// Behind satellites, over NATS.
    Remote(Remote),
}

impl Plugins {
    /// Starts (embedded) or reaches (NATS, when `nats_url` is set, as
    /// `auth`) the named plugins.
    pub async fn start(
        names: &[String],
        search: &[PathBuf],
        nats_url: Option<&str>,
        auth: &NatsAuth,
    ) -> Result<Plugins, EngineError> {
        Ok(match nats_url {
            Some(url) => Plugins::Remote(Remote::connect(url, auth, names).await?),
            None => Plugins::Embedded(Embedded::start(names, search).await?),
        })
    }

    /// Their announcements.
    pub fn catalog(&self) -> &Catalog {
        match self {
            Plugins::Embedded(e) => &e.catalog,
            Plugins::Remote(r) => &r.catalog,
        }
    }

    /// The transport to use.
    pub fn transport(&self) -> Arc<dyn Transport> {
        match self {
            Plugins::Embedded(e) => e.transport(),
            Plugins::Remote(r) => Arc::new(r.bus.clone()),
        }
    }

    /// Stops in-process plugins; nothing to do for satellites.
    pub async fn stop(&self) {
        if let Plugins::Embedded(e) = self {
            e.stop().await;
        }
    }
}

/// Plugins running in this process's care, for the embedded mode.
pub struct Embedded {
    /// The in-process relay.
    pub bus: LocalBus,
    /// Their announcements.
    pub catalog: Catalog,
}

impl Embedded {
    /// Starts the named plugins.
    pub async fn start(names: &[String], search: &[PathBuf]) -> Result<Embedded, EngineError> {
        let mut hosts = Vec::new();
        let mut catalog = Catalog::new();
        for name in names {
            let path = find_plugin(name, search)?;
            let host = PluginHost::start(PluginSpec::new(path)).await?;
            catalog.insert(host.announcement().clone());
            hosts.push(host);
        }
        Ok(Embedded {
            bus: LocalBus::new(hosts),
            catalog,
        })
    }

    /// The transport to use.
    pub fn transport(&self) -> Arc<dyn Transport> {
        Arc::new(self.bus.clone())
    }

    /// Stops the plugins.
    pub async fn stop(&self) {
        self.bus.stop(Duration::from_secs(5)).await;
    }
}
