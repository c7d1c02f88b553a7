//! The postgres plugin against a real server, each figure beside a
//! baseline measured in the same run (run under scripts/with-postgres.sh):
//!
//! - **discovery of 10,000 roles**: the plugin binary's `list` of
//!   `Postgres::Role` over its stdio link, every page of 100 (keyset pages
//!   in SQL), and `orrery discover` of the whole target (every type, the
//!   unmanaged ones recorded in a fresh SQLite store), against one raw
//!   `SELECT` of the same catalog rows on an open connection;
//! - **apply of 1,000 grants** (USAGE on one schema for 1,000 roles: the
//!   case the `database:{database}` concurrency key serialises) with
//!   `orrery apply --concurrency 64`, process start and planning included,
//!   against the same 1,000 GRANT statements sent one after another on one
//!   connection (what a `psql` session running a script does).
//!
//! `cargo build --workspace --bins && scripts/with-postgres.sh cargo bench -p orrery-plugin-postgres --bench catalog`
//! `ORRERY_BENCH_QUICK=1` runs 1,000 roles and 100 grants.

use std::process::Command;
use std::time::{Duration, Instant};

use orrery_plugin_sdk::process::{spawn_plugin, SpawnConfig};
use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, Request, Target, Value};
use orrery_plugin_sdk::Answer;

struct Server {
    base: String,
    host: String,
    port: u16,
    user: String,
    ca: String,
}

fn server() -> Server {
    let url =
        std::env::var("ORRERY_TEST_DATABASE_URL").expect("run under scripts/with-postgres.sh");
    let plain = url.split('?').next().unwrap_or(&url);
    let (base, _) = plain.rsplit_once('/').unwrap();
    let (user, hostport) = base
        .trim_start_matches("postgres://")
        .split_once('@')
        .unwrap();
    let (host, port) = hostport.split_once(':').unwrap();
    Server {
        base: base.into(),
        host: host.into(),
        port: port.parse().unwrap(),
        user: user.into(),
        ca: std::env::var("ORRERY_TEST_DATABASE_CA").unwrap(),
    }
}

impl Server {
    async fn raw(&self, database: &str) -> tokio_postgres::Client {
        let url = format!("{}/{database}", self.base);
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
    }

