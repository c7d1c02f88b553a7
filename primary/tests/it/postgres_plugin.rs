//! The postgres plugin end to end: the real `orrery` binary running the
//! real plugin process against the throwaway PostgreSQL server
//! (`scripts/with-postgres.sh` sets `ORRERY_TEST_DATABASE_URL`): apply,
//! no-op, update, replace, drift, discover, import and destroy, and 200
//! grants on one database at concurrency 64, with and without the
//! plugin's concurrency key.

use crate::common;

use std::collections::BTreeSet;

use common::{Run, Scratch};

/// Host, port and user of the test server, and a plaintext URL for the
/// raw client that makes out-of-band changes.
struct Server {
    host: String,
    port: u16,
    user: String,
    base: String,
}

fn server() -> Server {
    let url = std::env::var("ORRERY_TEST_DATABASE_URL").expect(
        "ORRERY_TEST_DATABASE_URL is not set: run through scripts/with-postgres.sh (scripts/test.sh does)",
    );
    let plain = url.split('?').next().unwrap().to_owned();
    let (base, _) = plain.rsplit_once('/').unwrap();
    let (auth, hostport) = base
        .trim_start_matches("postgres://")
        .split_once('@')
        .unwrap();
    let (host, port) = hostport.split_once(':').unwrap();
    Server {
        host: host.into(),
        port: port.parse().unwrap(),
        user: auth.split(':').next().unwrap().into(),
        base: base.into(),
    }
}

impl Server {
    /// The stack's target, TLS checked against the test CA.
    fn target(&self) -> String {
        let ca = std::env::var("ORRERY_TEST_DATABASE_CA").unwrap();
        format!(
            "targets:\n  - name: pg\n    plugin: postgres\n    config: {{host: \"{}\", port: {}, user: \"{}\", sslmode: verify-full, ca_file: \"{ca}\"}}\n",
            self.host, self.port, self.user
        )
    }

    /// [`Server::target`] with a password given as a secret reference, which
    /// the host running the plugin resolves (the server trusts the user
    /// anyway: this shows where the value goes, not that it logs in).
    fn target_with_password(&self) -> String {
        self.target().replace(
            "ca_file:",
            &format!("password: \"${{env:{TARGET_PASSWORD_VAR}}}\", ca_file:"),
        )
    }

    /// Runs `sql` on `database` with a raw client (no Orrery involved).
    fn sql(&self, database: &str, sql: &str) {
        let mut client =
            postgres::Client::connect(&format!("{}/{database}", self.base), postgres::NoTls)
                .unwrap();
        client.batch_execute(sql).unwrap();
    }

    fn query(&self, database: &str, sql: &str) -> Vec<postgres::Row> {
        let mut client =
            postgres::Client::connect(&format!("{}/{database}", self.base), postgres::NoTls)
                .unwrap();
        client.query(sql, &[]).unwrap()
    }
}

fn unique() -> String {
    uuid::Uuid::now_v7().simple().to_string()[20..].to_owned()
}

fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"))
}

