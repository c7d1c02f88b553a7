//! # orrery-satellite
//!
//! Plugin process supervision and the NATS relay. Not built yet: the plugin
//! side it will drive (`orrery_plugin_sdk::process`, `orrery_plugin_sdk::client`)
//! is in place and tested.
