//! How records' parts are encoded in a store (the same on both backends):
//! properties and operation contexts as MessagePack, secret hashes and
//! dependencies as JSON.

use crate::{OperationRecord, StoreError, StoredResource};

/// A resource's properties (MessagePack), secret hashes and dependencies
/// (JSON) as stored.
pub(crate) fn encode_resource(r: &StoredResource) -> Result<(Vec<u8>, String, String), StoreError> {
    let props = orrery_schema::encode(&r.properties).map_err(|e| StoreError::Corrupt {
        label: r.label.clone(),
        reason: e.to_string(),
    })?;
    let hashes = serde_json::to_string(&r.secret_hashes).unwrap_or_else(|_| "{}".into());
    let deps = serde_json::to_string(&r.deps).unwrap_or_else(|_| "[]".into());
    Ok((props, hashes, deps))
}

/// An operation's `InProgress` context as stored (MessagePack).
pub(crate) fn encode_context(op: &OperationRecord) -> Result<Option<Vec<u8>>, StoreError> {
    op.context
        .as_ref()
        .map(|c| {
            orrery_schema::encode(c).map_err(|e| StoreError::Corrupt {
                label: op.label.clone(),
                reason: format!("operation context: {e}"),
            })
        })
        .transpose()
}

/// The stored context of operation `label`.
pub(crate) fn decode_context(
    label: &str,
    bytes: Option<&[u8]>,
) -> Result<Option<orrery_schema::Value>, StoreError> {
    bytes
        .map(|b| {
            orrery_schema::decode(b).map_err(|e| StoreError::Corrupt {
                label: label.to_owned(),
                reason: format!("operation context: {e}"),
            })
        })
        .transpose()
}
