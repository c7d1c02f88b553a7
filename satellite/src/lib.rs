//! # orrery-satellite
//!
//! Supervises plugin processes and relays operations to them.
//!
//! - [`supervisor`]: restart and crash-loop decisions, time passed in.
//! - [`plugin_host`]: the process edge: start, capture logs, watch, restart.
//! - [`relay`]: serving plugins over NATS as a NATS service, with drain.
//! - [`bus`]: the caller's side, sending operations to satellites.
//! - [`health`]: `/healthz`, `/readyz`, `/metrics` over HTTP.
//! - [`describe`]: plugin announcements over NATS, for a primary without the binaries.
//! - [`hub`]: serving plugins installed from the hub (the `orrery-hub`
//!   crate), and rolling them on a lock change.
//! - [`transport`]: the `Transport` trait over NATS or the in-process [`transport::LocalBus`].

pub mod bus;
pub mod describe;
pub mod health;
pub mod hub;
pub mod metrics;
pub mod nats_client;
pub mod plugin_host;
pub mod relay;
pub mod supervisor;
pub mod transport;
