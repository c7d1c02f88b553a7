//! What the state store records.

use std::collections::BTreeMap;

use orrery_schema::{PropertyMap, Value};

/// Format version written with every resource and command record. Readers
/// upgrade older formats on load (see `state::sqlite::migrate`).
pub const RECORD_FORMAT: i64 = 1;

/// A resource as last recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoredResource {
    /// The stack that manages it (empty for unmanaged, discovered resources).
    pub stack: String,
    /// Its label in the stack.
    pub label: String,
    /// Its type.
    pub resource_type: String,
    /// Its target.
    pub target: String,
    /// The plugin serving the target when it was recorded.
    pub plugin: String,
    /// The plugin's identifier.
    pub native_id: String,
    /// Its properties as the plugin last returned them. Never holds
    /// write-only or opaque values.
    pub properties: PropertyMap,
    /// Keyed hashes of the write-only and opaque inputs last applied, by field.
    pub secret_hashes: BTreeMap<String, String>,
    /// Labels of the resources it referenced when applied (for delete order).
    pub deps: Vec<String>,
    /// Whether a stack manages it.
    pub managed: bool,
    /// Version counter, bumped on every change.
    pub version: i64,
}

/// How a command ended (or that it has not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandStatus {
    /// Still running (or interrupted: the primary stopped mid-command).
    #[default]
    Running,
    /// Every operation succeeded.
    Completed,
    /// Some operation failed.
    Failed,
    /// Canceled by the user.
    Canceled,
}

impl CommandStatus {
    /// The stored name.
    pub fn as_str(&self) -> &'static str {
        match self {
            CommandStatus::Running => "running",
            CommandStatus::Completed => "completed",
            CommandStatus::Failed => "failed",
            CommandStatus::Canceled => "canceled",
        }
    }

    /// Parses the stored name; unknown names read as `Failed`.
    pub fn parse(s: &str) -> Self {
        match s {
            "running" => CommandStatus::Running,
            "completed" => CommandStatus::Completed,
            "canceled" => CommandStatus::Canceled,
            _ => CommandStatus::Failed,
        }
    }
}

impl std::fmt::Display for CommandStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an operation of a command stands, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpStatus {
    /// Recorded before it is sent; its outcome is unknown until answered.
    #[default]
    Running,
    /// The plugin answered `InProgress`: polled with `status`.
    InProgress,
    /// It took effect.
    Succeeded,
    /// It failed.
    Failed,
    /// Not attempted: something it depends on failed.
    DependencyFailed,
    /// Not started: the command was canceled.
    Canceled,
}

impl OpStatus {
    /// Every status, in the order above.
    pub const ALL: [OpStatus; 6] = [
        OpStatus::Running,
        OpStatus::InProgress,
        OpStatus::Succeeded,
        OpStatus::Failed,
        OpStatus::DependencyFailed,
        OpStatus::Canceled,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            OpStatus::Running => "running",
            OpStatus::InProgress => "in_progress",
            OpStatus::Succeeded => "succeeded",
            OpStatus::Failed => "failed",
            OpStatus::DependencyFailed => "dependency_failed",
            OpStatus::Canceled => "canceled",
        }
    }

    /// Parses the stored name; an unknown name (a newer release's) reads
    /// as `Failed`, which is planned again rather than trusted.
    pub fn parse(s: &str) -> Self {
        OpStatus::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .unwrap_or(OpStatus::Failed)
    }
}

impl std::fmt::Display for OpStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One operation of a command, as recorded. Two records are equal when
/// they say the same; when each was written does not count.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct OperationRecord {
    /// The resource's label.
    pub label: String,
    /// `create`, `update`, `delete`, …
    pub operation: String,
    /// The idempotency key sent to the plugin.
    pub request_id: String,
    /// Where it stands.
    pub status: OpStatus,
    /// Attempts made.
    pub attempts: i64,
    /// The error code of a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// The message of a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The plugin's identifier, once an `InProgress` answer gave it: what a
    /// restarted primary polls `status` with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native_id: Option<String>,
    /// The plugin's `InProgress` context (stored MessagePack-encoded), passed
    /// back with every `status` poll, including after a restart.
    #[serde(skip)]
    pub context: Option<Value>,
    /// When the record was last written, in the store's clock (ms since
    /// the Unix epoch; 0 in one not read from a store). A `running` create
    /// was sent right after this: its answer may still come until this
    /// plus the request timeout.
    #[serde(skip)]
    pub updated_ms: i64,
}

impl PartialEq for OperationRecord {
    fn eq(&self, other: &Self) -> bool {
        let OperationRecord {
            label,
            operation,
            request_id,
            status,
            attempts,
            error_code,
            message,
            native_id,
            context,
            updated_ms: _,
        } = self;
        (
            label, operation, request_id, status, attempts, error_code, message, native_id, context,
        ) == (
            &other.label,
            &other.operation,
            &other.request_id,
            &other.status,
            &other.attempts,
            &other.error_code,
            &other.message,
            &other.native_id,
            &other.context,
        )
    }
}

/// A command and its operations.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CommandRecord {
    /// Its id.
    pub id: String,
    /// The stack.
    pub stack: String,
    /// `apply` or `destroy`.
    pub kind: String,
    /// Where it stands.
    pub status: CommandStatus,
    /// Unix milliseconds.
    pub started_ms: i64,
    /// Unix milliseconds, once finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// Who ran it (the API's principal, `local:<user>` from the CLI);
    /// `None` for commands recorded before the audit existed.
    pub principal: Option<String>,
    /// Its operations.
    pub operations: Vec<OperationRecord>,
}

/// A command without its operations.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CommandHead {
    /// Its id.
    pub id: String,
    /// The stack.
    pub stack: String,
    /// `apply` or `destroy`.
    pub kind: String,
    /// Where it stands.
    pub status: CommandStatus,
    /// Unix milliseconds.
    pub started_ms: i64,
    /// Unix milliseconds, once finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// Who ran it.
    pub principal: Option<String>,
}

impl CommandHead {
    /// The whole record: the head with its operations.
    pub fn with_operations(self, operations: Vec<OperationRecord>) -> CommandRecord {
        CommandRecord {
            id: self.id,
            stack: self.stack,
            kind: self.kind,
            status: self.status,
            started_ms: self.started_ms,
            principal: self.principal,
            finished_ms: self.finished_ms,
            operations,
        }
    }
}

/// Which commands `StateStore::commands` (crate `orrery-state`) lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandFilter {
    /// Only this stack's (every stack's when `None`).
    pub stack: Option<String>,
    /// Only those with this status (any when `None`).
    pub status: Option<CommandStatus>,
    /// At most this many, newest first.
    pub limit: usize,
    /// Only those after this command (by id) in that order, the next page
    /// of a listing; an unknown id lists none.
    pub before: Option<String>,
}

/// The stack document an apply was started with, kept so that a primary
/// restarted (or another one) can resume the command without being sent
/// the document again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandDocument {
    /// Where plugins ran: `embedded` (in the primary's care) or `nats`
    /// (behind satellites). Only a primary of the same kind resumes it.
    pub engine: String,
    /// `reconcile` or `patch`.
    pub mode: String,
    /// How errors name the document.
    pub source: String,
    /// The value of `${stack_dir}`.
    pub stack_dir: String,
    /// The document's text.
    pub text: String,
    /// The part of the stack it runs (`--target`, `--exclude`,
    /// `--replace`); empty: all of it.
    pub selection: crate::select::Selection,
}
