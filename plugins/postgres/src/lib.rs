//! # orrery-plugin-postgres
//!
//! Manages a PostgreSQL server's roles, databases, schemas, grants,
//! default privileges and extensions (namespace `Postgres`). Each type
//! lives in its own module; this file dispatches by type and holds what
//! they share: the target's connection pools, the databases to walk, and
//! the codes every type answers with.

mod acl;
mod catalog;
mod config;
mod database;
mod default_privileges;
mod error;
mod extension;
mod fields;
mod grant;
mod id;
mod page;
mod pool;
mod privileged;
mod role;
mod schema;
mod sql;

use deadpool_postgres::Object;
use orrery_plugin_sdk::schema::{
    ConcurrencyKey, CreateRequest, DeleteRequest, ErrorCode, FieldSchema, ListRequest, RateLimit,
    ReadRequest, ResourceSchema, Target, UpdateRequest,
};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError, PluginInfo, ResourcePlugin};

pub use config::TargetConfig;
use default_privileges::DefaultPrivileges;
use grant::Grant;
use pool::Pools;

/// Set (to anything) in the plugin's environment, grants and default
/// privileges announce no concurrency key. For tests only.
pub const NO_CONCURRENCY_KEY: &str = "ORRERY_PLUGIN_POSTGRES_NO_CONCURRENCY_KEY";

/// The `postgres` plugin: its only state is the connection pools.
#[derive(Default)]
pub struct PostgresPlugin {
    pools: Pools,
}

impl ResourcePlugin for PostgresPlugin {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "postgres".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            namespace: "Postgres".into(),
        }
    }

    fn resources(&self) -> Vec<ResourceSchema> {
        let mut catalog_writes = [grant::schema(), default_privileges::schema()];
        // GRANT and ALTER DEFAULT PRIVILEGES on one database rewrite shared
        // catalog rows: two at once lose with `tuple concurrently updated`.
        // The scheduler runs them one at a time per database. The variable
        // exists so a test can show the failure the key prevents.
        if std::env::var_os(NO_CONCURRENCY_KEY).is_none() {
            for schema in &mut catalog_writes {
                schema.concurrency = Some(ConcurrencyKey {
                    key: "database:{database}".into(),
                    limit: 1,
                });
            }
        }
        let [grant, default_privileges] = catalog_writes;
        vec![
            role::schema(),
            database::schema(),
            schema::schema(),
            grant,
            default_privileges,
            extension::schema(),
        ]
    }

    fn target_config(&self) -> Vec<FieldSchema> {
        config::fields()
    }

    fn rate_limit(&self) -> RateLimit {
        RateLimit {
            requests_per_second: 500.0,
            burst: 100,
            max_in_flight: 64,
        }
    }

    async fn create(&self, request: CreateRequest) -> OpResult {
        let cx = Cx::new(&self.pools, &request.target)?;
        let p = &request.properties;
        match request.resource_type.as_str() {
            role::TYPE => role::create(&cx, p).await,
            database::TYPE => database::create(&cx, p).await,
            schema::TYPE => schema::create(&cx, p).await,
            grant::TYPE => privileged::create::<Grant>(&cx, p).await,
            default_privileges::TYPE => privileged::create::<DefaultPrivileges>(&cx, p).await,
            extension::TYPE => extension::create(&cx, p).await,
            other => Err(unknown(other)),
        }
    }

    async fn read(&self, request: ReadRequest) -> OpResult {
        let cx = Cx::new(&self.pools, &request.target)?;
        let (id, p) = (request.native_id.as_str(), &request.properties);
        match request.resource_type.as_str() {
            role::TYPE => role::read(&cx, id, p).await,
            database::TYPE => database::read(&cx, id, p).await,
            schema::TYPE => schema::read(&cx, id).await,
            grant::TYPE => privileged::read::<Grant>(&cx, id, p).await,
            default_privileges::TYPE => privileged::read::<DefaultPrivileges>(&cx, id, p).await,
            extension::TYPE => extension::read(&cx, id).await,
            other => Err(unknown(other)),
        }
    }

    async fn update(&self, request: UpdateRequest) -> OpResult {
        let cx = Cx::new(&self.pools, &request.target)?;
        let (id, p) = (request.native_id.as_str(), &request.properties);
        match request.resource_type.as_str() {
            role::TYPE => role::update(&cx, id, p).await,
            database::TYPE => database::update(&cx, id, p).await,
            schema::TYPE => schema::update(&cx, id, p).await,
            grant::TYPE => privileged::update::<Grant>(&cx, id, p).await,
            default_privileges::TYPE => privileged::update::<DefaultPrivileges>(&cx, id, p).await,
            extension::TYPE => extension::update(&cx, id, p).await,
            other => Err(unknown(other)),
        }
    }

    async fn delete(&self, request: DeleteRequest) -> OpResult {
        let cx = Cx::new(&self.pools, &request.target)?;
        let (id, p) = (request.native_id.as_str(), &request.properties);
        match request.resource_type.as_str() {
            role::TYPE => role::delete(&cx, id, p).await,
            database::TYPE => database::delete(&cx, id).await,
            schema::TYPE => schema::delete(&cx, id).await,
            grant::TYPE => privileged::delete::<Grant>(&cx, id).await,
            default_privileges::TYPE => privileged::delete::<DefaultPrivileges>(&cx, id).await,
            extension::TYPE => extension::delete(&cx, id).await,
            other => Err(unknown(other)),
        }
    }

    async fn list(&self, request: ListRequest) -> Result<ListPage, PluginError> {
        let cx = Cx::new(&self.pools, &request.target)?;
        match request.resource_type.as_str() {
            role::TYPE => role::list(&cx, &request).await,
            database::TYPE => database::list(&cx, &request).await,
            schema::TYPE => schema::list(&cx, &request).await,
            grant::TYPE => grant::list(&cx, &request).await,
            default_privileges::TYPE => default_privileges::list(&cx, &request).await,
            extension::TYPE => extension::list(&cx, &request).await,
            other => Err(unknown(other)),
        }
    }
}

