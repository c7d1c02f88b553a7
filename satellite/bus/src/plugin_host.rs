//! The process edge of supervision: starts a plugin, captures its logs,
//! watches it, and restarts it as the [`Supervisor`] decides.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use orrery_plugin_sdk::process::{spawn_plugin, SpawnConfig};
use orrery_plugin_sdk::{Answered, CallError, PluginClient};
use orrery_schema::{Announcement, Envelope, ErrorCode};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::watch;

use crate::held_targets::HeldTargets;
use crate::supervisor::{Action, Policy, State, Supervisor, TargetBackoff};

/// One plugin to run.
#[derive(Clone, Debug)]
pub struct PluginSpec {
    /// The binary.
    pub path: PathBuf,
    /// How long its handshake may take.
    pub handshake_timeout: Duration,
    /// How often it is pinged; a missed pong counts as a failure.
    pub ping_interval: Duration,
    /// Restart policy.
    pub policy: Policy,
    /// Variables of the host's environment passed on besides the standard
    /// ones (`orrery_plugin_sdk::process::inherited`).
    pub env_allow: Vec<String>,
    /// Target configuration this host's operator holds, and which secret
    /// references a request may resolve ([`HeldTargets`]).
    pub held: Arc<HeldTargets>,
    /// The hub package the binary was installed from, if any: named in
    /// describe answers ([`crate::describe::PACKAGE_HEADER`]) so a primary
    /// can plan with the package's signed schema.
    pub package: Option<crate::describe::Package>,
}

impl PluginSpec {
    /// Defaults for `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        PluginSpec {
            path: path.into(),
            handshake_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(5),
            policy: Policy::default(),
            env_allow: Vec::new(),
            held: Arc::default(),
            package: None,
        }
    }
}

/// Why a request could not be handed to the plugin.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostError {
    /// The plugin is crash-looping.
    #[error("plugin `{plugin}` is unhealthy: {reason}")]
    Unhealthy {
        /// The plugin.
        plugin: String,
        /// Why.
        reason: String,
    },
    /// The plugin is not running (starting or restarting) and did not come
    /// back before the deadline, or died with the request in flight.
    #[error("plugin `{plugin}` is unavailable: {reason}")]
    Unavailable {
        /// The plugin.
        plugin: String,
        /// Why.
        reason: String,
    },
    /// The target's requests crashed the plugin again and again; they are
    /// refused for a while, other targets' are served.
    #[error("plugin `{plugin}` is unhealthy for target `{target}`: {reason}")]
    TargetUnhealthy {
        /// The plugin.
        plugin: String,
        /// The target.
        target: String,
        /// Why.
        reason: String,
    },
    /// The deadline passed while the plugin worked.
    #[error("plugin `{plugin}` did not answer before the deadline")]
    DeadlineExceeded {
        /// The plugin.
        plugin: String,
    },
    /// The request's target configuration was refused on this host
    /// before it reached the plugin.
    #[error(transparent)]
    Target(#[from] crate::held_targets::HeldError),
}

/// Why a plugin could not be put under supervision at all.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its first start failed and its file name gives no plugin name to
    /// serve it under while it is retried (`orrery-plugin-NAME`, or a bare
    /// NAME of letters, digits, `-` and `_`).
    #[error("{error}; and its file name gives no plugin name to serve it under while it is retried (orrery-plugin-NAME)")]
    Unnamed {
        /// The failed first start.
        error: orrery_plugin_sdk::process::SpawnError,
    },
}

/// The name a plugin binary is served under before it has announced
/// itself: its file name without the `orrery-plugin-` prefix, when that is
/// a valid plugin name (letters, digits, `-` and `_`, at most 64).
pub fn name_from_path(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    let name = file.strip_prefix("orrery-plugin-").unwrap_or(file);
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    valid.then(|| name.to_owned())
}

impl HostError {
    /// The error code the caller sees.
    pub fn code(&self) -> ErrorCode {
        match self {
            HostError::Unhealthy { .. } | HostError::TargetUnhealthy { .. } => {
                ErrorCode::PluginUnhealthy
            }
            HostError::Unavailable { .. } => ErrorCode::PluginUnavailable,
            HostError::DeadlineExceeded { .. } => ErrorCode::DeadlineExceeded,
            HostError::Target(_) => ErrorCode::InvalidRequest,
        }
    }
}

