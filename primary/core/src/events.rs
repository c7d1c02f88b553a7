//! The command event stream, schema version [`SCHEMA_VERSION`]: every
//! transition of a command, as `orrery apply --output ndjson` prints it and
//! `GET /v1/commands/{id}/events` serves it (`docs/http-api.md`, "Command
//! events"). What the remote CLI, dashboards and scripts consume.
//!
//! Pure data and a pure fold ([`Tally`]): the primary stamps the time and
//! the sequence number where it emits them.

use serde::{Deserialize, Serialize};

use crate::record::{CommandRecord, CommandStatus, OpStatus};

/// The `run` of events rebuilt from a command's record ([`from_record`]).
pub const RECORD_RUN: &str = "record";

/// The schema version every event carries in `schema`. A consumer reads
/// events of a higher version as best it can: fields are only ever added,
/// and an unknown `type` or `status` is to be skipped, not refused.
pub const SCHEMA_VERSION: u32 = 1;

/// One event of one command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandEvent {
    /// [`SCHEMA_VERSION`] of the emitter.
    pub schema: u32,
    /// The command.
    pub command_id: String,
    /// Which run of the command emitted it: a command resumed by another
    /// (or a restarted) primary starts a new run, whose `seq` starts at 1.
    pub run: String,
    /// Position in the run, from 1, without gaps.
    pub seq: u64,
    /// When it was emitted, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub body: EventBody,
}

/// What happened, tagged by `type`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventBody {
    /// The command's plan, before the first operation.
    Planned(PlannedEvent),
    /// An operation's transition.
    Operation(OperationEvent),
    /// The command ended; the last event of a run.
    Finished(FinishedEvent),
}

/// The plan a command executes, counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedEvent {
    /// The stack.
    pub stack: String,
    /// `apply` or `destroy`.
    pub kind: String,
    /// Resources to create.
    pub create: usize,
    /// Resources to update in place.
    pub update: usize,
    /// Resources to replace.
    pub replace: usize,
    /// Resources to delete.
    pub delete: usize,
    /// Resources left as they are.
    pub no_op: usize,
    /// Operations the command will run (a replace is two).
    pub operations: usize,
}

/// One operation's transition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationEvent {
    /// The resource's label.
    pub label: String,
    /// `create`, `update` or `delete`.
    pub operation: String,
    /// The resource's type.
    pub resource_type: String,
    /// The plugin that runs it.
    pub plugin: String,
    /// The target it runs on.
    pub target: String,
    /// The transition.
    pub status: OpEvent,
    /// The attempt it belongs to, from 1 (0: none was made).
    pub attempt: u32,
    /// Error code of a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The plugin's (or the primary's) message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Milliseconds since the operation's first attempt started, on a
    /// terminal transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
}

/// An operation's transitions. `started` comes first, then any of
/// `waiting_for_rate_limit`, `in_progress`, `retrying` and `attempt`, then
/// exactly one terminal transition (`succeeded`, `failed`,
/// `dependency_failed`, `canceled`); `dependency_failed` and `canceled`
/// may come without a `started`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpEvent {
    /// Its first attempt was sent.
    Started,
    /// A later attempt was sent (after `retrying`).
    Attempt,
    /// It waits for a token of its rate-limit bucket.
    WaitingForRateLimit,
    /// The plugin answered InProgress; it is polled until it settles.
    InProgress,
    /// An attempt failed retryably; another follows after a backoff.
    Retrying,
    /// It took effect.
    Succeeded,
    /// It failed for good.
    Failed,
    /// Not attempted: an operation it depends on failed.
    DependencyFailed,
    /// Not attempted (or stopped): the command was canceled.
    Canceled,
}

impl OpEvent {
    /// Whether nothing follows it for that operation.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            OpEvent::Succeeded | OpEvent::Failed | OpEvent::DependencyFailed | OpEvent::Canceled
        )
    }

    /// The name in the schema.
    pub fn name(self) -> &'static str {
        match self {
            OpEvent::Started => "started",
            OpEvent::Attempt => "attempt",
            OpEvent::WaitingForRateLimit => "waiting_for_rate_limit",
            OpEvent::InProgress => "in_progress",
            OpEvent::Retrying => "retrying",
            OpEvent::Succeeded => "succeeded",
            OpEvent::Failed => "failed",
            OpEvent::DependencyFailed => "dependency_failed",
            OpEvent::Canceled => "canceled",
        }
    }
}

