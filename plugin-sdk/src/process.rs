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
    /// Variables of the host's environment passed on to the plugin besides
    /// the standard ones ([`inherited`]); the plugin starts with nothing
    /// else of the host's environment.
    pub env_allow: Vec<String>,
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
            env_allow: Vec::new(),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Variables every plugin gets from its host's environment: what a process
/// needs to run (`PATH`, `HOME`, `USER`, `LOGNAME`, `LANG`, `LC_*`, `TZ`,
/// `TMPDIR`), its logging and telemetry (`RUST_LOG`, `RUST_BACKTRACE`,
/// `OTEL_*` but `OTEL_SERVICE_NAME`) and the SDK's own (`ORRERY_PLUGIN_*`).
pub const INHERITED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_*",
    "TZ",
    "TMPDIR",
    "RUST_LOG",
    "RUST_BACKTRACE",
    "OTEL_*",
    "ORRERY_PLUGIN_*",
];

/// Whether the host's variable `name` is passed on to a plugin: one of
/// [`INHERITED`] (a trailing `*` matches any rest) or of `extra` (exact
/// names, as `--plugin-env` gives them).
pub fn inherited(name: &str, extra: &[String]) -> bool {
    if name == "OTEL_SERVICE_NAME" {
        // The host's own service name would label the plugin's spans as
        // the host's; the SDK names the plugin after itself instead.
        return false;
    }
    extra.iter().any(|e| e == name)
        || INHERITED.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *p,
        })
}

/// The command that starts the plugin of `config`, not yet spawned: a
/// cleared environment but the host's variables that [`inherited`] allows
/// (the standard ones and `env_allow`), then `env`; piped stdio; its own
/// process group; killed when its handle is dropped and sent SIGKILL if the
/// host dies (`PR_SET_PDEATHSIG`). Every host that starts a plugin (the
/// satellite, the embedded primary, `orrery plugin test`) starts it this
/// way, so none hands a plugin the host's secrets.
pub fn plugin_command(config: &SpawnConfig) -> Command {
    let mut command = Command::new(&config.path);
    command
        .args(&config.args)
        .env_clear()
        .envs(
            std::env::vars_os()
                .filter(|(k, _)| k.to_str().is_some_and(|k| inherited(k, &config.env_allow))),
        )
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
    command
}

/// Starts the plugin and completes the handshake.
///
/// The plugin starts with a cleared environment: only the host's variables
/// that [`inherited`] allows (the standard ones and `env_allow`), then
/// `env`. Secrets in the host's environment (a database URL, cloud
/// credentials) reach no plugin unless the operator names them.
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
    let mut command = plugin_command(config);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_standard_and_the_named_variables_are_inherited() {
        let extra = vec!["AWS_PROFILE".to_owned()];
        for yes in [
            "PATH",
            "HOME",
            "LC_ALL",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "ORRERY_PLUGIN_LOG_FORMAT",
            "AWS_PROFILE",
        ] {
            assert!(inherited(yes, &extra), "{yes}");
        }
        for no in [
            "ORRERY_DATABASE_URL",
            "SECRET_THING",
            "OTEL_SERVICE_NAME",
            "AWS_PROFILE_X",
            "PATHX",
            "LD_PRELOAD",
        ] {
            assert!(!inherited(no, &extra), "{no}");
        }
    }
}
