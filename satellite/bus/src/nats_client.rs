//! Connecting to NATS as the satellite and `orrery` both do: comma-separated
//! server URLs, an identity from a JWT credentials file or an nkey seed
//! file, and TLS (server CA, client certificate for mutual TLS).

use std::path::{Path, PathBuf};

/// Where and as whom to connect.
#[derive(Debug, Clone, Default)]
pub struct NatsClientConfig {
    /// Server URLs, comma-separated.
    pub urls: String,
    /// JWT credentials file (operator-mode NATS).
    pub creds: Option<PathBuf>,
    /// nkey seed file.
    pub nkey: Option<PathBuf>,
    /// CA certificate (PEM) the server's certificate must verify against;
    /// requires TLS.
    pub tls_ca: Option<PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub tls_client: Option<(PathBuf, PathBuf)>,
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A credentials or nkey file could not be read.
    #[error("reading {what} {}: {source}", path.display())]
    Read {
        /// `credentials` or `nkey`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A URL does not parse.
    #[error("invalid NATS URL in {urls}: {reason}")]
    Url {
        /// The URLs given.
        urls: String,
        /// Why.
        reason: String,
    },
    /// The server could not be reached or refused the client.
    #[error("cannot connect to NATS at {urls}: {reason}")]
    Connect {
        /// The URLs given.
        urls: String,
        /// Why.
        reason: String,
    },
}

/// Connects as `name`; `customize` adds the caller's own options (timeouts,
/// reconnection, event logging).
pub async fn connect(
    config: &NatsClientConfig,
    name: &str,
    customize: impl FnOnce(async_nats::ConnectOptions) -> async_nats::ConnectOptions,
) -> Result<async_nats::Client, ConnectError> {
    let read_error = |what, path: &Path| {
        let path = path.to_owned();
        move |source| ConnectError::Read { what, path, source }
    };
    let mut options = customize(async_nats::ConnectOptions::new().name(name));
    if let Some(creds) = &config.creds {
        options = options
            .credentials_file(creds)
            .await
            .map_err(read_error("credentials", creds))?;
    }
    if let Some(nkey) = &config.nkey {
        let seed = std::fs::read_to_string(nkey).map_err(read_error("nkey", nkey))?;
        options = options.nkey(seed.trim().to_owned());
    }
    if let Some(ca) = &config.tls_ca {
        options = options.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let Some((cert, key)) = &config.tls_client {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    let addrs: Vec<async_nats::ServerAddr> = config
        .urls
        .split(',')
        .map(|u| u.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|e: std::io::Error| ConnectError::Url {
            urls: config.urls.clone(),
            reason: e.to_string(),
        })?;
    options
        .connect(addrs)
        .await
        .map_err(|e| ConnectError::Connect {
            urls: config.urls.clone(),
            reason: e.to_string(),
        })
}
