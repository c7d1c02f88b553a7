//! Command leases: a row per leased command. Taking one is a single upsert
//! whose conflicting row stays locked for the rest of the transaction, so
//! the holder read after a refusal is the one that refused.

use super::Cl;

use super::{execute, query_one, StoreError, NOW_MS};
use crate::{expiry, Lease, LeaseGrant};

pub(super) async fn now_ms(c: &Cl) -> Result<i64, StoreError> {
    Ok(query_one(c, &format!("SELECT {NOW_MS}"), &[]).await?.get(0))
}

pub(super) async fn acquire(
    c: &mut Cl,
    command_id: &str,
    owner: &str,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<LeaseGrant, StoreError> {
    let tx = c.transaction().await?;
    let upsert = tx
        .prepare_cached(
            "INSERT INTO command_leases (command_id, owner, expires_ms) VALUES ($1, $2, $4)
         ON CONFLICT (command_id) DO UPDATE SET owner = EXCLUDED.owner,
             expires_ms = EXCLUDED.expires_ms
         WHERE command_leases.owner = EXCLUDED.owner OR command_leases.expires_ms <= $3",
        )
        .await?;
    let taken = tx
        .execute(
            &upsert,
            &[&command_id, &owner, &now_ms, &expiry(now_ms, ttl_ms)],
        )
        .await?;
    let grant = if taken > 0 {
        LeaseGrant::Granted
    } else {
        let holder = tx
            .prepare_cached("SELECT owner, expires_ms FROM command_leases WHERE command_id = $1")
            .await?;
        let row = tx.query_one(&holder, &[&command_id]).await?;
        LeaseGrant::HeldBy(Lease {
            command_id: command_id.to_owned(),
            owner: row.get(0),
            expires_ms: row.get(1),
        })
    };
    tx.commit().await?;
    Ok(grant)
}

pub(super) async fn renew(
    c: &Cl,
    command_id: &str,
    owner: &str,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<bool, StoreError> {
    Ok(execute(
        c,
        "UPDATE command_leases SET expires_ms = $3 WHERE command_id = $1 AND owner = $2",
        &[&command_id, &owner, &expiry(now_ms, ttl_ms)],
    )
    .await?
        > 0)
}

pub(super) async fn release(c: &Cl, command_id: &str, owner: &str) -> Result<(), StoreError> {
    execute(
        c,
        "DELETE FROM command_leases WHERE command_id = $1 AND owner = $2",
        &[&command_id, &owner],
    )
    .await?;
    Ok(())
}
