//! A database of its own on the throwaway PostgreSQL server that
//! `scripts/with-postgres.sh` starts (it sets `ORRERY_TEST_DATABASE_URL`).

/// The URL of a fresh, empty database named `<prefix>_<unique>`; `None`
/// when `ORRERY_TEST_DATABASE_URL` is not set.
pub fn fresh_database(prefix: &str) -> Option<String> {
    let url = std::env::var("ORRERY_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())?;
    // The URL asks for TLS (sslmode, sslrootcert: the store's parameters);
    // this admin connection is plaintext, which the throwaway server allows.
    let plain = url.split('?').next().unwrap_or(&url);
    let mut admin = postgres::Client::connect(plain, postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to ORRERY_TEST_DATABASE_URL ({url}): {e}"));
    let name = format!("{prefix}_{}", uuid::Uuid::now_v7().simple());
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    let base = plain.rsplit_once('/').unwrap().0;
    Some(format!("{base}/{name}"))
}