/// A snapshot for status reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PluginStatus {
    /// `starting`, `running`, `restarting` or `unhealthy`.
    pub state: &'static str,
    /// Why it is not running, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Restarts so far.
    pub restarts: u64,
    /// The current process id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Requests waiting for the plugin.
    pub in_flight: usize,
    /// Targets whose requests are refused for now, having crashed the
    /// plugin again and again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backed_off_targets: Vec<String>,
}

struct Shared {
    name: String,
    /// The first announcement; unset until a handshake succeeds.
    announced: OnceLock<Announcement>,
    held: Arc<HeldTargets>,
    package: Option<crate::describe::Package>,
    status: Mutex<(State, u64, Option<u32>)>,
    /// The supervisor's target backoffs, as last published.
    target_backoffs: Mutex<BTreeMap<String, TargetBackoff>>,
    client: watch::Sender<Option<Link>>,
}

/// The link to one process, with the targets of the requests it holds.
#[derive(Clone)]
struct Link {
    client: PluginClient,
    /// Requests in flight per target. A request that fails because the
    /// process died stays counted: the supervisor reads who was in flight
    /// at the crash from here, whichever of the two notices first.
    targets: Arc<Mutex<HashMap<String, usize>>>,
}

impl Link {
    fn new(client: PluginClient) -> Link {
        Link {
            client,
            targets: Arc::default(),
        }
    }

    /// The targets with requests in flight.
    fn suspects(&self) -> Vec<String> {
        lock(&self.targets)
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(t, _)| t.clone())
            .collect()
    }
}

/// A request of a target in flight on a [`Link`]; uncounted when dropped
/// unless [`InFlight::keep`] leaves it as evidence of a crash.
struct InFlight {
    targets: Arc<Mutex<HashMap<String, usize>>>,
    target: String,
    kept: bool,
}

impl InFlight {
    fn new(link: &Link, target: &str) -> InFlight {
        *lock(&link.targets).entry(target.to_owned()).or_default() += 1;
        InFlight {
            targets: link.targets.clone(),
            target: target.to_owned(),
            kept: false,
        }
    }

    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.kept {
            if let Some(n) = lock(&self.targets).get_mut(&self.target) {
                *n = n.saturating_sub(1);
            }
        }
    }
}