/// How a command ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishedEvent {
    /// `completed`, `failed`, `canceled`, or `error` (the command could
    /// not run: `message` says why; its record says where it stands).
    pub status: String,
    /// Operations that succeeded.
    pub succeeded: usize,
    /// Operations that failed.
    pub failed: usize,
    /// Operations not attempted because a dependency failed.
    pub dependency_failed: usize,
    /// Operations not started because the command was canceled.
    pub canceled: usize,
    /// Operations in flight when a forced cancel stopped waiting for them
    /// (recorded sent without an outcome; the next apply settles them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unsettled: usize,
    /// Requests retried.
    pub retries: u64,
    /// Requests sent to plugins.
    pub requests: u64,
    /// Wall time of the run.
    pub elapsed_ms: u64,
    /// Why the command could not run (`status` `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Where a command stands, folded from its events: what progress displays
/// show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Operations planned.
    pub total: usize,
    /// Operations that succeeded.
    pub succeeded: usize,
    /// Operations that failed, did not run for a failed dependency, or
    /// were canceled.
    pub failed: usize,
    /// Operations with a request in flight or being polled.
    pub in_flight: usize,
    /// Operations waiting for a rate-limit token.
    pub waiting: usize,
    /// Whether the command finished.
    pub finished: bool,
}

impl Tally {
    /// Takes `event` into account. `before` is the operation's previous
    /// transition (`None` for its first), which the caller keeps.
    pub fn add(&mut self, event: &EventBody, before: Option<OpEvent>) {
        match event {
            EventBody::Planned(p) => self.total = p.operations,
            EventBody::Finished(_) => {
                self.finished = true;
                self.in_flight = 0;
                self.waiting = 0;
            }
            EventBody::Operation(op) => {
                match before {
                    Some(OpEvent::WaitingForRateLimit) => {
                        self.waiting = self.waiting.saturating_sub(1)
                    }
                    Some(s) if !s.is_terminal() && s != OpEvent::Retrying => {
                        self.in_flight = self.in_flight.saturating_sub(1)
                    }
                    _ => {}
                }
                match op.status {
                    OpEvent::Succeeded => self.succeeded += 1,
                    OpEvent::Failed | OpEvent::DependencyFailed | OpEvent::Canceled => {
                        self.failed += 1
                    }
                    OpEvent::WaitingForRateLimit => self.waiting += 1,
                    OpEvent::Retrying => {}
                    OpEvent::Started | OpEvent::Attempt | OpEvent::InProgress => {
                        self.in_flight += 1
                    }
                }
            }
        }
    }

    /// Operations not finished yet.
    pub fn remaining(&self) -> usize {
        self.total.saturating_sub(self.succeeded + self.failed)
    }
}

/// A command's events as its record tells them, for a command whose live
/// events are gone (run by a primary since restarted, or long finished):
/// each operation's last recorded transition, then `finished` unless the
/// command is still `running`. Run [`RECORD_RUN`]; type, plugin and target
/// are not recorded and left empty.
pub fn from_record(record: &CommandRecord) -> Vec<CommandEvent> {
    let at_ms = |ms: Option<i64>| ms.unwrap_or(record.started_ms).max(0) as u64;
    let mut bodies: Vec<EventBody> = record
        .operations
        .iter()
        .map(|o| {
            EventBody::Operation(OperationEvent {
                label: o.label.clone(),
                operation: o.operation.clone(),
                resource_type: String::new(),
                plugin: String::new(),
                target: String::new(),
                status: match o.status {
                    OpStatus::Running => OpEvent::Started,
                    OpStatus::InProgress => OpEvent::InProgress,
                    OpStatus::Succeeded => OpEvent::Succeeded,
                    OpStatus::Failed => OpEvent::Failed,
                    OpStatus::DependencyFailed => OpEvent::DependencyFailed,
                    OpStatus::Canceled => OpEvent::Canceled,
                },
                attempt: o.attempts.max(0) as u32,
                code: o.error_code.clone(),
                message: o.message.clone(),
                elapsed_ms: None,
            })
        })
        .collect();
    if record.status != CommandStatus::Running {
        let count = |s: OpStatus| record.operations.iter().filter(|o| o.status == s).count();
        bodies.push(EventBody::Finished(FinishedEvent {
            status: record.status.to_string(),
            succeeded: count(OpStatus::Succeeded),
            failed: count(OpStatus::Failed),
            dependency_failed: count(OpStatus::DependencyFailed),
            canceled: count(OpStatus::Canceled),
            // A finished command's operations still sent without an
            // outcome: left so by a forced cancel.
            unsettled: count(OpStatus::Running) + count(OpStatus::InProgress),
            elapsed_ms: record
                .finished_ms
                .map_or(0, |f| (f - record.started_ms).max(0) as u64),
            ..Default::default()
        }));
    }
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| CommandEvent {
            schema: SCHEMA_VERSION,
            command_id: record.id.clone(),
            run: RECORD_RUN.to_owned(),
            seq: i as u64 + 1,
            at_ms: at_ms(record.finished_ms),
            body,
        })
        .collect()
}

#[cfg(test)]
mod tests;
