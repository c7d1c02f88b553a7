//! A batch of writes: the transitions an executor records between two
//! moments it acts, written in one transaction (one round trip to
//! PostgreSQL, one commit in SQLite) instead of one each.

use crate::{OperationRecord, StoredResource};

/// One write of a batch; each does what the store method it names does.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// [`crate::StateStore::put_operation`].
    Operation {
        /// The command the operation belongs to.
        command_id: String,
        /// Where it stands.
        record: OperationRecord,
    },
    /// [`crate::StateStore::put_resource`].
    Resource(StoredResource),
    /// [`crate::StateStore::remove_resource`].
    Removal {
        /// The resource's stack.
        stack: String,
        /// Its label.
        label: String,
    },
}
