//! The target config (which NATS servers, which credentials, which TLS) and
//! one cached connection per distinct config.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use async_nats::jetstream::{self, Context};
use async_nats::{ConnectErrorKind, ConnectOptions, ServerAddr};
use orrery_plugin_sdk::schema::{ErrorCode, FieldSchema, Target};
use orrery_plugin_sdk::{field, from_properties, FieldBuilder, PluginError};
use serde::{Deserialize, Serialize};

/// How long connecting, and each JetStream API call, may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// What a target's `config` holds. The managed NATS is whatever these
/// servers are; it is never the bus Orrery itself talks over.
#[derive(Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `nats://host:port` URLs (or `tls://`).
    servers: Vec<String>,
    /// A `.creds` file (user JWT and nkey seed).
    creds_file: Option<PathBuf>,
    /// An nkey seed (`SU...`); secret.
    nkey_seed: Option<String>,
    user: Option<String>,
    /// Secret.
    password: Option<String>,
    /// Secret.
    token: Option<String>,
    /// A CA bundle (PEM) to verify the servers with.
    tls_ca_file: Option<PathBuf>,
    /// A client certificate and its key (PEM), for mutual TLS.
    tls_cert_file: Option<PathBuf>,
    tls_key_file: Option<PathBuf>,
    /// Refuse a connection without TLS.
    tls_required: Option<bool>,
    /// The JetStream domain, when the servers are leaf nodes of another.
    domain: Option<String>,
}

/// The target-config fields, for the announcement (secrets marked).
pub fn fields() -> Vec<FieldSchema> {
    let plain = |name: &str, what: &str| field::string(name).describe(what);
    let secret = |name: &str, what: &str| plain(name, what).write_only().opaque();
    vec![
        field::list("servers")
            .required()
            .describe("NATS server URLs, e.g. nats://127.0.0.1:4222"),
        plain("creds_file", "A .creds file (user JWT and nkey seed)"),
        secret("nkey_seed", "An nkey seed (SU...)"),
        plain("user", "User name"),
        secret("password", "The user's password"),
        secret("token", "An authentication token"),
        plain("tls_ca_file", "CA bundle (PEM) to verify the servers"),
        plain("tls_cert_file", "Client certificate (PEM) for mutual TLS"),
        plain("tls_key_file", "Client key (PEM) for mutual TLS"),
        field::boolean("tls_required").describe("Refuse plain connections"),
        plain("domain", "JetStream domain"),
    ]
    .into_iter()
    .map(FieldBuilder::build)
    .collect()
}

impl Config {
    fn of(target: &Target) -> Result<Config, PluginError> {
        let config: Config = from_properties(&target.config).map_err(|e| {
            // Serde quotes a scalar of the wrong type, which may be a secret.
            let detail = match e.message.split_once(": invalid ") {
                Some((field, _)) => format!("{field}: wrong type or value (not shown)"),
                None => e.message,
            };
            PluginError::invalid(format!("config of target `{}`: {detail}", target.name))
        })?;
        if config.servers.is_empty() {
            return Err(PluginError::invalid(format!(
                "config of target `{}`: `servers` lists no NATS server",
                target.name
            )));
        }
        if config.tls_cert_file.is_some() != config.tls_key_file.is_some() {
            return Err(PluginError::invalid(format!(
                "config of target `{}`: `tls_cert_file` and `tls_key_file` go together",
                target.name
            )));
        }
        Ok(config)
    }

    async fn options(&self) -> Result<ConnectOptions, std::io::Error> {
        let mut options = match &self.creds_file {
            Some(path) => ConnectOptions::with_credentials_file(path).await?,
            None => ConnectOptions::new(),
        };
        if let Some(seed) = &self.nkey_seed {
            options = options.nkey(seed.clone());
        }
        if let (Some(user), Some(password)) = (&self.user, &self.password) {
            options = options.user_and_password(user.clone(), password.clone());
        }
        if let Some(token) = &self.token {
            options = options.token(token.clone());
        }
        if let Some(ca) = &self.tls_ca_file {
            options = options.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_key_file) {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        Ok(options
            .require_tls(self.tls_required.unwrap_or(false))
            .connection_timeout(TIMEOUT)
            .request_timeout(Some(TIMEOUT)))
    }
}

/// Connections by target config, so a run of requests shares one.
#[derive(Debug, Default)]
pub struct Connections(Mutex<HashMap<String, Context>>);

impl Connections {
    /// The JetStream context for `target`, connecting on first use.
    /// Failures never quote the config: it may hold secrets.
    pub async fn get(&self, target: &Target) -> Result<Context, PluginError> {
        let config = Config::of(target)?;
        // The key holds secrets, but only ever in this process's memory.
        let key = serde_json::to_string(&config).unwrap_or_default();
        if let Some(context) = self.lock().get(&key) {
            return Ok(context.clone());
        }
        let unreachable = |code, why: &str| {
            PluginError::new(
                code,
                format!(
                    "target `{}`: cannot connect to NATS at {}: {why}",
                    target.name,
                    config.servers.join(", ")
                ),
            )
        };
        let options = config.options().await.map_err(|e| {
            PluginError::invalid(format!(
                "target `{}`: cannot read `creds_file`: {}",
                target.name,
                e.kind()
            ))
        })?;
        let servers = config
            .servers
            .iter()
            .map(|s| s.parse::<ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| unreachable(ErrorCode::InvalidRequest, "a bad server URL"))?;
        let client = options.connect(servers).await.map_err(|e| match e.kind() {
            ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                unreachable(ErrorCode::InvalidCredentials, "authentication failed")
            }
            ConnectErrorKind::ServerParse => {
                unreachable(ErrorCode::InvalidRequest, "a bad server URL")
            }
            ConnectErrorKind::Tls => unreachable(ErrorCode::NetworkFailure, "TLS failed"),
            ConnectErrorKind::TimedOut => unreachable(ErrorCode::NetworkFailure, "timed out"),
            _ => unreachable(ErrorCode::NetworkFailure, "connection refused or lost"),
        })?;
        let context = match &config.domain {
            Some(domain) => jetstream::with_domain(client, domain),
            None => jetstream::new(client),
        };
        self.lock().insert(key, context.clone());
        Ok(context)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Context>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
