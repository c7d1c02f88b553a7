//! The server store: PostgreSQL (15 or newer), shared by any number of
//! primaries, selected by a `postgres://` or `postgresql://` URL.
//!
//! ## Client
//!
//! `tokio-postgres` with a `deadpool-postgres` pool, TLS by rustls
//! (`tokio-postgres-rustls`, ring provider: the workspace's rustls already).
//! Chosen over `sqlx` because it is the protocol crate the store already
//! spoke (the SQL and row decoding moved over as they were, and the
//! migrations did not change), it pipelines the requests of concurrent
//! callers on a connection by itself, it has no compile-time query checking
//! that would need a database at build time, and it brings a fraction of
//! `sqlx`'s dependencies. deadpool adds the pool, a per-connection cache of
//! prepared statements (every call is one round trip: bind + execute of a
//! statement prepared once per connection) and the replacement of broken
//! connections.
//!
//! ## URL
//!
//! `sslmode` (`disable`, `prefer` (default), `require`, `verify-ca`,
//! `verify-full`), `sslrootcert` and `pool_size` (default 8) are read by
//! `tls.rs`; the rest is `tokio-postgres`'s. Errors name host, port and
//! database, never the password.
//!
//! ## Sync bridge
//!
//! The operations are async methods of [`PgPool`]. The `StateStore` trait is
//! synchronous (the executor calls it from tokio worker threads), so each
//! `PgStore` owns a runtime of its own on a dedicated thread that drives the
//! pool's connections; a trait call spawns its operation there and waits
//! for the answer on a channel, as it would on SQLite's mutex. That never
//! runs or blocks on the caller's runtime, so it is safe from inside any.
//!
//! Migrations (`migrations/postgres/*.sql`, recorded in `schema_migrations`)
//! run at open inside one transaction that holds an advisory lock, so
//! primaries starting together apply each migration exactly once.
//!
//! A connection that breaks during a call fails that call
//! (`ConnectionLost`: its outcome is unknown) and leaves the pool; the next
//! call gets another connection (the pool drops connections it sees closed,
//! and checks one idle for over 30 s before handing it out).
//!
//! The trait's key-only views, command listings, leases and audit log are
//! in `keys.rs`, `commands.rs`, `lease.rs` and `audit.rs`; the URL and TLS in `tls.rs`.

mod audit;
mod batch;
mod commands;
mod keys;
mod lease;
mod outputs;
mod protect;
mod tls;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{
    ClientWrapper, Hook, HookError, Manager, ManagerConfig, Object, Pool, PoolError,
    RecyclingMethod,
};
use orrery_schema::PropertyMap;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::StateStore;
use crate::codec::{decode_context, encode_context, encode_resource};
use crate::{
    CommandRecord, CommandStatus, OpStatus, OperationRecord, StoredResource, RECORD_FORMAT,
};
use crate::{StoreError, Write};
use orrery_stack::TargetDecl;

pub use tls::{TlsMode, DEFAULT_POOL_SIZE};

/// What the store would connect to `url` with: the `tokio-postgres`
/// configuration (Orrery's parameters taken out, `sslmode` mapped) and the
/// TLS connector for its `sslmode`/`sslrootcert`. For tests and tools that
/// need a plain connection to the same server the same way (the sync
/// `postgres` crate takes both: `postgres::Config::from(config).connect(tls)`).
#[doc(hidden)]
pub fn connect_config(
    url: &str,
) -> Result<
    (
        tokio_postgres::Config,
        tokio_postgres_rustls::MakeRustlsConnect,
    ),
    StoreError,
> {
    let settings = tls::parse(url)?;
    Ok((settings.config, settings.tls))
}

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
    Migration {
        version: 8,
        name: "command_principals",
        sql: include_str!("../migrations/postgres/0008_command_principals.sql"),
    },
    Migration {
        version: 9,
        name: "stack_outputs",
        sql: include_str!("../migrations/postgres/0009_stack_outputs.sql"),
    },
    Migration {
        version: 10,
        name: "resource_protect",
        sql: include_str!("../migrations/postgres/0010_resource_protect.sql"),
    },
    Migration {
        version: 11,
        name: "command_selection",
        sql: include_str!("../migrations/postgres/0011_command_selection.sql"),
    },
    Migration {
        version: 12,
        name: "rate_sharers",
        sql: include_str!("../migrations/postgres/0012_rate_sharers.sql"),
    },
    Migration {
        version: 13,
        name: "audit",
        sql: include_str!("../migrations/postgres/0013_audit.sql"),
    },
];

/// The schema version this release writes (the last migration).
pub const PG_SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// Key of the advisory lock held while migrating ("orrery" + 1).
const MIGRATION_LOCK: i64 = 0x6f72_7265_7279_0001;

/// After this long unused, a pooled connection is checked before a call,
/// so a server restarted while the primary idled costs no failed call.
const IDLE_CHECK: Duration = Duration::from_secs(30);

/// Server time in Unix milliseconds (one clock for every primary).
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

fn put_resource_sql() -> String {
    format!(
        "INSERT INTO resources (stack, label, resource_type, target, plugin, native_id,
             properties, secret_hashes, deps, managed, version, format, updated_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, $11, {NOW_MS})
         ON CONFLICT (stack, label) DO UPDATE SET resource_type = EXCLUDED.resource_type,
             target = EXCLUDED.target, plugin = EXCLUDED.plugin,
             native_id = EXCLUDED.native_id, properties = EXCLUDED.properties,
             secret_hashes = EXCLUDED.secret_hashes, deps = EXCLUDED.deps,
             managed = EXCLUDED.managed, version = resources.version + 1,
             format = EXCLUDED.format, updated_ms = EXCLUDED.updated_ms"
    )
}

