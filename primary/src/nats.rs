//! The one way `orrery` connects to NATS (satellites, the hub, the fleet
//! view): comma-separated server URLs, the client's identity from a JWT
//! credentials file or an nkey seed file, and TLS, as `orrery-satellite` does.

use std::path::PathBuf;
use std::time::Duration;

use orrery_bus::nats_client::{self, NatsClientConfig};

/// Who `orrery` is on NATS. Without either option it connects
/// anonymously, which a server with deploy/nats's accounts refuses.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct NatsAuth {
    /// NATS credentials file (JWT + nkey seed; operator-mode NATS).
    #[arg(long, env = "ORRERY_NATS_CREDS")]
    pub nats_creds: Option<PathBuf>,
    /// NATS nkey seed file (e.g. primary.nk from deploy/nats/gen-nkeys.py).
    #[arg(long, env = "ORRERY_NATS_NKEY")]
    pub nats_nkey: Option<PathBuf>,
    /// CA certificate (PEM) to verify the NATS server's TLS certificate;
    /// requires TLS.
    #[arg(long, env = "ORRERY_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS; needs --tls-key.
    #[arg(long, env = "ORRERY_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Client key (PEM) for mutual TLS.
    #[arg(long, env = "ORRERY_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// Connects to the NATS server(s) in `url` (comma-separated) as `name`.
pub async fn connect(url: &str, name: &str, auth: &NatsAuth) -> anyhow::Result<async_nats::Client> {
    let config = NatsClientConfig {
        urls: url.to_owned(),
        creds: auth.nats_creds.clone(),
        nkey: auth.nats_nkey.clone(),
        tls_ca: auth.tls_ca.clone(),
        tls_client: auth.tls_cert.clone().zip(auth.tls_key.clone()),
    };
    let client = nats_client::connect(&config, name, |options| {
        options.connection_timeout(Duration::from_secs(5))
    })
    .await?;
    Ok(client)
}
