//! What a command can fail with, whoever asked for it. Only the HTTP layer
//! turns these into status codes; the CLI prints them.

use crate::apply::ResumeError;
use crate::lease::LeaseError;
use crate::stack::StackError;
use crate::state::StoreError;

use super::plugins::PluginError;

/// Why the service refused or failed a command.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The document does not parse or does not validate; nothing was changed.
    #[error("the stack is invalid; nothing was changed:\n  {}", lines(.0))]
    InvalidStack(Vec<StackError>),
    /// A plugin the stack needs cannot be provided.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The satellite holding a target allows other stacks only; nothing
    /// was planned (the satellite would refuse every operation anyway).
    #[error("target `{target}` is held by its satellite's operator for other stacks than `{stack}` (allowed: {}); nothing was planned", .allowed.join(", "))]
    TargetRefused {
        /// The target.
        target: String,
        /// The stack.
        stack: String,
        /// The stack patterns its operator allows.
        allowed: Vec<String>,
    },
    /// This process already runs a command of the stack.
    #[error("stack `{stack}` has a command running: {command_id}")]
    Busy {
        /// The stack.
        stack: String,
        /// Its running command.
        command_id: String,
    },
    /// Another primary holds the lease of the stack's command.
    #[error(transparent)]
    LeaseHeld(LeaseError),
    /// The server stops taking commands.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// A mode this release does not know (a document recorded by another
    /// release, or a damaged record): never taken as `reconcile`, the mode
    /// that deletes.
    #[error("unknown mode `{0}`: expected `reconcile` or `patch`; nothing was changed")]
    UnknownMode(String),
    /// Nothing is recorded of the stack.
    #[error("no stack `{0}` is recorded")]
    UnknownStack(String),
    /// An interrupted command cannot be resumed by this primary.
    #[error("command {command_id} cannot be resumed here: {reason}")]
    NotResumable {
        /// The command.
        command_id: String,
        /// Why.
        reason: String,
    },
    /// Settling an interrupted command failed; it stays `running`.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// The plan deletes or replaces resources marked `protect: true`, and
    /// the command does not allow it; nothing was changed.
    #[error("refusing to delete or replace protected resource(s) {}; nothing was changed (allow it with --allow-protected)", .0.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", "))]
    Protected(Vec<String>),
    /// `--refresh` could not read some managed resources of the stack;
    /// nothing was planned or applied.
    #[error("refresh: cannot read {} resource(s) of the stack; nothing was planned or applied:\n  {}", .0.len(), .0.iter().map(|f| format!("`{}` [{}]: {}: {}", f.label, f.resource_type, f.code, f.message)).collect::<Vec<_>>().join("\n  "))]
    Refresh(Vec<crate::discovery::Failure>),
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),

    /// A `--target`/`--exclude`/`--replace` that cannot be made.
    #[error(transparent)]
    Selection(#[from] orrery_core::select::SelectError),
    /// A bug: a task of the service failed.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<LeaseError> for ServiceError {
    fn from(e: LeaseError) -> Self {
        match e {
            LeaseError::Store(e) => ServiceError::Store(e),
            held @ (LeaseError::Held { .. }
            | LeaseError::StackHeld { .. }
            | LeaseError::Contended { .. }) => ServiceError::LeaseHeld(held),
        }
    }
}

impl From<tokio::task::JoinError> for ServiceError {
    fn from(e: tokio::task::JoinError) -> Self {
        ServiceError::Internal(format!("a task failed: {e}"))
    }
}

fn lines(errors: &[StackError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n  ")
}