fn put_operation_sql() -> String {
    format!(
        "INSERT INTO operations (command_id, label, operation, request_id, status, attempts,
             error_code, message, updated_ms, native_id, context)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, {NOW_MS}, $9, $10)
         ON CONFLICT (command_id, label, operation) DO UPDATE SET
             request_id = EXCLUDED.request_id, status = EXCLUDED.status,
             attempts = EXCLUDED.attempts, error_code = EXCLUDED.error_code,
             message = EXCLUDED.message, updated_ms = EXCLUDED.updated_ms,
             native_id = EXCLUDED.native_id, context = EXCLUDED.context"
    )
}

const REMOVE_RESOURCE_SQL: &str = "DELETE FROM resources WHERE stack = $1 AND label = $2";

/// A [`Write`] with its encoded columns, which the statements' parameters
/// borrow.
enum Encoded<'a> {
    Operation {
        command_id: &'a str,
        record: &'a OperationRecord,
        status: &'static str,
        context: Option<Vec<u8>>,
    },
    Resource {
        r: &'a StoredResource,
        props: Vec<u8>,
        hashes: String,
        deps: String,
    },
    Removal {
        stack: &'a str,
        label: &'a str,
    },
}

impl<'a> Encoded<'a> {
    fn of(write: &'a Write) -> Result<Self, StoreError> {
        Ok(match write {
            Write::Operation { command_id, record } => Encoded::Operation {
                command_id,
                record,
                status: record.status.as_str(),
                context: encode_context(record)?,
            },
            Write::Resource(r) => {
                let (props, hashes, deps) = encode_resource(r)?;
                Encoded::Resource {
                    r,
                    props,
                    hashes,
                    deps,
                }
            }
            Write::Removal { stack, label } => Encoded::Removal { stack, label },
        })
    }

    fn sql(&self) -> std::borrow::Cow<'static, str> {
        match self {
            Encoded::Operation { .. } => put_operation_sql().into(),
            Encoded::Resource { .. } => put_resource_sql().into(),
            Encoded::Removal { .. } => REMOVE_RESOURCE_SQL.into(),
        }
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        match self {
            Encoded::Operation {
                command_id,
                record: op,
                status,
                context,
            } => vec![
                command_id,
                &op.label,
                &op.operation,
                &op.request_id,
                status,
                &op.attempts,
                &op.error_code,
                &op.message,
                &op.native_id,
                context,
            ],
            Encoded::Resource {
                r,
                props,
                hashes,
                deps,
            } => vec![
                &r.stack,
                &r.label,
                &r.resource_type,
                &r.target,
                &r.plugin,
                &r.native_id,
                props,
                hashes,
                deps,
                &r.managed,
                &RECORD_FORMAT,
            ],
            Encoded::Removal { stack, label } => vec![stack, label],
        }
    }
}

/// A pooled connection (with its statement cache).
pub(super) type Cl = ClientWrapper;

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Runs `sql` (prepared once per connection) and returns its rows.
pub(super) async fn query(
    c: &Cl,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query(&statement, params).await
}

/// Runs `sql` and returns its one row.
pub(super) async fn query_one(
    c: &Cl,
    sql: &str,
    params: Params<'_>,
) -> Result<Row, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query_one(&statement, params).await
}

/// Runs `sql` and returns its row if any.
pub(super) async fn query_opt(
    c: &Cl,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<Row>, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query_opt(&statement, params).await
}

/// Runs `sql` and returns how many rows it changed.
pub(super) async fn execute(
    c: &Cl,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.execute(&statement, params).await
}

/// The pool and the store's operations, async. Must be polled on a tokio
/// runtime (new connections are driven by tasks spawned on it); `PgStore`
/// runs them on its own.
pub struct PgPool {
    pool: Pool,
    target: String,
    mode: TlsMode,
}

impl std::fmt::Debug for PgPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgPool")
            .field("target", &self.target)
            .field("sslmode", &self.mode)
            .field("max_size", &self.pool.status().max_size)
            .finish()
    }
}

/// Runs `$body` with `$c` bound to a pooled connection, turning an error
/// that broke the connection into `ConnectionLost` (and the connection out
/// of the pool).
macro_rules! on_conn {
    ($self:ident, |$c:ident| $body:expr) => {{
        let mut conn = $self.conn().await?;
        let result: Result<_, StoreError> = {
            #[allow(unused_mut)]
            let $c: &mut Cl = &mut conn;
            async { $body }.await
        };
        $self.settle(conn, result)
    }};
}

impl PgPool {
    fn new(url: &str) -> Result<Self, StoreError> {
        let settings = tls::parse(url)?;
        let manager = Manager::from_config(
            settings.config,
            settings.tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size)
            .pre_recycle(Hook::async_fn(|client: &mut Cl, metrics| {
                let idle = metrics.last_used();
                Box::pin(async move {
                    if idle > IDLE_CHECK {
                        client.simple_query("").await.map_err(HookError::Backend)?;
                    }
                    Ok(())
                })
            }))
            .build()
            .map_err(|e| StoreError::Unavailable {
                target: settings.target.clone(),
                reason: format!("cannot build the connection pool: {e}"),
            })?;
        Ok(PgPool {
            pool,
            target: settings.target,
            mode: settings.mode,
        })
    }

