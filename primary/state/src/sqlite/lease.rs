//! Command leases in one table: a row per leased command, taken in a write
//! transaction so that processes sharing the file agree on the holder.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::StoreError;
use crate::{expiry, Lease, LeaseGrant};

pub(super) fn acquire(
    conn: &mut Connection,
    command_id: &str,
    owner: &str,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<LeaseGrant, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let taken = tx.execute(
        "INSERT INTO command_leases (command_id, owner, expires_ms) VALUES (?1, ?2, ?4)
         ON CONFLICT (command_id) DO UPDATE SET owner = ?2, expires_ms = ?4
         WHERE command_leases.owner = ?2 OR command_leases.expires_ms <= ?3",
        params![command_id, owner, now_ms, expiry(now_ms, ttl_ms)],
    )?;
    let grant = if taken > 0 {
        LeaseGrant::Granted
    } else {
        let held = tx
            .query_row(
                "SELECT owner, expires_ms FROM command_leases WHERE command_id = ?1",
                params![command_id],
                |r| {
                    Ok(Lease {
                        command_id: command_id.to_owned(),
                        owner: r.get(0)?,
                        expires_ms: r.get(1)?,
                    })
                },
            )
            .optional()?;
        match held {
            Some(lease) => LeaseGrant::HeldBy(lease),
            // Not reachable inside the transaction; say so rather than guess.
            None => {
                return Err(StoreError::Corrupt {
                    label: command_id.to_owned(),
                    reason: "lease neither taken nor held".into(),
                })
            }
        }
    };
    tx.commit()?;
    Ok(grant)
}

pub(super) fn renew(
    conn: &Connection,
    command_id: &str,
    owner: &str,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<bool, StoreError> {
    Ok(conn.execute(
        "UPDATE command_leases SET expires_ms = ?3 WHERE command_id = ?1 AND owner = ?2",
        params![command_id, owner, expiry(now_ms, ttl_ms)],
    )? > 0)
}

pub(super) fn release(conn: &Connection, command_id: &str, owner: &str) -> Result<(), StoreError> {
    conn.execute(
        "DELETE FROM command_leases WHERE command_id = ?1 AND owner = ?2",
        params![command_id, owner],
    )?;
    Ok(())
}
