//! The server store: PostgreSQL (15 or newer), shared by any number of
//! primaries, selected by a `postgres://` or `postgresql://` URL.
//!
//! The trait is synchronous and the executor calls it from tokio worker
//! threads, while the sync `postgres` client drives a runtime of its own
//! (which panics inside another runtime). So one plain std thread owns the
//! connection and serves the calls, sent to it over a channel; the caller
//! blocks on the reply, as it would on SQLite's mutex.
//!
//! Migrations (`migrations/postgres/*.sql`, recorded in `schema_migrations`)
//! run at open inside one transaction that holds an advisory lock, so
//! primaries starting together apply each migration exactly once.
//!
//! A connection that breaks fails the call it broke (`ConnectionLost`: its
//! outcome is unknown) and the next call connects again.
//!
//! The trait's key-only views, command listings and leases are in
//! `keys.rs`, `commands.rs` and `lease.rs`.

mod commands;
mod keys;
mod lease;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::str::FromStr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use orrery_schema::PropertyMap;
use postgres::{Client, Config, NoTls};

use super::StateStore;
use crate::codec::{decode_context, encode_context, encode_resource};
use crate::StoreError;
use crate::{
    CommandRecord, CommandStatus, OpStatus, OperationRecord, StoredResource, RECORD_FORMAT,
};
use orrery_core::stack::TargetDecl;

/// A migration: its version, name and SQL.
pub struct Migration {
    /// Recorded in `schema_migrations.version`; applied in ascending order.
    pub version: i32,
    /// Recorded in `schema_migrations.name`.
    pub name: &'static str,
    /// The statements, run in the migration transaction.
    pub sql: &'static str,
}

/// Every migration, oldest first. Only ever appended to.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("../migrations/postgres/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "targets",
        sql: include_str!("../migrations/postgres/0002_targets.sql"),
    },
    Migration {
        version: 3,
        name: "command_order",
        sql: include_str!("../migrations/postgres/0003_command_order.sql"),
    },
    Migration {
        version: 4,
        name: "operation_progress",
        sql: include_str!("../migrations/postgres/0004_operation_progress.sql"),
    },
    Migration {
        version: 5,
        name: "discovery_keys",
        sql: include_str!("../migrations/postgres/0005_discovery_keys.sql"),
    },
    Migration {
        version: 6,
        name: "command_leases",
        sql: include_str!("../migrations/postgres/0006_command_leases.sql"),
    },
    Migration {
        version: 7,
        name: "command_documents",
        sql: include_str!("../migrations/postgres/0007_command_documents.sql"),
    },
];

/// The schema version this release writes (the last migration).
pub const PG_SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// Key of the advisory lock held while migrating ("orrery" + 1).
const MIGRATION_LOCK: i64 = 0x6f72_7265_7279_0001;

/// After this long unused, the connection is checked before a call, so a
/// server restarted while the primary idled costs no failed call.
const IDLE_CHECK: Duration = Duration::from_secs(30);

/// Server time in Unix milliseconds (one clock for every primary).
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

type Job = Box<dyn FnOnce(&mut Conn) + Send>;

/// The PostgreSQL store. Calls from any thread (tokio workers included).
pub struct PgStore {
    jobs: mpsc::Sender<Job>,
    target: String,
    /// The secret key, when it is kept in a key file (`ORRERY_SECRET_KEY_FILE`).
    key: Option<Vec<u8>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .finish()
    }
}

