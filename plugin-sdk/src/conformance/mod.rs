//! The conformance suite: does a plugin keep the contract?
//!
//! Run it from a plugin's own tests with [`assert_conformant`], or against
//! any plugin binary with [`run_binary`] (the `orrery plugin test` command).
//! Each check has a stable name; a failure names the check, the resource
//! type and what differed. The suite is exactly as strict as the protocol:
//! what the host accepts (an enum value this release does not know) passes,
//! with a warning in the report.

mod announcement;
mod binary;
mod checks;
mod fixture;
mod report;

use std::path::Path;
use std::time::Duration;

pub use binary::{run_binary, BinaryRun, PluginStderr, RunError, STDERR_TAIL_BYTES};
pub use fixture::{load_fixtures, Fixture, FixtureError, TEMPDIR_PLACEHOLDER};
pub use report::{CheckResult, Outcome, Report};

use crate::client::PluginClient;
use crate::plugin::ResourcePlugin;

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
    /// Variables of the host's environment passed on to a plugin binary
    /// besides the standard ones ([`crate::process::inherited`]), as a
    /// satellite's `--plugin-env` does.
    pub env_allow: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            call_timeout: Duration::from_secs(10),
            page_size: 2,
            concurrency: 8,
            max_polls: 200,
            env_allow: Vec::new(),
        }
    }
}

/// Runs every check against a connected plugin.
pub async fn run(client: &PluginClient, fixtures: &[Fixture], options: &Options) -> Report {
    checks::Suite::new(client.clone(), options.clone())
        .run(fixtures)
        .await
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
///
/// # Panics
///
/// When the fixtures cannot be loaded, when the plugin does not start
/// in-process, or when any check fails (the message is the report).
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