    /// `host:port/dbname` (never the password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Connections kept at most.
    pub fn max_size(&self) -> usize {
        self.pool.status().max_size
    }

    async fn conn(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|e| StoreError::Unavailable {
            target: self.target.clone(),
            reason: match e {
                PoolError::Backend(e) => error_text(&e),
                PoolError::Closed => "the store is closed".into(),
                other => other.to_string(),
            },
        })
    }

    fn settle<T>(&self, conn: Object, result: Result<T, StoreError>) -> Result<T, StoreError> {
        match result {
            Err(e) if broke(&e, &conn) => {
                // Never handed out again.
                drop(Object::take(conn));
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

    async fn migrate(&self, upto: i32) -> Result<Vec<i32>, StoreError> {
        on_conn!(self, |c| migrate(c, upto).await)
    }

    async fn meta_row(&self, row: &str) -> Result<Option<Vec<u8>>, StoreError> {
        on_conn!(self, |c| Ok(query_opt(
            c,
            "SELECT value FROM meta WHERE key = $1",
            &[&row]
        )
        .await?
        .map(|r| r.get(0))))
    }

    /// The key from `key_file` when one is configured (a key still in the
    /// database moved out to it, see `secret_key.rs`); otherwise the key in
    /// `meta`, made by the first primary to get here, refused once it was
    /// moved out to a key file.
    async fn ensure_secret_key(
        &self,
        key_file: Option<&std::path::Path>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        use crate::secret_key::{self as sk, CHECK_ROW, LEGACY_ROW};
        let legacy = self.meta_row(LEGACY_ROW).await?;
        let check = self.meta_row(CHECK_ROW).await?;
        if let Some(path) = key_file {
            let key = sk::key_for(legacy.as_deref(), check.as_deref(), path)?;
            let made = sk::check_of(&key);
            on_conn!(self, |c| {
                execute(
                    c,
                    "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                    &[&CHECK_ROW, &made],
                )
                .await?;
                Ok(())
            })?;
            sk::verify(path, &key, self.meta_row(CHECK_ROW).await?.as_deref())?;
            if legacy.is_some() {
                on_conn!(self, |c| {
                    execute(c, "DELETE FROM meta WHERE key = $1", &[&LEGACY_ROW]).await?;
                    Ok(())
                })?;
                sk::moved_log(path);
            }
            return Ok(Some(key));
        }
        if sk::moved_out(legacy.as_deref(), check.as_deref()) {
            return Err(StoreError::SecretKey {
                path: "(none)".into(),
                reason: format!(
                    "this database's secret key was moved out to a key file: set {} to it",
                    sk::KEY_FILE_ENV
                ),
            });
        }
        tracing::warn!(
            "the secret key is kept in the database, so a copy of it allows guessing write-only \
             values offline: set {} to a key file shared by the primaries",
            sk::KEY_FILE_ENV
        );
        let mut key = vec![0u8; 32];
        getrandom::fill(&mut key).map_err(|e| StoreError::Corrupt {
            label: "secret_key".into(),
            reason: format!("no randomness for the secret key: {e}"),
        })?;
        // The first primary to get here wins; the others keep its key.
        on_conn!(self, |c| {
            execute(
                c,
                "INSERT INTO meta (key, value) VALUES ('secret_key', $1) ON CONFLICT (key) DO NOTHING",
                &[&key],
            )
            .await?;
            Ok(())
        })?;
        Ok(None)
    }

    /// The key secret hashes are made with.
    pub async fn secret_key(&self) -> Result<Vec<u8>, StoreError> {
        on_conn!(self, |c| Ok(query_one(
            c,
            "SELECT value FROM meta WHERE key = 'secret_key'",
            &[]
        )
        .await?
        .get(0)))
    }

    /// The resources of `stack` (every stack when `None`).
    pub async fn resource_page(
        &self,
        page: &crate::ResourcePage,
    ) -> Result<Vec<StoredResource>, StoreError> {
        let (after_stack, after_label) = page.after.clone().unzip();
        let limit = page.limit.map(i64::from);
        // Along the primary key (stack, label): a page costs its size.
        let rows = on_conn!(self, |c| Ok(query(
            c,
            "SELECT stack, label, resource_type, target, plugin, native_id, properties,
                    secret_hashes, deps, managed, version
             FROM resources WHERE ($1::text IS NULL OR stack = $1)
               AND ($2::text IS NULL OR resource_type = $2) AND ($3::text IS NULL OR target = $3)
               AND ($4::text IS NULL OR (stack, label) > ($4::text, $5::text))
             ORDER BY stack, label LIMIT $6::bigint",
            &[
                &page.stack,
                &page.resource_type,
                &page.target,
                &after_stack,
                &after_label,
                &limit
            ],
        )
        .await?))?;
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
                let deps = serde_json::from_str(r.get(8)).map_err(|e| corrupt(e.to_string()))?;
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
    }

    /// Records a resource's new state, bumping its version.
    pub async fn put_resource(&self, r: &StoredResource) -> Result<(), StoreError> {
        self.write_one(&Write::Resource(r.clone())).await
    }

    /// Compare-and-set: writes only over the record at `version`.
    pub async fn put_resource_if_version(
        &self,
        r: &StoredResource,
        version: i64,
    ) -> Result<bool, StoreError> {
        let (props, hashes, deps) = encode_resource(r)?;
        let sql = format!(
            "UPDATE resources SET resource_type = $3, target = $4, plugin = $5,
                 native_id = $6, properties = $7, secret_hashes = $8, deps = $9,
                 managed = $10, version = version + 1, format = $11, updated_ms = {NOW_MS}
             WHERE stack = $1 AND label = $2 AND version = $12"
        );
        on_conn!(self, |c| Ok(execute(
            c,
            &sql,
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
        )
        .await?
            > 0))
    }

    /// Forgets a resource.
    pub async fn remove_resource(&self, stack: &str, label: &str) -> Result<(), StoreError> {
        self.write_one(&Write::Removal {
            stack: stack.to_owned(),
            label: label.to_owned(),
        })
        .await
    }

    /// Records a stack's targets (one transaction).
    pub async fn put_targets(&self, stack: &str, targets: &[TargetDecl]) -> Result<(), StoreError> {
        let rows = targets
            .iter()
            .map(|t| {
                Ok((
                    t.name.as_str(),
                    t.plugin.as_str(),
                    encode_props(&t.name, &t.config)?,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        on_conn!(self, |c| {
            let tx = c.transaction().await?;
            let upsert = tx
                .prepare_cached(
                    "INSERT INTO targets (stack, name, plugin, config) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (stack, name) DO UPDATE SET plugin = EXCLUDED.plugin, config = EXCLUDED.config",
                )
                .await?;
            for (name, plugin, config) in &rows {
                tx.execute(&upsert, &[&stack, name, plugin, config]).await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// A stack's recorded targets, by name.
    pub async fn targets(&self, stack: &str) -> Result<Vec<TargetDecl>, StoreError> {
        let rows = on_conn!(self, |c| Ok(query(
            c,
            "SELECT name, plugin, config FROM targets WHERE stack = $1 ORDER BY name",
            &[&stack],
        )
        .await?))?;
        rows.iter()
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
    }

    /// Starts a command record (`running`).
    pub async fn begin_command(&self, id: &str, stack: &str, kind: &str) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO commands (id, stack, kind, status, started_ms, format)
             VALUES ($1, $2, $3, 'running', {NOW_MS}, $4)"
        );
        on_conn!(self, |c| {
            execute(c, &sql, &[&id, &stack, &kind, &RECORD_FORMAT]).await?;
            Ok(())
        })
    }

    /// Records who ran a command (the audit); the first principal stays.
    pub async fn put_command_principal(
        &self,
        command_id: &str,
        principal: &str,
    ) -> Result<(), StoreError> {
        on_conn!(self, |c| {
            execute(
                c,
                "INSERT INTO command_principals (command_id, principal) VALUES ($1, $2)
                 ON CONFLICT (command_id) DO NOTHING",
                &[&command_id, &principal],
            )
            .await?;
            Ok(())
        })
    }

    /// Records where an operation of a command stands.
    pub async fn put_operation(
        &self,
        command_id: &str,
        op: &OperationRecord,
    ) -> Result<(), StoreError> {
        self.write_one(&Write::Operation {
            command_id: command_id.to_owned(),
            record: op.clone(),
        })
        .await
    }

    /// One write as one statement, no transaction around it: the SQL and
    /// parameters are those of [`PgPool::write_batch`].
    async fn write_one(&self, write: &Write) -> Result<(), StoreError> {
        let encoded = Encoded::of(write)?;
        let params = encoded.params();
        let sql = encoded.sql();
        on_conn!(self, |c| {
            execute(c, &sql, &params).await?;
            Ok(())
        })
    }

    /// Applies `writes` in one transaction as at most three multi-row
    /// statements ([`batch`]), pipelined on one connection: one round trip
    /// and three statements for the batch, not one of each per write.
    pub async fn write_batch(&self, writes: &[Write]) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        let encoded = writes
            .iter()
            .map(Encoded::of)
            .collect::<Result<Vec<_>, _>>()?;
        let columns = batch::Columns::of(&encoded);
        let (operation_sql, resource_sql) = (batch::Operations::sql(), batch::Resources::sql());
        // In this order: a resource removed and then recorded again is
        // deleted before it is inserted. Pipelined statements run in the
        // order they are sent, which is the order of this list.
        let mut statements: Vec<(&str, Vec<&(dyn ToSql + Sync)>)> = Vec::new();
        if !columns.removals.is_empty() {
            statements.push((batch::Removals::SQL, columns.removals.params()));
        }
        if !columns.resources.is_empty() {
            statements.push((&resource_sql, columns.resources.params()));
        }
        if !columns.operations.is_empty() {
            statements.push((&operation_sql, columns.operations.params()));
        }
        on_conn!(self, |c| {
            if let [(sql, params)] = statements.as_slice() {
                // One statement is atomic on its own.
                execute(c, sql, params).await?;
                return Ok(());
            }
            let tx = c.transaction().await?;
            let mut prepared = Vec::with_capacity(statements.len());
            for (sql, _) in &statements {
                prepared.push(tx.prepare_cached(sql).await?);
            }
            let runs = prepared
                .iter()
                .zip(&statements)
                .map(|(statement, (_, params))| tx.execute(statement, params));
            futures::future::try_join_all(runs).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    /// The latest command of `stack` with its operations.
    pub async fn latest_command_of(
        &self,
        stack: &str,
    ) -> Result<Option<CommandRecord>, StoreError> {
        let id: Option<String> = on_conn!(self, |c| {
            Ok(query_opt(
            c,
            "SELECT id FROM commands WHERE stack = $1 ORDER BY started_ms DESC, seq DESC LIMIT 1",
            &[&stack],
        )
        .await?
        .map(|r| r.get(0)))
        })?;
        match id {
            Some(id) => self.command(Some(&id)).await,
            None => Ok(None),
        }
    }

    /// Ends a command.
    pub async fn finish_command(&self, id: &str, status: &CommandStatus) -> Result<(), StoreError> {
        let status = status.as_str();
        let sql = format!("UPDATE commands SET status = $2, finished_ms = {NOW_MS} WHERE id = $1");
        on_conn!(self, |c| {
            execute(c, &sql, &[&id, &status]).await?;
            Ok(())
        })
    }

    /// A command with its operations; the latest when `id` is `None`.
    pub async fn command(&self, id: Option<&str>) -> Result<Option<CommandRecord>, StoreError> {
        self.command_page(id, &crate::OperationPage::default())
            .await
    }

    /// A command with a page of its operations; the latest when `id` is `None`.
    pub async fn command_page(
        &self,
        id: Option<&str>,
        page: &crate::OperationPage,
    ) -> Result<Option<CommandRecord>, StoreError> {
        on_conn!(self, |c| {
            let Some(head) = query_opt(
                c,
                "SELECT id, stack, kind, status, started_ms, finished_ms,
             (SELECT principal FROM command_principals WHERE command_id = commands.id) FROM commands
                 WHERE ($1::text IS NULL OR id = $1) ORDER BY started_ms DESC, seq DESC LIMIT 1",
                &[&id],
            )
            .await?
            else {
                return Ok(None);
            };
            let mut command = commands::head(&head).with_operations(Vec::new());
            // A page goes along the primary key (a page costs its size and
            // a cursor stays put while operations are updated); everything
            // comes in the order of updates.
            let (after_label, after_operation) = page.after.clone().unzip();
            let limit = page.limit.map(i64::from);
            command.operations = query(
                c,
                if page.is_paged() {
                    "SELECT label, operation, request_id, status, attempts, error_code, message,
                         native_id, context, updated_ms
                     FROM operations WHERE command_id = $1 AND ($2::text IS NULL OR status = $2)
                       AND ($3::text IS NULL OR (label, operation) > ($3::text, $4::text))
                     ORDER BY label, operation LIMIT $5::bigint"
                } else {
                    "SELECT label, operation, request_id, status, attempts, error_code, message,
                         native_id, context, updated_ms
                     FROM operations WHERE command_id = $1 AND ($2::text IS NULL OR status = $2)
                       AND $3::text IS NULL AND $4::text IS NULL
                     ORDER BY updated_ms, label LIMIT $5::bigint"
                },
                &[
                    &command.id,
                    &page.status,
                    &after_label,
                    &after_operation,
                    &limit,
                ],
            )
            .await?
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
                    updated_ms: r.get(9),
                })
            })
            .collect::<Result<_, StoreError>>()?;
            Ok(Some(command))
        })
    }

    /// How many resources each stack has.
    pub async fn resource_counts(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        on_conn!(self, |c| keys::resource_counts(c).await)
    }

    /// Managed resources of a type on a target, by key.
    pub async fn managed_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<crate::ManagedKey>, StoreError> {
        on_conn!(self, |c| keys::managed_keys(c, target, resource_type).await)
    }

    /// Discovered resources of a type on a target, with fingerprints.
    pub async fn discovered_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<crate::DiscoveredKey>, StoreError> {
        on_conn!(self, |c| keys::discovered_keys(c, target, resource_type)
            .await)
    }

    /// Commands without their operations, newest first.
    pub async fn commands(
        &self,
        filter: &crate::CommandFilter,
    ) -> Result<Vec<crate::CommandHead>, StoreError> {
        on_conn!(self, |c| commands::commands(c, filter).await)
    }

    /// A command's operations counted by status.
    pub async fn operation_counts(
        &self,
        command_id: &str,
    ) -> Result<BTreeMap<String, u64>, StoreError> {
        on_conn!(self, |c| commands::operation_counts(c, command_id).await)
    }

    /// Every stack that ran a command.
    pub async fn command_stacks(&self) -> Result<Vec<String>, StoreError> {
        on_conn!(self, |c| commands::command_stacks(c).await)
    }

    /// Records the document an apply runs.
    pub async fn put_command_document(
        &self,
        command_id: &str,
        doc: &crate::CommandDocument,
    ) -> Result<(), StoreError> {
        on_conn!(self, |c| commands::put_document(c, command_id, doc).await)
    }

    /// Records a stack's outputs, replacing the ones before.
    pub async fn put_outputs(&self, stack: &str, outputs: &PropertyMap) -> Result<(), StoreError> {
        let bytes = encode_props(stack, outputs)?;
        on_conn!(self, |c| outputs::put(c, stack, &bytes).await)
    }

    /// A stack's recorded outputs.
    pub async fn outputs(&self, stack: &str) -> Result<Option<PropertyMap>, StoreError> {
        on_conn!(self, |c| outputs::get(c, stack).await)
    }

    /// Marks `stack`'s records protected or not.
    pub async fn set_protected(
        &self,
        stack: &str,
        marks: &[(String, bool)],
    ) -> Result<(), StoreError> {
        on_conn!(self, |c| protect::set(c, stack, marks).await)
    }

    /// The labels of `stack`'s records marked protected.
    pub async fn protected_labels(
        &self,
        stack: &str,
    ) -> Result<std::collections::BTreeSet<String>, StoreError> {
        on_conn!(self, |c| protect::labels(c, stack).await)
    }

    /// The document recorded for a command.
    pub async fn command_document(
        &self,
        command_id: &str,
    ) -> Result<Option<crate::CommandDocument>, StoreError> {
        on_conn!(self, |c| commands::document(c, command_id).await)
    }

    /// The database's clock.
    pub async fn now_ms(&self) -> Result<i64, StoreError> {
        on_conn!(self, |c| lease::now_ms(c).await)
    }

    /// Takes a command's lease.
    pub async fn acquire_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<crate::LeaseGrant, StoreError> {
        on_conn!(self, |c| lease::acquire(
            c, command_id, owner, now_ms, ttl_ms
        )
        .await)
    }

    /// Extends a command's lease.
    pub async fn renew_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        on_conn!(self, |c| lease::renew(c, command_id, owner, now_ms, ttl_ms)
            .await)
    }

    /// Frees a command's lease.
    pub async fn release_lease(&self, command_id: &str, owner: &str) -> Result<(), StoreError> {
        on_conn!(self, |c| lease::release(c, command_id, owner).await)
    }

    /// See [`StateStore::append_audit`].
    pub async fn append_audit(
        &self,
        entries: &[crate::AuditEntry],
        keep: u64,
    ) -> Result<(), StoreError> {
        on_conn!(self, |c| audit::append(c, entries, keep).await)
    }

    /// See [`StateStore::set_audit_outcome`].
    pub async fn set_audit_outcome(
        &self,
        command_id: &str,
        outcome: &str,
    ) -> Result<(), StoreError> {
        on_conn!(self, |c| audit::set_outcome(c, command_id, outcome).await)
    }

    /// See [`StateStore::audit`].
    pub async fn audit(
        &self,
        filter: &crate::AuditFilter,
    ) -> Result<Vec<crate::AuditRecord>, StoreError> {
        on_conn!(self, |c| audit::list(c, filter).await)
    }

    /// See [`StateStore::rate_sharers`].
    pub async fn rate_sharers(
        &self,
        owner: &str,
        buckets: &[String],
        window_ms: i64,
    ) -> Result<HashMap<String, u32>, StoreError> {
        let buckets = buckets.to_vec();
        on_conn!(self, |c| {
            c.execute(
                &format!("DELETE FROM rate_sharers WHERE seen_ms < {NOW_MS} - $1"),
                &[&window_ms],
            )
            .await?;
            c.execute(
                &format!(
                    "INSERT INTO rate_sharers (bucket, owner, seen_ms)
                     SELECT b, $2, {NOW_MS} FROM unnest($1::text[]) AS b
                     ON CONFLICT (bucket, owner) DO UPDATE SET seen_ms = EXCLUDED.seen_ms"
                ),
                &[&buckets, &owner],
            )
            .await?;
            let rows = c
                .query(
                    "SELECT bucket, count(*) FROM rate_sharers WHERE bucket = ANY($1)
                     GROUP BY bucket",
                    &[&buckets],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| {
                    let n: i64 = r.get(1);
                    (r.get::<_, String>(0), u32::try_from(n).unwrap_or(u32::MAX))
                })
                .collect())
        })
    }
}

/// Whether `e` means the connection it happened on is gone.
fn broke(e: &StoreError, c: &Cl) -> bool {
    if c.is_closed() {
        return true;
    }
    let StoreError::Postgres(e) = e else {
        return false;
    };
    if e.is_closed() {
        return true;
    }
    // FATAL (e.g. terminated by an administrator, the server shutting
    // down) ends the session.
    if let Some(db) = e.as_db_error() {
        return matches!(db.severity(), "FATAL" | "PANIC");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// The error with its database message and cause, on one line.
fn error_text(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    if let Some(db) = e.as_db_error() {
        if !text.contains(db.message()) {
            text = format!("{text}: {}", db.message());
        }
    } else if let Some(source) = std::error::Error::source(e) {
        let source = source.to_string();
        if !text.contains(&source) {
            text = format!("{text}: {source}");
        }
    }
    text
}

/// Applies the migrations up to `upto` not yet recorded, all in one
/// transaction under an advisory lock. Returns the versions applied.
async fn migrate(c: &mut Cl, upto: i32) -> Result<Vec<i32>, StoreError> {
    let tx = c.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version INTEGER PRIMARY KEY,
             name TEXT NOT NULL,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
         )",
    )
    .await?;
    let done: Vec<i32> = tx
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )
        .await?
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
        tx.batch_execute(m.sql).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )
        .await?;
        applied.push(m.version);
    }
    tx.commit().await?;
    Ok(applied)
}

fn encode_props(label: &str, props: &PropertyMap) -> Result<Vec<u8>, StoreError> {
    orrery_schema::encode(props).map_err(|e| StoreError::Corrupt {
        label: label.to_owned(),
        reason: e.to_string(),
    })
}

/// The PostgreSQL store: a [`PgPool`] on a runtime of its own. Calls from
/// any thread (tokio workers included).
pub struct PgStore {
    pool: Arc<PgPool>,
    runtime: tokio::runtime::Handle,
    /// Dropped with the store: the runtime's thread then stops it, closing
    /// the connections.
    _stop: tokio::sync::oneshot::Sender<()>,
    /// The secret key, when it is kept in a key file (`ORRERY_SECRET_KEY_FILE`).
    key: Option<Vec<u8>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("pool", &self.pool).finish()
    }
}

