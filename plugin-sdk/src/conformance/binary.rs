//! The suite against a plugin executable (`orrery plugin test`), keeping the
//! end of the plugin's stderr so that a failure can be explained.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use crate::process::{plugin_command, SpawnConfig};

use super::report::{CheckResult, Report};
use super::{load_fixtures, run, FixtureError, Options};
use crate::client::{ConnectError, PluginClient};

/// Bytes of a plugin's stderr kept by [`run_binary`]: the last 64 KiB.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// How long a plugin may take to exit once its stdin is closed, before it
/// is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// How long the rest of stderr may take to arrive once the plugin is gone
/// (a grandchild may hold the pipe open).
const STDERR_GRACE: Duration = Duration::from_secs(2);

/// The end of what a plugin wrote on its stderr (its log channel).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginStderr {
    /// The last bytes written, at most [`STDERR_TAIL_BYTES`], starting at a
    /// line boundary when earlier bytes were dropped; invalid UTF-8 is
    /// replaced.
    pub text: String,
    /// How many bytes written before `text` were not kept.
    pub dropped_bytes: u64,
}

/// What [`run_binary`] produced.
#[derive(Debug)]
pub struct BinaryRun {
    /// The report, or why the suite could not run at all.
    pub result: Result<Report, RunError>,
    /// The plugin's stderr (empty when it never started).
    pub stderr: PluginStderr,
}

impl BinaryRun {
    /// Whether the suite ran and every check passed (warnings allowed).
    pub fn passed(&self) -> bool {
        self.result.as_ref().is_ok_and(Report::passed)
    }
}

/// Why the suite could not judge a plugin at all (as opposed to a plugin
/// that fails checks, `handshake` included).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The fixtures could not be loaded (none, unreadable, invalid).
    #[error(transparent)]
    Fixtures(#[from] FixtureError),
    /// The binary could not be executed.
    #[error("cannot start plugin `{}`", binary.display())]
    Start {
        /// The binary.
        binary: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The plugin speaks another protocol major: this host cannot test it.
    #[error("cannot test plugin `{}`", binary.display())]
    Protocol {
        /// The binary.
        binary: PathBuf,
        /// The handshake error, naming both majors.
        #[source]
        source: ConnectError,
    },
}

/// Starts the plugin binary at `binary` and runs the suite against it.
///
/// A plugin that starts but cannot complete the handshake (it crashes,
/// prints to stdout, announces nothing in time) yields a report whose
/// `handshake` check failed. A binary that cannot be executed, a plugin of
/// another protocol major and missing fixtures are a [`RunError`]: the
/// suite could not run. Either way the end of the plugin's stderr is kept.
pub async fn run_binary(binary: &Path, fixtures_dir: &Path, options: &Options) -> BinaryRun {
    let not_run = |e: RunError| BinaryRun {
        result: Err(e),
        stderr: PluginStderr::default(),
    };
    let fixtures = match load_fixtures(fixtures_dir) {
        Ok(fixtures) => fixtures,
        Err(e) => return not_run(e.into()),
    };
    let start_error = |source| RunError::Start {
        binary: binary.to_owned(),
        source,
    };
    let mut child = match command(binary, &options.env_allow).spawn() {
        Ok(child) => child,
        Err(e) => return not_run(start_error(e)),
    };
    // Read from the start, so that a chatty plugin never blocks on a full
    // pipe, not even before it has announced itself.
    let stderr = child
        .stderr
        .take()
        .map(|pipe| tokio::spawn(tail(pipe, STDERR_TAIL_BYTES)));
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        stop(&mut child).await;
        return not_run(start_error(std::io::Error::other(
            "child has no stdio pipes",
        )));
    };
    let result = match PluginClient::connect(stdout, stdin, options.call_timeout).await {
        Ok(client) => {
            let mut report = run(&client, &fixtures, options).await;
            report.checks.insert(
                0,
                CheckResult {
                    check: "handshake".into(),
                    resource_type: None,
                    passed: true,
                    detail: child.id().map(|p| format!("pid {p}")).unwrap_or_default(),
                    warnings: Vec::new(),
                },
            );
            // The last handle on the link: dropping it closes the plugin's
            // stdin, which asks it to exit.
            drop(client);
            Ok(report)
        }
        Err(source @ ConnectError::UnsupportedProtocol { .. }) => Err(RunError::Protocol {
            binary: binary.to_owned(),
            source,
        }),
        Err(e) => {
            let mut report = Report {
                plugin: binary.display().to_string(),
                ..Default::default()
            };
            report.record("handshake", None, Err(e.to_string()));
            Ok(report)
        }
    };
    stop(&mut child).await;
    let stderr = match stderr {
        Some(task) => match tokio::time::timeout(STDERR_GRACE, task).await {
            Ok(Ok(stderr)) => stderr,
            Ok(Err(e)) => PluginStderr {
                text: format!("(reading the plugin's stderr failed: {e})\n"),
                dropped_bytes: 0,
            },
            Err(_) => PluginStderr {
                text: "(the plugin's stderr stayed open after it exited)\n".into(),
                dropped_bytes: 0,
            },
        },
        None => PluginStderr::default(),
    };
    BinaryRun { result, stderr }
}

