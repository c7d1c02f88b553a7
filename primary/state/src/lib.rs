//! # orrery-state
//!
//! The state store: stacks' resources, commands and their operations.
//!
//! Every transition is written before the effect it records is acted on:
//! an operation is recorded `running` with its request id before it is
//! sent, so a primary restarted mid-apply knows what might have happened.

pub mod audit;
mod codec;
mod error;
mod off_worker;
mod postgres;
pub mod secret_key;
mod serve_lock;
mod sqlite;
mod write;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

pub use audit::{AuditEntry, AuditFilter, AuditRecord, DEFAULT_AUDIT_RETENTION};
pub use error::StoreError;
pub use off_worker::{off_worker, OffWorker};
pub use orrery_core::keys::{fingerprint, fingerprint_bytes, DiscoveredKey, ManagedKey};
pub use orrery_core::lease::{expiry, Lease, LeaseGrant};
pub use orrery_core::record::{
    CommandDocument, CommandFilter, CommandHead, CommandRecord, CommandStatus, OpStatus,
    OperationRecord, StoredResource, RECORD_FORMAT,
};
#[doc(hidden)]
pub use postgres::connect_config as pg_connect_config;
pub use postgres::{
    Migration, PgPool, PgStore, TlsMode, DEFAULT_POOL_SIZE, MIGRATIONS, PG_SCHEMA_VERSION,
};
pub use serve_lock::{serve_lock, ServeLock, LOCK_FILE};
pub use sqlite::SqliteStore;
pub use write::Write;

pub use orrery_core::plan::moved::Move;
use orrery_schema::PropertyMap;
use orrery_stack::TargetDecl;

/// A page of resources: those matching every filter given, ordered by
/// stack then label, after `after` (exclusive), at most `limit` of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourcePage {
    /// Only this stack's.
    pub stack: Option<String>,
    /// Only of this type.
    pub resource_type: Option<String>,
    /// Only on this target.
    pub target: Option<String>,
    /// The `(stack, label)` the page starts after.
    pub after: Option<(String, String)>,
    /// The most returned (`None`: all).
    pub limit: Option<u32>,
}

/// A page of a command's operations: those with `status` (every one when
/// `None`), ordered by label then operation kind, after `after`
/// (exclusive), at most `limit` of them. Without `after` and `limit` every
/// operation comes, in the order they were last updated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperationPage {
    /// Only operations with this status (`OpStatus::as_str`).
    pub status: Option<String>,
    /// The `(label, operation)` the page starts after.
    pub after: Option<(String, String)>,
    /// The most returned (`None`: all).
    pub limit: Option<u32>,
}

impl OperationPage {
    /// Whether this asks for a page (keyset order) rather than everything.
    pub fn is_paged(&self) -> bool {
        self.after.is_some() || self.limit.is_some()
    }
}

