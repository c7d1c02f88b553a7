//! Faults without stalls (issue 44, item 7): an apply of cloud-like things
//! (`Testbed::Cloud::Thing`: 0.25 s creates, deduplicated by request id
//! only) through two satellites with receipts, once without a fault and
//! once per fault, hitting one satellite (or NATS) after a fifth of the
//! creates. Each row gives the total time, its ratio to the fault-free run
//! of the same invocation, the longest time with no create completing, and
//! the things at the provider (each must exist once).
//!
//! `cargo build --workspace --bins && ORRERY_NATS_SERVER=$(scripts/ensure-nats.sh) cargo bench --profile dev -p orrery-primary --bench faults`
//!
//! The figures are waits on timeouts, pings and the provider's create
//! time, not CPU: the debug binaries of `cargo build` are the ones run
//! (`--profile dev` only spares building the workspace again in release).
//! `ORRERY_BENCH_FAULTS=hung,killed` runs only those rows.
//!
//! With a PostgreSQL server (`ORRERY_TEST_DATABASE_URL`: run it through
//! `scripts/with-postgres.sh`),
//! two rows more run the apply through an `orrery primary` whose store is
//! reached through a relay: once as is (its own baseline), once with the
//! store refusing every connection for 1 s after a fifth of the creates.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use orrery_testing::nats::NatsServer;

#[path = "../tests/it/chaos/proxy.rs"]
mod proxy;

#[path = "../tests/it/common/cloud.rs"]
mod cloud;

#[path = "../tests/it/common/postgres.rs"]
mod postgres;

#[path = "../tests/it/common/flap.rs"]
#[allow(dead_code)]
mod flap;

const THINGS: usize = 400;
const CREATE_MS: u64 = 250;
const CONCURRENCY: &str = "16";
/// How long a hung or partitioned satellite stays so.
const OUTAGE: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, PartialEq, Debug)]
enum Fault {
    None,
    Killed,
    Hung,
    Partitioned,
    NatsRestarted,
    DatabaseBlip,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::Killed => "killed",
            Fault::Hung => "hung",
            Fault::Partitioned => "partitioned",
            Fault::NatsRestarted => "nats-restart",
            Fault::DatabaseBlip => "database-blip",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Fault::None => "no fault",
            Fault::Killed => "one of two satellites SIGKILLed",
            Fault::Hung => "one of two satellites SIGSTOPped for 10 s",
            Fault::Partitioned => "one of two satellites cut off for 10 s",
            Fault::NatsRestarted => "nats-server killed, back after 1 s",
            Fault::DatabaseBlip => "PostgreSQL store refusing all for 1 s",
        }
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        signal("-CONT", &self.0.id().to_string());
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `kill -SIGNAL PID`, quietly (the process may be gone).
fn signal(sig: &str, pid: &str) {
    let _ = Command::new("kill")
        .args([sig, pid])
        .stderr(Stdio::null())
        .status();
}

fn satellite(url: &str, id: &str) -> Killed {
    Killed(
        Command::new(orrery_testing::binary("orrery-satellite"))
            .args(["--nats-url", url, "--id", id, "--receipts"])
            .arg("--plugin")
            .arg(orrery_testing::binary("orrery-plugin-testbed"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a satellite"),
    )
}

/// Waits (at most 30 s) until `n` satellites answer `$SRV.PING`.
async fn registered(client: &async_nats::Client, n: usize) {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        let inbox = client.new_inbox();
        let mut pongs = client.subscribe(inbox.clone()).await.unwrap();
        client
            .publish_with_reply("$SRV.PING.orrery-satellite", inbox, "".into())
            .await
            .unwrap();
        let mut seen = 0;
        while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(300), pongs.next()).await
        {
            seen += usize::from(!m.payload.is_empty());
        }
        if seen >= n {
            return;
        }
    }
    panic!("{n} satellites did not register within 30 s");
}