    fn config(&self) -> PropertyMap {
        [
            ("host", Value::from(self.host.as_str())),
            ("port", Value::from(i64::from(self.port))),
            ("user", Value::from(self.user.as_str())),
            ("sslmode", Value::from("verify-full")),
            ("ca_file", Value::from(self.ca.as_str())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    fn target_yaml(&self) -> String {
        format!(
            "targets:\n  - name: pg\n    plugin: postgres\n    config: {{host: \"{}\", port: {}, user: \"{}\", sslmode: verify-full, ca_file: \"{}\"}}\n",
            self.host, self.port, self.user, self.ca
        )
    }
}

fn orrery(args: &[&str], state: &std::path::Path) -> Duration {
    let start = Instant::now();
    let out = Command::new(orrery_testing::binary("orrery"))
        .args(args)
        .env("ORRERY_DATA_DIR", state)
        .env("ORRERY_PLUGIN_DIR", orrery_testing::target_debug())
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "orrery {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn line(what: &str, took: Duration, n: usize, baseline: Duration) {
    println!(
        "{what:<44} {:>9.1} ms {:>10.0} /s   ratio to baseline {:>6.2}",
        took.as_secs_f64() * 1e3,
        n as f64 / took.as_secs_f64(),
        took.as_secs_f64() / baseline.as_secs_f64()
    );
}

async fn discovery(pg: &Server, roles: usize) {
    let admin = pg.raw("postgres").await;
    let sql: String = (0..roles)
        .map(|i| format!("CREATE ROLE bench_role_{i:05};"))
        .collect();
    admin.batch_execute(&sql).await.unwrap();

    let start = Instant::now();
    let rows = admin
        .query("SELECT r.rolname, r.rolcanlogin, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolinherit, r.rolreplication, r.rolconnlimit, r.rolvaliduntil::text, array(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid) FROM pg_roles r WHERE r.rolname !~ '^pg_'", &[])
        .await
        .unwrap();
    let baseline = start.elapsed();
    assert!(rows.len() > roles);

    let plugin = spawn_plugin(&SpawnConfig::new(orrery_testing::binary(
        "orrery-plugin-postgres",
    )))
    .await
    .unwrap();
    let target = Target {
        name: "bench".into(),
        config: pg.config(),
        ..Default::default()
    };
    let start = Instant::now();
    let (mut token, mut listed, mut pages) = (None, 0, 0);
    loop {
        let request = Request::List(ListRequest {
            request_id: format!("p{pages}"),
            resource_type: "Postgres::Role".into(),
            target: target.clone(),
            page_size: 100,
            page_token: token.take(),
            parent: None,
        });
        let Answer::List(page) = plugin
            .client
            .request(&request, Duration::from_secs(60))
            .await
            .unwrap()
        else {
            panic!("not a list answer");
        };
        listed += page.resources.len();
        pages += 1;
        match page.next_page_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    let listing = start.elapsed();
    assert!(listed > roles);

    let dir = tempfile::tempdir().unwrap();
    let stack = dir.path().join("stack.yaml");
    std::fs::write(
        &stack,
        format!("stack: bench\n{}resources: []\n", pg.target_yaml()),
    )
    .unwrap();
    let state = dir.path().join("state");
    let discover = orrery(&["discover", stack.to_str().unwrap()], &state);

    println!("discovery of {roles} roles ({listed} listed in {pages} pages of 100)");
    line(
        "raw SELECT of the catalog rows (baseline)",
        baseline,
        listed,
        baseline,
    );
    line(
        "plugin list, every page, over stdio",
        listing,
        listed,
        baseline,
    );
    line(
        "orrery discover (all types, recorded)",
        discover,
        listed,
        baseline,
    );
}

async fn grants(pg: &Server, n: usize) {
    let admin = pg.raw("postgres").await;
    for db in ["bench_apply", "bench_raw"] {
        admin
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .await
            .unwrap();
        pg.raw(db)
            .await
            .batch_execute("CREATE SCHEMA shared")
            .await
            .unwrap();
    }
    let sql: String = (0..n)
        .map(|i| format!("CREATE ROLE bench_grantee_{i:04};"))
        .collect();
    admin.batch_execute(&sql).await.unwrap();

    let raw = pg.raw("bench_raw").await;
    let start = Instant::now();
    for i in 0..n {
        raw.batch_execute(&format!(
            "GRANT USAGE ON SCHEMA shared TO bench_grantee_{i:04}"
        ))
        .await
        .unwrap();
    }
    let baseline = start.elapsed();

    let dir = tempfile::tempdir().unwrap();
    let mut doc = format!("stack: bench-grants\n{}resources:\n", pg.target_yaml());
    for i in 0..n {
        doc.push_str(&format!(
            "  - label: g{i}\n    type: Postgres::Grant\n    target: pg\n    properties: {{ role: bench_grantee_{i:04}, database: bench_apply, object_type: schema, schema: shared, privileges: [USAGE] }}\n"
        ));
    }
    let stack = dir.path().join("grants.yaml");
    std::fs::write(&stack, doc).unwrap();
    let state = dir.path().join("state");
    let apply = orrery(
        &[
            "apply",
            stack.to_str().unwrap(),
            "--yes",
            "--concurrency",
            "64",
        ],
        &state,
    );

    println!("apply of {n} grants on one database");
    line(
        "GRANT statements on one connection (baseline)",
        baseline,
        n,
        baseline,
    );
    line(
        "orrery apply --concurrency 64, key database:{database}",
        apply,
        n,
        baseline,
    );
}

#[tokio::main]
async fn main() {
    // As every bench here: `--quick`, the variable, or a run without
    // cargo's `--bench` flag (`cargo test --benches`) is a smoke run.
    let args: Vec<String> = std::env::args().collect();
    let quick = std::env::var_os("ORRERY_BENCH_QUICK").is_some()
        || args.iter().any(|a| a == "--quick")
        || !args.iter().any(|a| a == "--bench");
    let pg = server();
    discovery(&pg, if quick { 1_000 } else { 10_000 }).await;
    grants(&pg, if quick { 100 } else { 1_000 }).await;
}
