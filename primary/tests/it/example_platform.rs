//! `examples/platform/stack.yaml` as its README runs it: one stack across
//! two satellites over a NATS bus, one serving the postgres plugin against
//! the throwaway PostgreSQL (`scripts/with-postgres.sh` sets
//! `ORRERY_TEST_DATABASE_URL`), one serving the jetstream plugin against a
//! JetStream server of its own (not the bus). Apply, a no-op plan, destroy.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use async_nats::jetstream;
use common::fleet::{orrery_through_nats, served, wait_registered, Killed};
use orrery_testing::nats::NatsServer;

const SATELLITES: [(&str, &str); 2] = [
    ("sat-postgres", "orrery-plugin-postgres"),
    ("sat-jetstream", "orrery-plugin-jetstream"),
];

/// The example document with its targets pointed at the test's servers, as
/// `examples/postgres/try.sh` does for the PostgreSQL one.
fn example_for(database_url: &str, managed_nats: &str) -> String {
    let text =
        std::fs::read_to_string(common::root().join("examples/platform/stack.yaml")).unwrap();
    let (user, port) = user_and_port(database_url);
    let ca = std::env::var("ORRERY_TEST_DATABASE_CA").unwrap();
    let replacements = [
        ("port: 5432", format!("port: {port}")),
        ("user: postgres", format!("user: {user}")),
        (
            "sslmode: prefer",
            format!("sslmode: verify-full\n      ca_file: \"{ca}\""),
        ),
        ("nats://127.0.0.1:4223", managed_nats.to_owned()),
    ];
    replacements.iter().fold(text, |doc, (from, to)| {
        assert!(doc.contains(from), "the example no longer has {from:?}");
        doc.replace(from, to)
    })
}

/// `postgres://USER@HOST:PORT/...` → (USER, PORT).
fn user_and_port(url: &str) -> (String, String) {
    let rest = url.trim_start_matches("postgres://");
    let (user, rest) = rest.split_once('@').unwrap();
    let hostport = rest.split('/').next().unwrap();
    let port = hostport.rsplit_once(':').unwrap().1;
    (user.split(':').next().unwrap().to_owned(), port.to_owned())
}

/// A plaintext client of `database` on the test server (the raw side: no
/// Orrery involved). The blocking client runs its own runtime, so it runs
/// off this test's.
fn sql(database_url: &str, database: &str, query: &str) -> Vec<postgres::Row> {
    let plain = database_url.split('?').next().unwrap();
    let base = plain.rsplit_once('/').unwrap().0;
    tokio::task::block_in_place(|| {
        let url = format!("{base}/{database}");
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client.query(query, &[]).unwrap()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_example_applies_through_two_satellites_and_destroys() {
    let Some(database_url) = std::env::var("ORRERY_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
    else {
        eprintln!(
            "skipped: ORRERY_TEST_DATABASE_URL is not set (run under scripts/with-postgres.sh, \
             as scripts/test.sh does)"
        );
        return;
    };
    let bus = NatsServer::start().await;
    let managed = NatsServer::start().await;
    let _satellites: Vec<Killed> = SATELLITES
        .iter()
        .map(|(id, plugin)| {
            let child = Command::new(orrery_testing::binary("orrery-satellite"))
                .args(["--nats-url", &bus.url, "--id", id, "--plugin"])
                .arg(orrery_testing::binary(plugin))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            Killed(child)
        })
        .collect();
    let client = bus.client().await;
    wait_registered(&client, SATELLITES.len(), Duration::from_secs(30)).await;

    let scratch = common::Scratch::new();
    let stack = scratch.write("stack.yaml", &example_for(&database_url, &managed.url));
    let stack = stack.to_str().unwrap();
    let state = scratch.state();

    let run = orrery_through_nats(&state, &bus.url, &["apply", stack, "--yes"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("10 succeeded"), "{run:?}");
    let usage = "SELECT has_schema_privilege('storefront_readonly', 'storefront', 'USAGE')";
    assert!(sql(&database_url, "storefront", usage)[0].get::<_, bool>(0));
    let js = jetstream::new(managed.client().await);
    let mut orders = js.get_stream("STOREFRONT_ORDERS").await.unwrap();
    assert_eq!(
        orders.info().await.unwrap().config.subjects,
        ["storefront.orders.>"]
    );
    orders.consumer_info("shipping").await.unwrap();
    let settings = js.get_key_value("storefront-settings").await.unwrap();
    let database = settings.get("database").await.unwrap();
    assert_eq!(database.as_deref(), Some(&b"storefront"[..]));
    // The bus is only the bus: nothing of the application's lands on it.
    assert!(jetstream::new(client.clone())
        .get_stream("STOREFRONT_ORDERS")
        .await
        .is_err());

    let run = orrery_through_nats(&state, &bus.url, &["plan", stack]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("No changes: 10 resources"), "{run:?}");
    // Keyed by service instance: one each, and both did work.
    let served = served(&client).await;
    assert_eq!(served.len(), SATELLITES.len(), "{served:?}");
    assert!(
        served.values().all(|&n| n > 0),
        "a satellite served nothing: {served:?}"
    );

    let destroy = ["destroy", "--stack", "platform-example", "--yes"];
    let run = orrery_through_nats(&state, &bus.url, &destroy).await;
    assert_eq!(run.code, 0, "{run:?}");
    let roles = "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'storefront\\_%'";
    assert_eq!(sql(&database_url, "postgres", roles)[0].get::<_, i64>(0), 0);
    let databases = "SELECT count(*) FROM pg_database WHERE datname = 'storefront'";
    assert_eq!(
        sql(&database_url, "postgres", databases)[0].get::<_, i64>(0),
        0
    );
    assert!(js.get_stream("STOREFRONT_ORDERS").await.is_err());
    assert!(js.get_stream("KV_storefront-settings").await.is_err());
}
