//! `orrery-hub`'s integration tests, one binary (issue 41): attacks on the
//! trust model through the storage layer, and the library against a real
//! nats-server with JetStream.

mod attacks;
mod common;
mod hub;
