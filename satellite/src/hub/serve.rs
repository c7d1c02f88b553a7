//! Serving hub-installed plugins, and rolling one to a new version when the
//! lock file changes.
//!
//! Each hub-installed plugin runs in its own relay ([`crate::relay::serve`])
//! — its own NATS service instance — so one plugin can be replaced without
//! touching the others. A roll, triggered by a changed lock entry:
//!
//! 1. installs and verifies the pinned version, and refuses a move to a
//!    lower or a yanked version unless [`ServeConfig::allow_downgrade`] (a
//!    refusal leaves the old version serving, and is logged with the check
//!    that failed);
//! 2. starts the new process and checks its announcement;
//! 3. starts a second relay for it in the same queue group and waits until
//!    its endpoints are registered (seen in `$SRV.INFO`), so from then on
//!    requests are shared between old and new;
//! 4. drains the old relay: it stops taking requests, finishes those in
//!    flight, and stops the old process.
//!
//! At every moment at least one process is subscribed to the plugin's
//! subjects and every request taken is finished. A request the NATS
//! server routes to the old relay in the instant it unsubscribes is lost
//! on the wire (async-nats drops what arrives for a removed
//! subscription): its caller times out, as for any request lost on the
//! network (docs/hub.md).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use orrery_hub::install::{Installed, Installer, Requirement};
use orrery_hub::lock::{check_move, LockEntry, LockFile};
use orrery_hub::HubError;

use super::fleet;
use crate::plugin_host::{PluginHost, PluginSpec};
use crate::relay::{self, RelayConfig, RelayError};

/// What to serve.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The plugins and versions wanted.
    pub requirements: Vec<Requirement>,
    /// The lock file: read at start (pins), written with what was resolved,
    /// watched for changes.
    pub lock_file: Option<PathBuf>,
    /// How often the lock file is checked for changes.
    pub lock_poll: Duration,
    /// The relay settings (satellite id, targets, permits, drain grace).
    pub relay: RelayConfig,
    /// How long a plugin may take to announce itself.
    pub handshake_timeout: Duration,
    /// Variables of the satellite's environment passed on to the plugins
    /// besides the standard ones (`--plugin-env`).
    pub plugin_env: Vec<String>,
    /// Target configuration held on this host (see `PluginSpec::held`).
    pub held: std::sync::Arc<orrery_bus::held_targets::HeldTargets>,
    /// How long a new relay may take to register before a roll is given up.
    pub register_timeout: Duration,
    /// Whether the lock may move a plugin to a lower or a yanked version
    /// (`--allow-downgrade`). Off: such a roll is refused.
    pub allow_downgrade: bool,
}

impl ServeConfig {
    /// Defaults for `requirements`.
    pub fn new(requirements: Vec<Requirement>) -> ServeConfig {
        ServeConfig {
            requirements,
            lock_file: None,
            lock_poll: Duration::from_secs(2),
            relay: RelayConfig::default(),
            handshake_timeout: Duration::from_secs(10),
            plugin_env: Vec::new(),
            held: Default::default(),
            register_timeout: Duration::from_secs(10),
            allow_downgrade: false,
        }
    }
}

struct Slot {
    requirement: Requirement,
    installed: Installed,
    host: PluginHost,
    instance_id: String,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), RelayError>>,
}

impl Slot {
    async fn drain(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "relay ended with an error"),
            Err(e) => tracing::warn!(error = %e, "relay task failed"),
        }
    }
}

/// What applying a lock did to one plugin.
#[derive(Debug)]
pub enum RollOutcome {
    /// Now serving this version (the old one drained).
    Rolled {
        /// The plugin.
        plugin: String,
        /// The version it ran.
        from: String,
        /// The version it runs.
        to: String,
    },
    /// The new version was refused or failed to start; the old one keeps
    /// serving.
    Refused {
        /// The plugin.
        plugin: String,
        /// The version still serving.
        kept: String,
        /// Why.
        error: HubError,
    },
}

/// A running plugin, as reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Running {
    /// The plugin.
    pub name: String,
    /// Its package version.
    pub version: String,
    /// The binary's SHA-256.
    pub sha256: String,
    /// Its process id.
    pub pid: Option<u32>,
}

/// The hub-installed plugins of a satellite.
pub struct HubPlugins {
    client: async_nats::Client,
    installer: Installer,
    config: ServeConfig,
    slots: Vec<Slot>,
    failures: Vec<(Requirement, HubError)>,
    last_lock: Option<String>,
    outcomes: Option<tokio::sync::mpsc::Sender<RollOutcome>>,
}

