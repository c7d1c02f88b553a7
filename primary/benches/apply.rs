//! Applies generated stacks of 1,000 and 10,000 no-op resources (wide, and
//! a 10-layer DAG) embedded and through NATS, beside `terraform apply` of
//! `terraform_data` resources of the same shapes measured in the same run.
//!
//! `cargo build --workspace --bins && ORRERY_NATS_SERVER=$(scripts/ensure-nats.sh) cargo bench -p orrery-primary --bench apply`
//! `ORRERY_BENCH_QUICK=1` runs 100-resource stacks and skips Terraform;
//! `ORRERY_BENCH_SIZES=100000` (a comma-separated list) runs those sizes
//! instead of 1,000 and 10,000 (Terraform only at 1,000 or fewer).
//! `ORRERY_BENCH_SHAPES=wide` (or `10-layer`, or `fleet`: the same number
//! of resources from a `for_each` document; comma-separated) and
//! `ORRERY_BENCH_PATHS=embedded` (or `nats`) run only those rows, to
//! iterate on one of them.
//!
//! The no-change plan is timed twice: of the YAML document, and of the same
//! document written as JSON (read by the same parser); the JSON one runs
//! first.
//!
//! Each row gives the peak resident memory of this process during the plan
//! and apply, and then during the no-change plan (its `VmHWM`, reset
//! through `/proc/self/clear_refs` before each run and after the apply):
//! the primary's plan, executor and store, plus the two satellites' relays,
//! which run in this process too (the plugins and nats-server do not).
//!
//! With a PostgreSQL server (`ORRERY_BENCH_DATABASE_URL`, else
//! `ORRERY_TEST_DATABASE_URL`: run it through `scripts/with-postgres.sh`),
//! the NATS path runs a second time with its state in PostgreSQL (a fresh
//! database per run, over TLS as the URL says), and its resources/s are
//! printed as a ratio of the SQLite run's just before.

use orrery_testing::nats as common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use orrery_bus::bus::NatsBus;
use orrery_bus::plugin_host::{PluginHost, PluginSpec};
use orrery_bus::transport::{LocalBus, Transport};
use orrery_primary::apply::{Executor, Options};
use orrery_primary::plan::{self, Mode, SecretHasher};
use orrery_primary::stack::{self, Catalog};
use orrery_primary::state;
use orrery_satellite::relay::{self, RelayConfig};

#[derive(Clone, Copy)]
enum Shape {
    Wide,
    Layered,
    /// A fleet written with `for_each`, as `examples/fleet` is: 10 sites
    /// and `n - 10` things, each referring to its site.
    Fleet,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Wide => "wide",
            Shape::Layered => "10-layer",
            Shape::Fleet => "fleet",
        }
    }
}

/// The fleet document: a few lines whatever `n`.
fn fleet_yaml(n: usize, target: &str) -> String {
    let things = n - 10;
    format!(
        "stack: bench\ntargets:\n  - name: {target}\n    plugin: testbed\nresources:\n\
         \x20 - label: site\n    for_each: \"${{range(10)}}\"\n    type: Testbed::Noop::Thing\n    target: {target}\n\
         \x20   properties: {{ name: \"site-${{each.value}}\", value: \"${{each.value}}\" }}\n\
         \x20 - label: thing\n    for_each: \"${{range({things})}}\"\n    type: Testbed::Noop::Thing\n    target: {target}\n\
         \x20   properties:\n      name: \"thing-${{each.value}}\"\n\
         \x20     value: \"${{site[tostring(each.value % 10)].name}}/${{each.value}}\"\n"
    )
}

fn stack_yaml(n: usize, shape: Shape, target: &str) -> String {
    if let Shape::Fleet = shape {
        return fleet_yaml(n, target);
    }
    let mut doc =
        format!("stack: bench\ntargets:\n  - name: {target}\n    plugin: testbed\nresources:\n");
    for i in 0..n {
        let value = value(n, shape, i);
        doc.push_str(&format!(
            "  - label: r{i}\n    type: Testbed::Noop::Thing\n    target: {target}\n    properties: {{ name: r{i}, value: {value} }}\n"
        ));
    }
    doc
}

