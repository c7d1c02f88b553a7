//! The plugins a command works with, provisioned one way for every caller
//! (the CLI, the HTTP API, the background jobs). Embedded mode: started
//! in-process on demand, by the names the stacks' targets use, then kept
//! running and shared by later commands of the same process. Distributed
//! mode: served by satellites over NATS, their schemas asked for per
//! command so a fleet upgrade is seen at once, and per target
//! (`orrery.describe.<plugin>.<target>`) so only the satellites allowed to
//! serve a target describe the plugin for it (docs/security.md, "Where
//! schemas come from"). A plugin that cannot be provided fails the command
//! with its reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use orrery_bus::held_targets::HeldTargets;
use orrery_bus::plugin_host::{PluginHost, PluginSpec};
use orrery_bus::transport::{LocalBus, Transport};

use super::hub_schemas::HubSchemas;
use crate::scheduler::RateRegistry;
use crate::stack::Catalog;

/// Variables of this process's environment every plugin started in-process
/// gets besides the standard ones (`--plugin-env`), set once at start.
static PLUGIN_ENV: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Names the variables of this process's environment passed on to the
/// plugins it starts (besides `orrery_plugin_sdk::process::INHERITED`);
/// plugins start with a cleared environment otherwise. The first call wins.
pub fn set_plugin_env(names: Vec<String>) {
    let _ = PLUGIN_ENV.set(names);
}

/// Which secret references in a target's configuration the plugins started
/// in-process resolve, set once at start (the local CLI: any; a server:
/// what `--secrets-dir` and `--secret-env` expose; unset: none).
static HELD: std::sync::OnceLock<Arc<HeldTargets>> = std::sync::OnceLock::new();

/// Sets how the plugins this process starts get their targets' secret
/// references (`${env:NAME}`, `${file:PATH}`) resolved, at request time
/// and in this process only. The first call wins.
pub fn set_held_targets(held: HeldTargets) {
    let _ = HELD.set(Arc::new(held));
}

/// Environment variable naming a directory of plugin binaries.
pub const PLUGIN_DIR_ENV: &str = "ORRERY_PLUGIN_DIR";

/// Why a plugin could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// No binary `orrery-plugin-<name>` was found (or the name cannot be a
    /// plugin's).
    #[error("plugin `{name}` not found: looked for `orrery-plugin-{name}` in {searched}")]
    NotFound {
        /// The plugin.
        name: String,
        /// Where it looked.
        searched: String,
    },
    /// The plugin binary did not start.
    #[error("plugin `{name}` ({path}) did not start: {source}")]
    Spawn {
        /// The plugin.
        name: String,
        /// Its binary.
        path: String,
        /// Why.
        #[source]
        source: orrery_plugin_sdk::process::SpawnError,
    },
    /// The binary announced another name: targets name plugins as they
    /// announce themselves, so it cannot serve them.
    #[error("plugin binary {path} announced itself as `{announced}`, not `{name}`")]
    Misnamed {
        /// The name asked for.
        name: String,
        /// The name it announced.
        announced: String,
        /// Its binary.
        path: String,
    },
    /// No satellite describes the plugin.
    #[error("cannot learn the schemas of plugin `{name}`: {source}")]
    Describe {
        /// The plugin.
        name: String,
        /// Why.
        #[source]
        source: orrery_bus::bus::BusError,
    },
    /// Satellites (of one target, or of the targets a command plans for)
    /// answered different schemas for the plugin: which one a plan used
    /// would be a race, so it uses none.
    #[error("{source}")]
    Disagreement {
        /// The plugin.
        name: String,
        /// Who answered what.
        #[source]
        source: orrery_bus::describe::DescribeError,
    },
    /// A satellite's schema is not the one signed in the hub package it
    /// names, or it names none (or one that does not verify) where this
    /// primary trusts publishers for the plugin.
    ///
    /// Its message is the whole of `why` (the satellite, the package, the
    /// check), which is not also its source: printed with its cause chain,
    /// it would say everything twice.
    #[error("{why}")]
    Unsigned {
        /// The plugin.
        name: String,
        /// Which satellite, and why.
        why: Box<super::hub_schemas::SchemaTrustError>,
    },
}