impl PgStore {
    /// Connects to `url`, applies pending migrations and makes sure the
    /// secret key exists.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with_key_file(url, crate::secret_key::key_file_from_env().as_deref())
    }

    /// As [`PgStore::connect`], the secret key in `key_file` (a key still
    /// in the database is moved out to it), or in the database when `None`.
    pub fn connect_with_key_file(
        url: &str,
        key_file: Option<&std::path::Path>,
    ) -> Result<Self, StoreError> {
        let mut store = Self::start(url)?;
        let key_file = key_file.map(ToOwned::to_owned);
        store.key = store.call(|p| async move {
            p.migrate(PG_SCHEMA_VERSION).await?;
            p.ensure_secret_key(key_file.as_deref()).await
        })?;
        Ok(store)
    }

    /// Applies the migrations up to `version` and nothing else (no secret
    /// key): what an older release would have left. For upgrade tests.
    #[doc(hidden)]
    pub fn migrate_to(url: &str, version: i32) -> Result<(), StoreError> {
        let store = Self::start(url)?;
        store.call(move |p| async move { p.migrate(version).await.map(|_| ()) })
    }

    /// The async operations (to be polled on a tokio runtime).
    pub fn pool(&self) -> &Arc<PgPool> {
        &self.pool
    }

    fn start(url: &str) -> Result<Self, StoreError> {
        let pool = Arc::new(PgPool::new(url)?);
        let unavailable = |reason: String| StoreError::Unavailable {
            target: pool.target.clone(),
            reason,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| unavailable(format!("cannot start the store's runtime: {e}")))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("orrery-postgres".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
                runtime.shutdown_timeout(Duration::from_secs(5));
            })
            .map_err(|e| unavailable(format!("cannot start the store's thread: {e}")))?;
        Ok(PgStore {
            pool,
            runtime: handle,
            _stop: stop,
            key: None,
        })
    }

    /// Runs `f` on the store's runtime and waits for its answer.
    fn call<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<PgPool>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        let work = f(self.pool.clone());
        self.runtime.spawn(async move {
            let _ = reply.send(work.await);
        });
        answer.recv().map_err(|_| StoreError::Unavailable {
            target: self.pool.target.clone(),
            reason: "the store's runtime stopped during the call".into(),
        })?
    }
}