impl PgStore {
    /// Connects to `url`, applies pending migrations and makes sure the
    /// secret key exists.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        Self::open(
            url,
            PG_SCHEMA_VERSION,
            crate::secret_key::key_file_from_env(),
        )
    }

    /// As [`PgStore::connect`], the secret key in `key_file` (a key still
    /// in the database is moved out to it), or in the database when `None`.
    pub fn connect_with_key_file(
        url: &str,
        key_file: Option<&std::path::Path>,
    ) -> Result<Self, StoreError> {
        Self::open(url, PG_SCHEMA_VERSION, key_file.map(ToOwned::to_owned))
    }

    /// Applies the migrations up to `version` and nothing else (no secret
    /// key): what an older release would have left. For upgrade tests.
    #[doc(hidden)]
    pub fn migrate_to(url: &str, version: i32) -> Result<(), StoreError> {
        let store = Self::spawn(url)?;
        store.call(move |c| migrate(c, version).map(|_| ()))
    }

    fn open(
        url: &str,
        version: i32,
        key_file: Option<std::path::PathBuf>,
    ) -> Result<Self, StoreError> {
        let mut store = Self::spawn(url)?;
        store.key = store.call(move |c| {
            migrate(c, version)?;
            ensure_secret_key(c, key_file.as_deref())
        })?;
        Ok(store)
    }

    fn spawn(url: &str) -> Result<Self, StoreError> {
        let mut config = Config::from_str(url).map_err(|e| StoreError::Unavailable {
            target: "(unparsable URL)".into(),
            reason: format!("invalid database URL: {e}"),
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(Duration::from_secs(60));
        }
        if config.get_application_name().is_none() {
            config.application_name("orrery-primary");
        }
        config.keepalives_idle(Duration::from_secs(60));
        let target = describe(&config);
        let (jobs, rx) = mpsc::channel::<Job>();
        let mut conn = Conn {
            config,
            client: None,
            last_used: Instant::now(),
            target: target.clone(),
        };
        std::thread::Builder::new()
            .name("orrery-postgres".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    if std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut conn))).is_err() {
                        // The caller sees the reply channel close; start the
                        // next call on a fresh connection.
                        conn.client = None;
                    }
                }
            })
            .map_err(|e| StoreError::Unavailable {
                target: target.clone(),
                reason: format!("cannot start the connection thread: {e}"),
            })?;
        Ok(PgStore {
            jobs,
            target,
            key: None,
        })
    }

    /// Runs `f` on the connection thread and waits for its answer.
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |conn: &mut Conn| {
            let _ = reply.send(conn.run(f));
        });
        let gone = |reason: &str| StoreError::Unavailable {
            target: self.target.clone(),
            reason: reason.into(),
        };
        self.jobs
            .send(job)
            .map_err(|_| gone("the connection thread has stopped"))?;
        answer
            .recv()
            .map_err(|_| gone("the connection thread failed during the call"))?
    }
}

/// `host:port/dbname`, for messages (never the password).
fn describe(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// The connection thread's state.
struct Conn {
    config: Config,
    client: Option<Client>,
    last_used: Instant,
    target: String,
}

impl Conn {
    fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        if self.last_used.elapsed() > IDLE_CHECK {
            if let Some(client) = &mut self.client {
                if client.is_valid(Duration::from_secs(5)).is_err() {
                    self.client = None;
                }
            }
        }
        match &mut self.client {
            Some(client) => Ok(client),
            slot => {
                let client = self
                    .config
                    .connect(NoTls)
                    .map_err(|e| StoreError::Unavailable {
                        target: self.target.clone(),
                        reason: error_text(&e),
                    })?;
                Ok(slot.insert(client))
            }
        }
    }

    fn run<T>(
        &mut self,
        f: impl FnOnce(&mut Client) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let result = f(self.client()?);
        self.last_used = Instant::now();
        match result {
            Err(e) if self.client.as_ref().is_none_or(Client::is_closed) => {
                self.client = None;
                Err(StoreError::ConnectionLost {
                    target: self.target.clone(),
                    reason: match e {
                        StoreError::Postgres(e) => error_text(&e),
                        other => other.to_string(),
                    },
                })
            }
            other => other,
        }
    }
}

/// The error with its database message and cause, on one line.
fn error_text(e: &postgres::Error) -> String {
    let mut text = e.to_string();
    if let Some(db) = e.as_db_error() {
        if !text.contains(db.message()) {
            text = format!("{text}: {}", db.message());
        }
    } else if let Some(source) = std::error::Error::source(e) {
        text = format!("{text}: {source}");
    }
    text
}

