//! # orrery-core
//!
//! The pure heart of the primary: what must change for a stack document
//! (read and validated by `orrery-stack`) to hold, and in which order and
//! when to send it. Nothing here does I/O or
//! reads a clock: time is an argument, and the crate's dependency tree has
//! no async runtime, database driver, HTTP server or NATS client (the
//! workspace's `tests/it/dependency_edges.rs` and `clippy.toml` enforce it).
//!
//! - [`answer`]: what a plugin's answer means (one classification).
//! - [`events`]: the command event stream's schema and its tally.
//! - [`plan`]: the planner.
//! - [`tasks`]: a plan turned into scheduler tasks (deletes in reverse order).
//! - [`select`]: targeted runs (`--target`, `--exclude`, `--replace`).
//! - [`scheduler`]: dependency order, concurrency, rate limits, retry policy.
//! - [`discovery`]: discovery and drift decisions (what to list, what changed).
//! - [`timetable`]: when periodic jobs are due.
//! - [`record`]: what the state store records (resources, commands, operations).
//! - [`keys`]: key-only views of records, for work in bounded memory.
//! - [`lease`]: command lease records and expiry rules.

pub mod answer;
pub mod discovery;
pub mod events;
pub mod extract;
pub mod keys;
pub mod lease;
pub mod plan;
pub mod record;
pub mod scheduler;
pub mod select;
pub mod tasks;
pub mod timetable;

#[cfg(test)]
mod test_support;

/// The tests' time origin: the one clock read in this crate, test-only.
#[cfg(test)]
mod test_clock {
    #[allow(clippy::disallowed_methods)]
    pub(crate) fn epoch() -> std::time::Instant {
        std::time::Instant::now()
    }
}
