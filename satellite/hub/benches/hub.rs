//! Publishing and installing a 20 MiB plugin artifact through the hub on
//! JetStream, beside the raw JetStream object store moving the same bytes
//! (put / get, no hashing, no signature, no index) in the same run.
//!
//! `cargo bench -p orrery-hub --bench hub` (needs a nats-server, see
//! scripts/ensure-nats.sh, and the workspace binaries built by
//! `cargo build --workspace --bins`: the artifact is the debug
//! `orrery-plugin-local`, stripped when `strip` exists, padded to 20 MiB).
//!
//! What is timed:
//!
//! - **publish**: `Hub::publish` of a package whose bytes the hub has not
//!   seen: check the signature, hash the files, upload the artifact and the
//!   schema, create the index entry.
//! - **install (cold cache)**: `Installer::install`: list versions, resolve,
//!   verify the signature, download while hashing, check the digest,
//!   chmod, rename into the cache.
//! - **install (warm cache)**: the same with the binary cached: re-hash it.
//! - **2 concurrent installs**: two installers (own connections, own
//!   caches) at once; the time until both are done.
//! - **object store put / get**: the baseline.
//!
//! Smoke test: append `-- --quick` or set `ORRERY_BENCH_QUICK=1` (one
//! iteration; figures meaningless). Run without cargo's `--bench` argument
//! (as `cargo test --benches` does), it also runs in quick mode.

use orrery_testing::nats as common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{binary, NatsServer};
use orrery_hub::package::{self, Package, PackageOptions};
use orrery_hub::{Hub, Installer, PublisherKey, Requirement, TrustedKeys};
use tokio::io::AsyncReadExt;

const SIZE: u64 = 20 * 1024 * 1024;

fn quick() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    args.iter().any(|a| a == "--quick")
        || std::env::var("ORRERY_BENCH_QUICK").is_ok_and(|v| v == "1")
        || !args.iter().any(|a| a == "--bench")
}