/// `PgStore::call` with the arguments cloned into the future.
macro_rules! bridge {
    ($self:ident, $method:ident ( $($arg:expr),* )) => {
        $self.call(move |p| async move { p.$method($($arg),*).await })
    };
}

impl StateStore for PgStore {
    fn secret_key(&self) -> Result<Vec<u8>, StoreError> {
        if let Some(key) = &self.key {
            return Ok(key.clone());
        }
        bridge!(self, secret_key())
    }

    fn resource_page(&self, page: &crate::ResourcePage) -> Result<Vec<StoredResource>, StoreError> {
        let page = page.clone();
        bridge!(self, resource_page(&page))
    }

    fn put_resource(&self, r: &StoredResource) -> Result<(), StoreError> {
        let r = r.clone();
        bridge!(self, put_resource(&r))
    }

    fn put_resource_if_version(
        &self,
        r: &StoredResource,
        version: i64,
    ) -> Result<bool, StoreError> {
        let r = r.clone();
        bridge!(self, put_resource_if_version(&r, version))
    }

    fn remove_resource(&self, stack: &str, label: &str) -> Result<(), StoreError> {
        let (stack, label) = (stack.to_owned(), label.to_owned());
        bridge!(self, remove_resource(&stack, &label))
    }

    fn write_batch(&self, writes: &[Write]) -> Result<(), StoreError> {
        let writes = writes.to_vec();
        bridge!(self, write_batch(&writes))
    }

