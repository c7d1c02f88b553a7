//! `orrery-satellite`'s integration tests, one binary (issue 41): the relay,
//! drain, health, hub serving, an older plugin, logs, the plugins'
//! environment and the loss of a satellite, against real nats-servers and
//! real plugin processes.

mod blast;
mod common;
mod drain;
mod health;
mod hub;
mod legacy_plugin;
mod logs;
mod plugin_env;
mod relay;
mod satellite_loss;
