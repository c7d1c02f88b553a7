//! The listener: HTTP/1.1 over TCP or TLS (rustls), with a header-read
//! timeout that also closes idle connections, and the names of a verified
//! client certificate handed to [`super::auth`].

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, server::WebPkiClientVerifier, RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;
use x509_cert::der::asn1::ObjectIdentifier;
use x509_cert::der::{Decode, Tag, Tagged};

use super::auth::ClientCertificate;

/// How long a request's body may take by default: a 16 MiB document at
/// 300 KB/s.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How many connections are served at once by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// What a connection past the cap is told, over plain HTTP, before it is
/// closed (over TLS it is closed: there is no handshake to answer in).
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-type: text/plain\r\ncontent-length: 39\r\n\r\ntoo many connections; try again later\r\n";

/// How connections are served.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// How long a client has to send a request's headers; also how long a
    /// connection may sit idle between requests, and how long a TLS
    /// handshake may take.
    pub header_read_timeout: Duration,
    /// How long a client has, after its headers, to send a request's
    /// whole body (408 and the connection closed beyond).
    pub body_read_timeout: Duration,
    /// TLS on the listener.
    pub tls: Option<Arc<ServerConfig>>,
    /// Most connections served at once, authenticated or not: each holds
    /// memory and a task until its timeouts pass, so without a cap
    /// clients that never send a token could hold any number.
    pub max_connections: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            tls: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Why TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file cannot be read.
    #[error("cannot read {path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// rustls refuses the configuration.
    #[error("bad TLS configuration: {0}")]
    Config(String),
}

fn pem_err(path: &Path) -> impl Fn(rustls_pki_types::pem::Error) -> TlsError + '_ {
    move |e| TlsError::Pem {
        path: path.to_owned(),
        message: e.to_string(),
    }
}

/// A rustls server configuration: this server's certificate chain and
/// key, and with `client_ca`, client certificates verified against it
/// (optional: clients without one may still present a token).
pub fn tls_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(pem_err(cert))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_err(cert))?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(pem_err(key))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca).map_err(pem_err(ca))? {
                roots
                    .add(c.map_err(pem_err(ca))?)
                    .map_err(|e| TlsError::Config(format!("{}: {e}", ca.display())))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key_der)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The names of a (verified) client certificate: its subject CN, then its
/// DNS subject alternative names.
fn certificate_names(der: &CertificateDer<'_>) -> Vec<String> {
    let Ok(cert) = webpki::EndEntityCert::try_from(der) else {
        return Vec::new();
    };
    let mut names: Vec<String> = subject_common_name(der.as_ref()).into_iter().collect();
    names.extend(cert.valid_dns_names().map(str::to_owned));
    names
}

/// commonName, 2.5.4.3.
const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");

/// The value of the subject's commonName attribute, read by a DER parser:
/// an attribute of type 2.5.4.3 in the subject's distinguished name, a
/// UTF8String, PrintableString or IA5String. None when the certificate
/// cannot be parsed, when it has no such attribute, or when it has more
/// than one (which one is "the" name would be a guess).
fn subject_common_name(der: &[u8]) -> Option<String> {
    let cert = x509_cert::Certificate::from_der(der).ok()?;
    let mut found = cert
        .tbs_certificate
        .subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .filter(|atv| atv.oid == COMMON_NAME);
    let first = found.next()?;
    if found.next().is_some() {
        return None;
    }
    let value = &first.value;
    match value.tag() {
        Tag::Utf8String => std::str::from_utf8(value.value()).ok().map(str::to_owned),
        Tag::PrintableString | Tag::Ia5String => {
            let text = std::str::from_utf8(value.value()).ok()?;
            text.is_ascii().then(|| text.to_owned())
        }
        _ => None,
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets the
/// requests in progress finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    // Every request's body, the API's and the dashboard's, arrives whole
    // within the deadline or not at all.
    let router = router.layer(axum::middleware::from_fn_with_state(
        options.body_read_timeout,
        super::body::deadline,
    ));
    let acceptor = options.tls.clone().map(TlsAcceptor::from);
    let slots = Arc::new(tokio::sync::Semaphore::new(options.max_connections));
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors, most likely: pause, not spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = options.max_connections, "too many connections: one refused");
            if acceptor.is_none() {
                // Best effort: a client that reads nothing is closed all the same.
                let _ = stream.try_write(BUSY);
            }
            continue;
        };
        let timeout = options.header_read_timeout;
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(timeout);
        let watcher = graceful.watcher();
        let router = router.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let result = match acceptor {
                None => {
                    let service = TowerToHyperService::new(router);
                    let conn = builder.serve_connection(TokioIo::new(stream), service);
                    watcher.watch(conn).await
                }
                Some(acceptor) => {
                    let tls = match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                    let names = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .map(certificate_names);
                    let router = match names {
                        Some(names) => router.layer(axum::Extension(ClientCertificate { names })),
                        None => router,
                    }
                    .layer(axum::Extension(super::ui::ServedOverTls));
                    let service = TowerToHyperService::new(router);
                    let conn = builder.serve_connection(TokioIo::new(tls), service);
                    watcher.watch(conn).await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate from `openssl` (`-subj "/OU=<bytes>/CN=reader"`,
    /// self-signed), its OU holding the DER of a commonName `admin-user`.
    const SPOOF_PEM: &str = include_str!("listen_spoof.pem");

    #[test]
    fn the_common_name_is_the_subjects_attribute() {
        let der = CertificateDer::from_pem_slice(SPOOF_PEM.as_bytes()).unwrap();
        assert_eq!(subject_common_name(der.as_ref()).as_deref(), Some("reader"));
        assert_eq!(certificate_names(&der), ["reader"]);
        assert_eq!(subject_common_name(&der.as_ref()[..200]), None);
        assert_eq!(subject_common_name(&[]), None);
    }
}
