//! The state store: stacks' resources, commands and their operations.
//!
//! Every transition is written before the effect it records is acted on:
//! an operation is recorded `running` with its request id before it is
//! sent, so a primary restarted mid-apply knows what might have happened.

mod model;
mod sqlite;

pub use model::{CommandRecord, CommandStatus, OperationRecord, StoredResource, RECORD_FORMAT};
pub use sqlite::{SqliteStore, StoreError};
