//! Tests of the JetStream plugin against real nats-server processes the
//! tests start (ORRERY_NATS_SERVER, or scripts/ensure-nats.sh's binary).

mod asynchronous;
mod auth;
mod buckets;
mod cluster;
mod common;
mod consumer;
mod cycle;
mod entry;
mod errors;
mod example;
mod fixtures;
mod orrery;
mod stream;