/// What every state backend does. Calls are short and synchronous; the
/// executor makes a handful per operation. The stores [`open`] returns are
/// wrapped in [`OffWorker`], so a call made from an async task never holds
/// up the runtime's other tasks.
pub trait StateStore: Send + Sync {
    /// The key secret hashes are made with (created on first open).
    fn secret_key(&self) -> Result<Vec<u8>, StoreError>;
    /// The resources of `stack` (every stack when `None`), by stack and label.
    fn resources(&self, stack: Option<&str>) -> Result<Vec<StoredResource>, StoreError> {
        self.resource_page(&ResourcePage {
            stack: stack.map(str::to_owned),
            ..Default::default()
        })
    }
    /// A page of resources (bounded memory over a store of any size).
    fn resource_page(&self, page: &ResourcePage) -> Result<Vec<StoredResource>, StoreError>;
    /// Records a resource's new state (insert or replace), bumping its version.
    fn put_resource(&self, resource: &StoredResource) -> Result<(), StoreError>;
    /// Records a resource's new state only if its record is still at
    /// `version` (compare-and-set), bumping the version; false when the
    /// record changed since (or is gone). For writers that read, then
    /// decide, while a command may write the same record.
    fn put_resource_if_version(
        &self,
        resource: &StoredResource,
        version: i64,
    ) -> Result<bool, StoreError>;
    /// Forgets a resource (after it was deleted).
    fn remove_resource(&self, stack: &str, label: &str) -> Result<(), StoreError>;
    /// Records a stack's targets.
    fn put_targets(&self, stack: &str, targets: &[TargetDecl]) -> Result<(), StoreError>;
    /// A stack's recorded targets, by name.
    fn targets(&self, stack: &str) -> Result<Vec<TargetDecl>, StoreError>;
    /// Starts a command record (`running`).
    fn begin_command(&self, id: &str, stack: &str, kind: &str) -> Result<(), StoreError>;
    /// Records who ran a command (the audit). The first principal recorded
    /// for an id stays.
    fn put_command_principal(&self, command_id: &str, principal: &str) -> Result<(), StoreError>;
    /// Records where an operation of a command stands.
    fn put_operation(&self, command_id: &str, op: &OperationRecord) -> Result<(), StoreError>;
    /// Applies `writes` in order, all or none (one transaction in both
    /// backends). This default applies them one by one, for stores that
    /// have nothing better.
    fn write_batch(&self, writes: &[Write]) -> Result<(), StoreError> {
        for write in writes {
            match write {
                Write::Operation { command_id, record } => {
                    self.put_operation(command_id, record)?
                }
                Write::Resource(r) => self.put_resource(r)?,
                Write::Removal { stack, label } => self.remove_resource(stack, label)?,
            }
        }
        Ok(())
    }
    /// Re-addresses `stack`'s records as `moves` say (`moved:` in a
    /// document), in one write (one transaction): each moved record under
    /// its new label, unchanged otherwise, and every other record's
    /// dependency on it renamed. Moves apply in order, so chains work; a
    /// `from` that is not recorded is skipped. A `to` that is recorded
    /// already is refused ([`StoreError::MoveTaken`]) and nothing is written.
    fn move_resources(&self, stack: &str, moves: &[Move]) -> Result<(), StoreError> {
        let stored = self.resources(Some(stack))?;
        let mut labels: std::collections::BTreeSet<&str> =
            stored.iter().map(|s| s.label.as_str()).collect();
        for m in moves {
            if !labels.contains(m.from.as_str()) {
                continue;
            }
            if labels.contains(m.to.as_str()) {
                return Err(StoreError::MoveTaken {
                    stack: stack.to_owned(),
                    label: m.to.clone(),
                });
            }
            labels.remove(m.from.as_str());
            labels.insert(&m.to);
        }
        let (removed, put) = orrery_core::plan::moved::move_writes(&stored, moves);
        let writes: Vec<Write> = removed
            .into_iter()
            .map(|label| Write::Removal {
                stack: stack.to_owned(),
                label,
            })
            .chain(put.into_iter().map(Write::Resource))
            .collect();
        self.write_batch(&writes)
    }
    /// The latest command of `stack` with its operations (a restarted
    /// primary resumes it when it is still `running`).
    fn latest_command_of(&self, stack: &str) -> Result<Option<CommandRecord>, StoreError>;
    /// Ends a command.
    fn finish_command(&self, id: &str, status: &CommandStatus) -> Result<(), StoreError>;
    /// A command with its operations; the latest when `id` is `None`.
    fn command(&self, id: Option<&str>) -> Result<Option<CommandRecord>, StoreError> {
        self.command_page(id, &OperationPage::default())
    }
    /// A command with a page of its operations (bounded memory over a
    /// command of any size); the latest when `id` is `None`.
    fn command_page(
        &self,
        id: Option<&str>,
        page: &OperationPage,
    ) -> Result<Option<CommandRecord>, StoreError>;

    // Key-only views, for work over the whole store in bounded memory.

    /// How many resources each stack has (`""`: discovered ones), by stack.
    fn resource_counts(&self) -> Result<BTreeMap<String, u64>, StoreError>;
    /// The managed resources of `resource_type` on targets named `target`
    /// (in any stack), by key, ordered by stack then native id.
    fn managed_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<ManagedKey>, StoreError>;
    /// The discovered (unmanaged) resources of `resource_type` on `target`,
    /// by label with a fingerprint of their properties, ordered by label.
    fn discovered_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<DiscoveredKey>, StoreError>;

    // Command listings.