/// The plugin's command, as `process::spawn_plugin` builds it (the same
/// environment allow-list, own process group, killed with its handle and
/// with its host), except that the log format is left to the environment:
/// these logs are for a person.
fn command(binary: &Path, env_allow: &[String]) -> Command {
    let mut config = SpawnConfig::new(binary);
    config.env.clear();
    config.env_allow = env_allow.to_vec();
    plugin_command(&config)
}

/// Waits for the plugin to exit after its stdin closed, killing it when it
/// takes longer than [`EXIT_GRACE`].
async fn stop(child: &mut Child) {
    if tokio::time::timeout(EXIT_GRACE, child.wait())
        .await
        .is_err()
    {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

/// Reads `reader` to its end, keeping the last `keep` bytes.
async fn tail<R: AsyncRead + Unpin>(mut reader: R, keep: usize) -> PluginStderr {
    let mut kept: Vec<u8> = Vec::with_capacity(keep.min(8192));
    let mut dropped = 0u64;
    let mut chunk = vec![0u8; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => kept.extend_from_slice(&chunk[..n]),
        }
        // Trim in batches: at most twice `keep` is ever held.
        if kept.len() > 2 * keep {
            let cut = kept.len() - keep;
            kept.drain(..cut);
            dropped += cut as u64;
        }
    }
    if kept.len() > keep {
        let cut = kept.len() - keep;
        kept.drain(..cut);
        dropped += cut as u64;
    }
    if dropped > 0 {
        // Start at a whole line.
        if let Some(newline) = kept.iter().position(|&b| b == b'\n') {
            kept.drain(..=newline);
            dropped += newline as u64 + 1;
        }
    }
    PluginStderr {
        text: String::from_utf8_lossy(&kept).into_owned(),
        dropped_bytes: dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_tail_keeps_the_last_bytes_from_a_line_boundary() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let got = tail(text.as_bytes(), 1000).await;
        assert!(got.text.len() <= 1000, "{}", got.text.len());
        assert!(got.text.len() > 980, "{}", got.text.len());
        assert!(got.text.starts_with("line "), "{:?}", &got.text[..20]);
        assert!(got.text.ends_with("line 9999\n"));
        assert_eq!(got.dropped_bytes as usize + got.text.len(), text.len());
        assert_eq!(&text[got.dropped_bytes as usize..], got.text);
    }

    #[tokio::test]
    async fn a_short_stderr_is_kept_whole() {
        let got = tail(&b"one\ntwo"[..], 1000).await;
        assert_eq!(
            got,
            PluginStderr {
                text: "one\ntwo".into(),
                dropped_bytes: 0
            }
        );
    }
}
