//! The database URL as Orrery reads it, and the TLS it asks for.
//!
//! `tokio-postgres` understands `sslmode=disable|prefer|require` and no
//! certificate options, so the parameters that are Orrery's (or libpq's and
//! not `tokio-postgres`'s) are taken out of the URL here before the rest is
//! parsed:
//!
//! - `sslmode`: as libpq. `disable`: plaintext. `prefer` (the default):
//!   TLS when the server offers it, else plaintext. `require`: TLS or
//!   fail. `verify-ca`: TLS, the server's certificate chain checked against
//!   `sslrootcert`. `verify-full`: that, and the certificate names the host
//!   connected to. As in libpq, `prefer` and `require` check the chain too
//!   when `sslrootcert` is given; without it they encrypt without checking
//!   who answers.
//! - `sslrootcert`: a PEM file of the trusted CA certificates (needed by
//!   `verify-ca` and `verify-full`; percent-encoded in the URL if need be).
//! - `pool_size`: how many connections the store keeps at most (default
//!   [`DEFAULT_POOL_SIZE`]).
//!
//! Nothing here puts the password in a message: errors name the host, port
//! and database only.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use orrery_pg_tls::TlsMode;
use tokio_postgres::config::Host;
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// Connections a store keeps at most unless the URL says `pool_size=N`.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// A parsed database URL: the `tokio-postgres` configuration, the TLS
/// connector and the pool size.
pub struct ConnectSettings {
    /// What `tokio-postgres` connects with (its `ssl_mode` set from ours).
    pub config: Config,
    /// The TLS connector (used unless the mode is `disable`).
    pub tls: MakeRustlsConnect,
    /// `sslmode` as given (default `prefer`).
    pub mode: TlsMode,
    /// Connections kept at most.
    pub pool_size: usize,
    /// `host:port/dbname`, for messages.
    pub target: String,
}

fn invalid(target: &str, reason: String) -> StoreError {
    StoreError::Unavailable {
        target: target.to_owned(),
        reason,
    }
}

/// Percent-decodes a URL query value (`+` stays `+`, as libpq reads it).
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Reads `url` (`postgres://` or `postgresql://`).
pub fn parse(url: &str) -> Result<ConnectSettings, StoreError> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut rest = Vec::new();
    let mut mode = None;
    let mut rootcert = None;
    let mut pool_size = DEFAULT_POOL_SIZE;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let unparsable =
            |what: &str| invalid("(unparsable URL)", format!("invalid database URL: {what}"));
        match key {
            "sslmode" => {
                mode = Some(TlsMode::parse(value).ok_or_else(|| {
                    unparsable(&format!(
                        "sslmode `{value}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
                    ))
                })?)
            }
            "sslrootcert" => {
                let path = percent_decode(value)
                    .ok_or_else(|| unparsable("sslrootcert is not a valid percent-encoded path"))?;
                rootcert = Some(PathBuf::from(path));
            }
            "pool_size" => {
                pool_size = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=1024).contains(n))
                    .ok_or_else(|| {
                        unparsable(&format!("pool_size `{value}` is not a number from 1 to 1024"))
                    })?
            }
            _ => rest.push(pair),
        }
    }
    let stripped = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    // tokio-postgres's own message quotes no part of the URL.
    let mut config = Config::from_str(&stripped)
        .map_err(|e| invalid("(unparsable URL)", format!("invalid database URL: {e}")))?;
    let target = describe(&config);
    let mode = mode.unwrap_or(TlsMode::Prefer);
    config.ssl_mode(mode.ssl_mode());
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(60));
    }
    if config.get_application_name().is_none() {
        config.application_name("orrery-primary");
    }
    config.keepalives_idle(Duration::from_secs(60));
    let tls = tls_connector(mode, rootcert.as_deref(), &target)?;
    Ok(ConnectSettings {
        config,
        tls,
        mode,
        pool_size,
        target,
    })
}

/// `host:port/dbname`, for messages (never the password).
pub fn describe(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// libpq's default root certificate file, when there is one.
fn default_rootcert() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let path = Path::new(&home).join(".postgresql/root.crt");
    path.is_file().then_some(path)
}

/// The connector (`orrery-pg-tls`, shared with the postgres plugin); a
/// verifying mode without `sslrootcert` falls back to libpq's default file.
fn tls_connector(
    mode: TlsMode,
    rootcert: Option<&Path>,
    target: &str,
) -> Result<MakeRustlsConnect, StoreError> {
    let fallback = match rootcert {
        None if mode.verifies() => default_rootcert(),
        _ => None,
    };
    let rootcert = rootcert.or(fallback.as_deref());
    orrery_pg_tls::connector(mode, rootcert, "sslrootcert")
        .map_err(|e| invalid(target, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::config::SslMode;

    #[test]
    fn orrery_parameters_are_taken_out_and_the_rest_kept() {
        let s = parse("postgres://u:secret@db.example:5433/app?sslmode=require&pool_size=3&application_name=x")
            .unwrap();
        assert_eq!(s.mode, TlsMode::Require);
        assert_eq!(s.pool_size, 3);
        assert_eq!(s.target, "db.example:5433/app");
        assert_eq!(s.config.get_application_name(), Some("x"));
        assert_eq!(s.config.get_ssl_mode(), SslMode::Require);
    }

    #[test]
    fn the_default_is_prefer_with_the_default_pool() {
        let s = parse("postgresql://u@h/db").unwrap();
        assert_eq!((s.mode, s.pool_size), (TlsMode::Prefer, DEFAULT_POOL_SIZE));
        assert_eq!(s.config.get_ssl_mode(), SslMode::Prefer);
    }

    #[test]
    fn bad_parameters_are_refused_without_the_password() {
        for url in [
            "postgres://u:hunter2@h/db?sslmode=sometimes",
            "postgres://u:hunter2@h/db?pool_size=0",
            "postgres://u:hunter2@h/db?pool_size=many",
            "postgres://u:hunter2@h/db?sslrootcert=%zz",
            "postgres://u:hunter2@h/db?no_such_option=1",
        ] {
            let err = parse(url).err().unwrap_or_else(|| panic!("{url} accepted"));
            let text = err.to_string();
            assert!(matches!(err, StoreError::Unavailable { .. }), "{text}");
            assert!(!text.contains("hunter2"), "{text}");
        }
    }

    #[test]
    fn verifying_needs_a_readable_root_certificate() {
        let err =
            parse("postgres://u:hunter2@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.crt")
                .err()
                .unwrap();
        let text = err.to_string();
        assert!(
            text.contains("/nonexistent/ca.crt") && text.contains("h:5432/db"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(
            percent_decode("%2Ftmp%2Fca.crt").as_deref(),
            Some("/tmp/ca.crt")
        );
        assert_eq!(percent_decode("/a b").as_deref(), Some("/a b"));
        assert_eq!(percent_decode("%4"), None);
    }
}
