//! `protect: true` recorded with the resource (`resources.protected`).

use std::collections::BTreeSet;

use rusqlite::{params, Connection};

use crate::StoreError;

/// Adds `resources.protected` to a file made before it existed (no-op
/// when it has it). Rows from before are unprotected.
pub(super) fn add_column(tx: &Connection) -> Result<(), StoreError> {
    let has = tx.query_row(
        "SELECT count(*) FROM pragma_table_info('resources') WHERE name = 'protected'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0;
    if !has {
        tx.execute_batch("ALTER TABLE resources ADD COLUMN protected INTEGER NOT NULL DEFAULT 0;")?;
    }
    Ok(())
}

pub(super) fn set(
    conn: &Connection,
    stack: &str,
    marks: &[(String, bool)],
) -> Result<(), StoreError> {
    let tx = conn.unchecked_transaction()?;
    {
        // A record not named keeps its mark; the version is not bumped
        // (nothing a plugin knows changed).
        let mut stmt = tx.prepare_cached(
            "UPDATE resources SET protected = ?3 WHERE stack = ?1 AND label = ?2 AND protected != ?3",
        )?;
        for (label, protected) in marks {
            stmt.execute(params![stack, label, protected])?;
        }
    }
    tx.commit()?;
    Ok(())
}

pub(super) fn labels(conn: &Connection, stack: &str) -> Result<BTreeSet<String>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT label FROM resources WHERE stack = ?1 AND protected != 0")?;
    let rows = stmt.query_map(params![stack], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}