/// One request's view of its target: the config and the pools to reach it.
pub(crate) struct Cx<'a> {
    config: TargetConfig,
    pools: &'a Pools,
}

impl<'a> Cx<'a> {
    fn new(pools: &'a Pools, target: &Target) -> Result<Self, PluginError> {
        Ok(Cx {
            config: TargetConfig::of(target)?,
            pools,
        })
    }

    /// A connection to `database`; `what` names the resource in errors.
    async fn conn(&self, database: &str, what: &str) -> Result<Object, PluginError> {
        self.pools.get(&self.config, database, what).await
    }

    /// A connection to the target's own database, for cluster-wide work.
    async fn admin(&self, what: &str) -> Result<Object, PluginError> {
        self.conn(&self.config.database, what).await
    }

    /// Runs `sql` on `database`; the connection goes back before this
    /// returns, so a handler never holds two (a full pool would deadlock).
    async fn exec(&self, database: &str, what: &str, sql: &str) -> Result<(), PluginError> {
        let conn = self.conn(database, what).await?;
        conn.batch_execute(sql).await.map_err(self.err(what))
    }

    /// Runs `sql` on the target's own database, for cluster-wide work.
    async fn exec_admin(&self, what: &str, sql: &str) -> Result<(), PluginError> {
        self.exec(&self.config.database, what, sql).await
    }

    /// The rows of `sql` in `database`; `None` when the database was
    /// dropped since it was listed, before or while the query ran
    /// (discovery walks a server that keeps changing: a `DROP DATABASE ...
    /// WITH (FORCE)` ends the listing connection with SQLSTATE 57P01).
    async fn list_rows(
        &self,
        database: &str,
        what: &str,
        sql: &str,
    ) -> Result<Option<Vec<tokio_postgres::Row>>, PluginError> {
        let query = || async {
            let conn = self.conn(database, what).await?;
            conn.query(sql, &[]).await.map_err(self.err(what))
        };
        match self.relinking(database, query).await {
            Ok(rows) => Ok(Some(rows)),
            Err(e) if !self.database_exists(database, what).await? => {
                tracing::debug!(database, error = %e.message, "database gone while listing");
                self.forget(database);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Runs `sql` on `database` unless the database is gone (dropped
    /// since it was listed, or while `sql` ran): for work done "in every
    /// database", where one that no longer exists has nothing left to do.
    async fn exec_unless_gone(
        &self,
        database: &str,
        what: &str,
        sql: &str,
    ) -> Result<(), PluginError> {
        let exec = || self.exec(database, what, sql);
        match self.relinking(database, exec).await {
            Err(e) if !self.database_exists(database, what).await? => {
                tracing::debug!(database, error = %e.message, "database gone");
                self.forget(database);
                Ok(())
            }
            done => done,
        }
    }

    /// `work` on `database`, run once more on a new connection when the
    /// link failed. A forced drop ends the database's connections before
    /// its catalog row goes, so the first failure can come while the
    /// database still shows as existing; the second connection waits on
    /// the drop's lock and is refused once the drop commits.
    async fn relinking<T, F, W>(&self, database: &str, work: W) -> Result<T, PluginError>
    where
        W: Fn() -> F,
        F: std::future::Future<Output = Result<T, PluginError>>,
    {
        match work().await {
            Err(e) if is_link_loss(&e) => {
                tracing::debug!(database, error = %e.message, "connection lost: trying again");
                self.forget(database);
                work().await
            }
            done => done,
        }
    }

    async fn database_exists(&self, database: &str, what: &str) -> Result<bool, PluginError> {
        let conn = self.admin(what).await?;
        let found = conn
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&database])
            .await
            .map_err(self.err(what))?;
        Ok(found.is_some())
    }

    /// Closes this plugin's connections to `database`.
    fn forget(&self, database: &str) {
        self.pools.forget(&self.config, database);
    }

    /// Maps a failure on `what` (see [`error::pg`]).
    fn err<'w>(&self, what: &'w str) -> impl Fn(tokio_postgres::Error) -> PluginError + 'w {
        move |e| error::pg(what, &e)
    }
}

