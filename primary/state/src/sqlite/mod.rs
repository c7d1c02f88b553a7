//! The embedded store: one SQLite file in the data directory, no server.
//!
//! The trait's key-only views, command listings, leases and audit log are
//! in `keys.rs`, `commands.rs`, `lease.rs` and `audit.rs`.

mod audit;
mod commands;
mod keys;
mod lease;
mod outputs;
mod protect;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use orrery_schema::PropertyMap;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::codec::{decode_context, encode_context, encode_resource};
use crate::{secret_key, StateStore, StoreError, Write};
use crate::{
    CommandRecord, CommandStatus, OpStatus, OperationRecord, StoredResource, RECORD_FORMAT,
};
use secret_key::KeyRows as _;

/// The embedded SQLite store. Cheap to clone.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    key: Arc<Vec<u8>>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS resources (
    stack TEXT NOT NULL,
    label TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    target TEXT NOT NULL,
    plugin TEXT NOT NULL,
    native_id TEXT NOT NULL,
    properties BLOB NOT NULL,
    secret_hashes TEXT NOT NULL,
    deps TEXT NOT NULL,
    managed INTEGER NOT NULL,
    version INTEGER NOT NULL,
    format INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (stack, label)
);
CREATE TABLE IF NOT EXISTS targets (
    stack TEXT NOT NULL,
    name TEXT NOT NULL,
    plugin TEXT NOT NULL,
    config BLOB NOT NULL,
    PRIMARY KEY (stack, name)
);
CREATE TABLE IF NOT EXISTS commands (
    id TEXT PRIMARY KEY,
    stack TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    finished_ms INTEGER,
    format INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS operations (
    command_id TEXT NOT NULL,
    label TEXT NOT NULL,
    operation TEXT NOT NULL,
    request_id TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    error_code TEXT,
    message TEXT,
    updated_ms INTEGER NOT NULL,
    native_id TEXT,
    context BLOB,
    PRIMARY KEY (command_id, label, operation)
);
CREATE TABLE IF NOT EXISTS command_leases (
    command_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS command_documents (
    command_id TEXT PRIMARY KEY,
    engine TEXT NOT NULL,
    mode TEXT NOT NULL,
    source TEXT NOT NULL,
    stack_dir TEXT NOT NULL,
    text TEXT NOT NULL,
    selection TEXT
);
CREATE TABLE IF NOT EXISTS command_principals (
    command_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rate_sharers (
    bucket TEXT NOT NULL,
    owner TEXT NOT NULL,
    seen_ms INTEGER NOT NULL,
    PRIMARY KEY (bucket, owner)
);
CREATE TABLE IF NOT EXISTS stack_outputs (
    stack TEXT PRIMARY KEY,
    outputs BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS resources_by_target_type ON resources (target, resource_type);
CREATE INDEX IF NOT EXISTS commands_by_stack ON commands (stack, started_ms);
CREATE INDEX IF NOT EXISTS commands_by_status ON commands (status, started_ms);
";

/// Version of the tables and indexes beside the records' format, in
/// `meta.schema`: 2 added command leases, command documents and the
/// indexes of key-only views; 3 the command principals (the audit); 4 the
/// stacks' outputs; 5 `resources.protected`; 6 the selection of a
/// command's document; 7 the rate limits' sharers; 8 the audit log. Additions only: an older
/// release ignores them, so a newer value is never refused.
const SQLITE_SCHEMA: i64 = 8;

/// The value of `meta.schema` (0 before it existed).
fn marked_schema(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn
        .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
            r.get::<_, i64>(0)
        })
        .optional()?
        .unwrap_or(0))
}

/// Whether `operations` has the columns an interrupted command is resumed
/// from (`native_id`, `context`), added after format 1 was released.
fn has_progress_columns(conn: &Connection) -> Result<bool, StoreError> {
    Ok(conn.query_row(
        "SELECT count(*) FROM pragma_table_info('operations') WHERE name = 'context'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0)
}

/// Adds `native_id` and `context` to an `operations` table made before they
/// existed (no-op when it has them or does not exist yet).
fn add_progress_columns(tx: &Connection) -> Result<(), StoreError> {
    let has_operations = tx.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'operations'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0;
    if has_operations && !has_progress_columns(tx)? {
        tx.execute_batch(
            "ALTER TABLE operations ADD COLUMN native_id TEXT;
             ALTER TABLE operations ADD COLUMN context BLOB;",
        )?;
    }
    Ok(())
}

/// Adds `selection` to a `command_documents` table made before it existed
/// (no-op when it has it).
fn add_selection_column(tx: &Connection) -> Result<(), StoreError> {
    let has = tx.query_row(
        "SELECT count(*) FROM pragma_table_info('command_documents') WHERE name = 'selection'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0;
    if !has {
        tx.execute_batch("ALTER TABLE command_documents ADD COLUMN selection TEXT;")?;
    }
    Ok(())
}

/// The format recorded in `meta.format`, if the file has one.
fn marked_format(conn: &Connection) -> Result<Option<i64>, StoreError> {
    let has_meta = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0;
    if !has_meta {
        return Ok(None);
    }
    Ok(conn
        .query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| {
            r.get::<_, i64>(0)
        })
        .optional()?)
}

/// The store's format: `meta.format` once written; before that key existed,
/// format 1 had a `format` column on every record and format 0 had none.
/// `None` for a new, empty file.
fn stored_format(conn: &Connection) -> Result<Option<i64>, StoreError> {
    if let Some(format) = marked_format(conn)? {
        return Ok(Some(format));
    }
    let has_resources = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'resources'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0;
    if !has_resources {
        return Ok(None);
    }
    let has_format_column = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('resources') WHERE name = 'format'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0;
    Ok(Some(if has_format_column { 1 } else { 0 }))
}

/// Brings the file to `RECORD_FORMAT` in one write transaction (so two
/// processes opening it at once upgrade it once): creates missing tables and
/// rewrites older records. Refuses a file from a newer release.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    if marked_format(conn)? == Some(RECORD_FORMAT)
        && has_progress_columns(conn)?
        && marked_schema(conn)? >= SQLITE_SCHEMA
    {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = stored_format(&tx)?;
    match found {
        Some(f) if f > RECORD_FORMAT => {
            return Err(StoreError::NewerFormat {
                what: "record format",
                found: f,
                supported: RECORD_FORMAT,
            })
        }
        Some(0) => upgrade_from_0(&tx)?,
        _ => {}
    }
    add_progress_columns(&tx)?;
    tx.execute_batch(SCHEMA)?;
    tx.execute_batch(audit::TABLE)?;
    protect::add_column(&tx)?;
    add_selection_column(&tx)?;
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('format', ?1)
         ON CONFLICT (key) DO UPDATE SET value = ?1",
        params![RECORD_FORMAT],
    )?;
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('schema', ?1)
         ON CONFLICT (key) DO UPDATE SET value = max(value, ?1)",
        params![SQLITE_SCHEMA],
    )?;
    tx.commit()?;
    Ok(())
}

/// Format 0 (before records carried a version) stored properties as JSON
/// text, had no `format` columns and no `targets` table (`SCHEMA` adds it).
fn upgrade_from_0(tx: &Connection) -> Result<(), StoreError> {
    tx.execute_batch(
        "ALTER TABLE resources ADD COLUMN format INTEGER NOT NULL DEFAULT 0;
         ALTER TABLE commands ADD COLUMN format INTEGER NOT NULL DEFAULT 0;",
    )?;
    let rows: Vec<(String, String, Vec<u8>)> = {
        let mut stmt = tx.prepare("SELECT stack, label, properties FROM resources")?;
        let rows = stmt.query_map([], |r| {
            let props = match r.get_ref(2)? {
                rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                    t.to_vec()
                }
                _ => Vec::new(),
            };
            Ok((r.get(0)?, r.get(1)?, props))
        })?;
        rows.collect::<Result<_, _>>()?
    };
    for (stack, label, json) in rows {
        let corrupt = |reason: String| StoreError::Corrupt {
            label: format!("{stack}/{label}"),
            reason: format!("format 0 properties: {reason}"),
        };
        let props: PropertyMap =
            serde_json::from_slice(&json).map_err(|e| corrupt(e.to_string()))?;
        let packed = orrery_schema::encode(&props).map_err(|e| corrupt(e.to_string()))?;
        tx.execute(
            "UPDATE resources SET properties = ?3, format = ?4 WHERE stack = ?1 AND label = ?2",
            params![stack, label, packed, RECORD_FORMAT],
        )?;
    }
    tx.execute("UPDATE commands SET format = ?1", params![RECORD_FORMAT])?;
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl SqliteStore {
    /// Opens (creating if needed) `dir/state.db` and applies migrations;
    /// the secret key is in the file `ORRERY_SECRET_KEY_FILE` names, else
    /// in `dir/secret.key` (see [`crate::secret_key`]).
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let key_file =
            secret_key::key_file_from_env().unwrap_or_else(|| dir.join(secret_key::KEY_FILE_NAME));
        Self::open_with_key_file(dir, &key_file)
    }

    /// Opens `dir/state.db` with its secret key in `key_file`.
    pub fn open_with_key_file(dir: &Path, key_file: &Path) -> Result<Self, StoreError> {
        create_private_dir(dir)?;
        // Processes opening one file at once contend for the lock that
        // switches it to WAL, which SQLite reports as busy without waiting:
        // try again for a while before giving up.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match Self::open_once(dir, key_file) {
                Err(StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    fn open_once(dir: &Path, key_file: &Path) -> Result<Self, StoreError> {
        let db = dir.join("state.db");
        create_private_file(&db)?;
        let mut conn = Connection::open(&db)?;
        // The busy timeout first: switching a file to WAL takes an exclusive
        // lock, and processes opening it at once must wait for each other
        // rather than fail with "database is locked". Deleted content is
        // overwritten (`secure_delete`), so a removed key leaves no trace.
        conn.execute_batch(
            "PRAGMA busy_timeout=5000; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
             PRAGMA secure_delete=ON;",
        )?;
        // SQLite gives the journal files the database file's mode; narrow
        // any left by an older release.
        for suffix in ["-wal", "-shm"] {
            secret_key::tighten(&dir.join(format!("state.db{suffix}")), 0o600);
        }
        migrate(&mut conn)?;
        let key = {
            let mut rows = SqliteKeyRows(&conn);
            let moved = rows.get(secret_key::LEGACY_ROW)?.is_some();
            let key = secret_key::resolve(&mut rows, key_file)?;
            if moved {
                // The removed row's old page images leave the log.
                conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
            }
            key
        };
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            key: Arc::new(key),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn put_resource_on(c: &Connection, r: &StoredResource) -> Result<(), StoreError> {
    let (props, hashes, deps) = encode_resource(r)?;
    c.prepare_cached(
        "INSERT INTO resources (stack, label, resource_type, target, plugin, native_id, properties, secret_hashes, deps, managed, version, format, updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 1, ?11, ?12)
         ON CONFLICT (stack, label) DO UPDATE SET resource_type = ?3, target = ?4, plugin = ?5, native_id = ?6,
           properties = ?7, secret_hashes = ?8, deps = ?9, managed = ?10, version = resources.version + 1, format = ?11, updated_ms = ?12",
    )?
    .execute(params![r.stack, r.label, r.resource_type, r.target, r.plugin, r.native_id, props, hashes, deps, r.managed, RECORD_FORMAT, now_ms()])?;
    Ok(())
}

fn remove_resource_on(c: &Connection, stack: &str, label: &str) -> Result<(), StoreError> {
    c.prepare_cached("DELETE FROM resources WHERE stack = ?1 AND label = ?2")?
        .execute(params![stack, label])?;
    Ok(())
}

fn put_operation_on(
    c: &Connection,
    command_id: &str,
    op: &OperationRecord,
) -> Result<(), StoreError> {
    let context = encode_context(op)?;
    c.prepare_cached(
        "INSERT INTO operations (command_id, label, operation, request_id, status, attempts, error_code, message, updated_ms, native_id, context)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (command_id, label, operation) DO UPDATE SET request_id = ?4, status = ?5, attempts = ?6,
           error_code = ?7, message = ?8, updated_ms = ?9, native_id = ?10, context = ?11",
    )?
    .execute(params![command_id, op.label, op.operation, op.request_id, op.status.as_str(), op.attempts, op.error_code, op.message, now_ms(), op.native_id, context])?;
    Ok(())
}

/// Creates `dir` (and its parents) `0700`, whatever the umask; narrows an
/// existing one that others can enter, with a warning.
fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    let existed = dir.is_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| StoreError::Dir {
            path: dir.display().to_string(),
            source,
        })?;
    if existed {
        secret_key::tighten(dir, 0o700);
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| StoreError::Dir {
                path: dir.display().to_string(),
                source,
            },
        )?;
    }
    Ok(())
}

/// Creates the database file `0600` before SQLite does (SQLite would make
/// it `0644` under the usual umask); narrows an existing one, with a warning.
fn create_private_file(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(f) => f
            .set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|source| StoreError::Dir {
                path: path.display().to_string(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            secret_key::tighten(path, 0o600);
            Ok(())
        }
        Err(source) => Err(StoreError::Dir {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// The key rows of the `meta` table.
struct SqliteKeyRows<'a>(&'a Connection);

impl secret_key::KeyRows for SqliteKeyRows<'_> {
    fn get(&mut self, row: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .0
            .query_row("SELECT value FROM meta WHERE key = ?1", params![row], |r| {
                r.get(0)
            })
            .optional()?)
    }

    fn put_if_absent(&mut self, row: &str, value: &[u8]) -> Result<(), StoreError> {
        self.0.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
            params![row, value],
        )?;
        Ok(())
    }

    fn delete(&mut self, row: &str) -> Result<(), StoreError> {
        self.0
            .execute("DELETE FROM meta WHERE key = ?1", params![row])?;
        Ok(())
    }
}

impl StateStore for SqliteStore {
    /// The key secret hashes are made with (from the key file).
    fn secret_key(&self) -> Result<Vec<u8>, StoreError> {
        Ok(self.key.to_vec())
    }

    /// The resources of `stack` (all stacks when `None`).
    fn resource_page(&self, page: &crate::ResourcePage) -> Result<Vec<StoredResource>, StoreError> {
        let conn = self.conn();
        // Along the primary key (stack, label): a page costs its size.
        let mut stmt = conn.prepare_cached(
            "SELECT stack, label, resource_type, target, plugin, native_id, properties, secret_hashes, deps, managed, version
             FROM resources WHERE (?1 IS NULL OR stack = ?1) AND (?2 IS NULL OR resource_type = ?2)
               AND (?3 IS NULL OR target = ?3) AND (?4 IS NULL OR (stack, label) > (?4, ?5))
             ORDER BY stack, label LIMIT ?6",
        )?;
        let (after_stack, after_label) = page.after.clone().unzip();
        let limit = page.limit.map_or(-1, i64::from);
        let rows = stmt.query_map(
            params![
                page.stack,
                page.resource_type,
                page.target,
                after_stack,
                after_label,
                limit
            ],
            |r| {
                Ok((
                    StoredResource {
                        stack: r.get(0)?,
                        label: r.get(1)?,
                        resource_type: r.get(2)?,
                        target: r.get(3)?,
                        plugin: r.get(4)?,
                        native_id: r.get(5)?,
                        properties: PropertyMap::new(),
                        secret_hashes: Default::default(),
                        deps: Vec::new(),
                        managed: r.get::<_, i64>(9)? != 0,
                        version: r.get(10)?,
                    },
                    r.get::<_, Vec<u8>>(6)?,
                    r.get::<_, String>(7)?,
                    r.get::<_, String>(8)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for row in rows {
            let (mut res, props, hashes, deps) = row?;
            let corrupt = |reason: String| StoreError::Corrupt {
                label: res.label.clone(),
                reason,
            };
            res.properties = orrery_schema::decode(&props).map_err(|e| corrupt(e.to_string()))?;
            res.secret_hashes =
                serde_json::from_str(&hashes).map_err(|e| corrupt(e.to_string()))?;
            res.deps = serde_json::from_str(&deps).map_err(|e| corrupt(e.to_string()))?;
            out.push(res);
        }
        Ok(out)
    }

    /// Records a resource's new state (insert or replace), bumping its version.
    fn put_resource(&self, r: &StoredResource) -> Result<(), StoreError> {
        put_resource_on(&self.conn(), r)
    }

    fn put_resource_if_version(
        &self,
        r: &StoredResource,
        version: i64,
    ) -> Result<bool, StoreError> {
        let (props, hashes, deps) = encode_resource(r)?;
        Ok(self.conn().execute(
            "UPDATE resources SET resource_type = ?3, target = ?4, plugin = ?5, native_id = ?6,
               properties = ?7, secret_hashes = ?8, deps = ?9, managed = ?10, version = version + 1,
               format = ?11, updated_ms = ?12
             WHERE stack = ?1 AND label = ?2 AND version = ?13",
            params![
                r.stack,
                r.label,
                r.resource_type,
                r.target,
                r.plugin,
                r.native_id,
                props,
                hashes,
                deps,
                r.managed,
                RECORD_FORMAT,
                now_ms(),
                version
            ],
        )? > 0)
    }

    /// Records a stack's targets (so a stack can be destroyed without its
    /// document).
    fn put_targets(
        &self,
        stack: &str,
        targets: &[orrery_stack::TargetDecl],
    ) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for t in targets {
            let config = orrery_schema::encode(&t.config).map_err(|e| StoreError::Corrupt {
                label: t.name.clone(),
                reason: e.to_string(),
            })?;
            tx.execute(
                "INSERT INTO targets (stack, name, plugin, config) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (stack, name) DO UPDATE SET plugin = ?3, config = ?4",
                params![stack, t.name, t.plugin, config],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn put_outputs(
        &self,
        stack: &str,
        outputs: &orrery_schema::PropertyMap,
    ) -> Result<(), StoreError> {
        outputs::put(&self.conn(), stack, outputs)
    }

    fn outputs(&self, stack: &str) -> Result<Option<orrery_schema::PropertyMap>, StoreError> {
        outputs::get(&self.conn(), stack)
    }

    fn set_protected(&self, stack: &str, marks: &[(String, bool)]) -> Result<(), StoreError> {
        protect::set(&self.conn(), stack, marks)
    }

    fn protected_labels(
        &self,
        stack: &str,
    ) -> Result<std::collections::BTreeSet<String>, StoreError> {
        protect::labels(&self.conn(), stack)
    }

    /// A stack's recorded targets.
    fn targets(&self, stack: &str) -> Result<Vec<orrery_stack::TargetDecl>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT name, plugin, config FROM targets WHERE stack = ?1 ORDER BY name",
        )?;
        let rows = stmt.query_map(params![stack], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Vec<u8>>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (name, plugin, config) = row?;
            let config = orrery_schema::decode(&config).map_err(|e| StoreError::Corrupt {
                label: name.clone(),
                reason: e.to_string(),
            })?;
            out.push(orrery_stack::TargetDecl {
                name,
                plugin,
                config,
            });
        }
        Ok(out)
    }

    /// Forgets a resource (after it was deleted).
    fn remove_resource(&self, stack: &str, label: &str) -> Result<(), StoreError> {
        remove_resource_on(&self.conn(), stack, label)
    }

    /// Starts a command record.
    fn begin_command(&self, id: &str, stack: &str, kind: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO commands (id, stack, kind, status, started_ms, format) VALUES (?1, ?2, ?3, 'running', ?4, ?5)",
            params![id, stack, kind, now_ms(), RECORD_FORMAT],
        )?;
        Ok(())
    }

    fn put_command_principal(&self, command_id: &str, principal: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO command_principals (command_id, principal) VALUES (?1, ?2)
             ON CONFLICT (command_id) DO NOTHING",
            params![command_id, principal],
        )?;
        Ok(())
    }

    /// Records where an operation stands, before acting on it and after.
    fn put_operation(&self, command_id: &str, op: &OperationRecord) -> Result<(), StoreError> {
        put_operation_on(&self.conn(), command_id, op)
    }

    /// One transaction: one commit for the whole batch.
    fn write_batch(&self, writes: &[Write]) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for write in writes {
            match write {
                Write::Operation { command_id, record } => {
                    put_operation_on(&tx, command_id, record)?
                }
                Write::Resource(r) => put_resource_on(&tx, r)?,
                Write::Removal { stack, label } => remove_resource_on(&tx, stack, label)?,
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The latest command of `stack`, with its operations.
    fn latest_command_of(&self, stack: &str) -> Result<Option<CommandRecord>, StoreError> {
        let id: Option<String> = self
            .conn()
            .query_row(
                "SELECT id FROM commands WHERE stack = ?1 ORDER BY started_ms DESC, rowid DESC LIMIT 1",
                params![stack],
                |r| r.get(0),
            )
            .optional()?;
        match id {
            Some(id) => self.command(Some(&id)),
            None => Ok(None),
        }
    }

    /// Ends a command.
    fn finish_command(&self, id: &str, status: &CommandStatus) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE commands SET status = ?2, finished_ms = ?3 WHERE id = ?1",
            params![id, status.as_str(), now_ms()],
        )?;
        Ok(())
    }

    /// A command with a page of its operations; the latest when `id` is `None`.
    fn command_page(
        &self,
        id: Option<&str>,
        page: &crate::OperationPage,
    ) -> Result<Option<CommandRecord>, StoreError> {
        let conn = self.conn();
        let head = conn
            .query_row(
                "SELECT id, stack, kind, status, started_ms, finished_ms,
             (SELECT principal FROM command_principals WHERE command_id = commands.id) FROM commands
                 WHERE (?1 IS NULL OR id = ?1) ORDER BY started_ms DESC, rowid DESC LIMIT 1",
                params![id],
                commands::head,
            )
            .optional()?;
        let Some(mut command) = head.map(|h| h.with_operations(Vec::new())) else {
            return Ok(None);
        };
        // A page goes along the primary key (a page costs its size and a
        // cursor stays put while operations are updated); everything comes
        // in the order of updates.
        let mut stmt = conn.prepare_cached(if page.is_paged() {
            "SELECT label, operation, request_id, status, attempts, error_code, message, native_id, context, updated_ms FROM operations
             WHERE command_id = ?1 AND (?2 IS NULL OR status = ?2)
               AND (?3 IS NULL OR (label, operation) > (?3, ?4))
             ORDER BY label, operation LIMIT ?5"
        } else {
            "SELECT label, operation, request_id, status, attempts, error_code, message, native_id, context, updated_ms FROM operations
             WHERE command_id = ?1 AND (?2 IS NULL OR status = ?2) AND ?3 IS NULL AND ?4 IS NULL
             ORDER BY updated_ms, label LIMIT ?5"
        })?;
        let (after_label, after_operation) = page.after.clone().unzip();
        let limit = page.limit.map_or(-1, i64::from);
        let rows: Vec<(OperationRecord, Option<Vec<u8>>)> = stmt
            .query_map(
                params![command.id, page.status, after_label, after_operation, limit],
                |r| {
                    Ok((
                        OperationRecord {
                            label: r.get(0)?,
                            operation: r.get(1)?,
                            request_id: r.get(2)?,
                            status: OpStatus::parse(&r.get::<_, String>(3)?),
                            attempts: r.get(4)?,
                            error_code: r.get(5)?,
                            message: r.get(6)?,
                            native_id: r.get(7)?,
                            context: None,
                            updated_ms: r.get(9)?,
                        },
                        r.get(8)?,
                    ))
                },
            )?
            .collect::<Result<_, _>>()?;
        for (mut op, context) in rows {
            op.context = decode_context(&op.label, context.as_deref())?;
            command.operations.push(op);
        }
        Ok(Some(command))
    }
    fn resource_counts(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        keys::resource_counts(&self.conn())
    }

    fn managed_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<crate::ManagedKey>, StoreError> {
        keys::managed_keys(&self.conn(), target, resource_type)
    }

    fn discovered_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<crate::DiscoveredKey>, StoreError> {
        keys::discovered_keys(&self.conn(), target, resource_type)
    }

    fn commands(
        &self,
        filter: &crate::CommandFilter,
    ) -> Result<Vec<crate::CommandHead>, StoreError> {
        commands::commands(&self.conn(), filter)
    }

    fn operation_counts(&self, command_id: &str) -> Result<BTreeMap<String, u64>, StoreError> {
        commands::operation_counts(&self.conn(), command_id)
    }

    fn command_stacks(&self) -> Result<Vec<String>, StoreError> {
        commands::command_stacks(&self.conn())
    }

    fn put_command_document(
        &self,
        command_id: &str,
        doc: &crate::CommandDocument,
    ) -> Result<(), StoreError> {
        commands::put_document(&self.conn(), command_id, doc)
    }

    fn command_document(
        &self,
        command_id: &str,
    ) -> Result<Option<crate::CommandDocument>, StoreError> {
        commands::document(&self.conn(), command_id)
    }

    /// This machine's clock: every process sharing the file runs on it.
    fn now_ms(&self) -> Result<i64, StoreError> {
        Ok(now_ms())
    }

    fn acquire_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<crate::LeaseGrant, StoreError> {
        lease::acquire(&mut self.conn(), command_id, owner, now_ms, ttl_ms)
    }

    fn renew_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        lease::renew(&self.conn(), command_id, owner, now_ms, ttl_ms)
    }

    fn release_lease(&self, command_id: &str, owner: &str) -> Result<(), StoreError> {
        lease::release(&self.conn(), command_id, owner)
    }

    fn rate_sharers(
        &self,
        owner: &str,
        buckets: &[String],
        window_ms: i64,
    ) -> Result<std::collections::HashMap<String, u32>, StoreError> {
        let now = now_ms();
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "DELETE FROM rate_sharers WHERE seen_ms < ?1",
            params![now - window_ms],
        )?;
        let mut counts = std::collections::HashMap::new();
        for bucket in buckets {
            tx.execute(
                "INSERT INTO rate_sharers (bucket, owner, seen_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (bucket, owner) DO UPDATE SET seen_ms = ?3",
                params![bucket, owner, now],
            )?;
            let n: i64 = tx.query_row(
                "SELECT count(*) FROM rate_sharers WHERE bucket = ?1",
                params![bucket],
                |r| r.get(0),
            )?;
            counts.insert(bucket.clone(), u32::try_from(n).unwrap_or(u32::MAX));
        }
        tx.commit()?;
        Ok(counts)
    }

    fn append_audit(&self, entries: &[crate::AuditEntry], keep: u64) -> Result<(), StoreError> {
        audit::append(&mut self.conn(), entries, keep)
    }

    fn set_audit_outcome(&self, command_id: &str, outcome: &str) -> Result<(), StoreError> {
        audit::set_outcome(&self.conn(), command_id, outcome)
    }

    fn audit(&self, filter: &crate::AuditFilter) -> Result<Vec<crate::AuditRecord>, StoreError> {
        audit::list(&self.conn(), filter)
    }
}
