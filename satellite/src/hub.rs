//! Serving hub-installed plugins: the glue between the `orrery-hub` crate
//! (packages, verification, installs, lock files) and this satellite's
//! relay and plugin host.
//!
//! - [`serve`]: install, serve, and roll a plugin to a new version when the
//!   lock file changes.
//! - [`fleet`]: which satellites serve which plugin versions, from NATS
//!   service info (how a roll knows the new relay has registered).

pub mod fleet;
pub mod serve;