/// The same document as JSON, one resource a line, as a generator writes it.
fn stack_json(n: usize, shape: Shape, target: &str) -> String {
    if let Shape::Fleet = shape {
        let v: serde_json::Value = stack::yaml::read(&fleet_yaml(n, target), &Default::default())
            .expect("the fleet document");
        return serde_json::to_string_pretty(&v).unwrap();
    }
    let mut doc = format!(
        "{{\"stack\": \"bench\", \"targets\": [{{\"name\": \"{target}\", \"plugin\": \"testbed\"}}], \"resources\": [\n"
    );
    for i in 0..n {
        let value = value(n, shape, i);
        let comma = if i + 1 < n { "," } else { "" };
        doc.push_str(&format!(
            "  {{\"label\": \"r{i}\", \"type\": \"Testbed::Noop::Thing\", \"target\": \"{target}\", \"properties\": {{\"name\": \"r{i}\", \"value\": {value}}}}}{comma}\n"
        ));
    }
    doc.push_str("]}\n");
    doc
}

/// Resource `i`'s `value`: its number, or in the layered shape a
/// reference to a resource of the layer below.
fn value(n: usize, shape: Shape, i: usize) -> String {
    let per_layer = n.div_ceil(10);
    match shape {
        Shape::Layered if i >= per_layer => format!("\"${{r{}.name}}\"", i - per_layer),
        _ => i.to_string(),
    }
}

struct Run {
    plan: Duration,
    apply: Duration,
    noop_plan: Duration,
    /// The no-change plan of the same document written as JSON.
    noop_plan_json: Duration,
    /// Peak resident memory during the plan and apply, in MiB, where Linux
    /// reports it.
    peak_mib: Option<f64>,
    /// The same during the no-change plan (reset after the apply).
    noop_peak_mib: Option<f64>,
    /// The same during the JSON no-change plan (which runs first, so that
    /// what the YAML one frees does not count in its peak).
    noop_json_peak_mib: Option<f64>,
}

/// Resets this process's peak resident memory to its current one.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// This process's peak resident memory since the last reset, in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn mib(m: Option<f64>) -> String {
    m.map_or("—".to_owned(), |m| format!("{m:.0} MiB"))
}

/// Where a run keeps its state.
#[derive(Clone, Copy)]
enum Backend<'a> {
    Sqlite,
    /// A server: a fresh database on it per run.
    Postgres(&'a str),
}