/// A supervised plugin. Cheap to clone.
#[derive(Clone)]
pub struct PluginHost {
    shared: Arc<Shared>,
    /// What [`PluginHost::announcement`] shows before the first handshake:
    /// the name only.
    placeholder: Arc<Announcement>,
    stop: watch::Sender<bool>,
    task: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl PluginHost {
    /// Starts the plugin and waits for its first handshake, so the host
    /// knows the plugin's name and schemas before serving anything. A
    /// failed first handshake is an error: nothing is left running.
    pub async fn start(
        spec: PluginSpec,
    ) -> Result<PluginHost, orrery_plugin_sdk::process::SpawnError> {
        let config = spawn_config(&spec);
        let first = spawn_plugin(&config).await?;
        let name = first.client.announcement().name.clone();
        Ok(Self::supervise_from(spec, config, name, Ok(first)))
    }

    /// As [`PluginHost::start`], but a failed first start or handshake is
    /// not the end: the host is returned under the name its file gives
    /// ([`name_from_path`]), reports itself unhealthy with the failure
    /// ([`HostError::Unhealthy`] to requests, `unhealthy` in its status)
    /// and is retried with the supervisor's backoff; once it announces
    /// itself under that name it serves. A satellite starts its `--plugin`s
    /// this way, so one broken plugin leaves the others serving.
    ///
    /// # Errors
    ///
    /// [`StartError::Unnamed`] when the first start failed and the file
    /// name gives no plugin name.
    pub async fn start_or_retry(spec: PluginSpec) -> Result<PluginHost, StartError> {
        let config = spawn_config(&spec);
        let first = spawn_plugin(&config).await;
        let (name, first) = match first {
            Ok(process) => (process.client.announcement().name.clone(), Ok(process)),
            Err(error) => match name_from_path(&spec.path) {
                Some(name) => (name, Err(error)),
                None => return Err(StartError::Unnamed { error }),
            },
        };
        Ok(Self::supervise_from(spec, config, name, first))
    }

    /// Whether the plugin has completed a handshake since the host started.
    pub fn is_announced(&self) -> bool {
        self.shared.announced.get().is_some()
    }

    /// Resolves once the plugin has completed a handshake (at once if it
    /// has), or never if the host stops first.
    pub async fn announced(&self) {
        let mut clients = self.shared.client.subscribe();
        while !self.is_announced() {
            if clients.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    fn supervise_from(
        spec: PluginSpec,
        config: SpawnConfig,
        name: String,
        first: Result<
            orrery_plugin_sdk::process::PluginProcess,
            orrery_plugin_sdk::process::SpawnError,
        >,
    ) -> PluginHost {
        let now = Instant::now();
        let mut supervisor = Supervisor::new(spec.policy.clone(), now);
        supervisor.poll(now);
        let announced = OnceLock::new();
        let (running, pid) = match first {
            Ok(process) => {
                supervisor.on_started(now);
                let _ = announced.set(process.client.announcement().clone());
                let pid = process.pid;
                (Some(process), Some(pid))
            }
            Err(e) => {
                tracing::warn!(plugin = %name, error = %e, "plugin failed its first start; it is retried and reported unhealthy until it announces itself");
                supervisor.on_failure(now, e.to_string());
                (None, None)
            }
        };
        // The supervising task publishes the first process's link.
        let (client_tx, _) = watch::channel(None);
        let placeholder = Arc::new(Announcement {
            name: name.clone(),
            ..Announcement::default()
        });
        let shared = Arc::new(Shared {
            name,
            announced,
            held: spec.held.clone(),
            package: spec.package.clone(),
            status: Mutex::new((supervisor.state().clone(), 0, pid)),
            target_backoffs: Mutex::default(),
            client: client_tx,
        });
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(supervise(
            shared.clone(),
            spec,
            config,
            supervisor,
            running,
            stop_rx,
        ));
        PluginHost {
            shared,
            placeholder,
            stop,
            task: Arc::new(Mutex::new(Some(task))),
        }
    }

    /// The plugin's name, as announced.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// What this host's operator holds for its targets.
    pub fn held(&self) -> &Arc<HeldTargets> {
        &self.shared.held
    }

    /// The hub package the binary was installed from, if any.
    pub fn package(&self) -> Option<&crate::describe::Package> {
        self.shared.package.as_ref()
    }

    /// The first announcement (name, version, schemas); before the first
    /// handshake (see [`PluginHost::start_or_retry`]) the name only.
    pub fn announcement(&self) -> &Announcement {
        self.shared.announced.get().unwrap_or(&self.placeholder)
    }

    /// Current state, restarts and pid.
    pub fn status(&self) -> PluginStatus {
        let (state, restarts, pid) = lock(&self.shared.status).clone();
        let in_flight = self
            .shared
            .client
            .borrow()
            .as_ref()
            .map_or(0, |link| link.client.in_flight());
        let now = Instant::now();
        let backed_off_targets = lock(&self.shared.target_backoffs)
            .iter()
            .filter(|(_, b)| b.refuses(now))
            .map(|(t, _)| t.clone())
            .collect();
        let (state, reason) = match state {
            // Never announced: nothing to wait for, as unhealthy as a
            // crash loop until it comes up.
            State::Backoff { reason, .. } if !self.is_announced() => {
                ("unhealthy", Some(never_announced(&reason)))
            }
            State::Starting => ("starting", None),
            State::Running { .. } => ("running", None),
            State::Backoff { reason, .. } => ("restarting", Some(reason)),
            State::Unhealthy { reason, .. } => ("unhealthy", Some(reason)),
        };
        PluginStatus {
            state,
            reason,
            restarts,
            pid,
            in_flight,
            backed_off_targets,
        }
    }

    /// Sends an envelope to the plugin and returns its answer. Waits for a
    /// restarting plugin up to `timeout`; fails at once if it is unhealthy
    /// or dies with the request in flight.
    pub async fn call(&self, envelope: Envelope, timeout: Duration) -> Result<Envelope, HostError> {
        self.call_answered(envelope, timeout)
            .await
            .map(|answered| answered.envelope)
    }

    /// As [`PluginHost::call`], with the answer's bytes as the plugin wrote
    /// them (a relay forwards those instead of encoding the answer again).
    ///
    /// # Errors
    ///
    /// As [`PluginHost::call`].
    pub async fn call_answered(
        &self,
        envelope: Envelope,
        timeout: Duration,
    ) -> Result<Answered, HostError> {
        self.call_answered_on(None, envelope, timeout).await
    }

    /// As [`PluginHost::call_answered`], for a request of `target`: one
    /// that the supervisor has backed off ([`Supervisor::on_crash`]) is
    /// refused at once with [`HostError::TargetUnhealthy`], and a crash
    /// with this request in flight is laid to `target`.
    ///
    /// # Errors
    ///
    /// As [`PluginHost::call`], and [`HostError::TargetUnhealthy`].
    pub async fn call_answered_on(
        &self,
        target: Option<&str>,
        envelope: Envelope,
        timeout: Duration,
    ) -> Result<Answered, HostError> {
        if let Some(target) = target {
            let now = Instant::now();
            if let Some(backoff) = lock(&self.shared.target_backoffs)
                .get(target)
                .filter(|b| b.refuses(now))
            {
                return Err(HostError::TargetUnhealthy {
                    plugin: self.shared.name.clone(),
                    target: target.to_owned(),
                    reason: backoff.reason.clone(),
                });
            }
        }
        let envelope = self.shared.held.apply(envelope)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let plugin = || self.shared.name.clone();
        let mut clients = self.shared.client.subscribe();
        let link = loop {
            match &lock(&self.shared.status).0 {
                State::Unhealthy { reason, .. } => {
                    return Err(HostError::Unhealthy {
                        plugin: plugin(),
                        reason: reason.clone(),
                    })
                }
                State::Backoff { reason, .. } if !self.is_announced() => {
                    return Err(HostError::Unhealthy {
                        plugin: plugin(),
                        reason: never_announced(reason),
                    })
                }
                _ => {}
            }
            if let Some(link) = clients.borrow_and_update().clone() {
                if link.client.closed_reason().is_none() {
                    break link;
                }
            }
            match tokio::time::timeout_at(deadline, clients.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => {
                    return Err(HostError::Unavailable {
                        plugin: plugin(),
                        reason: "stopped".into(),
                    })
                }
                Err(_) => {
                    return Err(HostError::Unavailable {
                        plugin: plugin(),
                        reason: self.status().reason.unwrap_or_else(|| "not running".into()),
                    })
                }
            }
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let in_flight = target.map(|t| InFlight::new(&link, t));
        let answered = link.client.call_answered(envelope, left).await;
        if let (Err(e), Some(in_flight)) = (&answered, in_flight) {
            if !matches!(e, CallError::DeadlineExceeded) {
                in_flight.keep();
            }
        }
        answered.map_err(|e| match e {
            CallError::DeadlineExceeded => HostError::DeadlineExceeded { plugin: plugin() },
            other => HostError::Unavailable {
                plugin: plugin(),
                reason: other.to_string(),
            },
        })
    }

    /// Stops the plugin: closes its stdin so it finishes what it has, then
    /// kills it after `grace`.
    pub async fn stop(&self, grace: Duration) {
        let _ = self.stop.send(true);
        let task = lock(&self.task).take();
        if let Some(task) = task {
            if tokio::time::timeout(grace + Duration::from_secs(1), task)
                .await
                .is_err()
            {
                tracing::warn!(plugin = %self.name(), "supervisor did not stop in time");
            }
        }
    }
}

fn never_announced(reason: &str) -> String {
    format!("it has not completed a handshake since the satellite started; retrying with backoff; last failure: {reason}")
}

fn spawn_config(spec: &PluginSpec) -> SpawnConfig {
    let mut config = SpawnConfig::new(&spec.path);
    config.handshake_timeout = spec.handshake_timeout;
    config.env_allow = spec.env_allow.clone();
    config
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn supervise(
    shared: Arc<Shared>,
    spec: PluginSpec,
    config: SpawnConfig,
    mut supervisor: Supervisor,
    mut running: Option<orrery_plugin_sdk::process::PluginProcess>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if let Some(mut process) = running.take() {
            let version = process.client.announcement().version.clone();
            if let Some(stderr) = process.stderr.take() {
                tokio::spawn(capture_logs(
                    stderr,
                    shared.name.clone(),
                    version,
                    process.pid,
                ));
            }
            *lock(&shared.status) = (
                supervisor.state().clone(),
                supervisor.restarts(),
                Some(process.pid),
            );
            let link = Link::new(process.client.clone());
            shared.client.send_replace(Some(link.clone()));
            let reason = tokio::select! {
                status = process.child.wait() => match status {
                    Ok(s) => format!("process exited ({s})"),
                    Err(e) => format!("cannot wait for the process: {e}"),
                },
                reason = process.client.wait_closed() => reason,
                reason = watch_pings(&process.client, spec.ping_interval) => reason,
                () = stopped(&mut stop) => {
                    // Forget the link first so that no clone keeps the
                    // plugin's stdin open.
                    shared.client.send_replace(None);
                    drop(link);
                    shutdown(process, STOP_GRACE).await;
                    return;
                }
            };
            let _ = process.child.start_kill();
            shared.client.send_replace(None);
            let suspects = link.suspects();
            tracing::warn!(plugin = %shared.name, pid = process.pid, %reason, ?suspects, "plugin failed; its in-flight requests fail as retryable");
            let suspects: Vec<&str> = suspects.iter().map(String::as_str).collect();
            supervisor.on_crash(Instant::now(), reason, &suspects);
            for (target, backoff) in supervisor.target_backoffs() {
                if !lock(&shared.target_backoffs).contains_key(target) {
                    tracing::error!(plugin = %shared.name, %target, reason = %backoff.reason, "target backed off");
                }
            }
        }
        *lock(&shared.status) = (supervisor.state().clone(), supervisor.restarts(), None);
        lock(&shared.target_backoffs).clone_from(supervisor.target_backoffs());
        match supervisor.poll(Instant::now()) {
            Action::Start => match spawn_plugin(&config).await {
                Ok(process) if process.client.announcement().name != shared.name => {
                    // Served under the name its file gave; another name
                    // would answer requests meant for some other plugin.
                    let announced = process.client.announcement().name.clone();
                    shutdown(process, Duration::ZERO).await;
                    let reason = format!(
                        "it announced itself as `{announced}`, not as `{}`, the name it is served under",
                        shared.name
                    );
                    tracing::warn!(plugin = %shared.name, %reason, "plugin misnamed");
                    supervisor.on_failure(Instant::now(), reason);
                }
                Ok(process) => {
                    if shared
                        .announced
                        .set(process.client.announcement().clone())
                        .is_ok()
                    {
                        tracing::info!(plugin = %shared.name, version = %process.client.announcement().version, "plugin announced itself for the first time");
                    }
                    supervisor.on_started(Instant::now());
                    tracing::info!(plugin = %shared.name, pid = process.pid, restarts = supervisor.restarts(), "plugin started");
                    running = Some(process);
                }
                Err(e) => {
                    tracing::warn!(plugin = %shared.name, error = %e, "plugin failed to start");
                    supervisor.on_failure(Instant::now(), e.to_string());
                }
            },
            Action::WaitUntil(at) => {
                if let State::Unhealthy { reason, .. } = supervisor.state() {
                    tracing::error!(plugin = %shared.name, %reason, "plugin marked unhealthy");
                }
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {}
                    () = stopped(&mut stop) => return,
                }
            }
            Action::Idle => {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                    () = stopped(&mut stop) => return,
                }
            }
        }
    }
}

/// How long a stopping plugin may take to finish its in-flight requests.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Resolves once `stop` turns true (or its sender is gone).
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn watch_pings(client: &PluginClient, interval: Duration) -> String {
    loop {
        tokio::time::sleep(interval).await;
        if let Err(e) = client.ping(interval).await {
            return format!("plugin stopped answering pings: {e}");
        }
    }
}

async fn shutdown(mut process: orrery_plugin_sdk::process::PluginProcess, grace: Duration) {
    // Dropping every link handle closes the plugin's stdin; the SDK then
    // finishes in-flight requests and exits.
    drop(process.client);
    if tokio::time::timeout(grace, process.child.wait())
        .await
        .is_err()
    {
        let _ = process.child.kill().await;
    }
}

/// Re-emits the plugin's stderr through this process's logs, tagged with
/// the plugin's name, version and pid. JSON lines from the SDK keep their
/// level, message, request id and trace id.
async fn capture_logs(stderr: ChildStderr, plugin: String, version: String, pid: u32) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let parsed: Option<serde_json::Value> = serde_json::from_str(&line).ok();
        let field = |k: &str| {
            parsed.as_ref().and_then(|v| {
                v.get(k)
                    .or_else(|| v.get("fields").and_then(|f| f.get(k)))
                    .or_else(|| v.get("span").and_then(|f| f.get(k)))
                    .and_then(|x| x.as_str())
                    .map(str::to_owned)
            })
        };
        let level = field("level").unwrap_or_else(|| "INFO".into());
        let message = field("message").unwrap_or_else(|| line.clone());
        let request_id = field("request_id").unwrap_or_default();
        let trace_id = field("trace_id").unwrap_or_default();
        macro_rules! emit {
            ($lvl:ident) => {
                tracing::$lvl!(target: "plugin", %plugin, %version, pid, %request_id, %trace_id, "{message}")
            };
        }
        match level.as_str() {
            "ERROR" => emit!(error),
            "WARN" => emit!(warn),
            "DEBUG" => emit!(debug),
            "TRACE" => emit!(trace),
            _ => emit!(info),
        }
    }
}
