//! The audit log's table (`audit`, migration 13).

use super::{execute, query, Cl, StoreError, NOW_MS};
use crate::audit::{prune_below, AuditEntry, AuditFilter, AuditRecord, PRUNE_BATCH};

pub(super) async fn append(
    c: &mut Cl,
    entries: &[AuditEntry],
    keep: u64,
) -> Result<(), StoreError> {
    let mut principal = Vec::with_capacity(entries.len());
    let mut action = Vec::with_capacity(entries.len());
    let mut stack = Vec::with_capacity(entries.len());
    let mut command_id = Vec::with_capacity(entries.len());
    let mut plan_hash = Vec::with_capacity(entries.len());
    let mut outcome = Vec::with_capacity(entries.len());
    let mut count = Vec::with_capacity(entries.len());
    for e in entries {
        principal.push(e.principal.as_deref());
        action.push(e.action.as_str());
        stack.push(e.stack.as_deref());
        command_id.push(e.command_id.as_deref());
        plan_hash.push(e.plan_hash.as_deref());
        outcome.push(e.outcome.as_str());
        count.push(i32::try_from(e.count.max(1)).unwrap_or(i32::MAX));
    }
    let tx = c.transaction().await?;
    // One statement for the batch; `WITH ORDINALITY` keeps the given order
    // in the ids.
    let insert = tx
        .prepare_cached(&format!(
            "INSERT INTO audit (time_ms, principal, action, stack, command_id, plan_hash, outcome, count)
             SELECT {NOW_MS}, p, a, s, c, h, o, n
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[])
                  WITH ORDINALITY AS u(p, a, s, c, h, o, n, i)
             ORDER BY i"
        ))
        .await?;
    tx.execute(
        &insert,
        &[
            &principal,
            &action,
            &stack,
            &command_id,
            &plan_hash,
            &outcome,
            &count,
        ],
    )
    .await?;
    let newest = tx
        .prepare_cached("SELECT coalesce(max(id), 0) FROM audit")
        .await?;
    let newest: i64 = tx.query_one(&newest, &[]).await?.get(0);
    let prune = tx
        .prepare_cached(
            "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE id <= $1 ORDER BY id LIMIT $2)",
        )
        .await?;
    tx.execute(&prune, &[&prune_below(newest, keep), &PRUNE_BATCH])
        .await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn set_outcome(c: &Cl, command_id: &str, outcome: &str) -> Result<(), StoreError> {
    execute(
        c,
        "UPDATE audit SET outcome = $2 WHERE command_id = $1
           AND action IN ('apply', 'destroy', 'resume')",
        &[&command_id, &outcome],
    )
    .await?;
    Ok(())
}

pub(super) async fn list(c: &Cl, f: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
    Ok(query(
        c,
        "SELECT id, time_ms, principal, action, stack, command_id, plan_hash, outcome, count
         FROM audit WHERE ($1::text IS NULL OR stack = $1) AND ($2::text IS NULL OR principal = $2)
           AND ($3::bigint IS NULL OR time_ms >= $3) AND ($4::bigint IS NULL OR id < $4)
         ORDER BY id DESC LIMIT $5",
        &[
            &f.stack,
            &f.principal,
            &f.since_ms,
            &f.before,
            &i64::from(f.limit),
        ],
    )
    .await?
    .iter()
    .map(|r| AuditRecord {
        id: r.get(0),
        time_ms: r.get(1),
        principal: r.get(2),
        action: r.get(3),
        stack: r.get(4),
        command_id: r.get(5),
        plan_hash: r.get(6),
        outcome: r.get(7),
        count: u32::try_from(r.get::<_, i32>(8)).unwrap_or(1),
    })
    .collect())
}
