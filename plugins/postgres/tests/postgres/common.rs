//! The throwaway server: a target naming it, a raw client for setup and
//! out-of-band changes, and names no other test uses.

use orrery_plugin_postgres::PostgresPlugin;
use orrery_plugin_sdk::schema::{PropertyMap, Value};
use orrery_testing::{props, PluginEnv};

/// `ORRERY_TEST_DATABASE_URL` without its query (plaintext is allowed).
fn url() -> String {
    let url = std::env::var("ORRERY_TEST_DATABASE_URL").expect(
        "ORRERY_TEST_DATABASE_URL is not set: run through scripts/with-postgres.sh (scripts/test.sh does)",
    );
    url.split('?').next().unwrap_or(&url).to_owned()
}

/// Host, port and user of the server.
fn server() -> (String, u16, String) {
    let config: tokio_postgres::Config = url().parse().expect("a valid URL");
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("not a TCP host: {other:?}"),
    };
    let user = config.get_user().unwrap_or("postgres").to_owned();
    (host, config.get_ports()[0], user)
}

/// The target config reaching the server with TLS, certificate and host
/// name checked.
pub fn target_config() -> PropertyMap {
    let (host, port, user) = server();
    let ca = std::env::var("ORRERY_TEST_DATABASE_CA").expect("ORRERY_TEST_DATABASE_CA");
    props([
        ("host", host.into()),
        ("port", Value::from(i64::from(port))),
        ("user", user.into()),
        ("sslmode", "verify-full".into()),
        ("ca_file", ca.into()),
    ])
}

/// The plugin in-process, talking to the server.
pub async fn env() -> PluginEnv {
    PluginEnv::start(PostgresPlugin::default(), target_config()).await
}

/// A raw client (no plugin) on `database`.
pub async fn raw(database: &str) -> tokio_postgres::Client {
    let base = url();
    let base = base.rsplit_once('/').map_or(base.as_str(), |(b, _)| b);
    let (client, connection) =
        tokio_postgres::connect(&format!("{base}/{database}"), tokio_postgres::NoTls)
            .await
            .expect("connect to the test server");
    tokio::spawn(connection);
    client
}

/// A name no other test (or run) uses: `prefix_<unique>`.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}_{}_{nanos:x}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