/// Creates recorded succeeded so far.
fn succeeded(state: &Path) -> usize {
    let Ok(conn) = rusqlite::Connection::open_with_flags(
        state.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    ) else {
        return 0;
    };
    let _ = conn.busy_timeout(Duration::from_secs(2));
    conn.query_row(
        "SELECT count(*) FROM operations WHERE operation = 'create' AND status = 'succeeded'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

/// The stack: `THINGS` cloud-like things whose provider is `world`.
fn document(world: &Path) -> String {
    cloud::stack("faults", world, THINGS, CREATE_MS)
}

const TOKEN: &str = "orr_bench_admin_0123456789abcdef0123456789abcdef";

/// The same apply through an `orrery primary` over NATS whose PostgreSQL
/// store is reached through a relay; with `blip`, the store refuses every
/// connection for 1 s after a fifth of the creates. Progress is read from
/// `GET /v1/commands/{id}` (nothing is read while the store is down).
fn run_served(blip: bool, nats_url: &str) -> Figures {
    use sha2::Digest;
    let url = postgres::fresh_database("orrery_faults").expect("ORRERY_TEST_DATABASE_URL");
    let (head, tail) = url.rsplit_once('/').unwrap();
    let (host, port) = head.rsplit_once(':').unwrap();
    let relay = flap::Flapper::start(port.parse().unwrap());
    let url = format!("{host}:{}/{tail}", relay.port);
    let dir = tempfile::tempdir().unwrap();
    let sha = sha2::Sha256::digest(TOKEN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    std::fs::write(
        dir.path().join("tokens.toml"),
        format!("[[principal]]\nname = \"bench\"\ntoken_sha256 = \"{sha}\"\nroles = [\"admin\"]\n"),
    )
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api = listener.local_addr().unwrap().port();
    drop(listener);
    let _primary = Killed(
        Command::new(orrery_testing::binary("orrery"))
            .args(["primary", "--listen", &format!("127.0.0.1:{api}")])
            .args(["--database-url", &url, "--nats-url", nats_url])
            .args(["--concurrency", CONCURRENCY])
            .arg("--auth-tokens")
            .arg(dir.path().join("tokens.toml"))
            .env("ORRERY_DATA_DIR", dir.path().join("state"))
            .env("ORRERY_PLUGIN_DIR", "/nonexistent")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let base = format!("http://127.0.0.1:{api}");
    let get = |path: &str| -> Option<serde_json::Value> {
        let mut r = agent
            .get(&format!("{base}{path}"))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .call()
            .ok()?;
        (r.status() == 200).then(|| r.body_mut().read_json().ok())?
    };
    let until = Instant::now() + Duration::from_secs(30);
    while get("/v1/stacks").is_none() {
        assert!(
            Instant::now() < until,
            "the primary did not serve within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let world = dir.path().join("cloud.sqlite");
    let started = Instant::now();
    let mut accepted = agent
        .post(&format!("{base}/v1/stacks/apply"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send_json(serde_json::json!({ "document": document(&world) }))
        .unwrap();
    let accepted: serde_json::Value = accepted.body_mut().read_json().unwrap();
    let id = accepted["command_id"]
        .as_str()
        .expect("accepted")
        .to_owned();
    let (mut done, mut changed, mut stall, mut struck) = (0, Instant::now(), Duration::ZERO, false);
    let ok = loop {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "database-blip: the apply did not end within 300 s"
        );
        if let Some(command) = get(&format!("/v1/commands/{id}")) {
            let now = command["operations"].as_array().map_or(0, |ops| {
                ops.iter().filter(|o| o["status"] == "succeeded").count()
            });
            if now != done {
                stall = stall.max(changed.elapsed());
                (done, changed) = (now, Instant::now());
            }
            if command["active"] == false && command["status"] != "running" {
                break command["status"] == "completed";
            }
        }
        if blip && !struck && done >= THINGS / 5 {
            struck = true;
            relay.outage(Duration::from_secs(1));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let total = started.elapsed();
    stall = stall.max(changed.elapsed().min(total));
    let census = orrery_plugin_testbed::store::census(&world).unwrap();
    Figures {
        total,
        stall,
        things: census.rows.len(),
        duplicates: census.duplicates(),
        ok,
    }
}

struct Figures {
    total: Duration,
    stall: Duration,
    things: usize,
    duplicates: u64,
    ok: bool,
}

async fn run(fault: Fault) -> Figures {
    let mut server = NatsServer::start().await;
    let port: u16 = server.url.rsplit(':').next().unwrap().parse().unwrap();
    // Satellite A reaches NATS through a relay that can hold every byte.
    let relay = proxy::Proxy::start(port);
    let mut a = satellite(&format!("nats://127.0.0.1:{}", relay.port), "sat-a");
    let _b = satellite(&server.url, "sat-b");
    registered(&server.client().await, 2).await;
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("cloud.sqlite");
    let doc = document(&world);
    let file = dir.path().join("stack.yaml");
    std::fs::write(&file, doc).unwrap();
    let state = dir.path().join("state");
    let started = Instant::now();
    let mut apply = Killed(
        Command::new(orrery_testing::binary("orrery"))
            .args(["apply", file.to_str().unwrap(), "--yes"])
            .args(["--concurrency", CONCURRENCY, "--nats-url", &server.url])
            .env("ORRERY_DATA_DIR", &state)
            .env("ORRERY_PLUGIN_DIR", "/nonexistent")
            .env_remove("ORRERY_DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = a.0.id().to_string();
    let (mut done, mut changed, mut stall) = (0, Instant::now(), Duration::ZERO);
    let (mut struck, mut healed): (Option<Instant>, bool) = (None, false);
    let exit = loop {
        if let Some(exit) = apply.0.try_wait().unwrap() {
            break exit;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{}: the apply did not end within 300 s",
            fault.name()
        );
        let now = succeeded(&state);
        if now != done {
            stall = stall.max(changed.elapsed());
            (done, changed) = (now, Instant::now());
        }
        if struck.is_none() && done >= THINGS / 5 {
            struck = Some(Instant::now());
            match fault {
                Fault::None => {}
                Fault::Killed => {
                    let _ = a.0.kill();
                }
                Fault::Hung => {
                    signal("-STOP", &pid);
                }
                Fault::Partitioned => relay.hold(true),
                // The fault's own length; this loop's clock stops with it,
                // so the gap it leaves is measured by the counts after it.
                Fault::NatsRestarted => server.restart(Duration::from_secs(1)).await,
                Fault::DatabaseBlip => unreachable!("run_served strikes the store"),
            }
        }
        if let Some(at) = struck {
            if !healed && at.elapsed() >= OUTAGE {
                healed = true;
                match fault {
                    Fault::Hung => {
                        signal("-CONT", &pid);
                    }
                    Fault::Partitioned => relay.hold(false),
                    _ => {}
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let total = started.elapsed();
    stall = stall.max(changed.elapsed().min(total));
    relay.hold(false);
    signal("-CONT", &pid);
    let census = orrery_plugin_testbed::store::census(&world).unwrap();
    Figures {
        total,
        stall,
        things: census.rows.len(),
        duplicates: census.duplicates(),
        ok: exit.success(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let chosen = std::env::var("ORRERY_BENCH_FAULTS").ok();
    let faults: Vec<Fault> = [
        Fault::Killed,
        Fault::Hung,
        Fault::Partitioned,
        Fault::NatsRestarted,
    ]
    .into_iter()
    .filter(|f| {
        chosen
            .as_deref()
            .is_none_or(|c| c.split(',').any(|n| n == f.name()))
    })
    .collect();
    println!(
        "faults: apply of {THINGS} cloud-like things ({CREATE_MS} ms creates, {CONCURRENCY} at a time) through two satellites with receipts; the fault after {} creates",
        THINGS / 5
    );
    let base = run(Fault::None).await;
    println!(
        "{:<40} {:>9} {:>7} {:>16} {:>8} {:>11} {:>5}",
        "fault", "total s", "ratio", "longest stall s", "things", "duplicates", "exit"
    );
    let row = |fault: Fault, f: &Figures| {
        println!(
            "{:<40} {:>9.1} {:>7.2} {:>16.2} {:>8} {:>11} {:>5}",
            fault.describe(),
            f.total.as_secs_f64(),
            f.total.as_secs_f64() / base.total.as_secs_f64(),
            f.stall.as_secs_f64(),
            f.things,
            f.duplicates,
            if f.ok { "0" } else { "fail" }
        );
    };
    row(Fault::None, &base);
    for fault in faults {
        let figures = run(fault).await;
        row(fault, &figures);
    }
    let database = std::env::var("ORRERY_TEST_DATABASE_URL").is_ok();
    let wanted = chosen
        .as_deref()
        .is_none_or(|c| c.split(',').any(|n| n == Fault::DatabaseBlip.name()));
    match database {
        true if wanted => {
            let server = NatsServer::start().await;
            let _a = satellite(&server.url, "sat-a");
            let _b = satellite(&server.url, "sat-b");
            registered(&server.client().await, 2).await;
            let url = server.url.clone();
            let (served, blipped) = tokio::task::spawn_blocking(move || {
                (run_served(false, &url), run_served(true, &url))
            })
            .await
            .unwrap();
            println!("through `orrery primary`, its store in PostgreSQL behind a relay (its own baseline):");
            let served_base = served.total.as_secs_f64();
            for (fault, f) in [(Fault::None, &served), (Fault::DatabaseBlip, &blipped)] {
                println!(
                    "{:<40} {:>9.1} {:>7.2} {:>16.2} {:>8} {:>11} {:>5}",
                    fault.describe(),
                    f.total.as_secs_f64(),
                    f.total.as_secs_f64() / served_base,
                    f.stall.as_secs_f64(),
                    f.things,
                    f.duplicates,
                    if f.ok { "0" } else { "fail" }
                );
            }
        }
        true => {}
        false => println!(
            "(no PostgreSQL: ORRERY_TEST_DATABASE_URL unset; the database blip is not run)"
        ),
    }
}