/// A 20 MiB runnable plugin binary whose last bytes carry `n`, so every
/// iteration uploads bytes the hub has not seen.
fn artifact(dir: &Path, n: usize) -> std::path::PathBuf {
    let dest = dir.join(format!("orrery-plugin-local-{n}"));
    std::fs::copy(binary("orrery-plugin-local"), &dest).expect("copy the plugin");
    let _ = Command::new("strip")
        .arg(&dest)
        .stderr(Stdio::null())
        .status();
    let len = std::fs::metadata(&dest).expect("stat").len();
    assert!(
        len + 16 <= SIZE,
        "the plugin binary is {len} bytes, more than 20 MiB (is `strip` installed?)"
    );
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&dest)
        .expect("open");
    file.set_len(SIZE - 16).expect("pad");
    drop(file);
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&dest)
        .expect("open");
    file.write_all(format!("{n:016}").as_bytes()).expect("mark");
    dest
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn mib_s(d: Duration) -> f64 {
    (SIZE as f64 / (1024.0 * 1024.0)) / d.as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = quick();
    let iterations = if quick { 1 } else { 5 };
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = PublisherKey::generate().expect("key");
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);

    // Packages are built before timing (building runs the plugin once).
    let mut packages: Vec<Package> = Vec::new();
    for n in 0..iterations {
        let bin = artifact(dir.path(), n);
        let mut options = PackageOptions::new(&bin);
        options.version = Some(format!("1.{n}.0"));
        let out = dir.path().join(format!("pkg-{n}"));
        packages.push(
            package::build(&options, Some(&key), &out)
                .await
                .expect("package"),
        );
    }

    let hub = Hub::nats(server.client().await).await.expect("hub");
    let mut publish = Vec::new();
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    let mut pair = Vec::new();
    for (n, p) in packages.iter().enumerate() {
        let started = Instant::now();
        hub.publish(p).await.expect("publish");
        publish.push(started.elapsed());

        let requirement: Requirement = format!("local@=1.{n}.0").parse().expect("requirement");
        let installer = Installer::new(
            Hub::nats_existing(server.client().await)
                .await
                .expect("hub"),
            trusted.clone(),
            dir.path().join(format!("cache-{n}")),
        );
        let started = Instant::now();
        installer
            .install(&requirement, None)
            .await
            .expect("install");
        cold.push(started.elapsed());
        let started = Instant::now();
        installer
            .install(&requirement, None)
            .await
            .expect("install");
        warm.push(started.elapsed());

        let one = |m: usize| {
            let trusted = trusted.clone();
            let cache = dir.path().join(format!("cache-{n}-{m}"));
            let requirement = requirement.clone();
            let server = &server;
            async move {
                let hub = Hub::nats_existing(server.client().await)
                    .await
                    .expect("hub");
                Installer::new(hub, trusted, cache)
                    .install(&requirement, None)
                    .await
                    .expect("install")
            }
        };
        let started = Instant::now();
        let (a, b) = tokio::join!(one(1), one(2));
        pair.push(started.elapsed());
        assert_eq!(a.sha256, b.sha256);
    }

    // Baseline: the raw object store, same bytes, same server.
    let js = async_nats::jetstream::new(server.client().await);
    let store = js
        .create_object_store(async_nats::jetstream::object_store::Config {
            bucket: "bench-baseline".into(),
            ..Default::default()
        })
        .await
        .expect("bucket");
    let mut put = Vec::new();
    let mut get = Vec::new();
    for (n, p) in packages.iter().enumerate() {
        let path = p.files()[0].1.clone();
        let mut file = tokio::fs::File::open(&path).await.expect("open");
        let name = format!("raw-{n}");
        let meta = async_nats::jetstream::object_store::ObjectMetadata {
            name: name.clone(),
            chunk_size: Some(orrery_hub::store::CHUNK_BYTES),
            ..Default::default()
        };
        let started = Instant::now();
        store.put(meta, &mut file).await.expect("put");
        put.push(started.elapsed());
        let started = Instant::now();
        let mut object = store.get(&name).await.expect("get");
        let mut sink = Vec::with_capacity(SIZE as usize);
        object.read_to_end(&mut sink).await.expect("read");
        get.push(started.elapsed());
        assert_eq!(sink.len() as u64, SIZE);
    }

    let (publish, cold, warm, pair, put, get) = (
        median(publish),
        median(cold),
        median(warm),
        median(pair),
        median(put),
        median(get),
    );
    println!("## Hub: a 20 MiB artifact over JetStream (median of {iterations})\n");
    if quick {
        println!("(quick mode: one iteration, figures meaningless)\n");
    }
    println!("| operation | time (ms) | MiB/s | baseline | ratio |");
    println!("|---|---:|---:|---|---:|");
    println!(
        "| publish | {:.1} | {:.0} | object store put {:.1} ms | {:.2} |",
        ms(publish),
        mib_s(publish),
        ms(put),
        publish.as_secs_f64() / put.as_secs_f64()
    );
    println!(
        "| install, cold cache | {:.1} | {:.0} | object store get {:.1} ms | {:.2} |",
        ms(cold),
        mib_s(cold),
        ms(get),
        cold.as_secs_f64() / get.as_secs_f64()
    );
    println!(
        "| install, warm cache (re-hash) | {:.1} | {:.0} | object store get {:.1} ms | {:.2} |",
        ms(warm),
        mib_s(warm),
        ms(get),
        warm.as_secs_f64() / get.as_secs_f64()
    );
    println!(
        "| 2 concurrent installs | {:.1} | {:.0} (total) | 2 × object store get {:.1} ms | {:.2} |",
        ms(pair),
        2.0 * mib_s(pair),
        2.0 * ms(get),
        pair.as_secs_f64() / (2.0 * get.as_secs_f64())
    );
}
