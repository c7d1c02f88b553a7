//! # orrery-pg-tls
//!
//! libpq's `sslmode` and CA file, made into a rustls connector for
//! `tokio-postgres`. The postgres plugin (target config `sslmode`,
//! `ca_file`) and the PostgreSQL state store (URL `sslmode`,
//! `sslrootcert`) both connect through it; it depends on no Orrery crate,
//! so neither reaches the other through it.
//!
//! `tokio-postgres` knows `disable|prefer|require` and no certificate
//! checks, so `verify-ca` and `verify-full` are done here: `require` is
//! asked of `tokio-postgres` ([`TlsMode::ssl_mode`]) and the verifier checks
//! the chain (and, for `verify-full`, the host name). As in libpq, `prefer`
//! and `require` check the chain when a CA file is given and accept any
//! certificate otherwise.

#![deny(missing_docs)]

mod verifiers;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use serde::Deserialize;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use verifiers::{ChainOnly, Unverified};

/// libpq's `sslmode` values.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum TlsMode {
    /// Plaintext.
    Disable,
    /// TLS when the server offers it, else plaintext. libpq's `allow`
    /// (plaintext first, TLS if refused) is read as this.
    #[default]
    #[serde(alias = "allow")]
    Prefer,
    /// TLS or fail.
    Require,
    /// TLS with the chain checked against the CA file.
    VerifyCa,
    /// TLS with the chain and the host name checked.
    VerifyFull,
}

impl TlsMode {
    /// The mode named `s` as libpq spells it, `allow` included.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "disable" => TlsMode::Disable,
            "allow" | "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            _ => return None,
        })
    }

    /// What `tokio-postgres` is asked for; the verifier does the rest.
    pub fn ssl_mode(self) -> SslMode {
        match self {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        }
    }

    /// Whether the mode needs a CA file to check the server against.
    pub fn verifies(self) -> bool {
        matches!(self, TlsMode::VerifyCa | TlsMode::VerifyFull)
    }
}

/// Why no connector could be made. `setting` is the name the caller's
/// user knows the CA file by (`ca_file`, `sslrootcert`).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `verify-ca` or `verify-full` without a CA file.
    #[error(
        "sslmode verify-ca and verify-full need {setting} (a PEM file of the CA certificates to trust)"
    )]
    NeedsCa {
        /// The CA file's setting.
        setting: &'static str,
    },
    /// The CA file could not be read as PEM.
    #[error("cannot read {setting} {}: {source}", path.display())]
    ReadCa {
        /// The CA file's setting.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The CA file holds no certificate rustls can use.
    #[error("{setting} {} holds no usable CA certificate", path.display())]
    NoUsableCa {
        /// The CA file's setting.
        setting: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// rustls refused the configuration.
    #[error("TLS setup: {0}")]
    Setup(#[from] rustls::Error),
    /// rustls refused the certificate verifier.
    #[error("TLS setup: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
}

/// The connector for `mode`, trusting the CAs in `ca_file` when given.
///
/// # Errors
///
/// [`TlsError::NeedsCa`] when `mode` verifies and there is no CA file;
/// [`TlsError::ReadCa`] and [`TlsError::NoUsableCa`] when the file is not
/// usable; [`TlsError::Setup`] and [`TlsError::Verifier`] when rustls
/// refuses the configuration.
pub fn connector(
    mode: TlsMode,
    ca_file: Option<&Path>,
    setting: &'static str,
) -> Result<MakeRustlsConnect, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let config = match ca_file {
        None if mode.verifies() => return Err(TlsError::NeedsCa { setting }),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
            .with_no_client_auth(),
        Some(path) => {
            let roots = Arc::new(load_roots(path, setting)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider).build()?;
            if mode == TlsMode::VerifyFull {
                builder.with_webpki_verifier(webpki).with_no_client_auth()
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
                    .with_no_client_auth()
            }
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

fn load_roots(path: &Path, setting: &'static str) -> Result<RootCertStore, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::ReadCa {
            setting,
            path: path.to_owned(),
            source,
        })?;
    let mut roots = RootCertStore::empty();
    if roots.add_parsable_certificates(certs).0 == 0 {
        return Err(TlsError::NoUsableCa {
            setting,
            path: path.to_owned(),
        });
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_as_libpq_spells_them() {
        assert_eq!(TlsMode::parse("allow"), Some(TlsMode::Prefer));
        assert_eq!(TlsMode::parse("verify-full"), Some(TlsMode::VerifyFull));
        assert_eq!(TlsMode::parse("sometimes"), None);
        assert_eq!(TlsMode::VerifyCa.ssl_mode(), SslMode::Require);
        assert_eq!(TlsMode::default().ssl_mode(), SslMode::Prefer);
    }

    #[test]
    fn verifying_needs_a_usable_ca_file() {
        let err = connector(TlsMode::VerifyFull, None, "ca_file")
            .err()
            .unwrap();
        assert!(err.to_string().contains("need ca_file"), "{err}");
        let missing = Path::new("/nonexistent/ca.crt");
        let err = connector(TlsMode::VerifyCa, Some(missing), "sslrootcert")
            .err()
            .unwrap();
        assert!(matches!(err, TlsError::ReadCa { .. }), "{err}");
        assert!(
            err.to_string().contains("sslrootcert /nonexistent/ca.crt"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = connector(TlsMode::Require, Some(&empty), "ca_file")
            .err()
            .unwrap();
        assert!(matches!(err, TlsError::NoUsableCa { .. }), "{err}");
    }

    #[test]
    fn without_a_ca_file_prefer_and_require_still_encrypt() {
        for mode in [TlsMode::Disable, TlsMode::Prefer, TlsMode::Require] {
            assert!(connector(mode, None, "ca_file").is_ok(), "{mode:?}");
        }
    }
}