/// Whether `e` is the loss of a connection (closed, or ended by the
/// server: SQLSTATE class 57, as a terminated backend reports), not a
/// refusal of the statement.
fn is_link_loss(e: &PluginError) -> bool {
    matches!(
        e.code,
        ErrorCode::NetworkFailure | ErrorCode::ServiceInternalError
    )
}

/// Every database that takes connections (templates aside), by name.
async fn databases(cx: &Cx<'_>, what: &str) -> Result<Vec<String>, PluginError> {
    let conn = cx.admin(what).await?;
    let rows = conn
        .query(
            "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY 1",
            &[],
        )
        .await
        .map_err(cx.err(what))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The databases a list of a child type covers: its parent's (discovery
/// lists children per database found), else all.
async fn databases_listed(cx: &Cx<'_>, request: &ListRequest) -> Result<Vec<String>, PluginError> {
    match &request.parent {
        Some(parent) => match parent.properties.get("name").and_then(|n| n.as_str()) {
            Some(name) => Ok(vec![name.to_owned()]),
            None => Err(PluginError::invalid(format!(
                "listing {}: the parent `{}` has no `name`",
                request.resource_type, parent.native_id
            ))),
        },
        None => databases(cx, "listing databases").await,
    }
}

/// The catalog's list, unless `recorded` holds the same items in the
/// author's order.
fn same_set(recorded: Option<Vec<String>>, catalog: Option<Vec<String>>) -> Option<Vec<String>> {
    match (recorded, catalog) {
        (Some(mut want), Some(have)) => {
            let original = want.clone();
            want.sort();
            want.dedup();
            let mut sorted = have.clone();
            sorted.sort();
            if want == sorted {
                Some(original)
            } else {
                Some(have)
            }
        }
        (_, catalog) => catalog,
    }
}

const TYPES: [&str; 6] = [
    role::TYPE,
    database::TYPE,
    schema::TYPE,
    grant::TYPE,
    default_privileges::TYPE,
    extension::TYPE,
];

fn unknown(resource_type: &str) -> PluginError {
    PluginError::invalid(format!(
        "unknown resource type `{resource_type}`; the postgres plugin manages {}",
        TYPES.join(", ")
    ))
}

/// How errors name a resource of a type identified by a name.
fn named(resource_type: &str, name: &str) -> String {
    format!("{resource_type} `{name}`")
}

/// How errors name a resource of a type identified by database and name.
fn named_in(resource_type: &str, database: &str, name: &str) -> String {
    format!("{resource_type} `{name}` in database `{database}`")
}

/// `NotUpdatable` unless `desired` is `current`: the update would change
/// the create-only `field` (or fields) that identify the resource.
fn same_identity(field: &str, current: &str, desired: &str) -> Result<(), PluginError> {
    if current == desired {
        Ok(())
    } else {
        Err(not_updatable(field, current, desired))
    }
}

/// `NotUpdatable`: the update changes a create-only field.
fn not_updatable(field: &str, current: &str, desired: &str) -> PluginError {
    PluginError::new(
        ErrorCode::NotUpdatable,
        format!("`{field}` is create-only: changing it from `{current}` to `{desired}` requires replacing the resource"),
    )
}
