//! Things kept in an SQLite file instead of memory (target config `store`,
//! or `ORRERY_TESTBED_STORE` for the binary), shared by every testbed
//! process that opens the same file: things outlive a plugin restart, and a
//! test can count them afterwards.
//!
//! The table has no uniqueness on the thing's name on purpose: the name is
//! the schema's `identifier`, and two rows of one name are exactly the
//! duplicate a host that blindly sends a create twice would make. Creates
//! check and insert in one `IMMEDIATE` transaction, so the testbed never
//! makes one itself; a test counts rows per name with [`census`].
//!
//! ```sql
//! things(id INTEGER PRIMARY KEY, target TEXT, type TEXT, name TEXT,
//!        properties BLOB /* MessagePack map */, request_id TEXT)
//! ```

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use orrery_plugin_sdk::schema::{decode, encode, ErrorCode, PropertyMap};
use orrery_plugin_sdk::PluginError;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

/// How long a process waits for another holding the file's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a create found.
#[derive(Debug, PartialEq, Eq)]
pub enum Created {
    /// A new row.
    New,
    /// The row this request id made before: the create was retried.
    Again,
    /// A row of that name made by another request.
    Exists,
}

/// One open store file.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
}

pub(crate) fn failed(e: impl std::fmt::Display) -> PluginError {
    PluginError::new(
        ErrorCode::ServiceInternalError,
        format!("testbed store: {e}"),
    )
}

impl Store {
    /// Opens (and if need be creates) the store at `path`.
    pub fn open(path: &Path) -> Result<Store, PluginError> {
        let conn = Connection::open(path).map_err(failed)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(failed)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(failed)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS things (
                 id INTEGER PRIMARY KEY,
                 target TEXT NOT NULL,
                 type TEXT NOT NULL,
                 name TEXT NOT NULL,
                 properties BLOB NOT NULL,
                 request_id TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS things_by_name ON things (target, type, name);",
        )
        .map_err(failed)?;
        conn.execute_batch(crate::cloud::SCHEMA).map_err(failed)?;
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    pub(crate) fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The properties of the thing `(target, ty, name)`.
    pub fn get(
        &self,
        target: &str,
        ty: &str,
        name: &str,
    ) -> Result<Option<PropertyMap>, PluginError> {
        let blob: Option<Vec<u8>> = self
            .conn()
            .query_row(
                "SELECT properties FROM things WHERE target = ?1 AND type = ?2 AND name = ?3 ORDER BY id LIMIT 1",
                params![target, ty, name],
                |row| row.get(0),
            )
            .optional()
            .map_err(failed)?;
        blob.map(|b| decode(&b).map_err(failed)).transpose()
    }

    /// Makes the thing unless one of that name exists.
    pub fn create(
        &self,
        target: &str,
        ty: &str,
        name: &str,
        properties: &PropertyMap,
        request_id: &str,
    ) -> Result<Created, PluginError> {
        let blob = encode(properties).map_err(failed)?;
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(failed)?;
        let by: Option<String> = tx
            .query_row(
                "SELECT request_id FROM things WHERE target = ?1 AND type = ?2 AND name = ?3 ORDER BY id LIMIT 1",
                params![target, ty, name],
                |row| row.get(0),
            )
            .optional()
            .map_err(failed)?;
        let created = match by {
            Some(by) if by == request_id => Created::Again,
            Some(_) => Created::Exists,
            None => {
                tx.execute(
                    "INSERT INTO things (target, type, name, properties, request_id) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![target, ty, name, blob, request_id],
                )
                .map_err(failed)?;
                Created::New
            }
        };
        tx.commit().map_err(failed)?;
        Ok(created)
    }

    /// Replaces the thing's properties; false when there is no such thing.
    pub fn update(
        &self,
        target: &str,
        ty: &str,
        name: &str,
        properties: &PropertyMap,
    ) -> Result<bool, PluginError> {
        let blob = encode(properties).map_err(failed)?;
        let n = self
            .conn()
            .execute(
                "UPDATE things SET properties = ?4 WHERE target = ?1 AND type = ?2 AND name = ?3",
                params![target, ty, name, blob],
            )
            .map_err(failed)?;
        Ok(n > 0)
    }

    /// Removes the thing (every row of its name).
    pub fn remove(&self, target: &str, ty: &str, name: &str) -> Result<(), PluginError> {
        self.conn()
            .execute(
                "DELETE FROM things WHERE target = ?1 AND type = ?2 AND name = ?3",
                params![target, ty, name],
            )
            .map_err(failed)?;
        Ok(())
    }

    /// Every thing of type `ty` on `target`, by name, each name once.
    pub fn list(&self, target: &str, ty: &str) -> Result<Vec<(String, PropertyMap)>, PluginError> {
        let conn = self.conn();
        let mut statement = conn
            .prepare(
                "SELECT name, properties FROM things WHERE target = ?1 AND type = ?2
                 AND id IN (SELECT MIN(id) FROM things GROUP BY target, type, name) ORDER BY name",
            )
            .map_err(failed)?;
        let rows = statement
            .query_map(params![target, ty], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?))
            })
            .map_err(failed)?;
        rows.map(|row| {
            let (name, blob) = row.map_err(failed)?;
            Ok((name, decode(&blob).map_err(failed)?))
        })
        .collect()
    }
}

/// What a store file holds, for a test's invariants.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Rows per `(target, type, name)`, things and cloud things (ready or
    /// not) alike: more than 1 is a duplicate.
    pub rows: std::collections::BTreeMap<(String, String, String), u64>,
}

impl Census {
    /// Names with more than one row.
    pub fn duplicates(&self) -> u64 {
        self.rows.values().map(|n| n.saturating_sub(1)).sum()
    }
}

/// Counts the rows of the store at `path` per thing.
pub fn census(path: &Path) -> Result<Census, PluginError> {
    let store = Store::open(path)?;
    let conn = store.conn();
    let mut statement = conn
        .prepare(
            "SELECT target, type, name, COUNT(*) FROM things GROUP BY target, type, name
             UNION ALL SELECT target, type, name, COUNT(*) FROM cloud GROUP BY target, type, name",
        )
        .map_err(failed)?;
    let rows = statement
        .query_map([], |row| {
            Ok((
                (row.get(0)?, row.get(1)?, row.get(2)?),
                row.get::<_, i64>(3)?,
            ))
        })
        .map_err(failed)?;
    let mut census = Census::default();
    for row in rows {
        let (key, n) = row.map_err(failed)?;
        census.rows.insert(key, u64::try_from(n).unwrap_or(0));
    }
    Ok(census)
}

/// The instants (Unix ms) at which the cloud things of the store at `path`
/// are ready, in order: with `create_ms: 0`, when each create arrived at
/// the provider, for a test of a rate limit held across processes.
pub fn cloud_ready_times(path: &Path) -> Result<Vec<i64>, PluginError> {
    let store = Store::open(path)?;
    let conn = store.conn();
    let mut statement = conn
        .prepare("SELECT ready_ms FROM cloud ORDER BY ready_ms")
        .map_err(failed)?;
    let rows = statement
        .query_map([], |row| row.get::<_, i64>(0))
        .map_err(failed)?;
    rows.map(|row| row.map_err(failed)).collect()
}