    /// Commands without their operations, newest first.
    fn commands(&self, filter: &CommandFilter) -> Result<Vec<CommandHead>, StoreError>;
    /// A command's operations counted by status.
    fn operation_counts(&self, command_id: &str) -> Result<BTreeMap<String, u64>, StoreError>;
    /// Every stack that ran a command, ordered.
    fn command_stacks(&self) -> Result<Vec<String>, StoreError>;
    /// Records the document an apply runs (replacing an earlier one).
    fn put_command_document(
        &self,
        command_id: &str,
        doc: &CommandDocument,
    ) -> Result<(), StoreError>;
    /// The document recorded for a command.
    fn command_document(&self, command_id: &str) -> Result<Option<CommandDocument>, StoreError>;
    /// Records a stack's outputs (name → `{value}` or `{secret: true}`),
    /// replacing the ones before.
    fn put_outputs(&self, stack: &str, outputs: &PropertyMap) -> Result<(), StoreError>;
    /// A stack's recorded outputs; `None` when it never recorded any.
    fn outputs(&self, stack: &str) -> Result<Option<PropertyMap>, StoreError>;
    /// Marks each labelled record of `stack` protected (`protect: true` in
    /// the document applied) or not, in one write; records not named keep
    /// their mark, a new record is unprotected, and no version is bumped.
    /// A record written under a new label (moved, replaced) loses it until
    /// marked again.
    fn set_protected(&self, stack: &str, marks: &[(String, bool)]) -> Result<(), StoreError>;
    /// The labels of `stack`'s records marked protected.
    fn protected_labels(&self, stack: &str) -> Result<BTreeSet<String>, StoreError>;

    // Command leases (see `orrery_core::lease`). Times are Unix milliseconds.

    /// The store's clock: one clock for every primary sharing the store
    /// (PostgreSQL's); what lease times are measured on in production.
    fn now_ms(&self) -> Result<i64, StoreError>;
    /// Takes the lease of `command_id` for `owner` until `now_ms + ttl_ms`
    /// when it is free, expired at `now_ms`, or `owner`'s already.
    fn acquire_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<LeaseGrant, StoreError>;
    /// Extends `owner`'s lease of `command_id` to `now_ms + ttl_ms`; false
    /// when `owner` no longer holds it (released, or taken after expiry).
    fn renew_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Frees `owner`'s lease of `command_id` (no-op when not `owner`'s).
    fn release_lease(&self, command_id: &str, owner: &str) -> Result<(), StoreError>;
    /// Says that `owner` wants the rate-limit buckets `buckets` now (the
    /// store's clock), forgets every owner not seen within `window_ms`, and
    /// counts for each of `buckets` the owners seen within it (`owner`
    /// included): how many share the bucket's limit
    /// (`orrery_core::scheduler::SharedRateLimiter`).
    fn rate_sharers(
        &self,
        owner: &str,
        buckets: &[String],
        window_ms: i64,
    ) -> Result<std::collections::HashMap<String, u32>, StoreError>;

    // The audit log (`audit.rs`).

    /// Appends `entries` in order, all or none, at the store's clock, then
    /// prunes the oldest records beyond the newest `keep` (at most
    /// `audit::PRUNE_BATCH` per call).
    fn append_audit(&self, entries: &[AuditEntry], keep: u64) -> Result<(), StoreError>;
    /// Sets the outcome of the record of `command_id`'s start (once it
    /// ended).
    fn set_audit_outcome(&self, command_id: &str, outcome: &str) -> Result<(), StoreError>;
    /// Audit records matching `filter`, newest first.
    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError>;
}

/// A shared store.
pub type Store = Arc<dyn StateStore>;

/// Opens the embedded store in `dir`.
pub fn open_dir(dir: &Path) -> Result<Store, StoreError> {
    Ok(Arc::new(OffWorker(SqliteStore::open(dir)?)))
}

/// Whether `location` names a PostgreSQL database (`postgres://…` or
/// `postgresql://…`) rather than a data directory.
pub fn is_database_url(location: &str) -> bool {
    let lower = location.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// Opens the store at `location`: PostgreSQL for a `postgres://` or
/// `postgresql://` URL (migrations applied), otherwise the embedded store in
/// that directory.
pub fn open(location: &str) -> Result<Store, StoreError> {
    if is_database_url(location) {
        Ok(Arc::new(OffWorker(PgStore::connect(
            location.trim_start(),
        )?)))
    } else {
        open_dir(Path::new(location))
    }
}