impl HubPlugins {
    /// Installs every requirement (honouring the lock file), starts each
    /// plugin and its relay, and writes what was installed to the lock.
    /// A requirement that fails is reported in [`HubPlugins::failures`]
    /// and the others are served.
    pub async fn start(
        client: async_nats::Client,
        installer: Installer,
        config: ServeConfig,
    ) -> Result<HubPlugins, HubError> {
        let mut lock = match &config.lock_file {
            Some(path) => LockFile::load(path)?,
            None => LockFile::default(),
        };
        let mut plugins = HubPlugins {
            client,
            installer,
            config,
            slots: Vec::new(),
            failures: Vec::new(),
            last_lock: None,
            outcomes: None,
        };
        let mut lock_changed = false;
        for requirement in plugins.config.requirements.clone() {
            let pin = lock.get(&requirement.name).cloned();
            let result = async {
                let installed = plugins
                    .installer
                    .install(&requirement, pin.as_ref())
                    .await?;
                // The pin did not apply (say the requirement changed) and
                // resolution found another version: the lock would move.
                let pinned = pin.as_ref().filter(|p| p.name == requirement.name);
                check_move(
                    &requirement.name,
                    pinned.map(|p| p.version.as_str()),
                    &installed.manifest.version,
                    installed.yanked.then_some(installed.yank_reason.as_str()),
                    plugins.config.allow_downgrade,
                )?;
                let slot = plugins.start_slot(&requirement, installed).await?;
                Ok::<Slot, HubError>(slot)
            }
            .await;
            match result {
                Ok(slot) => {
                    let entry = slot.installed.lock_entry(&requirement.req.to_string());
                    if pin.as_ref() != Some(&merged(pin.as_ref(), &entry)) {
                        lock.upsert(entry);
                        lock_changed = true;
                    }
                    tracing::info!(plugin = %slot.installed.label(), sha256 = %slot.installed.sha256,
                        yanked = slot.installed.yanked, "serving hub-installed plugin");
                    plugins.slots.push(slot);
                }
                Err(error) => {
                    tracing::error!(requirement = %requirement, check = error.kind(), %error,
                        "cannot install plugin; serving the others");
                    plugins.failures.push((requirement, error));
                }
            }
        }
        if let Some(path) = &plugins.config.lock_file {
            if lock_changed {
                lock.save(path)?;
            }
            plugins.last_lock = std::fs::read_to_string(path).ok();
        }
        Ok(plugins)
    }

    /// Requirements that could not be installed at start, and why.
    pub fn failures(&self) -> &[(Requirement, HubError)] {
        &self.failures
    }

    /// What is running.
    pub fn running(&self) -> Vec<Running> {
        self.slots
            .iter()
            .map(|s| Running {
                name: s.installed.manifest.name.clone(),
                version: s.installed.manifest.version.clone(),
                sha256: s.installed.sha256.clone(),
                pid: s.host.status().pid,
            })
            .collect()
    }

    async fn start_slot(
        &self,
        requirement: &Requirement,
        installed: Installed,
    ) -> Result<Slot, HubError> {
        let mut spec = PluginSpec::new(&installed.path);
        spec.handshake_timeout = self.config.handshake_timeout;
        spec.env_allow = self.config.plugin_env.clone();
        spec.held = self.config.held.clone();
        // Named in describe answers, so a primary trusting the publisher
        // plans with this manifest's signed schema.
        spec.package = Some(orrery_bus::describe::Package {
            name: installed.manifest.name.clone(),
            version: installed.manifest.version.clone(),
            manifest_sha256: installed.manifest_digest.clone(),
        });
        let host = orrery_hub::retry_text_busy(|| PluginHost::start(spec.clone())).await?;
        let announced = host.announcement();
        if announced.name != installed.manifest.name
            || announced.protocol != installed.manifest.protocol
        {
            let error = HubError::AnnouncementMismatch {
                plugin: installed.manifest.name.clone(),
                version: installed.manifest.version.clone(),
                announced_name: announced.name.clone(),
                announced_protocol: announced.protocol,
            };
            host.stop(Duration::from_secs(2)).await;
            return Err(error);
        }
        let before = self.instance_ids(&installed.manifest.name).await;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(relay::serve(
            self.client.clone(),
            vec![host.clone()],
            self.config.relay.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        let mut slot = Slot {
            requirement: requirement.clone(),
            installed,
            host,
            instance_id: String::new(),
            stop: Some(stop),
            task,
        };
        match self.wait_registered(&slot, &before).await {
            Ok(id) => {
                slot.instance_id = id;
                Ok(slot)
            }
            Err(error) => {
                slot.drain().await;
                Err(error)
            }
        }
    }

    async fn instance_ids(&self, plugin: &str) -> BTreeSet<String> {
        let wait = Duration::from_millis(150);
        fleet::instances(&self.client, wait)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|i| {
                i.satellite_id == self.config.relay.satellite_id
                    && i.plugins.iter().any(|(p, _)| p == plugin)
            })
            .map(|i| i.instance_id)
            .collect()
    }

    /// Waits until a relay instance that was not in `before` serves the
    /// slot's plugin with all its endpoints.
    async fn wait_registered(
        &self,
        slot: &Slot,
        before: &BTreeSet<String>,
    ) -> Result<String, HubError> {
        let plugin = slot.installed.manifest.name.clone();
        let endpoints = self.config.relay.targets.len().max(1);
        let deadline = tokio::time::Instant::now() + self.config.register_timeout;
        loop {
            if slot.task.is_finished() {
                return Err(HubError::Storage(format!(
                    "the relay for {} stopped before registering with NATS",
                    slot.installed.label()
                )));
            }
            let found = fleet::instances(&self.client, Duration::from_millis(150))
                .await
                .unwrap_or_default()
                .into_iter()
                .find(|i| {
                    i.satellite_id == self.config.relay.satellite_id
                        && !before.contains(&i.instance_id)
                        && i.endpoints >= endpoints
                        && i.plugins.iter().any(|(p, _)| *p == plugin)
                });
            if let Some(instance) = found {
                return Ok(instance.instance_id);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(HubError::Storage(format!(
                    "the relay for {} did not register with NATS within {:?}",
                    slot.installed.label(),
                    self.config.register_timeout
                )));
            }
        }
    }

    /// Rolls every plugin whose lock entry differs from what runs.
    pub async fn apply_lock(&mut self, lock: &LockFile) -> Vec<RollOutcome> {
        let mut outcomes = Vec::new();
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            let Some(pin) = lock.get(&slot.installed.manifest.name) else {
                continue;
            };
            if !self.installer.pin_applies(&slot.requirement, pin) {
                continue;
            }
            let same_version = pin.version == slot.installed.manifest.version;
            let same_bytes = pin
                .sha256
                .get(&slot.installed.platform)
                .is_none_or(|d| *d == slot.installed.sha256);
            if same_version && same_bytes {
                continue;
            }
            outcomes.push(self.roll(index, pin.clone()).await);
        }
        outcomes
    }

