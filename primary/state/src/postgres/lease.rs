//! Command leases: a row per leased command. Taking one is a single upsert
//! whose conflicting row stays locked for the rest of the transaction, so
//! the holder read after a refusal is the one that refused.

use postgres::Client;

use super::{StoreError, NOW_MS};
use crate::{expiry, Lease, LeaseGrant};

pub(super) fn now_ms(c: &mut Client) -> Result<i64, StoreError> {
    Ok(c.query_one(&format!("SELECT {NOW_MS}"), &[])?.get(0))
}

pub(super) fn acquire(
    c: &mut Client,
    command_id: &str,
    owner: &str,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<LeaseGrant, StoreError> {
    let mut tx = c.transaction()?;
    let taken = tx.execute(
        "INSERT INTO command_leases (command_id, owner, expires_ms) VALUES ($1, $2, $4)
         ON CONFLICT (command_id) DO UPDATE SET owner = EXCLUDED.owner,
             expires_ms = EXCLUDED.expires_ms
         WHERE command_leases.owner = EXCLUDED.owner OR command_leases.expires_ms <= $3",
        &[&command_id, &owner, &now_ms, &expiry(now_ms, ttl_ms)],
    )?;
    let grant = if taken > 0 {
        LeaseGrant::Granted
    } else {
        let row = tx.query_one(
            "SELECT owner, expires_ms FROM command_leases WHERE command_id = $1",
            &[&command_id],
        )?;
        LeaseGrant::HeldBy(Lease {
            command_id: command_id.to_owned(),
            owner: row.get(0),
            expires_ms: row.get(1),
        })
    };
    tx.commit()?;
    Ok(grant)
}

pub(super) fn renew(
    c: &mut Client,
    command_id: &str,
    owner: &str,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<bool, StoreError> {
    Ok(c.execute(
        "UPDATE command_leases SET expires_ms = $3 WHERE command_id = $1 AND owner = $2",
        &[&command_id, &owner, &expiry(now_ms, ttl_ms)],
    )? > 0)
}

pub(super) fn release(c: &mut Client, command_id: &str, owner: &str) -> Result<(), StoreError> {
    c.execute(
        "DELETE FROM command_leases WHERE command_id = $1 AND owner = $2",
        &[&command_id, &owner],
    )?;
    Ok(())
}