    fn put_targets(&self, stack: &str, targets: &[TargetDecl]) -> Result<(), StoreError> {
        let (stack, targets) = (stack.to_owned(), targets.to_vec());
        bridge!(self, put_targets(&stack, &targets))
    }

    fn targets(&self, stack: &str) -> Result<Vec<TargetDecl>, StoreError> {
        let stack = stack.to_owned();
        bridge!(self, targets(&stack))
    }

    fn begin_command(&self, id: &str, stack: &str, kind: &str) -> Result<(), StoreError> {
        let (id, stack, kind) = (id.to_owned(), stack.to_owned(), kind.to_owned());
        bridge!(self, begin_command(&id, &stack, &kind))
    }

    fn put_command_principal(&self, command_id: &str, principal: &str) -> Result<(), StoreError> {
        let (command_id, principal) = (command_id.to_owned(), principal.to_owned());
        bridge!(self, put_command_principal(&command_id, &principal))
    }

    fn put_operation(&self, command_id: &str, op: &OperationRecord) -> Result<(), StoreError> {
        let (command_id, op) = (command_id.to_owned(), op.clone());
        bridge!(self, put_operation(&command_id, &op))
    }

    fn latest_command_of(&self, stack: &str) -> Result<Option<CommandRecord>, StoreError> {
        let stack = stack.to_owned();
        bridge!(self, latest_command_of(&stack))
    }

