//! Creating 500 key-value buckets: `orrery apply` of a stack of 500
//! `Jetstream::KvBucket`s (embedded mode, concurrency 64, the real plugin
//! process) against the same 500 buckets created with raw JetStream API
//! calls (async-nats `create_key_value`), 64 at a time and one at a time,
//! each on a fresh nats-server, in the same run.
//!
//! Needs the `orrery` binary of the same profile beside the plugin's:
//! `cargo build --release -p orrery-primary --bin orrery` first.
//! `ORRERY_BENCH_QUICK=1` (or running without `--bench`) creates 20.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use orrery_testing::nats::NatsServer;

const ROUNDS: usize = 3;

/// Where `orrery` and the plugin are: `ORRERY_BENCH_BIN_DIR`, else beside
/// this bench's own plugin build.
fn profile_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ORRERY_BENCH_BIN_DIR") {
        return PathBuf::from(dir);
    }
    PathBuf::from(env!("CARGO_BIN_EXE_orrery-plugin-jetstream"))
        .parent()
        .unwrap()
        .to_owned()
}

fn stack(url: &str, n: usize) -> String {
    let mut doc = format!(
        "stack: kv-bench\ntargets:\n  - name: nats\n    plugin: jetstream\n    config: {{ servers: [\"{url}\"] }}\nresources:\n"
    );
    for i in 0..n {
        doc.push_str(&format!(
            "  - label: b{i}\n    type: Jetstream::KvBucket\n    target: nats\n    properties: {{ bucket: bench-{i}, history: 1 }}\n"
        ));
    }
    doc
}

async fn raw(n: usize, in_flight: usize) -> Duration {
    let server = NatsServer::start().await;
    let js = jetstream::new(server.client().await);
    let started = Instant::now();
    let created: Vec<_> = futures::stream::iter(0..n)
        .map(|i| {
            let js = js.clone();
            async move {
                js.create_key_value(kv::Config {
                    bucket: format!("bench-{i}"),
                    history: 1,
                    ..Default::default()
                })
                .await
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    let took = started.elapsed();
    assert!(created.iter().all(Result::is_ok), "a raw create failed");
    took
}

/// Wall time of the whole `orrery apply` process, and the apply's own
/// figure ("Done in …s").
async fn orrery(n: usize) -> (Duration, String) {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stack.yaml");
    std::fs::write(&file, stack(&server.url, n)).unwrap();
    let orrery = profile_dir().join("orrery");
    assert!(
        orrery.is_file(),
        "{} missing: cargo build --release -p orrery-primary --bin orrery",
        orrery.display()
    );
    let started = Instant::now();
    let out = Command::new(orrery)
        .args([
            "apply",
            file.to_str().unwrap(),
            "--yes",
            "--concurrency",
            "64",
        ])
        .env("ORRERY_DATA_DIR", dir.path().join("state"))
        .env("ORRERY_PLUGIN_DIR", profile_dir())
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&format!("{n} succeeded")),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = stdout
        .lines()
        .find_map(|l| l.split("Done in ").nth(1))
        .and_then(|r| r.split(':').next())
        .unwrap_or("?")
        .to_owned();
    let js = jetstream::new(server.client().await);
    assert_eq!(js.stream_names().count().await, n, "every bucket exists");
    (took, done)
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var("ORRERY_BENCH_QUICK").is_ok_and(|v| v == "1")
        || !std::env::args().any(|a| a == "--bench");
    let n = if quick { 20 } else { 500 };
    println!("{n} KV buckets, file storage, a fresh nats-server per measurement\n");
    println!("| round | raw, 64 in flight | raw, 1 at a time | orrery apply (process) | apply's own figure | ratio (raw 64 / orrery) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    for round in 1..=ROUNDS {
        let parallel = raw(n, 64).await;
        let serial = raw(n, 1).await;
        let (apply, done) = orrery(n).await;
        let ratio = parallel.as_secs_f64() / apply.as_secs_f64();
        ratios.push(ratio);
        println!(
            "| {round} | {:.2} s ({:.0}/s) | {:.2} s ({:.0}/s) | {:.2} s ({:.0}/s) | {done} | {ratio:.2} |",
            parallel.as_secs_f64(),
            rate(n, parallel),
            serial.as_secs_f64(),
            rate(n, serial),
            apply.as_secs_f64(),
            rate(n, apply),
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "\nmedian ratio (raw time / orrery time): {:.2}",
        ratios[ratios.len() / 2]
    );
}
