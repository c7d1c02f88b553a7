//! # orrery-primary
//!
//! The primary: reads stack documents, plans, schedules operations through
//! plugins, and remembers what it did.
//!
//! - [`stack`]: stack documents, validation, the dependency graph.
//! - [`plan`]: the planner (pure).
//! - [`scheduler`]: the scheduler, rate limiter and retry policy (pure, time passed in).
//! - [`state`]: the state store.
//! - [`apply`]: the executor, the I/O edge driving the scheduler.
//! - [`discovery`]: discovery of unmanaged resources, import, drift sync.
//! - [`service`]: the command service every caller drives (plan, apply, destroy, resume), how plugins are provided, plan and report views.
//! - [`nats`]: the NATS connection (URLs, credentials, nkey).
//! - [`http`]: the HTTP API of `orrery primary`.
//! - [`lease`]: command leases (which primary runs a command), kept while it runs.
//! - [`memory`]: giving the allocator's free memory back after a command.
//! - [`timetable`]: when periodic jobs are due (pure, time passed in).

pub mod apply;
pub mod discovery;
pub mod http;
pub mod lease;
pub mod memory;
pub mod metrics;
pub mod nats;
pub mod service;
pub use orrery_core::{plan, scheduler, timetable};
pub use orrery_stack as stack;
pub use orrery_state as state;
