//! How records' parts are encoded in a store (the same on both backends):
//! properties and operation contexts as MessagePack, secret hashes and
//! dependencies and an apply's selection as JSON.

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

/// An apply's selection as stored: `None` for the whole stack.
pub(crate) fn selection_to_text(selection: &orrery_core::select::Selection) -> Option<String> {
    (selection != &Default::default())
        .then(|| serde_json::to_string(selection).unwrap_or_else(|_| "{}".into()))
}

/// The stored selection of command `command_id`'s document.
pub(crate) fn selection_from_text(
    command_id: &str,
    text: Option<&str>,
) -> Result<orrery_core::select::Selection, StoreError> {
    text.map(|t| {
        serde_json::from_str(t).map_err(|e| StoreError::Corrupt {
            label: command_id.to_owned(),
            reason: format!("command selection: {e}"),
        })
    })
    .transpose()
    .map(Option::unwrap_or_default)
}
