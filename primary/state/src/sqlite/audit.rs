//! The audit log's table (`audit`).

use rusqlite::{params, Connection};

use super::{now_ms, StoreError};
use crate::audit::{prune_below, AuditEntry, AuditFilter, AuditRecord, PRUNE_BATCH};

pub(super) const TABLE: &str = "
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time_ms INTEGER NOT NULL,
    principal TEXT,
    action TEXT NOT NULL,
    stack TEXT,
    command_id TEXT,
    plan_hash TEXT,
    outcome TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS audit_by_command ON audit (command_id);
";

pub(super) fn append(
    conn: &mut Connection,
    entries: &[AuditEntry],
    keep: u64,
) -> Result<(), StoreError> {
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO audit (time_ms, principal, action, stack, command_id, plan_hash, outcome, count)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        let now = now_ms();
        for e in entries {
            insert.execute(params![
                now,
                e.principal,
                e.action,
                e.stack,
                e.command_id,
                e.plan_hash,
                e.outcome,
                e.count.max(1)
            ])?;
        }
        let newest: i64 =
            tx.query_row("SELECT coalesce(max(id), 0) FROM audit", [], |r| r.get(0))?;
        tx.prepare_cached(
            "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE id <= ?1 ORDER BY id LIMIT ?2)",
        )?
        .execute(params![prune_below(newest, keep), PRUNE_BATCH])?;
    }
    tx.commit()?;
    Ok(())
}

pub(super) fn set_outcome(
    conn: &Connection,
    command_id: &str,
    outcome: &str,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE audit SET outcome = ?2 WHERE command_id = ?1
           AND action IN ('apply', 'destroy', 'resume')",
    )?
    .execute(params![command_id, outcome])?;
    Ok(())
}

pub(super) fn list(conn: &Connection, f: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, time_ms, principal, action, stack, command_id, plan_hash, outcome, count
         FROM audit WHERE (?1 IS NULL OR stack = ?1) AND (?2 IS NULL OR principal = ?2)
           AND (?3 IS NULL OR time_ms >= ?3) AND (?4 IS NULL OR id < ?4)
         ORDER BY id DESC LIMIT ?5",
    )?;
    let rows = stmt.query_map(
        params![
            f.stack,
            f.principal,
            f.since_ms,
            f.before,
            i64::from(f.limit)
        ],
        |r| {
            Ok(AuditRecord {
                id: r.get(0)?,
                time_ms: r.get(1)?,
                principal: r.get(2)?,
                action: r.get(3)?,
                stack: r.get(4)?,
                command_id: r.get(5)?,
                plan_hash: r.get(6)?,
                outcome: r.get(7)?,
                count: r.get(8)?,
            })
        },
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}
