//! The audit log: who started or canceled which command, and every refusal
//! (401, 403), kept in the store beside the commands. Records are appended
//! with the store's clock, pruned to the newest `keep`, and listed newest
//! first. A record carries names and reasons only: never a token, a
//! password or an output's value (the writers build it from principals,
//! stack names and refusal messages, which carry none).

/// What to record (the store adds the id and the time).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditEntry {
    /// Who: the principal's name; `None` when nobody was recognised (a 401).
    pub principal: Option<String>,
    /// What: `apply`, `destroy`, `resume`, `cancel`, `unauthorized` (401),
    /// `forbidden` (403).
    pub action: String,
    /// The stack concerned, when there is one.
    pub stack: Option<String>,
    /// The command concerned, when there is one.
    pub command_id: Option<String>,
    /// The hash of the plan a command started with.
    pub plan_hash: Option<String>,
    /// How it ended (`running` until a command finishes), or why it was refused.
    pub outcome: String,
    /// How many identical entries this one stands for (refusals coalesced
    /// by the writer); 1 otherwise.
    pub count: u32,
}

/// A recorded entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AuditRecord {
    /// Increases with every record.
    pub id: i64,
    /// When it was recorded, Unix milliseconds on the store's clock.
    pub time_ms: i64,
    /// See [`AuditEntry::principal`].
    pub principal: Option<String>,
    /// See [`AuditEntry::action`].
    pub action: String,
    /// See [`AuditEntry::stack`].
    pub stack: Option<String>,
    /// See [`AuditEntry::command_id`].
    pub command_id: Option<String>,
    /// See [`AuditEntry::plan_hash`].
    pub plan_hash: Option<String>,
    /// See [`AuditEntry::outcome`].
    pub outcome: String,
    /// See [`AuditEntry::count`].
    pub count: u32,
}

/// Which records to list: those matching every filter given, newest first,
/// with an id below `before` (exclusive), at most `limit`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this stack's.
    pub stack: Option<String>,
    /// Only this principal's.
    pub principal: Option<String>,
    /// Only those recorded at or after this time (Unix milliseconds).
    pub since_ms: Option<i64>,
    /// Only those older than this record id.
    pub before: Option<i64>,
    /// The most returned.
    pub limit: u32,
}

/// How many records the store keeps by default (`--audit-retention`).
pub const DEFAULT_AUDIT_RETENTION: u64 = 100_000;

/// The most records one prune deletes: a lowered retention is reached over
/// a few writes rather than in one long transaction.
pub const PRUNE_BATCH: i64 = 10_000;

/// The id at or below which records are pruned to keep the newest `keep`
/// of those up to `newest` (ids only grow; gaps only make fewer kept).
pub(crate) fn prune_below(newest: i64, keep: u64) -> i64 {
    newest.saturating_sub(i64::try_from(keep).unwrap_or(i64::MAX))
}
