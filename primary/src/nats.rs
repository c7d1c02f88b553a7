//! The one way `orrery` connects to NATS (satellites, the hub, the fleet
//! view): comma-separated server URLs, the client's identity from a JWT
//! credentials file or an nkey seed file, and TLS, as `orrery-satellite` does.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

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
/// The error says which file could not be read; callers add the URL.
pub async fn connect(url: &str, name: &str, auth: &NatsAuth) -> anyhow::Result<async_nats::Client> {
    let mut options = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5));
    if let Some(creds) = &auth.nats_creds {
        options = options
            .credentials_file(creds)
            .await
            .with_context(|| format!("reading credentials {}", creds.display()))?;
    }
    if let Some(nkey) = &auth.nats_nkey {
        let seed = std::fs::read_to_string(nkey)
            .with_context(|| format!("reading nkey {}", nkey.display()))?;
        options = options.nkey(seed.trim().to_owned());
    }
    if let Some(ca) = &auth.tls_ca {
        options = options.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let (Some(cert), Some(key)) = (&auth.tls_cert, &auth.tls_key) {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    let addrs: Vec<async_nats::ServerAddr> = url
        .split(',')
        .map(|u| u.trim().parse())
        .collect::<Result<_, _>>()
        .with_context(|| format!("invalid NATS URL {url}"))?;
    Ok(options.connect(addrs).await?)
}
