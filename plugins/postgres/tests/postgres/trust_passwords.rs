//! Issue #43, attack 7, against a real server (run under
//! `scripts/with-postgres.sh`): a role's password must not reach the
//! server's log (a failed `CREATE ROLE` is logged with its statement at
//! PostgreSQL's default `log_min_error_statement`) nor `pg_stat_activity`
//! (an `ALTER ROLE` held on a lock shows its text there).

use std::time::Duration;

use orrery_plugin_postgres::PostgresPlugin;
use orrery_plugin_sdk::schema::{OperationStatus, PropertyMap, Value};
use orrery_testing::{props, PluginEnv, Wait};

fn url() -> String {
    let url = std::env::var("ORRERY_TEST_DATABASE_URL")
        .expect("ORRERY_TEST_DATABASE_URL is not set: run through scripts/with-postgres.sh");
    url.split('?').next().unwrap_or(&url).to_owned()
}

fn target_config() -> PropertyMap {
    let config: tokio_postgres::Config = url().parse().expect("a valid URL");
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("not a TCP host: {other:?}"),
    };
    let ca = std::env::var("ORRERY_TEST_DATABASE_CA").expect("ORRERY_TEST_DATABASE_CA");
    props([
        ("host", host.into()),
        ("port", Value::from(i64::from(config.get_ports()[0]))),
        ("user", config.get_user().unwrap_or("postgres").into()),
        ("sslmode", "verify-full".into()),
        ("ca_file", ca.into()),
    ])
}

async fn raw() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(connection);
    client
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}_{}_{nanos:x}", std::process::id())
}

#[tokio::test]
async fn role_passwords_reach_neither_the_server_log_nor_pg_stat_activity() {
    let log_path = std::env::var("ORRERY_TEST_DATABASE_LOG")
        .expect("ORRERY_TEST_DATABASE_LOG (scripts/with-postgres.sh sets it)");
    let env = PluginEnv::start(PostgresPlugin::default(), target_config()).await;
    let admin = raw().await;

    // A CREATE ROLE that fails (the role exists): the server logs
    // `ERROR: role ... already exists` and `STATEMENT: CREATE ROLE ...`.
    let taken = unique("taken");
    let first = format!("first-{}-CLEAR", unique("pw"));
    admin
        .batch_execute(&format!("CREATE ROLE \"{taken}\""))
        .await
        .unwrap();
    let refused = env
        .create(
            "Postgres::Role",
            props([
                ("name", taken.as_str().into()),
                ("login", true.into()),
                ("password", first.as_str().into()),
            ]),
        )
        .await;
    assert_eq!(refused.status, OperationStatus::Failure, "{refused:?}");
    assert!(!format!("{refused:?}").contains(&first));

    // An ALTER ROLE setting a password, held behind another transaction's
    // change of the same role: its text is in pg_stat_activity meanwhile.
    let held = unique("held");
    let second = format!("second-{}-CLEAR", unique("pw"));
    let made = env
        .create(
            "Postgres::Role",
            props([("name", held.as_str().into()), ("login", true.into())]),
        )
        .await;
    assert_eq!(made.status, OperationStatus::Success, "{made:?}");
    let mut locker = raw().await;
    let tx = locker.transaction().await.unwrap();
    tx.batch_execute(&format!("ALTER ROLE \"{held}\" CONNECTION LIMIT 5"))
        .await
        .unwrap();
    let update = env.update(
        "Postgres::Role",
        &held,
        props([
            ("name", held.as_str().into()),
            ("login", true.into()),
            ("password", second.as_str().into()),
            ("password_version", 2.into()),
        ]),
    );
    let watch = async {
        let admin = &admin;
        let seen = Wait::new("an ALTER ROLE waiting on the lock", Duration::from_secs(20))
            .every(Duration::from_millis(50))
            .until_ok_async(|| async move {
                let rows = admin
                    .query(
                        "SELECT query FROM pg_stat_activity \
                         WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock' \
                         AND query LIKE 'ALTER ROLE%'",
                        &[],
                    )
                    .await
                    .unwrap();
                rows.first()
                    .map(|row| row.get::<_, String>(0))
                    .ok_or("none yet")
            })
            .await;
        tx.rollback().await.unwrap();
        seen
    };
    let (updated, seen) = tokio::join!(update, watch);
    assert!(seen.contains(&format!("\"{held}\"")), "{seen}");
    assert!(
        !seen.contains(&second),
        "pg_stat_activity shows the password: {seen}"
    );
    assert!(seen.contains("PASSWORD 'SCRAM-SHA-256$4096:"), "{seen}");
    assert_eq!(updated.status, OperationStatus::Success, "{updated:?}");
    // The password set is the one given: its verifier, not a verifier of
    // something else.
    let verifier: String = admin
        .query_one(
            "SELECT rolpassword FROM pg_authid WHERE rolname = $1",
            &[&held],
        )
        .await
        .unwrap()
        .get(0);
    assert!(verifier.starts_with("SCRAM-SHA-256$4096:"), "{verifier}");

    // The server's log has the failed statement, without the password.
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("STATEMENT:") && l.contains(&format!("CREATE ROLE \"{taken}\""))),
        "the failed CREATE ROLE was not logged: {log}"
    );
    assert!(!log.contains(&first), "the server log shows the password");
    assert!(!log.contains(&second), "the server log shows the password");
}