    async fn roll(&mut self, index: usize, pin: LockEntry) -> RollOutcome {
        let old = &self.slots[index];
        let plugin = old.installed.manifest.name.clone();
        let from = old.installed.manifest.version.clone();
        let requirement = old.requirement.clone();
        tracing::info!(%plugin, %from, to = %pin.version, "lock changed: rolling");
        let allow_downgrade = self.config.allow_downgrade;
        let started = async {
            let installed = self.installer.install(&requirement, Some(&pin)).await?;
            check_move(
                &plugin,
                Some(&from),
                &installed.manifest.version,
                installed.yanked.then_some(installed.yank_reason.as_str()),
                allow_downgrade,
            )?;
            self.start_slot(&requirement, installed).await
        }
        .await;
        match started {
            Ok(new) => {
                let to = new.installed.manifest.version.clone();
                let old = std::mem::replace(&mut self.slots[index], new);
                tracing::info!(%plugin, %from, %to, "new version serving; draining the old one");
                old.drain().await;
                tracing::info!(%plugin, %from, %to, "rolled");
                RollOutcome::Rolled { plugin, from, to }
            }
            Err(error) => {
                tracing::error!(%plugin, kept = %from, wanted = %pin.version, check = error.kind(), %error,
                    "refusing the new version; the old one keeps serving");
                RollOutcome::Refused {
                    plugin,
                    kept: from,
                    error,
                }
            }
        }
    }

    /// Sends what each lock change [`HubPlugins::watch`] applies did to
    /// `outcomes` as well as logging it (for tests and embedders; an
    /// outcome that finds the channel full is only logged).
    pub fn report_outcomes(&mut self, outcomes: tokio::sync::mpsc::Sender<RollOutcome>) {
        self.outcomes = Some(outcomes);
    }

    /// Checks the lock file every `lock_poll` and applies changes, until
    /// `shutdown` completes. Returns without watching when no lock file is
    /// configured (still waiting for `shutdown`).
    pub async fn watch(&mut self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let Some(path) = self.config.lock_file.clone() else {
            shutdown.await;
            return;
        };
        let mut tick = tokio::time::interval(self.config.lock_poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                _ = tick.tick() => {}
            }
            let text = std::fs::read_to_string(&path).ok();
            if text == self.last_lock {
                continue;
            }
            self.last_lock = text.clone();
            let lock = match text.as_deref().map(LockFile::parse) {
                Some(Ok(lock)) => lock,
                Some(Err(e)) => {
                    tracing::error!(path = %path.display(), error = %e, "unreadable lock file; keeping what runs");
                    continue;
                }
                None => continue,
            };
            for outcome in self.apply_lock(&lock).await {
                tracing::info!(?outcome, "lock applied");
                if let Some(tx) = &self.outcomes {
                    if let Err(e) = tx.try_send(outcome) {
                        tracing::debug!(error = %e, "roll outcome not reported");
                    }
                }
            }
        }
    }

    /// Drains every plugin's relay and stops the plugins.
    pub async fn shutdown(self) {
        let drains: Vec<_> = self.slots.into_iter().map(Slot::drain).collect();
        futures::future::join_all(drains).await;
    }
}

/// `entry` with the other platforms' digests of `pin` kept (what
/// `LockFile::upsert` would store).
fn merged(pin: Option<&LockEntry>, entry: &LockEntry) -> LockEntry {
    let mut lock = LockFile::default();
    if let Some(pin) = pin {
        lock.upsert(pin.clone());
    }
    lock.upsert(entry.clone());
    lock.get(&entry.name)
        .cloned()
        .unwrap_or_else(|| entry.clone())
}
