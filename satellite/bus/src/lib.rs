//! # orrery-bus
//!
//! How operations reach plugins, shared by the primary and the satellite:
//! nothing depends on the satellite daemon.
//!
//! - [`subjects`]: every NATS subject and queue group, in one file.
//! - [`transport`]: the `Transport` trait ("send this operation to plugin
//!   P") over NATS ([`bus::NatsBus`]) or in-process ([`transport::LocalBus`]).
//! - [`bus`]: the caller's side over NATS (`NoSatellite` on no responders).
//! - [`describe`]: plugin announcements over NATS, both sides.
//! - [`answer`]: answers given on a plugin's behalf when it cannot answer.
//! - [`receipts`]: satellites confirm taking a request; callers steer
//!   away from a silent one.
//! - [`nats_client`]: the one NATS connect (credentials, nkey, TLS).
//! - [`supervisor`]: restart and crash-loop decisions, time passed in.
//! - [`plugin_host`]: the process edge: start, capture logs, watch, restart.

pub mod answer;
pub mod bus;
pub mod describe;
pub mod held_targets;
pub mod nats_client;
pub mod plugin_host;
pub mod receipts;
pub mod subjects;
pub mod supervisor;
pub mod transport;