/// Applies the migrations up to `upto` not yet recorded, all in one
/// transaction under an advisory lock. Returns the versions applied.
fn migrate(c: &mut Client, upto: i32) -> Result<Vec<i32>, StoreError> {
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version INTEGER PRIMARY KEY,
             name TEXT NOT NULL,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
         )",
    )?;
    let done: Vec<i32> = tx
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if let Some(&newest) = done.last() {
        if newest > PG_SCHEMA_VERSION {
            return Err(StoreError::NewerFormat {
                what: "schema version",
                found: newest.into(),
                supported: PG_SCHEMA_VERSION.into(),
            });
        }
    }
    let mut applied = Vec::new();
    for m in MIGRATIONS
        .iter()
        .filter(|m| m.version <= upto && !done.contains(&m.version))
    {
        tx.batch_execute(m.sql)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )?;
        applied.push(m.version);
    }
    tx.commit()?;
    Ok(applied)
}

/// The key from `key_file` when one is configured (a key still in the
/// database moved out to it); otherwise the key in `meta` (made by the first
/// primary to get here), refused once it was moved out to a key file.
fn ensure_secret_key(
    c: &mut Client,
    key_file: Option<&std::path::Path>,
) -> Result<Option<Vec<u8>>, StoreError> {
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    let mut rows = PgKeyRows(&mut tx);
    if let Some(path) = key_file {
        let key = crate::secret_key::resolve(&mut rows, path)?;
        tx.commit()?;
        return Ok(Some(key));
    }
    if crate::secret_key::moved_out(&mut rows)? {
        return Err(StoreError::SecretKey {
            path: "(none)".into(),
            reason: format!(
                "this database's secret key was moved out to a key file: set {} to it",
                crate::secret_key::KEY_FILE_ENV
            ),
        });
    }
    tracing::warn!(
        "the secret key is kept in the database, so a copy of it allows guessing write-only \
         values offline: set {} to a key file shared by the primaries",
        crate::secret_key::KEY_FILE_ENV
    );
    let mut key = vec![0u8; 32];
    getrandom::fill(&mut key).map_err(|e| StoreError::Corrupt {
        label: "secret_key".into(),
        reason: format!("no randomness for the secret key: {e}"),
    })?;
    // The first primary to get here wins; the others keep its key.
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('secret_key', $1) ON CONFLICT (key) DO NOTHING",
        &[&key],
    )?;
    tx.commit()?;
    Ok(None)
}

/// The key rows of `meta`, in the opening transaction.
struct PgKeyRows<'a, 'b>(&'a mut postgres::Transaction<'b>);

impl crate::secret_key::KeyRows for PgKeyRows<'_, '_> {
    fn get(&mut self, row: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .0
            .query_opt("SELECT value FROM meta WHERE key = $1", &[&row])?
            .map(|r| r.get(0)))
    }

    fn put_if_absent(&mut self, row: &str, value: &[u8]) -> Result<(), StoreError> {
        self.0.execute(
            "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            &[&row, &value],
        )?;
        Ok(())
    }

    fn delete(&mut self, row: &str) -> Result<(), StoreError> {
        self.0.execute("DELETE FROM meta WHERE key = $1", &[&row])?;
        Ok(())
    }
}

fn encode_props(label: &str, props: &PropertyMap) -> Result<Vec<u8>, StoreError> {
    orrery_schema::encode(props).map_err(|e| StoreError::Corrupt {
        label: label.to_owned(),
        reason: e.to_string(),
    })
}

impl StateStore for PgStore {
    fn secret_key(&self) -> Result<Vec<u8>, StoreError> {
        if let Some(key) = &self.key {
            return Ok(key.clone());
        }
        self.call(|c| {
            Ok(
                c.query_one("SELECT value FROM meta WHERE key = 'secret_key'", &[])?
                    .get(0),
            )
        })
    }

