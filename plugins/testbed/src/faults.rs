//! The target config of the testbed: how many status polls an asynchronous
//! operation takes, and which faults to inject.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use orrery_plugin_sdk::schema::{ErrorCode, Operation, Target};
use orrery_plugin_sdk::{from_properties, PluginError};
use serde::Deserialize;

/// How long a throttled caller is asked to wait.
pub const THROTTLE_RETRY_AFTER_MS: u64 = 10;

/// The target config. Every key is optional; an empty config injects nothing.
#[derive(Debug, Default, Deserialize)]
pub struct Config {
    /// Status polls until an asynchronous create or delete finishes (default 2;
    /// 0 finishes at once).
    pub polls: Option<u64>,
    /// Every Nth request of the process answers `Throttling`.
    pub throttle_every: Option<u64>,
    /// The code of injected failures (default `ServiceInternalError`).
    pub fail_code: Option<String>,
    /// Every Nth request of the process fails with `fail_code` (default 1
    /// when `fail_code` is set).
    pub fail_every: Option<u64>,
    /// The operation on which the process aborts.
    pub crash_on: Option<String>,
    /// Abort on the Nth request of `crash_on` (default 1).
    pub crash_after: Option<u64>,
    /// Sleep this long before answering.
    pub delay_ms: Option<u64>,
    /// The operation whose handler panics.
    pub panic_on: Option<String>,
    /// Things `list` returns besides those created (`listed-00000`, …), to
    /// list more bytes than a message carries.
    pub listed: Option<u64>,
    /// The size of each such thing's `value`, a string, in bytes.
    pub listed_bytes: Option<u64>,
    /// An SQLite file keeping this target's things (see [`crate::store`]).
    pub store: Option<String>,
    /// How long a `Testbed::Cloud::Thing` create takes on the provider's
    /// side (default 0), at most [`MAX_CREATE_MS`].
    pub create_ms: Option<u64>,
}

/// The longest a cloud create may be asked to take.
pub const MAX_CREATE_MS: u64 = 600_000;

/// Most synthetic things `listed` may ask for.
const MAX_LISTED: u64 = 100_000;
/// Most bytes all synthetic things may take together.
const MAX_LISTED_BYTES: u64 = 64 << 20;

const OPERATIONS: [&str; 6] = ["create", "read", "update", "delete", "status", "list"];

impl Config {
    /// Reads and checks a target's config.
    pub fn of(target: &Target) -> Result<Config, PluginError> {
        if target.config.is_empty() {
            return Ok(Config::default()); // the benchmarks' fast path
        }
        let config: Config = from_properties(&target.config).map_err(|e| {
            PluginError::invalid(format!("config of target `{}`: {}", target.name, e.message))
        })?;
        for op in [&config.crash_on, &config.panic_on].into_iter().flatten() {
            if !OPERATIONS.contains(&op.as_str()) {
                return Err(PluginError::invalid(format!(
                    "config of target `{}`: unknown operation `{op}`; expected one of {}",
                    target.name,
                    OPERATIONS.join(", ")
                )));
            }
        }
        // A test's knob, still bounded: a config cannot make the plugin
        // allocate without limit.
        let (listed, bytes) = (config.listed.unwrap_or(0), config.listed_bytes.unwrap_or(0));
        if listed > MAX_LISTED || listed.saturating_mul(bytes.max(1)) > MAX_LISTED_BYTES {
            return Err(PluginError::invalid(format!(
                "config of target `{}`: at most {MAX_LISTED} listed things of at most \
                 {MAX_LISTED_BYTES} bytes in all",
                target.name
            )));
        }
        if config.create_ms.unwrap_or(0) > MAX_CREATE_MS {
            return Err(PluginError::invalid(format!(
                "config of target `{}`: `create_ms` is at most {MAX_CREATE_MS}",
                target.name
            )));
        }
        Ok(config)
    }

    /// Status polls an asynchronous operation takes.
    pub fn polls(&self) -> u64 {
        self.polls.unwrap_or(2)
    }
}

/// Counters shared by every target of one plugin instance (in the binary:
/// of the process).
#[derive(Debug, Default)]
pub struct Counters {
    requests: AtomicU64,
    per_operation: [AtomicU64; OPERATIONS.len()],
}

impl Counters {
    /// Counts a request and applies the faults `config` asks for: abort,
    /// panic, delay, throttling, failure — in that order.
    pub async fn inject(&self, config: &Config, operation: &Operation) -> Result<(), PluginError> {
        let op = operation.as_str();
        let nth = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let nth_of_op = match OPERATIONS.iter().position(|o| *o == op) {
            Some(i) => self.per_operation[i].fetch_add(1, Ordering::Relaxed) + 1,
            None => 0,
        };
        if config.crash_on.as_deref() == Some(op) && nth_of_op >= config.crash_after.unwrap_or(1) {
            tracing::error!(operation = op, nth = nth_of_op, "testbed: injected crash");
            std::process::abort();
        }
        if config.panic_on.as_deref() == Some(op) {
            panic!("testbed: injected panic on {op}");
        }
        if let Some(ms) = config.delay_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(every) = config.throttle_every.filter(|n| *n > 0) {
            if nth.is_multiple_of(every) {
                return Err(PluginError::throttled(
                    format!("testbed: injected throttling (request {nth}, every {every})"),
                    THROTTLE_RETRY_AFTER_MS,
                ));
            }
        }
        let fail_every = match (&config.fail_code, config.fail_every) {
            (_, Some(every)) => every,
            (Some(_), None) => 1,
            (None, None) => 0,
        };
        if fail_every > 0 && nth.is_multiple_of(fail_every) {
            let code = config
                .fail_code
                .as_deref()
                .map_or(ErrorCode::ServiceInternalError, ErrorCode::from_wire);
            return Err(PluginError::new(
                code,
                format!("testbed: injected failure (request {nth}, every {fail_every})"),
            ));
        }
        Ok(())
    }
}
