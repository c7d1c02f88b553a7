//! `orrery-core`'s integration tests, one binary: the deterministic
//! simulation.

mod simulation;