    fn finish_command(&self, id: &str, status: &CommandStatus) -> Result<(), StoreError> {
        let (id, status) = (id.to_owned(), *status);
        bridge!(self, finish_command(&id, &status))
    }

    fn command_page(
        &self,
        id: Option<&str>,
        page: &crate::OperationPage,
    ) -> Result<Option<CommandRecord>, StoreError> {
        let id = id.map(str::to_owned);
        let page = page.clone();
        bridge!(self, command_page(id.as_deref(), &page))
    }

    fn resource_counts(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        bridge!(self, resource_counts())
    }

    fn managed_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<crate::ManagedKey>, StoreError> {
        let (target, resource_type) = (target.to_owned(), resource_type.to_owned());
        bridge!(self, managed_keys(&target, &resource_type))
    }

    fn discovered_keys(
        &self,
        target: &str,
        resource_type: &str,
    ) -> Result<Vec<crate::DiscoveredKey>, StoreError> {
        let (target, resource_type) = (target.to_owned(), resource_type.to_owned());
        bridge!(self, discovered_keys(&target, &resource_type))
    }

    fn commands(
        &self,
        filter: &crate::CommandFilter,
    ) -> Result<Vec<crate::CommandHead>, StoreError> {
        let filter = filter.clone();
        bridge!(self, commands(&filter))
    }

