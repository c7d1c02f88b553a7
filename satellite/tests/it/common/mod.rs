//! The satellite tests' fixtures: a real nats-server per test and the
//! workspace's binaries, from `orrery-testing` (one implementation for every
//! crate's tests).

#![allow(unused_imports)]

pub use orrery_testing::nats::*;
