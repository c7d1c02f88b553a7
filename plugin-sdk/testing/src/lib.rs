//! # orrery-testing
//!
//! What Orrery's tests share, in one place (`publish = false`):
//!
//! - [`binaries`]: the workspace's built binaries, found where cargo put
//!   them (`CARGO_TARGET_DIR` honoured), with a failure that says how to
//!   build them, and copies of plugin binaries with bytes of their own.
//! - [`wait`]: waiting on a condition with a deadline (never a bare sleep),
//!   for a value too, at another interval, or handing the timeout back.
//! - [`plugin_env`]: a plugin served in-process with request builders and
//!   answer checks, for plugin crates' tests.
//! - `nats` (feature `nats`): a real nats-server per test on a free port.
//! - `moto` (feature `moto`): a real moto_server (AWS emulator) per test.

pub mod binaries;
#[cfg(feature = "moto")]
pub mod moto;
#[cfg(feature = "nats")]
pub mod nats;
pub mod plugin_env;
pub mod wait;

pub use binaries::{binary, plugin_copy, target_debug, workspace_root};
pub use plugin_env::{failed, ok, props, PluginEnv};
pub use wait::{wait_for, wait_for_async, wait_until, wait_until_async, Wait};
