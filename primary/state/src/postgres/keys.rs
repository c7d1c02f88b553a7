//! Key-only views of the records. Fingerprints are computed in the
//! database (`sha256` of the stored MessagePack), so properties never cross
//! the connection.

use std::collections::BTreeMap;

use super::Cl;

use super::{query, StoreError};
use crate::{DiscoveredKey, ManagedKey};
use orrery_core::keys::fingerprint_of_digest;

pub(super) async fn resource_counts(c: &Cl) -> Result<BTreeMap<String, u64>, StoreError> {
    Ok(query(
        c,
        "SELECT stack, count(*) FROM resources GROUP BY stack",
        &[],
    )
    .await?
    .iter()
    .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
    .collect())
}

pub(super) async fn managed_keys(
    c: &Cl,
    target: &str,
    resource_type: &str,
) -> Result<Vec<ManagedKey>, StoreError> {
    Ok(query(
        c,
        "SELECT stack, native_id FROM resources
             WHERE target = $1 AND resource_type = $2 AND managed
             ORDER BY stack, native_id COLLATE \"C\"",
        &[&target, &resource_type],
    )
    .await?
    .iter()
    .map(|r| ManagedKey {
        stack: r.get(0),
        native_id: r.get(1),
    })
    .collect())
}

pub(super) async fn discovered_keys(
    c: &Cl,
    target: &str,
    resource_type: &str,
) -> Result<Vec<DiscoveredKey>, StoreError> {
    Ok(query(
        c,
        "SELECT label, substring(sha256(properties) from 1 for 16) FROM resources
             WHERE stack = '' AND NOT managed AND target = $1 AND resource_type = $2
             ORDER BY label",
        &[&target, &resource_type],
    )
    .await?
    .iter()
    .map(|r| DiscoveredKey {
        label: r.get(0),
        fingerprint: fingerprint_of_digest(r.get::<_, &[u8]>(1)),
    })
    .collect())
}