/// (label, action) of the plan's changes other than no-ops.
fn changes(orrery: &dyn Fn(&[&str]) -> Run, stack: &str) -> BTreeSet<(String, String)> {
    let run = orrery(&["plan", stack, "--output", "json"]);
    json(&run)["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] != "no-op")
        .map(|c| {
            (
                c["label"].as_str().unwrap().to_owned(),
                c["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pair(label: &str, action: &str) -> (String, String) {
    (label.to_owned(), action.to_owned())
}

/// Planted secrets: the owner's password (a secret parameter, write-only)
/// and the target's password (a secret reference). Neither may appear in
/// the store or in anything `orrery` prints.
const OWNER_PASSWORD: &str = "owner-pw-5d1c9e";
const TARGET_PASSWORD: &str = "target-pw-8b2f4a";
const TARGET_PASSWORD_VAR: &str = "ORRERY_TEST_PG_TARGET_PASSWORD";

fn app_stack(pg: &Server, u: &str, limit: u32, schema: &str) -> String {
    format!(
        r#"stack: pg_{u}
parameters:
  owner_password: {{ type: secret }}
{target}
resources:
  - label: owner
    type: Postgres::Role
    target: pg
    properties: {{ name: owner_{u}, login: true, password: "${{param.owner_password}}" }}
  - label: reader
    type: Postgres::Role
    target: pg
    properties: {{ name: reader_{u} }}
  - label: db
    type: Postgres::Database
    target: pg
    properties: {{ name: app_{u}, owner: "${{owner.name}}", connection_limit: {limit} }}
  - label: schema
    type: Postgres::Schema
    target: pg
    properties: {{ database: "${{db.name}}", name: {schema}, owner: "${{owner.name}}" }}
  - label: usage
    type: Postgres::Grant
    target: pg
    properties:
      role: "${{reader.name}}"
      database: "${{db.name}}"
      object_type: schema
      schema: "${{schema.name}}"
      privileges: [USAGE]
"#,
        target = pg.target_with_password()
    )
}

#[test]
fn a_database_its_roles_schema_and_grant_go_through_the_whole_cycle() {
    cycle(None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cycle_runs_through_a_satellite_over_nats() {
    let nats = orrery_testing::nats::NatsServer::start().await;
    let mut satellite = common::fleet::satellite_command(&nats.url, "pg-sat");
    // The satellite serves the postgres plugin instead of `local`.
    let args: Vec<_> = satellite.get_args().map(|a| a.to_owned()).collect();
    let mut command = std::process::Command::new(satellite.get_program());
    let plugin_at = args.iter().position(|a| a == "--plugin").unwrap() + 1;
    for (i, arg) in args.iter().enumerate() {
        if i == plugin_at {
            command.arg(orrery_testing::binary("orrery-plugin-postgres"));
        } else {
            command.arg(arg);
        }
    }
    satellite = command;
    // The target's password reference resolves on the satellite's host,
    // from a variable its operator exposes.
    satellite
        .args(["--secret-env", TARGET_PASSWORD_VAR])
        .env(TARGET_PASSWORD_VAR, TARGET_PASSWORD);
    let _satellite = common::fleet::Killed(satellite.spawn().unwrap());
    let client = nats.client().await;
    common::fleet::wait_registered(&client, 1, std::time::Duration::from_secs(20)).await;
    let url = nats.url.clone();
    tokio::task::spawn_blocking(move || cycle(Some(&url)))
        .await
        .unwrap();
    let served = common::fleet::served(&client).await;
    assert!(
        served.values().sum::<u64>() > 20,
        "operations went through the satellite: {served:?}"
    );
}

/// The whole cycle, embedded (`nats: None`) or through the satellites on
/// `nats` (plugins are then never started by `orrery` itself).
fn cycle(nats: Option<&str>) {
    let pg = server();
    let u = unique();
    let scratch = Scratch::new();
    let printed = std::cell::RefCell::new(String::new());
    let orrery = |args: &[&str]| -> Run {
        let mut command = scratch.command(args);
        command.env("ORRERY_VAR_owner_password", OWNER_PASSWORD);
        match nats {
            Some(url) => {
                command
                    .args(["--nats-url", url])
                    .env("ORRERY_PLUGIN_DIR", "/nonexistent");
            }
            None => {
                command.env(TARGET_PASSWORD_VAR, TARGET_PASSWORD);
            }
        }
        let run = Run::from(command.output().unwrap());
        printed
            .borrow_mut()
            .push_str(&format!("{}{}", run.stdout, run.stderr));
        run
    };
    let stack = scratch.write("stack.yaml", &app_stack(&pg, &u, 20, "billing"));
    let stack = stack.to_str().unwrap();
    let db = format!("app_{u}");

    let run = orrery(&["apply", stack, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("5 succeeded"), "{run:?}");
    let rows = pg.query(
        &db,
        &format!("SELECT has_schema_privilege('reader_{u}', 'billing', 'USAGE')"),
    );
    assert!(rows[0].get::<_, bool>(0));
    let rows = pg.query(
        "postgres",
        &format!("SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = 'owner_{u}'"),
    );
    assert!(rows[0].get::<_, bool>(0), "the write-only password was set");
    assert_eq!(
        orrery(&["plan", stack]).code,
        0,
        "a second plan changes nothing"
    );

    // Update in place, and a create-only change that replaces.
    let edited = scratch.write("edited.yaml", &app_stack(&pg, &u, 30, "ledger"));
    let edited = edited.to_str().unwrap();
    assert_eq!(
        changes(&orrery, edited),
        BTreeSet::from([
            pair("db", "update"),
            pair("schema", "replace"),
            pair("usage", "replace")
        ])
    );
    let run = orrery(&["apply", edited, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    let rows = pg.query(
        "postgres",
        &format!("SELECT datconnlimit FROM pg_database WHERE datname = '{db}'"),
    );
    assert_eq!(rows[0].get::<_, i32>(0), 30);
    let rows = pg.query(
        &db,
        "SELECT nspname::text FROM pg_namespace WHERE nspname IN ('billing', 'ledger')",
    );
    assert_eq!(
        rows.iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>(),
        ["ledger"]
    );
    assert_eq!(orrery(&["plan", edited]).code, 0, "converged");

    // Drift: changed behind Orrery's back, seen, and put back by apply.
    pg.sql("postgres", &format!("ALTER ROLE owner_{u} NOLOGIN"));
    let run = orrery(&["drift", edited, "--output", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    let drifted = json(&run)["drifted"].clone();
    assert_eq!(drifted[0]["label"], "owner", "{run:?}");
    assert_eq!(
        drifted[0]["fields"],
        serde_json::json!(["login"]),
        "{run:?}"
    );
    let run = orrery(&["apply", edited, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    let rows = pg.query(
        "postgres",
        &format!("SELECT rolcanlogin FROM pg_roles WHERE rolname = 'owner_{u}'"),
    );
    assert!(rows[0].get::<_, bool>(0), "apply restored LOGIN");
    assert_eq!(orrery(&["drift", edited]).code, 0);

    // Discover: what was made by hand shows up unmanaged, a grant among it.
    pg.sql("postgres", &format!("CREATE ROLE byhand_{u}"));
    pg.sql(
        &db,
        &format!("CREATE SCHEMA byhand; GRANT CONNECT ON DATABASE app_{u} TO reader_{u}"),
    );
    let run = orrery(&["discover", edited, "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = orrery(&["inventory", "--unmanaged", "--output", "json"]);
    let unmanaged: BTreeSet<(String, String)> = json(&run)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["type"].as_str().unwrap().to_owned(),
                r["native_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let grant_id = format!("reader_{u}/app_{u}/database//");
    for expected in [
        ("Postgres::Role".to_owned(), format!("byhand_{u}")),
        ("Postgres::Schema".to_owned(), format!("app_{u}/byhand")),
        ("Postgres::Grant".to_owned(), grant_id.clone()),
    ] {
        assert!(
            unmanaged.contains(&expected),
            "{expected:?} not discovered: {unmanaged:?}"
        );
    }
    assert!(
        !unmanaged.contains(&("Postgres::Role".to_owned(), format!("owner_{u}"))),
        "managed ones are not unmanaged"
    );

    // Import a role and the grant (a composite id), then plan them as no-ops.
    for (label, ty, id) in [
        ("byhand", "Postgres::Role", format!("byhand_{u}")),
        ("connect", "Postgres::Grant", grant_id),
    ] {
        let run = orrery(&[
            "import",
            "--stack",
            &format!("pg_{u}"),
            "--label",
            label,
            "--type",
            ty,
            "--target",
            "pg",
            "--native-id",
            &id,
        ]);
        assert_eq!(run.code, 0, "{run:?}");
    }
    let imported = format!(
        r#"{}  - label: byhand
    type: Postgres::Role
    target: pg
    properties: {{ name: byhand_{u} }}
  - label: connect
    type: Postgres::Grant
    target: pg
    properties: {{ role: "${{reader.name}}", database: "${{db.name}}", object_type: database, privileges: [CONNECT] }}
"#,
        app_stack(&pg, &u, 30, "ledger")
    );
    let imported = scratch.write("imported.yaml", &imported);
    let imported = imported.to_str().unwrap();
    let run = orrery(&["plan", imported]);
    assert_eq!(run.code, 0, "imported resources plan as no-ops: {run:?}");

    // Destroy: everything goes, roles last (the database's owner after it).
    let run = orrery(&["destroy", "--stack", &format!("pg_{u}"), "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    let rows = pg.query(
        "postgres",
        &format!("SELECT count(*) FROM pg_roles WHERE rolname LIKE '%{u}'"),
    );
    assert_eq!(rows[0].get::<_, i64>(0), 0);
    let rows = pg.query(
        "postgres",
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{db}'"),
    );
    assert_eq!(rows[0].get::<_, i64>(0), 0);

    // After apply, update, drift, discover, import and destroy: the
    // planted secrets are nowhere in the store or the output.
    let printed = printed.into_inner();
    assert!(printed.contains("succeeded"), "the outputs were collected");
    for secret in [OWNER_PASSWORD, TARGET_PASSWORD] {
        assert!(!printed.contains(secret), "`{secret}` printed");
        for entry in std::fs::read_dir(scratch.state()).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "`{secret}` in {}",
                    path.display()
                );
            }
        }
    }
}

/// 200 roles, each granted USAGE on the same schema: every GRANT rewrites
/// that schema's one catalog row.
fn grants_stack(pg: &Server, u: &str) -> String {
    pg.sql("postgres", &format!("CREATE DATABASE g_{u}"));
    pg.sql(&format!("g_{u}"), "CREATE SCHEMA shared");
    let roles: String = (0..200).map(|i| format!("CREATE ROLE g{i}_{u};")).collect();
    pg.sql("postgres", &roles);
    let mut doc = format!("stack: g_{u}\n{}\nresources:\n", pg.target());
    for i in 0..200 {
        doc.push_str(&format!(
            "  - label: g{i}\n    type: Postgres::Grant\n    target: pg\n    properties: {{ role: g{i}_{u}, database: g_{u}, object_type: schema, schema: shared, privileges: [USAGE] }}\n"
        ));
    }
    doc
}

fn granted(pg: &Server, u: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'g%\\_{u}' AND has_schema_privilege(oid, 'shared', 'USAGE')");
    pg.query(&format!("g_{u}"), &sql)[0].get(0)
}

fn retries(run: &Run) -> u64 {
    let summary = run
        .stdout
        .lines()
        .find(|l| l.contains(" retries."))
        .unwrap_or_else(|| panic!("{run:?}"));
    let before = summary.split(" retries.").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn two_hundred_grants_on_one_database_at_concurrency_64_never_race() {
    let pg = server();
    let u = unique();
    let scratch = Scratch::new();
    let stack = scratch.write("grants.yaml", &grants_stack(&pg, &u));
    let run = scratch.orrery(&[
        "apply",
        stack.to_str().unwrap(),
        "--yes",
        "--concurrency",
        "64",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("200 succeeded"), "{run:?}");
    assert_eq!(retries(&run), 0, "{run:?}");
    let status = scratch.orrery(&["status"]);
    assert!(
        !status.stdout.contains("tuple concurrently updated"),
        "{status:?}"
    );
    assert!(
        !run.stdout.contains("tuple concurrently updated")
            && !run.stderr.contains("tuple concurrently updated")
    );
    assert_eq!(granted(&pg, &u), 200);
}

#[test]
fn without_the_concurrency_key_the_same_grants_race() {
    let pg = server();
    let u = unique();
    let scratch = Scratch::new();
    let stack = scratch.write("grants.yaml", &grants_stack(&pg, &u));
    let run = common::Run::from(
        scratch
            .command(&[
                "apply",
                stack.to_str().unwrap(),
                "--yes",
                "--concurrency",
                "64",
            ])
            .env(orrery_plugin_postgres_env(), "1")
            .output()
            .unwrap(),
    );
    // The plugin logs each race it reports (as retryable ResourceConflict).
    let raced = run.stderr.matches("tuple concurrently updated").count();
    eprintln!(
        "without the key: {} retries, {raced} catalog races",
        retries(&run)
    );
    assert!(raced > 0, "no race seen without the key: {run:?}");
    assert!(retries(&run) > 0, "{run:?}");
    assert_eq!(run.code, 0, "retried until done: {run:?}");
    assert_eq!(granted(&pg, &u), 200);
}

/// The plugin's test-only switch (`NO_CONCURRENCY_KEY` in its crate); the
/// host passes `ORRERY_PLUGIN_*` variables on to plugins.
fn orrery_plugin_postgres_env() -> &'static str {
    "ORRERY_PLUGIN_POSTGRES_NO_CONCURRENCY_KEY"
}

#[test]
fn the_example_applies_as_its_readme_says() {
    let pg = server();
    let scratch = Scratch::new();
    // `try.sh` is what the README runs under scripts/with-postgres.sh; the
    // test runs under it already.
    let run = Run::from(
        std::process::Command::new(common::root().join("examples/postgres/try.sh"))
            .env("ORRERY_DATA_DIR", scratch.state())
            .env("ORRERY_PLUGIN_DIR", orrery_testing::target_debug())
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("8 succeeded"), "{run:?}");
    assert!(run.stdout.contains("No changes"), "{run:?}");
    let sql = "SELECT has_database_privilege('shop_readonly', 'shop', 'CONNECT')";
    assert!(pg.query("postgres", sql)[0].get::<_, bool>(0));
    let run = scratch.orrery(&["destroy", "--stack", "pg-example", "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    let gone = "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'shop\\_%'";
    assert_eq!(pg.query("postgres", gone)[0].get::<_, i64>(0), 0);
}
