//! One bounded connection pool per (target, database), made on first use.

use std::sync::Mutex;
use std::time::Duration;

use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use orrery_plugin_sdk::schema::ErrorCode;
use orrery_plugin_sdk::PluginError;

use crate::config::TargetConfig;
use crate::error;

/// Pools kept at most; the least recently made goes first. Discovery of a
/// server with many databases touches each once.
const MAX_POOLS: usize = 32;

/// How long a request waits for a free connection of a full pool.
const WAIT: Duration = Duration::from_secs(60);

/// The pools of every (target, database) this plugin has talked to.
#[derive(Default)]
pub struct Pools {
    pools: Mutex<Vec<((TargetConfig, String), Pool)>>,
}

impl Pools {
    /// A connection to `database` of `config`'s server; `what` names the
    /// resource in errors.
    pub async fn get(
        &self,
        config: &TargetConfig,
        database: &str,
        what: &str,
    ) -> Result<Object, PluginError> {
        let pool = self.pool(config, database)?;
        pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => error::pg(what, &e),
            PoolError::Timeout(_) => PluginError::new(
                ErrorCode::ServiceTimeout,
                format!(
                    "{what}: no free connection to {} within {}s",
                    config.describe(database),
                    WAIT.as_secs()
                ),
            ),
            other => PluginError::new(
                ErrorCode::InternalFailure,
                format!("{what}: connection pool: {other}"),
            ),
        })
    }

    /// Closes and forgets the pool of `database` (before dropping it).
    pub fn forget(&self, config: &TargetConfig, database: &str) {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        pools.retain(|((c, d), pool)| {
            let gone = c == config && d == database;
            if gone {
                pool.close();
            }
            !gone
        });
    }

    fn pool(&self, config: &TargetConfig, database: &str) -> Result<Pool, PluginError> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, pool)) = pools
            .iter()
            .find(|((c, d), _)| c == config && d == database)
        {
            return Ok(pool.clone());
        }
        let pool = build(config, database)?;
        if pools.len() >= MAX_POOLS {
            pools.remove(0);
        }
        pools.push(((config.clone(), database.to_owned()), pool.clone()));
        Ok(pool)
    }
}

fn build(config: &TargetConfig, database: &str) -> Result<Pool, PluginError> {
    let mut pg = tokio_postgres::Config::new();
    pg.host(&config.host)
        .port(config.port)
        .dbname(database)
        .user(&config.user)
        .ssl_mode(config.sslmode.ssl_mode())
        .connect_timeout(Duration::from_secs(10))
        .keepalives_idle(Duration::from_secs(60))
        .application_name("orrery-plugin-postgres");
    if let Some(password) = &config.password {
        pg.password(password);
    }
    let where_ = config.describe(database);
    let ca_file = config.ca_file.as_deref().map(std::path::Path::new);
    let tls = orrery_pg_tls::connector(config.sslmode, ca_file, "ca_file")
        .map_err(|e| PluginError::invalid(format!("target {where_}: {e}")))?;
    let manager = Manager::from_config(
        pg,
        tls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(config.pool_size())
        .wait_timeout(Some(WAIT))
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| {
            PluginError::new(
                ErrorCode::InternalFailure,
                format!("connection pool for {where_}: {e}"),
            )
        })
}