/// A fresh database on the server `url` names; its URL.
async fn fresh_database(url: &str) -> String {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = format!(
        "orrery_bench_{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let admin = url.to_owned();
    let create = name.clone();
    // The sync client runs a runtime of its own: not on this one's thread.
    tokio::task::spawn_blocking(move || {
        let (config, tls) = state::pg_connect_config(&admin).unwrap();
        let mut client = postgres::Config::from(config).connect(tls).unwrap();
        client
            .batch_execute(&format!("CREATE DATABASE \"{create}\""))
            .unwrap();
    })
    .await
    .unwrap();
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let server = base.rsplit_once('/').map_or(base, |(s, _)| s);
    if query.is_empty() {
        format!("{server}/{name}")
    } else {
        format!("{server}/{name}?{query}")
    }
}

async fn run(
    transport: Arc<dyn Transport>,
    catalog: &Catalog,
    n: usize,
    shape: Shape,
    target: &str,
    backend: Backend<'_>,
) -> Run {
    reset_peak_rss();
    let dir = tempfile::tempdir().unwrap();
    let store = match backend {
        Backend::Sqlite => state::open_dir(dir.path()).unwrap(),
        Backend::Postgres(server) => state::open(&fresh_database(server).await).unwrap(),
    };
    let hasher = SecretHasher::new(store.secret_key().unwrap());
    let yaml = stack_yaml(n, shape, target);
    // A literal document of 100,000 resources has more nodes than the
    // default limit allows (1,000,000; fleets that size are written with
    // `for_each`), so the bench raises it for its literal documents.
    let limits = stack::Limits {
        max_nodes: (n as u64 * 16).max(stack::Limits::default().max_nodes),
        ..stack::Limits::default()
    };
    let plan_once = |stored: &[orrery_primary::state::StoredResource]| {
        let s = stack::parse_with_limits("bench.yaml", &yaml, "/tmp", &limits).unwrap();
        let g = stack::validate(&s, catalog).unwrap();
        let p = plan::plan(&s, &g, catalog, stored, Mode::Reconcile, &hasher);
        (s, g, p)
    };
    let t = Instant::now();
    let (s, g, p) = plan_once(&[]);
    let plan_time = t.elapsed();
    let options = Options {
        max_concurrency: 256,
        ..Options::default()
    };
    let executor = Executor::new(
        transport,
        store.clone(),
        catalog.clone(),
        hasher.clone(),
        options,
        orrery_primary::scheduler::RateRegistry::local(),
    );
    let t = Instant::now();
    let report = executor
        .run("bench", "apply", &s.name, Some((&s, &g)), &p, &[])
        .await
        .unwrap();
    let apply = t.elapsed();
    assert!(report.ok() && report.succeeded == n, "{report:?}");
    let apply_peak = peak_rss_mib();
    // A no-change plan is a command of its own (a fresh `orrery plan`):
    // it does not hold the apply's document, plan and executor.
    drop((executor, s, g, p, report));
    // The same document as JSON.
    let json = stack_json(n, shape, target);
    let noop = |text: &str, form: &str| {
        reset_peak_rss();
        let t = Instant::now();
        let stored = store.resources(Some("bench")).unwrap();
        let read = t.elapsed();
        let s = stack::parse_with_limits("bench.yaml", text, "/tmp", &limits).unwrap();
        let parsed = t.elapsed();
        let g = stack::validate(&s, catalog).unwrap();
        let validated = t.elapsed();
        let again = plan::plan(&s, &g, catalog, &stored, Mode::Reconcile, &hasher);
        let total = t.elapsed();
        // Where a no-change plan's time goes, beside the table.
        let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
        eprintln!(
            "no-change plan of {n} ({form}): store read {}, parse {}, validate {}, plan {}",
            ms(read),
            ms(parsed - read),
            ms(validated - parsed),
            ms(total - validated),
        );
        assert!(!again.has_changes());
        (total, peak_rss_mib())
    };
    let (noop_plan_json, noop_json_peak_mib) = noop(&json, "JSON");
    drop(json);
    let (noop_plan, noop_peak_mib) = noop(&yaml, "YAML");
    Run {
        plan: plan_time,
        apply,
        noop_plan,
        noop_plan_json,
        peak_mib: apply_peak,
        noop_peak_mib,
        noop_json_peak_mib,
    }
}

fn terraform(n: usize, shape: Shape) -> Option<(Duration, Duration)> {
    let which = std::process::Command::new("terraform")
        .arg("version")
        .output()
        .ok()?;
    if !which.status.success() {
        return None;
    }
    let dir = tempfile::tempdir().ok()?;
    let per_layer = n.div_ceil(10);
    let mut tf = String::new();
    for i in 0..n {
        let input = match shape {
            Shape::Layered if i >= per_layer => format!("terraform_data.r{}.id", i - per_layer),
            _ => format!("\"{i}\""),
        };
        tf.push_str(&format!(
            "resource \"terraform_data\" \"r{i}\" {{\n  input = {input}\n}}\n"
        ));
    }
    std::fs::write(dir.path().join("main.tf"), tf).ok()?;
    let tf_cmd = |args: &[&str], dir: &Path| {
        std::process::Command::new("terraform")
            .args(args)
            .current_dir(dir)
            .env("TF_IN_AUTOMATION", "1")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if !tf_cmd(&["init", "-input=false"], dir.path()) {
        return None;
    }
    let t = Instant::now();
    if !tf_cmd(&["apply", "-auto-approve", "-input=false"], dir.path()) {
        return None;
    }
    let apply = t.elapsed();
    let t = Instant::now();
    tf_cmd(&["plan", "-input=false"], dir.path());
    Some((apply, t.elapsed()))
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var("ORRERY_BENCH_QUICK").is_ok_and(|v| v == "1")
        || !std::env::args().any(|a| a == "--bench");
    let chosen: Option<Vec<usize>> = std::env::var("ORRERY_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    let sizes: &[usize] = match (&chosen, quick) {
        (Some(sizes), _) => sizes,
        (None, true) => &[100],
        (None, false) => &[1_000, 10_000],
    };
    let testbed = common::binary("orrery-plugin-testbed");

    let host = PluginHost::start(PluginSpec::new(&testbed)).await.unwrap();
    let mut catalog = Catalog::new();
    catalog.insert(host.announcement().clone());
    let local: Arc<dyn Transport> = Arc::new(LocalBus::new([host.clone()]));

    let server = common::NatsServer::start().await;
    let mut stops = Vec::new();
    for id in ["bench-a", "bench-b"] {
        let h = PluginHost::start(PluginSpec::new(&testbed)).await.unwrap();
        let client = server.client().await;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let config = RelayConfig {
            satellite_id: id.into(),
            ..RelayConfig::default()
        };
        tokio::spawn(async move {
            let _ = relay::serve(client, vec![h], config, async {
                let _ = rx.await;
            })
            .await;
        });
        stops.push(tx);
    }
    let nats: Arc<dyn Transport> = Arc::new(NatsBus::new(server.client().await));
    // Wait until the satellites answer.
    let probe = orrery_schema::Request::Read(orrery_schema::ReadRequest {
        resource_type: "Testbed::Noop::Thing".into(),
        target: orrery_schema::Target {
            name: "lab".into(),
            ..Default::default()
        },
        ..Default::default()
    });
    for _ in 0..500 {
        if nats
            .send("testbed", &probe, Duration::from_secs(2))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let database = std::env::var("ORRERY_BENCH_DATABASE_URL")
        .or_else(|_| std::env::var("ORRERY_TEST_DATABASE_URL"))
        .ok()
        .filter(|u| !u.trim().is_empty());
    if database.is_none() {
        eprintln!("no PostgreSQL rows: set ORRERY_BENCH_DATABASE_URL, or run through scripts/with-postgres.sh");
    }

    // Which rows run: every one unless the environment names some.
    let only = |var: &str, name: &str| {
        std::env::var(var).map_or(true, |v| {
            v.split(',')
                .any(|w| name.to_lowercase().starts_with(&w.trim().to_lowercase()))
        })
    };
    println!("| shape | resources | path | plan | apply | resources/s | no-change plan: YAML / JSON | peak RSS: apply / no-change plan JSON / YAML | vs Terraform (resources/s) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        for shape in [Shape::Wide, Shape::Layered, Shape::Fleet] {
            if !only("ORRERY_BENCH_SHAPES", shape.name()) {
                continue;
            }
            let tf = if quick || n > 1_000 {
                None
            } else {
                terraform(n, shape)
            };
            for (k, (path, transport)) in [("embedded", &local), ("NATS, 2 satellites", &nats)]
                .into_iter()
                .enumerate()
            {
                if !only("ORRERY_BENCH_PATHS", path) {
                    continue;
                }
                // A fresh target per run: the testbed keeps its state in memory.
                let target = format!("t{n}-{}-{k}", shape.name().replace('-', ""));
                let r = run(
                    transport.clone(),
                    &catalog,
                    n,
                    shape,
                    &target,
                    Backend::Sqlite,
                )
                .await;
                let vs = tf.map_or("—".to_owned(), |(apply, _)| {
                    format!("{:.0}×", rate(n, r.apply) / rate(n, apply))
                });
                println!(
                    "| {} | {n} | {path} | {:.0} ms | {:.2} s | {:.0} | {:.0} / {:.0} ms | {} / {} / {} | {vs} |",
                    shape.name(),
                    r.plan.as_secs_f64() * 1e3,
                    r.apply.as_secs_f64(),
                    rate(n, r.apply),
                    r.noop_plan.as_secs_f64() * 1e3,
                    r.noop_plan_json.as_secs_f64() * 1e3,
                    mib(r.peak_mib),
                    mib(r.noop_json_peak_mib),
                    mib(r.noop_peak_mib),
                );
                // The same through NATS with the state in PostgreSQL.
                if let (1, Some(url)) = (k, database.as_deref()) {
                    let target = format!("{target}-pg");
                    let pg = run(
                        transport.clone(),
                        &catalog,
                        n,
                        shape,
                        &target,
                        Backend::Postgres(url),
                    )
                    .await;
                    println!(
                        "| {} | {n} | {path}, PostgreSQL | {:.0} ms | {:.2} s | {:.0} | {:.0} / {:.0} ms | {} / {} / {} | PG/SQLite {:.2} |",
                        shape.name(),
                        pg.plan.as_secs_f64() * 1e3,
                        pg.apply.as_secs_f64(),
                        rate(n, pg.apply),
                        pg.noop_plan.as_secs_f64() * 1e3,
                        pg.noop_plan_json.as_secs_f64() * 1e3,
                        mib(pg.peak_mib),
                        mib(pg.noop_json_peak_mib),
                        mib(pg.noop_peak_mib),
                        rate(n, pg.apply) / rate(n, r.apply),
                    );
                }
            }
            if let Some((apply, plan)) = tf {
                println!(
                    "| {} | {n} | terraform apply (terraform_data) | — | {:.2} s | {:.0} | {:.0} ms | — | 1× |",
                    shape.name(),
                    apply.as_secs_f64(),
                    rate(n, apply),
                    plan.as_secs_f64() * 1e3
                );
            }
        }
    }
    for stop in stops {
        let _ = stop.send(());
    }
}
