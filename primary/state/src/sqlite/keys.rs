//! Key-only views of the records: identifiers, counts and fingerprints,
//! read row by row without decoding (or keeping) whole records.

use std::collections::BTreeMap;

use rusqlite::{params, Connection};

use super::StoreError;
use crate::{fingerprint_bytes, DiscoveredKey, ManagedKey};

pub(super) fn resource_counts(conn: &Connection) -> Result<BTreeMap<String, u64>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT stack, count(*) FROM resources GROUP BY stack")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn managed_keys(
    conn: &Connection,
    target: &str,
    resource_type: &str,
) -> Result<Vec<ManagedKey>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT stack, native_id FROM resources
         WHERE target = ?1 AND resource_type = ?2 AND managed != 0
         ORDER BY stack, native_id",
    )?;
    let rows = stmt.query_map(params![target, resource_type], |r| {
        Ok(ManagedKey {
            stack: r.get(0)?,
            native_id: r.get(1)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn discovered_keys(
    conn: &Connection,
    target: &str,
    resource_type: &str,
) -> Result<Vec<DiscoveredKey>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT label, properties FROM resources
         WHERE stack = '' AND managed = 0 AND target = ?1 AND resource_type = ?2
         ORDER BY label",
    )?;
    let rows = stmt.query_map(params![target, resource_type], |r| {
        // Hashed in place: the properties are never copied out.
        let fingerprint = match r.get_ref(1)? {
            rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => {
                fingerprint_bytes(b)
            }
            _ => fingerprint_bytes(&[]),
        };
        Ok(DiscoveredKey {
            label: r.get(0)?,
            fingerprint,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