/// The plugins a command works with, each with the targets it works on:
/// `(plugin, target)`. Satellites describe a plugin per target.
pub type Needs = BTreeSet<(String, String)>;

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
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// Finds `orrery-plugin-<name>` (only for names that can be a plugin's).
pub fn find_plugin(name: &str, search: &[PathBuf]) -> Result<PathBuf, PluginError> {
    let file = format!("orrery-plugin-{name}");
    search
        .iter()
        .filter(|_| valid_name(name))
        .map(|d| d.join(&file))
        .find(|p| p.is_file())
        .ok_or_else(|| PluginError::NotFound {
            name: name.to_owned(),
            searched: search
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// How long a replaced or stopping plugin may take to finish its requests.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long satellites get to describe a plugin.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long after the first answer to a describe request the other
/// satellites' answers are waited for, to be compared with it: added to
/// every distributed command's start (the targets are asked at once).
const DESCRIBE_GATHER: Duration = Duration::from_millis(150);

/// What a command works with: the plugins it needs, their announcements.
#[derive(Clone)]
pub struct Plugins {
    /// Sends operations to the running plugins.
    pub transport: Arc<dyn Transport>,
    /// Their announcements.
    pub catalog: Catalog,
    /// The pool's rate-limit registry, the process's one: every run made
    /// with these plugins (a command, a resume, a discovery, a drift sync,
    /// an import) takes its tokens from it.
    pub rates: RateRegistry,
    /// Plugins asked for that could not be found or described, with why:
    /// stack validation names them at the targets that use them.
    pub unavailable: BTreeMap<String, String>,
    /// Targets whose satellites' operators allow only some stacks, with
    /// those stacks' patterns, as the satellites said when describing
    /// (`orrery_bus::describe::STACKS_HEADER`).
    pub target_stacks: BTreeMap<String, Vec<String>>,
}

impl Plugins {
    /// The first of `targets` whose satellite's operator does not allow
    /// `stack` on it, with the patterns it allows.
    pub fn refused_target<'a>(
        &'a self,
        stack: &str,
        targets: impl IntoIterator<Item = &'a str>,
    ) -> Option<(&'a str, &'a [String])> {
        targets.into_iter().find_map(|target| {
            let allowed = self.target_stacks.get(target)?;
            let matches = allowed
                .iter()
                .any(|p| wildmatch::WildMatch::new(p).matches(stack));
            (!matches).then_some((target, allowed.as_slice()))
        })
    }
}

#[derive(Clone, Default)]
struct Snapshot {
    /// Running plugins by announced name.
    hosts: BTreeMap<String, PluginHost>,
    catalog: Catalog,
}

/// Plugins started on demand and kept, and the rate-limit registry of the
/// runs made with them. A process has one pool (the service's, or the
/// CLI's for its one command), so its registry is the process's.
pub struct PluginPool {
    search: Vec<PathBuf>,
    rates: RateRegistry,
    current: RwLock<Arc<Snapshot>>,
    /// Held while plugins start, so that two requests naming the same new
    /// plugin start it once.
    starting: tokio::sync::Mutex<()>,
    /// Set in distributed mode: plugins are behind satellites.
    nats: Option<async_nats::Client>,
    /// Set when this primary trusts hub publishers: satellites' schemas
    /// are held to their signed packages.
    hub: Option<Arc<HubSchemas>>,
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
            rates: RateRegistry::local(),
            current: RwLock::new(Arc::new(Snapshot::default())),
            starting: tokio::sync::Mutex::new(()),
            nats: None,
            hub: None,
        }
    }

    /// A pool of plugins served by satellites reached through `client`.
    pub fn distributed(client: async_nats::Client) -> Self {
        PluginPool {
            nats: Some(client),
            ..PluginPool::new(Vec::new())
        }
    }

    /// Holds the schemas satellites describe to the hub packages they name
    /// (distributed mode only): plans use the signed schemas.
    pub fn with_hub_schemas(mut self, hub: Arc<HubSchemas>) -> Self {
        self.hub = Some(hub);
        self
    }

    /// The runs' rate limits from `rates` instead of this pool's own
    /// in-memory registry: where a limiter shared beyond this process
    /// would plug in.
    pub fn with_rates(mut self, rates: RateRegistry) -> Self {
        self.rates = rates;
        self
    }

    /// The process's rate-limit registry, shared by every run made with
    /// this pool's plugins.
    pub fn rates(&self) -> &RateRegistry {
        &self.rates
    }

    /// The satellites' plugins, as the satellites of each target describe
    /// them. The catalog holds one schema per plugin, so every target's
    /// satellites must agree on it: a plugin whose schemas differ between
    /// two satellites fails with [`PluginError::Disagreement`]. With `hub`,
    /// each answer is first held to the hub package it names, and the
    /// signed schema is the one kept ([`PluginError::Unsigned`] otherwise).
    /// A plugin no target's satellite describes is left out, with why.
    async fn described(
        client: &async_nats::Client,
        needs: &Needs,
        rates: &RateRegistry,
        hub: Option<&HubSchemas>,
    ) -> Result<Plugins, PluginError> {
        use orrery_bus::describe::{describe_target_all, DescribeError};
        let asks = needs.iter().map(|(plugin, target)| async move {
            let answers =
                describe_target_all(client, plugin, target, DESCRIBE_TIMEOUT, DESCRIBE_GATHER)
                    .await;
            (plugin, target, answers)
        });
        let mut chosen: BTreeMap<&String, orrery_bus::describe::Answer> = BTreeMap::new();
        let mut unavailable = BTreeMap::new();
        let mut target_stacks = BTreeMap::new();
        for (name, target, answers) in futures::future::join_all(asks).await {
            let disagreement = |source| PluginError::Disagreement {
                name: name.clone(),
                source,
            };
            let answers = match answers {
                Ok(answers) => answers,
                Err(e @ DescribeError::Disagreement { .. }) => return Err(disagreement(e)),
                Err(DescribeError::Bus(source)) => {
                    let e = PluginError::Describe {
                        name: name.clone(),
                        source,
                    };
                    unavailable.entry(name.clone()).or_insert(e.to_string());
                    continue;
                }
            };
            if let Some(stacks) = answers.first().and_then(|a| a.stacks.clone()) {
                target_stacks.insert(target.clone(), stacks);
            }
            // Every answer gathered, the first first: each is held to its
            // signed package before any is compared, so a refusal names
            // the satellite whose schema is wrong rather than a pair.
            for mut answer in answers {
                if let Some(hub) = hub {
                    let signed =
                        hub.check(name, &answer)
                            .await
                            .map_err(|why| PluginError::Unsigned {
                                name: name.clone(),
                                why: Box::new(why),
                            })?;
                    if let Some(signed) = signed {
                        answer.announcement = signed;
                    }
                }
                match chosen.get(name) {
                    Some(first) => first.check(&answer).map_err(disagreement)?,
                    None => {
                        chosen.insert(name, answer);
                    }
                }
            }
        }
        let mut catalog = Catalog::new();
        for (name, answer) in chosen {
            // Described for one of its targets: a target no satellite
            // answered for fails at its operations (no satellite).
            unavailable.remove(name);
            catalog.insert(answer.announcement);
        }
        Ok(Plugins {
            transport: Arc::new(orrery_bus::bus::NatsBus::new(client.clone())),
            catalog,
            rates: rates.clone(),
            unavailable,
            target_stacks,
        })
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes sure the plugins of `needs` run (restarting any that gave up
    /// as unhealthy) and returns every running plugin, naming those that
    /// could not be found or described; fails when one is found but does
    /// not start, or when satellites disagree about one's schemas.
    pub async fn ensure(&self, needs: &Needs) -> Result<Plugins, PluginError> {
        if let Some(client) = &self.nats {
            return Self::described(client, needs, &self.rates, self.hub.as_deref()).await;
        }
        let names: &BTreeSet<String> = &needs.iter().map(|(p, _)| p.clone()).collect();
        let needs_start = |snap: &Snapshot| {
            names.iter().any(|n| match snap.hosts.get(n) {
                None => true,
                Some(host) => host.status().state == "unhealthy",
            })
        };
        if needs_start(&self.snapshot()) {
            let _starting = self.starting.lock().await;
            let snap = self.snapshot();
            let mut next = (*snap).clone();
            let started = self.start_missing(names, &mut next).await;
            // What did start is kept (and stopped with the pool) either way.
            *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
            started?;
        }
        let snap = self.snapshot();
        let unavailable = names
            .iter()
            .filter(|n| !snap.hosts.contains_key(*n))
            .filter_map(|n| {
                find_plugin(n, &self.search)
                    .err()
                    .map(|e| (n.clone(), e.to_string()))
            })
            .collect();
        Ok(Plugins {
            transport: Arc::new(LocalBus::new(snap.hosts.values().cloned())),
            catalog: snap.catalog.clone(),
            rates: self.rates.clone(),
            unavailable,
            target_stacks: BTreeMap::new(),
        })
    }

    /// Starts each of `names` not running (or unhealthy) in `next`.
    async fn start_missing(
        &self,
        names: &BTreeSet<String>,
        next: &mut Snapshot,
    ) -> Result<(), PluginError> {
        for name in names {
            if let Some(host) = next.hosts.get(name) {
                if host.status().state != "unhealthy" {
                    continue;
                }
                tracing::warn!(plugin = %name, "restarting a plugin that gave up as unhealthy");
                host.stop(STOP_GRACE).await;
                next.hosts.remove(name);
            }
            // Not found: left out, and validation names it.
            let Ok(path) = find_plugin(name, &self.search) else {
                continue;
            };
            let mut spec = PluginSpec::new(&path);
            spec.env_allow = PLUGIN_ENV.get().cloned().unwrap_or_default();
            spec.held = HELD.get().cloned().unwrap_or_default();
            let host = PluginHost::start(spec)
                .await
                .map_err(|source| PluginError::Spawn {
                    name: name.clone(),
                    path: path.display().to_string(),
                    source,
                })?;
            if host.name() != name {
                let announced = host.name().to_owned();
                host.stop(STOP_GRACE).await;
                return Err(PluginError::Misnamed {
                    name: name.clone(),
                    announced,
                    path: path.display().to_string(),
                });
            }
            tracing::info!(plugin = %name, version = %host.announcement().version, "plugin started");
            next.catalog.insert(host.announcement().clone());
            next.hosts.insert(host.name().to_owned(), host);
        }
        Ok(())
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
    use super::{valid_name, PluginPool, RateRegistry};

    /// Every run made with a pool's plugins gets the pool's one registry.
    #[tokio::test]
    async fn every_provision_shares_the_pools_rate_registry() {
        let pool = PluginPool::new(Vec::new());
        let none = std::collections::BTreeSet::new();
        let (first, second) = (
            pool.ensure(&none).await.unwrap(),
            pool.ensure(&none).await.unwrap(),
        );
        assert!(first.rates.same_as(pool.rates()));
        assert!(second.rates.same_as(&first.rates));
        assert!(!PluginPool::new(Vec::new()).rates().same_as(pool.rates()));
        let shared = RateRegistry::local();
        let pool = PluginPool::new(Vec::new()).with_rates(shared.clone());
        assert!(pool.ensure(&none).await.unwrap().rates.same_as(&shared));
    }

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
