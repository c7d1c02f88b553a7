//! Listings the state store does not offer yet: recent commands, the stacks
//! that ran commands, operation counts. Read-only queries over the store's
//! SQLite file, on a connection of their own.
//!
//! Stopgap: these belong in `state::SqliteStore` (and its future PostgreSQL
//! sibling) as `commands(stack, limit)` and `command_stacks()`; once they
//! are there this module goes away. It reads only the `commands` and
//! `operations` tables' stable columns.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags};

use crate::state::StoreError;

/// A command without its operations.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CommandHead {
    /// Its id.
    pub id: String,
    /// The stack.
    pub stack: String,
    /// `apply` or `destroy`.
    pub kind: String,
    /// `running`, `completed`, `failed`, `canceled`.
    pub status: String,
    /// Unix milliseconds.
    pub started_ms: i64,
    /// Unix milliseconds, once finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
}

/// Read-only queries on the store's file.
pub struct Listing {
    conn: Mutex<Connection>,
}

impl Listing {
    /// Opens `dir/state.db` read-only; the store must have created it.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open_with_flags(
            dir.join("state.db"),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(5))?;
        Ok(Listing {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The latest `limit` commands, of `stack` or of every stack.
    pub fn commands(
        &self,
        stack: Option<&str>,
        limit: usize,
    ) -> Result<Vec<CommandHead>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, stack, kind, status, started_ms, finished_ms FROM commands
             WHERE (?1 IS NULL OR stack = ?1) ORDER BY started_ms DESC, rowid DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![stack, limit as i64], |r| {
            Ok(CommandHead {
                id: r.get(0)?,
                stack: r.get(1)?,
                kind: r.get(2)?,
                status: r.get(3)?,
                started_ms: r.get(4)?,
                finished_ms: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A command's operations counted by status.
    pub fn operation_counts(&self, command_id: &str) -> Result<BTreeMap<String, i64>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT status, COUNT(*) FROM operations WHERE command_id = ?1 GROUP BY status",
        )?;
        let rows = stmt.query_map(params![command_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every stack that ran a command.
    pub fn command_stacks(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached("SELECT DISTINCT stack FROM commands ORDER BY stack")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
