//! The target configuration: which server, as whom, and how TLS is checked.

use orrery_plugin_sdk::schema::{FieldSchema, Target};
use orrery_plugin_sdk::{field, from_properties, PluginError};
use serde::Deserialize;

use orrery_pg_tls::TlsMode;

/// Connections kept at most per (target, database) unless `pool_size` says.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// A target's `config`, as the author writes it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    #[serde(default = "localhost")]
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    /// The database connected to for cluster-wide work (roles, databases).
    #[serde(default = "postgres")]
    pub database: String,
    #[serde(default = "postgres")]
    pub user: String,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub sslmode: TlsMode,
    /// A PEM file of the CA certificates to trust.
    #[serde(default)]
    pub ca_file: Option<String>,
    #[serde(default)]
    pub pool_size: Option<u32>,
}

fn localhost() -> String {
    "localhost".into()
}
fn postgres() -> String {
    "postgres".into()
}
fn default_port() -> u16 {
    5432
}

impl TargetConfig {
    /// Reads the target's config; a bad one is `InvalidRequest` naming the target.
    pub fn of(target: &Target) -> Result<TargetConfig, PluginError> {
        let config: TargetConfig = from_properties(&target.config).map_err(|e| {
            PluginError::invalid(format!("target `{}`: {}", target.name, e.message))
        })?;
        if config.pool_size.is_some_and(|n| !(1..=64).contains(&n)) {
            return Err(PluginError::invalid(format!(
                "target `{}`: pool_size must be from 1 to 64",
                target.name
            )));
        }
        Ok(config)
    }

    /// Connections kept at most per database.
    pub fn pool_size(&self) -> usize {
        self.pool_size.map_or(DEFAULT_POOL_SIZE, |n| n as usize)
    }

    /// `host:port/database` for messages (never the password).
    pub fn describe(&self, database: &str) -> String {
        format!("{}:{}/{database}", self.host, self.port)
    }
}

/// The fields of [`TargetConfig`], announced so the runtime knows the
/// password is secret.
pub fn fields() -> Vec<FieldSchema> {
    vec![
        field::string("host").describe("Host name or address (default localhost)"),
        field::integer("port").describe("Port (default 5432)"),
        field::string("database").describe("Database for cluster-wide work (default postgres)"),
        field::string("user").describe("Role to log in as (default postgres)"),
        field::string("password")
            .write_only()
            .opaque()
            .describe("Password of `user`"),
        field::string("sslmode")
            .describe("disable, prefer (default), require, verify-ca or verify-full, as libpq"),
        field::string("ca_file").describe("PEM file of the CA certificates to trust"),
        field::integer("pool_size").describe("Connections kept per database, 1 to 64 (default 8)"),
    ]
    .into_iter()
    .map(|f| f.build())
    .collect()
}
