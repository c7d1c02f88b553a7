//! The conformance suite: does a plugin keep the contract?
//!
//! Run it from a plugin's own tests with [`assert_conformant`], or against
//! any plugin binary with [`run_binary`] (the `orrery plugin test` command).
//! Each check has a stable name; a failure names the check, the resource
//! type and what differed.

mod checks;
mod fixture;
mod report;

use std::path::Path;
use std::time::Duration;

pub use fixture::{load_fixtures, Fixture, FixtureError, TEMPDIR_PLACEHOLDER};
pub use report::{CheckResult, Report};

use crate::client::PluginClient;
use crate::plugin::ResourcePlugin;
use crate::process::{spawn_plugin, SpawnConfig};

/// Knobs of a run.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long one call may take.
    pub call_timeout: Duration,
    /// Page size for list checks; small, to exercise paging.
    pub page_size: u32,
    /// Resources created at once by the concurrency check.
    pub concurrency: usize,
    /// Most `status` polls before an `InProgress` operation counts as stuck.
    pub max_polls: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            call_timeout: Duration::from_secs(10),
            page_size: 2,
            concurrency: 8,
            max_polls: 200,
        }
    }
}

/// Runs every check against a connected plugin.
pub async fn run(client: &PluginClient, fixtures: &[Fixture], options: &Options) -> Report {
    checks::Suite::new(client.clone(), options.clone())
        .run(fixtures)
        .await
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The fixtures could not be loaded.
    #[error(transparent)]
    Fixtures(#[from] FixtureError),
    /// The in-process plugin did not connect.
    #[error("plugin did not start: {0}")]
    Connect(#[from] crate::client::ConnectError),
}

/// Starts the plugin binary at `binary` and runs the suite against it. A
/// plugin that cannot complete the handshake (it crashes, prints to stdout,
/// speaks another protocol) yields a report whose `handshake` check failed.
pub async fn run_binary(
    binary: &Path,
    fixtures_dir: &Path,
    options: &Options,
) -> Result<Report, RunError> {
    let fixtures = load_fixtures(fixtures_dir)?;
    let mut config = SpawnConfig::new(binary);
    config.handshake_timeout = options.call_timeout;
    let mut process = match spawn_plugin(&config).await {
        Ok(process) => process,
        Err(e) => {
            let mut report = Report {
                plugin: binary.display().to_string(),
                ..Default::default()
            };
            report.record("handshake", None, Err(e.to_string()));
            return Ok(report);
        }
    };
    if let Some(stderr) = process.stderr.take() {
        // Drain the log channel so a chatty plugin never blocks on a full pipe.
        tokio::spawn(async move {
            let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "plugin", "{line}");
            }
        });
    }
    let mut report = run(&process.client, &fixtures, options).await;
    report.checks.insert(
        0,
        CheckResult {
            check: "handshake".into(),
            resource_type: None,
            passed: true,
            detail: format!("pid {}", process.pid),
        },
    );
    let _ = process.child.start_kill();
    Ok(report)
}

/// Runs the suite against `plugin` in-process and panics with the report if
/// any check fails. For a plugin crate's own tests:
///
/// ```no_run
/// # async fn t() {
/// # struct MyPlugin;
/// # let my_plugin: Box<dyn Fn() -> ()> = Box::new(|| ());
/// // orrery_plugin_sdk::conformance::assert_conformant(MyPlugin::default(), "conformance").await;
/// # }
/// ```
pub async fn assert_conformant<P: ResourcePlugin>(
    plugin: P,
    fixtures_dir: impl AsRef<Path>,
) -> Report {
    let fixtures = match load_fixtures(fixtures_dir.as_ref()) {
        Ok(f) => f,
        Err(e) => panic!("conformance fixtures: {e}"),
    };
    let client = match crate::harness::start(plugin).await {
        Ok(c) => c,
        Err(e) => panic!("plugin did not start in-process: {e}"),
    };
    let report = run(&client, &fixtures, &Options::default()).await;
    assert!(report.passed(), "conformance failed:\n{}", report.to_text());
    report
}
