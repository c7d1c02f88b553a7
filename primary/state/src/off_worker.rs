//! Store calls that never hold up an async runtime. The trait is
//! synchronous; called from a task on tokio's multi-thread runtime, a call
//! runs under `block_in_place`, which hands that worker's other tasks to
//! another thread while this one waits on SQLite or on the PostgreSQL
//! pool. Elsewhere (plain threads, `spawn_blocking`, a current-thread
//! runtime, where handing off is impossible) the call runs as is.
//!
//! Every store `open` returns gives this wrapper, so no caller has to
//! remember to.

use std::collections::BTreeMap;

use orrery_stack::TargetDecl;
use tokio::runtime::{Handle, RuntimeFlavor};

use crate::{
    CommandDocument, CommandFilter, CommandHead, CommandRecord, CommandStatus, DiscoveredKey,
    LeaseGrant, ManagedKey, OperationPage, OperationRecord, StateStore, StoreError, StoredResource,
    Write,
};

/// A store whose calls leave the calling runtime's other tasks running.
pub struct OffWorker<S>(pub S);

/// Runs `f`, off the runtime's worker when called from one.
pub fn off_worker<T>(f: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl<S: StateStore> StateStore for OffWorker<S> {
    fn secret_key(&self) -> Result<Vec<u8>, StoreError> {
        off_worker(|| self.0.secret_key())
    }
    fn resource_page(&self, page: &crate::ResourcePage) -> Result<Vec<StoredResource>, StoreError> {
        off_worker(|| self.0.resource_page(page))
    }
    fn put_resource(&self, resource: &StoredResource) -> Result<(), StoreError> {
        off_worker(|| self.0.put_resource(resource))
    }
    fn put_resource_if_version(
        &self,
        resource: &StoredResource,
        version: i64,
    ) -> Result<bool, StoreError> {
        off_worker(|| self.0.put_resource_if_version(resource, version))
    }
    fn remove_resource(&self, stack: &str, label: &str) -> Result<(), StoreError> {
        off_worker(|| self.0.remove_resource(stack, label))
    }
    fn write_batch(&self, writes: &[Write]) -> Result<(), StoreError> {
        off_worker(|| self.0.write_batch(writes))
    }
    fn put_targets(&self, stack: &str, targets: &[TargetDecl]) -> Result<(), StoreError> {
        off_worker(|| self.0.put_targets(stack, targets))
    }
    fn put_outputs(
        &self,
        stack: &str,
        outputs: &orrery_schema::PropertyMap,
    ) -> Result<(), StoreError> {
        off_worker(|| self.0.put_outputs(stack, outputs))
    }
    fn outputs(&self, stack: &str) -> Result<Option<orrery_schema::PropertyMap>, StoreError> {
        off_worker(|| self.0.outputs(stack))
    }
    fn set_protected(&self, stack: &str, marks: &[(String, bool)]) -> Result<(), StoreError> {
        off_worker(|| self.0.set_protected(stack, marks))
    }
    fn protected_labels(
        &self,
        stack: &str,
    ) -> Result<std::collections::BTreeSet<String>, StoreError> {
        off_worker(|| self.0.protected_labels(stack))
    }
    fn targets(&self, stack: &str) -> Result<Vec<TargetDecl>, StoreError> {
        off_worker(|| self.0.targets(stack))
    }
    fn begin_command(&self, id: &str, stack: &str, kind: &str) -> Result<(), StoreError> {
        off_worker(|| self.0.begin_command(id, stack, kind))
    }
    fn put_command_principal(&self, command_id: &str, principal: &str) -> Result<(), StoreError> {
        off_worker(|| self.0.put_command_principal(command_id, principal))
    }
    fn put_operation(&self, command_id: &str, op: &OperationRecord) -> Result<(), StoreError> {
        off_worker(|| self.0.put_operation(command_id, op))
    }
    fn latest_command_of(&self, stack: &str) -> Result<Option<CommandRecord>, StoreError> {
        off_worker(|| self.0.latest_command_of(stack))
    }
    fn finish_command(&self, id: &str, status: &CommandStatus) -> Result<(), StoreError> {
        off_worker(|| self.0.finish_command(id, status))
    }
    fn command_page(
        &self,
        id: Option<&str>,
        page: &OperationPage,
    ) -> Result<Option<CommandRecord>, StoreError> {
        off_worker(|| self.0.command_page(id, page))
    }
    fn resource_counts(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        off_worker(|| self.0.resource_counts())
    }
    fn managed_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<ManagedKey>, StoreError> {
        off_worker(|| self.0.managed_keys(target, resource_type))
    }
    fn discovered_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<DiscoveredKey>, StoreError> {
        off_worker(|| self.0.discovered_keys(target, resource_type))
    }
    fn commands(&self, filter: &CommandFilter) -> Result<Vec<CommandHead>, StoreError> {
        off_worker(|| self.0.commands(filter))
    }
    fn operation_counts(&self, command_id: &str) -> Result<BTreeMap<String, u64>, StoreError> {
        off_worker(|| self.0.operation_counts(command_id))
    }
    fn command_stacks(&self) -> Result<Vec<String>, StoreError> {
        off_worker(|| self.0.command_stacks())
    }
    fn put_command_document(
        &self,
        command_id: &str,
        doc: &CommandDocument,
    ) -> Result<(), StoreError> {
        off_worker(|| self.0.put_command_document(command_id, doc))
    }
    fn command_document(&self, command_id: &str) -> Result<Option<CommandDocument>, StoreError> {
        off_worker(|| self.0.command_document(command_id))
    }
    fn now_ms(&self) -> Result<i64, StoreError> {
        off_worker(|| self.0.now_ms())
    }
    fn acquire_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<LeaseGrant, StoreError> {
        off_worker(|| self.0.acquire_lease(command_id, owner, now_ms, ttl_ms))
    }
    fn renew_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        off_worker(|| self.0.renew_lease(command_id, owner, now_ms, ttl_ms))
    }
    fn release_lease(&self, command_id: &str, owner: &str) -> Result<(), StoreError> {
        off_worker(|| self.0.release_lease(command_id, owner))
    }
    fn rate_sharers(
        &self,
        owner: &str,
        buckets: &[String],
        window_ms: i64,
    ) -> Result<std::collections::HashMap<String, u32>, StoreError> {
        off_worker(|| self.0.rate_sharers(owner, buckets, window_ms))
    }
    fn append_audit(&self, entries: &[crate::AuditEntry], keep: u64) -> Result<(), StoreError> {
        off_worker(|| self.0.append_audit(entries, keep))
    }
    fn set_audit_outcome(&self, command_id: &str, outcome: &str) -> Result<(), StoreError> {
        off_worker(|| self.0.set_audit_outcome(command_id, outcome))
    }
    fn audit(&self, filter: &crate::AuditFilter) -> Result<Vec<crate::AuditRecord>, StoreError> {
        off_worker(|| self.0.audit(filter))
    }
}
