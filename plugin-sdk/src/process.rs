//! Starting a plugin binary as a child process with no way to outlive its host.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, ChildStderr, Command};

use crate::client::{ConnectError, PluginClient};

/// A running plugin process and its link.
pub struct PluginProcess {
    /// The child; killed when dropped.
    pub child: Child,
    /// The link to it.
    pub client: PluginClient,
    /// Its stderr (the log channel), for the host to capture.
    pub stderr: Option<ChildStderr>,
    /// Its process id.
    pub pid: u32,
}

/// Why a plugin could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The binary could not be executed.
    #[error("cannot start plugin `{path}`: {source}")]
    Exec {
        /// The binary.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The process started but the handshake failed.
    #[error("plugin `{path}` failed its handshake: {source}")]
    Handshake {
        /// The binary.
        path: PathBuf,
        /// Why.
        #[source]
        source: ConnectError,
    },
}

/// How to start a plugin.
#[derive(Clone, Debug)]
pub struct SpawnConfig {
    /// The binary.
    pub path: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Extra environment variables.
    pub env: Vec<(OsString, OsString)>,
    /// How long the plugin may take to announce itself.
    pub handshake_timeout: Duration,
}

impl SpawnConfig {
    /// Defaults for `path`: no arguments, a 10 s handshake, JSON logs.
    pub fn new(path: impl AsRef<Path>) -> Self {
        SpawnConfig {
            path: path.as_ref().to_owned(),
            args: Vec::new(),
            env: vec![(crate::logging::LOG_FORMAT_ENV.into(), "json".into())],
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Starts the plugin and completes the handshake.
///
/// The child runs in its own process group, is killed when its handle is
/// dropped, and receives SIGKILL if the host dies (`PR_SET_PDEATHSIG`), so no
/// plugin process outlives its host.
///
/// # Errors
///
/// [`SpawnError::Exec`] when the binary cannot be started;
/// [`SpawnError::Handshake`] when it starts but does not announce itself
/// correctly within `handshake_timeout` (see [`PluginClient::connect`]).
pub async fn spawn_plugin(config: &SpawnConfig) -> Result<PluginProcess, SpawnError> {
    let mut command = Command::new(&config.path);
    command
        .args(&config.args)
        // The host's own service name would label the plugin's spans as the
        // host's; the SDK names the plugin after itself instead.
        .env_remove("OTEL_SERVICE_NAME")
        .envs(config.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // SAFETY: prctl is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|source| SpawnError::Exec {
        path: config.path.clone(),
        source,
    })?;
    let pid = child.id().unwrap_or(0);
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(SpawnError::Exec {
            path: config.path.clone(),
            source: std::io::Error::other("child has no stdio pipes"),
        });
    };
    let stderr = child.stderr.take();
    let client = PluginClient::connect(stdout, stdin, config.handshake_timeout)
        .await
        .map_err(|source| SpawnError::Handshake {
            path: config.path.clone(),
            source,
        })?;
    Ok(PluginProcess {
        child,
        client,
        stderr,
        pid,
    })
}