    fn resources(&self, stack: Option<&str>) -> Result<Vec<StoredResource>, StoreError> {
        let stack = stack.map(str::to_owned);
        self.call(move |c| {
            let rows = c.query(
                "SELECT stack, label, resource_type, target, plugin, native_id, properties,
                        secret_hashes, deps, managed, version
                 FROM resources WHERE ($1::text IS NULL OR stack = $1) ORDER BY stack, label",
                &[&stack],
            )?;
            rows.iter()
                .map(|r| {
                    let label: String = r.get(1);
                    let corrupt = |reason: String| StoreError::Corrupt {
                        label: label.clone(),
                        reason,
                    };
                    let properties = orrery_schema::decode(r.get::<_, &[u8]>(6))
                        .map_err(|e| corrupt(e.to_string()))?;
                    let secret_hashes =
                        serde_json::from_str(r.get(7)).map_err(|e| corrupt(e.to_string()))?;
                    let deps =
                        serde_json::from_str(r.get(8)).map_err(|e| corrupt(e.to_string()))?;
                    Ok(StoredResource {
                        stack: r.get(0),
                        label: label.clone(),
                        resource_type: r.get(2),
                        target: r.get(3),
                        plugin: r.get(4),
                        native_id: r.get(5),
                        properties,
                        secret_hashes,
                        deps,
                        managed: r.get(9),
                        version: r.get(10),
                    })
                })
                .collect()
        })
    }

