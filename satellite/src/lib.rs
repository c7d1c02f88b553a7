//! # orrery-satellite
//!
//! Supervises plugin processes and relays operations to them.
//!
//! - [`relay`]: serving plugins over NATS as a NATS service, with drain.
//! - [`health`]: `/healthz`, `/readyz`, `/metrics` over HTTP.
//! - [`metrics`]: the relay's latency histogram.
//! - [`hub`]: serving plugins installed from the hub (the `orrery-hub`
//!   crate), and rolling them on a lock change.
//!
//! The plugin host, its supervisor and the bus are crate `orrery-bus`.

pub mod health;
pub mod hub;
pub mod metrics;
pub mod relay;
pub mod service;

// The bus and the plugin host live in `orrery-bus`, which the primary uses
// too; these paths keep the satellite's own callers short.
pub use orrery_bus::{
    bus, describe, held_targets, nats_client, plugin_host, supervisor, transport,
};