    fn operation_counts(&self, command_id: &str) -> Result<BTreeMap<String, u64>, StoreError> {
        let command_id = command_id.to_owned();
        bridge!(self, operation_counts(&command_id))
    }

    fn command_stacks(&self) -> Result<Vec<String>, StoreError> {
        bridge!(self, command_stacks())
    }

    fn put_command_document(
        &self,
        command_id: &str,
        doc: &crate::CommandDocument,
    ) -> Result<(), StoreError> {
        let (command_id, doc) = (command_id.to_owned(), doc.clone());
        bridge!(self, put_command_document(&command_id, &doc))
    }

    fn command_document(
        &self,
        command_id: &str,
    ) -> Result<Option<crate::CommandDocument>, StoreError> {
        let command_id = command_id.to_owned();
        bridge!(self, command_document(&command_id))
    }

    fn put_outputs(&self, stack: &str, outputs: &PropertyMap) -> Result<(), StoreError> {
        let (stack, outputs) = (stack.to_owned(), outputs.clone());
        bridge!(self, put_outputs(&stack, &outputs))
    }

    fn outputs(&self, stack: &str) -> Result<Option<PropertyMap>, StoreError> {
        let stack = stack.to_owned();
        bridge!(self, outputs(&stack))
    }

    fn set_protected(&self, stack: &str, marks: &[(String, bool)]) -> Result<(), StoreError> {
        let (stack, marks) = (stack.to_owned(), marks.to_vec());
        bridge!(self, set_protected(&stack, &marks))
    }

    fn protected_labels(
        &self,
        stack: &str,
    ) -> Result<std::collections::BTreeSet<String>, StoreError> {
        let stack = stack.to_owned();
        bridge!(self, protected_labels(&stack))
    }

    /// The database's clock, shared by every primary.
    fn now_ms(&self) -> Result<i64, StoreError> {
        bridge!(self, now_ms())
    }

    fn acquire_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<crate::LeaseGrant, StoreError> {
        let (command_id, owner) = (command_id.to_owned(), owner.to_owned());
        bridge!(self, acquire_lease(&command_id, &owner, now_ms, ttl_ms))
    }

    fn renew_lease(
        &self,
        command_id: &str,
        owner: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let (command_id, owner) = (command_id.to_owned(), owner.to_owned());
        bridge!(self, renew_lease(&command_id, &owner, now_ms, ttl_ms))
    }

    fn release_lease(&self, command_id: &str, owner: &str) -> Result<(), StoreError> {
        let (command_id, owner) = (command_id.to_owned(), owner.to_owned());
        bridge!(self, release_lease(&command_id, &owner))
    }

    fn rate_sharers(
        &self,
        owner: &str,
        buckets: &[String],
        window_ms: i64,
    ) -> Result<HashMap<String, u32>, StoreError> {
        let (owner, buckets) = (owner.to_owned(), buckets.to_vec());
        bridge!(self, rate_sharers(&owner, &buckets, window_ms))
    }

    fn append_audit(&self, entries: &[crate::AuditEntry], keep: u64) -> Result<(), StoreError> {
        let entries = entries.to_vec();
        bridge!(self, append_audit(&entries, keep))
    }

    fn set_audit_outcome(&self, command_id: &str, outcome: &str) -> Result<(), StoreError> {
        let (command_id, outcome) = (command_id.to_owned(), outcome.to_owned());
        bridge!(self, set_audit_outcome(&command_id, &outcome))
    }

    fn audit(&self, filter: &crate::AuditFilter) -> Result<Vec<crate::AuditRecord>, StoreError> {
        let filter = filter.clone();
        bridge!(self, audit(&filter))
    }
}
