//! The process edge of supervision: starts a plugin, captures its logs,
//! watches it, and restarts it as the [`Supervisor`] decides.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orrery_plugin_sdk::process::{spawn_plugin, SpawnConfig};
use orrery_plugin_sdk::{Answered, CallError, PluginClient};
use orrery_schema::{Announcement, Envelope, ErrorCode};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::watch;

use crate::held_targets::HeldTargets;
use crate::supervisor::{Action, Policy, State, Supervisor};

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

impl HostError {
    /// The error code the caller sees.
    pub fn code(&self) -> ErrorCode {
        match self {
            HostError::Unhealthy { .. } => ErrorCode::PluginUnhealthy,
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
}

struct Shared {
    name: String,
    held: Arc<HeldTargets>,
    status: Mutex<(State, u64, Option<u32>)>,
    client: watch::Sender<Option<PluginClient>>,
}

/// A supervised plugin. Cheap to clone.
#[derive(Clone)]
pub struct PluginHost {
    shared: Arc<Shared>,
    announcement: Arc<Announcement>,
    stop: watch::Sender<bool>,
    task: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl PluginHost {
    /// Starts the plugin and waits for its first handshake, so the host
    /// knows the plugin's name and schemas before serving anything.
    pub async fn start(
        spec: PluginSpec,
    ) -> Result<PluginHost, orrery_plugin_sdk::process::SpawnError> {
        let mut config = SpawnConfig::new(&spec.path);
        config.handshake_timeout = spec.handshake_timeout;
        config.env_allow = spec.env_allow.clone();
        let first = spawn_plugin(&config).await?;
        let announcement = Arc::new(first.client.announcement().clone());
        let now = Instant::now();
        let mut supervisor = Supervisor::new(spec.policy.clone(), now);
        supervisor.poll(now);
        supervisor.on_started(now);
        let (client_tx, _) = watch::channel(Some(first.client.clone()));
        let shared = Arc::new(Shared {
            name: announcement.name.clone(),
            held: spec.held.clone(),
            status: Mutex::new((supervisor.state().clone(), 0, Some(first.pid))),
            client: client_tx,
        });
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(supervise(
            shared.clone(),
            spec,
            config,
            supervisor,
            first,
            stop_rx,
        ));
        Ok(PluginHost {
            shared,
            announcement,
            stop,
            task: Arc::new(Mutex::new(Some(task))),
        })
    }

    /// The plugin's name, as announced.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The first announcement (name, version, schemas).
    pub fn announcement(&self) -> &Announcement {
        &self.announcement
    }

    /// Current state, restarts and pid.
    pub fn status(&self) -> PluginStatus {
        let (state, restarts, pid) = lock(&self.shared.status).clone();
        let in_flight = self
            .shared
            .client
            .borrow()
            .as_ref()
            .map_or(0, PluginClient::in_flight);
        let (state, reason) = match state {
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
        let envelope = self.shared.held.apply(envelope)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let plugin = || self.shared.name.clone();
        let mut clients = self.shared.client.subscribe();
        let client = loop {
            if let State::Unhealthy { reason, .. } = &lock(&self.shared.status).0 {
                return Err(HostError::Unhealthy {
                    plugin: plugin(),
                    reason: reason.clone(),
                });
            }
            if let Some(client) = clients.borrow_and_update().clone() {
                if client.closed_reason().is_none() {
                    break client;
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
        client
            .call_answered(envelope, left)
            .await
            .map_err(|e| match e {
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn supervise(
    shared: Arc<Shared>,
    spec: PluginSpec,
    config: SpawnConfig,
    mut supervisor: Supervisor,
    first: orrery_plugin_sdk::process::PluginProcess,
    mut stop: watch::Receiver<bool>,
) {
    let mut running = Some(first);
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
            shared.client.send_replace(Some(process.client.clone()));
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
                    shutdown(process, STOP_GRACE).await;
                    return;
                }
            };
            let _ = process.child.start_kill();
            shared.client.send_replace(None);
            tracing::warn!(plugin = %shared.name, pid = process.pid, %reason, "plugin failed; its in-flight requests fail as retryable");
            supervisor.on_failure(Instant::now(), reason);
        }
        *lock(&shared.status) = (supervisor.state().clone(), supervisor.restarts(), None);
        match supervisor.poll(Instant::now()) {
            Action::Start => match spawn_plugin(&config).await {
                Ok(process) => {
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