    fn put_resource(&self, r: &StoredResource) -> Result<(), StoreError> {
        let (props, hashes, deps) = encode_resource(r)?;
        let r = r.clone();
        self.call(move |c| {
            c.execute(
                &format!(
                    "INSERT INTO resources (stack, label, resource_type, target, plugin, native_id,
                         properties, secret_hashes, deps, managed, version, format, updated_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, $11, {NOW_MS})
                     ON CONFLICT (stack, label) DO UPDATE SET resource_type = EXCLUDED.resource_type,
                         target = EXCLUDED.target, plugin = EXCLUDED.plugin,
                         native_id = EXCLUDED.native_id, properties = EXCLUDED.properties,
                         secret_hashes = EXCLUDED.secret_hashes, deps = EXCLUDED.deps,
                         managed = EXCLUDED.managed, version = resources.version + 1,
                         format = EXCLUDED.format, updated_ms = EXCLUDED.updated_ms"
                ),
                &[
                    &r.stack,
                    &r.label,
                    &r.resource_type,
                    &r.target,
                    &r.plugin,
                    &r.native_id,
                    &props,
                    &hashes,
                    &deps,
                    &r.managed,
                    &RECORD_FORMAT,
                ],
            )?;
            Ok(())
        })
    }

    fn put_resource_if_version(
        &self,
        r: &StoredResource,
        version: i64,
    ) -> Result<bool, StoreError> {
        let (props, hashes, deps) = encode_resource(r)?;
        let r = r.clone();
        self.call(move |c| {
            Ok(c.execute(
                &format!(
                    "UPDATE resources SET resource_type = $3, target = $4, plugin = $5,
                         native_id = $6, properties = $7, secret_hashes = $8, deps = $9,
                         managed = $10, version = version + 1, format = $11, updated_ms = {NOW_MS}
                     WHERE stack = $1 AND label = $2 AND version = $12"
                ),
                &[
                    &r.stack,
                    &r.label,
                    &r.resource_type,
                    &r.target,
                    &r.plugin,
                    &r.native_id,
                    &props,
                    &hashes,
                    &deps,
                    &r.managed,
                    &RECORD_FORMAT,
                    &version,
                ],
            )? > 0)
        })
    }

    fn remove_resource(&self, stack: &str, label: &str) -> Result<(), StoreError> {
        let (stack, label) = (stack.to_owned(), label.to_owned());
        self.call(move |c| {
            c.execute(
                "DELETE FROM resources WHERE stack = $1 AND label = $2",
                &[&stack, &label],
            )?;
            Ok(())
        })
    }

    fn put_targets(&self, stack: &str, targets: &[TargetDecl]) -> Result<(), StoreError> {
        let rows = targets
            .iter()
            .map(|t| {
                Ok((
                    t.name.clone(),
                    t.plugin.clone(),
                    encode_props(&t.name, &t.config)?,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let stack = stack.to_owned();
        self.call(move |c| {
            let mut tx = c.transaction()?;
            for (name, plugin, config) in &rows {
                tx.execute(
                    "INSERT INTO targets (stack, name, plugin, config) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (stack, name) DO UPDATE SET plugin = EXCLUDED.plugin, config = EXCLUDED.config",
                    &[&stack, name, plugin, config],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn targets(&self, stack: &str) -> Result<Vec<TargetDecl>, StoreError> {
        let stack = stack.to_owned();
        self.call(move |c| {
            c.query(
                "SELECT name, plugin, config FROM targets WHERE stack = $1 ORDER BY name",
                &[&stack],
            )?
            .iter()
            .map(|r| {
                let name: String = r.get(0);
                let config = orrery_schema::decode(r.get::<_, &[u8]>(2)).map_err(|e| {
                    StoreError::Corrupt {
                        label: name.clone(),
                        reason: e.to_string(),
                    }
                })?;
                Ok(TargetDecl {
                    name,
                    plugin: r.get(1),
                    config,
                })
            })
            .collect()
        })
    }

    fn begin_command(&self, id: &str, stack: &str, kind: &str) -> Result<(), StoreError> {
        let (id, stack, kind) = (id.to_owned(), stack.to_owned(), kind.to_owned());
        self.call(move |c| {
            c.execute(
                &format!(
                    "INSERT INTO commands (id, stack, kind, status, started_ms, format)
                     VALUES ($1, $2, $3, 'running', {NOW_MS}, $4)"
                ),
                &[&id, &stack, &kind, &RECORD_FORMAT],
            )?;
            Ok(())
        })
    }

    fn put_operation(&self, command_id: &str, op: &OperationRecord) -> Result<(), StoreError> {
        let context = encode_context(op)?;
        let (command_id, op) = (command_id.to_owned(), op.clone());
        self.call(move |c| {
            c.execute(
                &format!(
                    "INSERT INTO operations (command_id, label, operation, request_id, status, attempts,
                         error_code, message, updated_ms, native_id, context)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, {NOW_MS}, $9, $10)
                     ON CONFLICT (command_id, label, operation) DO UPDATE SET
                         request_id = EXCLUDED.request_id, status = EXCLUDED.status,
                         attempts = EXCLUDED.attempts, error_code = EXCLUDED.error_code,
                         message = EXCLUDED.message, updated_ms = EXCLUDED.updated_ms,
                         native_id = EXCLUDED.native_id, context = EXCLUDED.context"
                ),
                &[
                    &command_id,
                    &op.label,
                    &op.operation,
                    &op.request_id,
                    &op.status.as_str(),
                    &op.attempts,
                    &op.error_code,
                    &op.message,
                    &op.native_id,
                    &context,
                ],
            )?;
            Ok(())
        })
    }

    fn latest_command_of(&self, stack: &str) -> Result<Option<CommandRecord>, StoreError> {
        let stack = stack.to_owned();
        let id: Option<String> = self.call(move |c| {
            Ok(c.query_opt(
                "SELECT id FROM commands WHERE stack = $1 ORDER BY started_ms DESC, seq DESC LIMIT 1",
                &[&stack],
            )?
            .map(|r| r.get(0)))
        })?;
        match id {
            Some(id) => self.command(Some(&id)),
            None => Ok(None),
        }
    }

    fn finish_command(&self, id: &str, status: &CommandStatus) -> Result<(), StoreError> {
        let (id, status) = (id.to_owned(), status.as_str());
        self.call(move |c| {
            c.execute(
                &format!("UPDATE commands SET status = $2, finished_ms = {NOW_MS} WHERE id = $1"),
                &[&id, &status],
            )?;
            Ok(())
        })
    }

    fn command(&self, id: Option<&str>) -> Result<Option<CommandRecord>, StoreError> {
        let id = id.map(str::to_owned);
        self.call(move |c| {
            let Some(head) = c.query_opt(
                "SELECT id, stack, kind, status, started_ms, finished_ms FROM commands
                 WHERE ($1::text IS NULL OR id = $1) ORDER BY started_ms DESC, seq DESC LIMIT 1",
                &[&id],
            )?
            else {
                return Ok(None);
            };
            let mut command = commands::head(&head).with_operations(Vec::new());
            command.operations = c
                .query(
                    "SELECT label, operation, request_id, status, attempts, error_code, message,
                         native_id, context
                     FROM operations WHERE command_id = $1 ORDER BY updated_ms, label",
                    &[&command.id],
                )?
                .iter()
                .map(|r| {
                    let label: String = r.get(0);
                    let context = decode_context(&label, r.get::<_, Option<&[u8]>>(8))?;
                    Ok(OperationRecord {
                        label,
                        operation: r.get(1),
                        request_id: r.get(2),
                        status: OpStatus::parse(r.get(3)),
                        attempts: r.get(4),
                        error_code: r.get(5),
                        message: r.get(6),
                        native_id: r.get(7),
                        context,
                    })
                })
                .collect::<Result<_, StoreError>>()?;
            Ok(Some(command))
        })
    }
    fn resource_counts(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        self.call(keys::resource_counts)
    }

    fn managed_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<crate::ManagedKey>, StoreError> {
        let (target, resource_type) = (target.to_owned(), resource_type.to_owned());
        self.call(move |c| keys::managed_keys(c, &target, &resource_type))
    }

    fn discovered_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<crate::DiscoveredKey>, StoreError> {
        let (target, resource_type) = (target.to_owned(), resource_type.to_owned());
        self.call(move |c| keys::discovered_keys(c, &target, &resource_type))
    }

    fn commands(
        &self,
        filter: &crate::CommandFilter,
    ) -> Result<Vec<crate::CommandHead>, StoreError> {
        let filter = filter.clone();
        self.call(move |c| commands::commands(c, &filter))
    }

    fn operation_counts(&self, command_id: &str) -> Result<BTreeMap<String, u64>, StoreError> {
        let command_id = command_id.to_owned();
        self.call(move |c| commands::operation_counts(c, &command_id))
    }

    fn command_stacks(&self) -> Result<Vec<String>, StoreError> {
        self.call(commands::command_stacks)
    }

    fn put_command_document(
        &self,
        command_id: &str,
        doc: &crate::CommandDocument,
    ) -> Result<(), StoreError> {
        let (command_id, doc) = (command_id.to_owned(), doc.clone());
        self.call(move |c| commands::put_document(c, &command_id, &doc))
    }

    fn command_document(
        &self,
        command_id: &str,
    ) -> Result<Option<crate::CommandDocument>, StoreError> {
        let command_id = command_id.to_owned();
        self.call(move |c| commands::document(c, &command_id))
    }

    /// The database's clock, shared by every primary.
    fn now_ms(&self) -> Result<i64, StoreError> {
        self.call(lease::now_ms)
    }

    fn acquire_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<crate::LeaseGrant, StoreError> {
        let (command_id, owner) = (command_id.to_owned(), owner.to_owned());
        self.call(move |c| lease::acquire(c, &command_id, &owner, now_ms, ttl_ms))
    }

    fn renew_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let (command_id, owner) = (command_id.to_owned(), owner.to_owned());
        self.call(move |c| lease::renew(c, &command_id, &owner, now_ms, ttl_ms))
    }

    fn release_lease(&self, command_id: &str, owner: &str) -> Result<(), StoreError> {
        let (command_id, owner) = (command_id.to_owned(), owner.to_owned());
        self.call(move |c| lease::release(c, &command_id, &owner))
    }
}
