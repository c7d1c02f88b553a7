//! The round-trip cost of tracing: a no-op operation caller → NATS →
//! satellite relay → plugin process → back, with each telemetry setting.
//!
//! `cargo bench -p orrery-satellite --bench tracing` (needs a nats-server,
//! see scripts/ensure-nats.sh).
//!
//! A tracing subscriber is set once per process, so every setting runs in a
//! fresh worker process (this program, re-executed): the worker is the
//! caller and the relay, and supervises the plugin process, which inherits
//! the setting through the standard `OTEL_*` variables. Settings:
//!
//! - `no subscriber`: the worker installs no telemetry at all (the floor);
//! - `export off`: Orrery's default without an endpoint: spans get ids and
//!   propagate, nothing is recorded or exported;
//! - `sampled 1%` and `sampled 100%`: OTLP/HTTP export to a sink in this
//!   process, at that sampling ratio.
//!
//! Besides latency and throughput, each worker reports the CPU time per
//! operation with 64 in flight of every process an operation runs through
//! (itself, its plugin, the NATS server; Linux `/proc`), which a
//! neighbour's load on a shared machine moves far less than throughput.
//!
//! Settings alternate in rounds, the order reversed every other round, so
//! they share the machine's load; figures pool the rounds. Ratios are
//! against `export off`. `export off` and `sampled 1%` always run side by
//! side, each first in half the rounds, and the 1 % overhead is also given
//! per round and as the median of those: on a shared machine a neighbour's
//! load moves the pooled figures by more than the 5 % measured, while two
//! runs a few seconds apart see the same load.
//!
//! Then, side by side: in each of 8 rounds an `export off` worker and a
//! `sampled 1%` worker run at once, started and stopped together by this
//! process over the same 5 s, and their CPU per operation (worker and
//! plugin; the NATS server is shared) is compared. Whatever the machine
//! does to one falls on the other in the same moment, which rounds one
//! after the other cannot promise.
//!
//! Quick mode (`-- --quick`, `ORRERY_BENCH_QUICK=1`, or no `--bench`
//! argument) is a smoke test with tiny counts.

use orrery_testing::nats as common;
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use orrery_plugin_sdk::telemetry::{self, TelemetryConfig};
use orrery_satellite::bus::NatsBus;
use orrery_satellite::plugin_host::{PluginHost, PluginSpec};
use orrery_satellite::relay::{self, RelayConfig};
use support::{
    children_named, cpu_time, plugin_binary, populate, quick, request, Requests, THINGS,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tracing::Instrument;

const MODE_ENV: &str = "ORRERY_TRACING_BENCH_MODE";
/// Set for a worker that runs side by side with another (`paired`).
const WINDOW_ENV: &str = "BENCH_WINDOW";

/// (name, mode, sampling ratio when exporting).
const MODES: [(&str, &str, &str); 4] = [
    ("no subscriber", "none", ""),
    ("export off", "off", ""),
    ("sampled 1%", "export", "0.01"),
    ("sampled 100%", "export", "1"),
];

fn main() {
    match std::env::var(MODE_ENV) {
        Ok(mode) => worker(&mode),
        Err(_) => parent(),
    }
}

/// One setting, measured in this process; prints one JSON line.
fn worker(mode: &str) {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let (n_seq, n_par): (usize, usize) = (
        var("BENCH_N_SEQ").parse().unwrap(),
        var("BENCH_N_PAR").parse().unwrap(),
    );
    let telemetry = match mode {
        "none" => None,
        _ => {
            // Logs as a deployed satellite writes them (JSON lines at
            // `info`, deploy/ and helm/): nothing per request at that
            // level, but spans are formatted for the lines that could be.
            let config = TelemetryConfig::from_env("orrery-bench")
                .unwrap()
                .with_overrides(None, None, true);
            Some(telemetry::init(&config).unwrap())
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let line = runtime.block_on(async move {
        let client = async_nats::connect(var("BENCH_NATS_URL")).await.unwrap();
        let host = PluginHost::start(PluginSpec::new(var("BENCH_PLUGIN")))
            .await
            .unwrap();
        // The processes whose CPU an operation costs: this one (caller,
        // relay, exporter threads), its plugin, the NATS server.
        let pids = [
            Some(std::process::id()),
            host.status().pid,
            std::env::var("BENCH_NATS_PID")
                .ok()
                .and_then(|pid| pid.parse().ok()),
        ];
        let cpu_of = || pids.map(|pid| cpu_time(pid?));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let relay_client = client.clone();
        let relay = tokio::spawn(async move {
            let config = RelayConfig {
                satellite_id: "bench".into(),
                ..RelayConfig::default()
            };
            let _ = relay::serve(relay_client, vec![host], config, async {
                let _ = stopped.await;
            })
            .await;
        });
        let bus = NatsBus::new(client);
        // Each call is a root span, as the primary's attempt span is.
        let requests = Requests::new(THINGS);
        let call = |_: usize| {
            let bus = bus.clone();
            let request = requests.next();
            async move {
                bus.send("testbed", request, Duration::from_secs(30))
                    .instrument(orrery_plugin_sdk::entry_span!(
                        telemetry::sample_root(),
                        "bench.request",
                    ))
                    .await
                    .unwrap();
            }
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while bus
            .send("testbed", &request(0), Duration::from_secs(1))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "the relay never served");
        }
        populate(&bus, &requests, 1).await;
        for i in 0..100 {
            call(i).await;
        }
        if std::env::var_os(WINDOW_ENV).is_some() {
            // Side by side with another setting's worker, measured over the
            // same stretch of time: the parent says when it starts and ends.
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            println!("ready");
            let _ = lines.next_line().await;
            let before = cpu_of();
            let mut ops = 0u64;
            futures::stream::iter(0..)
                .map(call)
                .buffer_unordered(64)
                .take_until(async {
                    let _ = lines.next_line().await;
                })
                .for_each(|()| {
                    ops += 1;
                    async {}
                })
                .await;
            // The worker and its plugin; the NATS server is shared.
            let cpu: Option<Duration> = cpu_of()
                .iter()
                .zip(before)
                .take(2)
                .map(|(a, b)| Some((*a)? - b?))
                .sum();
            let _ = stop.send(());
            let _ = relay.await;
            return serde_json::json!({
                "ops": ops,
                "cpu_us": cpu.map(|c| c.as_secs_f64() * 1e6 / ops.max(1) as f64),
            });
        }
        let mut latencies = Vec::with_capacity(n_seq);
        for i in 0..n_seq {
            let t = Instant::now();
            call(i).await;
            latencies.push(t.elapsed());
        }
        let before = cpu_of();
        let start = Instant::now();
        futures::stream::iter(0..n_par)
            .map(call)
            .buffer_unordered(64)
            .for_each(|()| async {})
            .await;
        let rate_64 = n_par as f64 / start.elapsed().as_secs_f64();
        let per_op =
            |after: Duration, before: Duration| (after - before).as_secs_f64() * 1e6 / n_par as f64;
        let cpu_each: Vec<Option<f64>> = cpu_of()
            .iter()
            .zip(before)
            .map(|(a, b)| Some(per_op((*a)?, b?)))
            .collect();
        let cpu_us: Option<f64> = cpu_each.iter().copied().sum();
        let _ = stop.send(());
        let _ = relay.await;
        latencies.sort();
        serde_json::json!({
            "p50_us": latencies[latencies.len() / 2].as_secs_f64() * 1e6,
            "p99_us": latencies[latencies.len() * 99 / 100].as_secs_f64() * 1e6,
            "rate_64": rate_64,
            "cpu_us": cpu_us,
            // Worker, plugin, nats-server.
            "cpu_us_each": cpu_each,
        })
    });
    drop(runtime);
    // Flushes the spans still queued: part of the cost of exporting.
    drop(telemetry);
    println!("{line}");
}

#[derive(Default, Clone)]
struct Pooled {
    p50: Vec<f64>,
    p99: Vec<f64>,
    rate: Vec<f64>,
    /// CPU time per operation with 64 in flight (all processes), µs.
    cpu: Vec<f64>,
    exports: u64,
    bytes: u64,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n.is_multiple_of(2) {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    } else {
        v[n / 2]
    }
}

#[tokio::main(flavor = "current_thread")]
async fn parent() {
    let quick = quick();
    let (n_seq, n_par, rounds) = if quick {
        (100, 300, 1)
    } else {
        (3_000, 200_000, 6)
    };
    let plugin = plugin_binary(quick);
    let server = common::NatsServer::start().await;
    let nats_pid = children_named("nats-server")
        .first()
        .map_or_else(String::new, u32::to_string);

    // The OTLP sink: accepts every export and counts it.
    let exports = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let (e, b) = (exports.clone(), bytes.clone());
    let sink = axum::Router::new().route(
        "/v1/{signal}",
        axum::routing::post(move |body: axum::body::Bytes| {
            e.fetch_add(1, Ordering::Relaxed);
            b.fetch_add(body.len() as u64, Ordering::Relaxed);
            async { axum::http::StatusCode::OK }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, sink).await.unwrap() });

    // A worker process of one setting.
    let command = |mode: &str, ratio: &str| {
        let mut worker = tokio::process::Command::new(std::env::current_exe().unwrap());
        worker
            .env(MODE_ENV, mode)
            .env("BENCH_N_SEQ", n_seq.to_string())
            .env("BENCH_N_PAR", n_par.to_string())
            .env("BENCH_NATS_URL", &server.url)
            .env("BENCH_PLUGIN", &plugin)
            .env("BENCH_NATS_PID", &nats_pid)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env("RUST_LOG", "info");
        if mode == "export" {
            worker
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
                .env("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
                .env("OTEL_TRACES_SAMPLER_ARG", ratio);
        }
        worker
    };

    let mut pooled = vec![Pooled::default(); MODES.len()];
    for round in 0..rounds {
        for k in 0..MODES.len() {
            // ABBA: reversed every other round, so a drift in the machine's
            // load falls on every setting alike.
            let m = if round % 2 == 0 {
                k
            } else {
                MODES.len() - 1 - k
            };
            let (_, mode, ratio) = MODES[m];
            let mut worker = command(mode, ratio);
            let (e0, b0) = (
                exports.load(Ordering::Relaxed),
                bytes.load(Ordering::Relaxed),
            );
            let out = worker.output().await.unwrap();
            assert!(
                out.status.success(),
                "worker `{mode}` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let line = String::from_utf8_lossy(&out.stdout);
            let v: serde_json::Value = serde_json::from_str(line.trim().lines().last().unwrap())
                .unwrap_or_else(|e| panic!("worker output {line:?}: {e}"));
            let p = &mut pooled[m];
            p.p50.push(v["p50_us"].as_f64().unwrap());
            p.p99.push(v["p99_us"].as_f64().unwrap());
            p.rate.push(v["rate_64"].as_f64().unwrap());
            p.cpu.push(v["cpu_us"].as_f64().unwrap_or(f64::NAN));
            // Plugin processes may still be exporting as they exit; what
            // arrived by now is a lower bound, enough to show export ran.
            p.exports += exports.load(Ordering::Relaxed) - e0;
            p.bytes += bytes.load(Ordering::Relaxed) - b0;
        }
    }

    if quick {
        println!("quick mode: a smoke test, the figures are meaningless\n");
    }
    println!(
        "no-op operation round trip with tracing: {n_seq} sequential calls (median p50 of {rounds} rounds), \
         {n_par} calls with 64 in flight (mean of {rounds} rounds); one worker process per setting and round"
    );
    println!("plugin binary: {}\n", plugin.display());
    println!("| setting | p50 | p99 | ops/s @64 | CPU/op @64 | p50 vs export off | ops/s @64 vs export off | CPU/op vs export off | OTLP requests | OTLP bytes |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let base = &pooled[1];
    let (base_p50, base_rate, base_cpu) = (median(&base.p50), mean(&base.rate), mean(&base.cpu));
    for (i, (name, _, _)) in MODES.iter().enumerate() {
        let p = &pooled[i];
        println!(
            "| {name} | {:.0} µs | {:.0} µs | {:.0} | {:.1} µs | {:.3}x | {:.1}% | {:.3}x | {} | {} |",
            median(&p.p50),
            median(&p.p99),
            mean(&p.rate),
            mean(&p.cpu),
            median(&p.p50) / base_p50,
            100.0 * mean(&p.rate) / base_rate,
            mean(&p.cpu) / base_cpu,
            p.exports,
            p.bytes
        );
    }
    let one = &pooled[2];
    println!(
        "\noverhead at 1% sampling, pooled: p50 {:+.1}%, throughput {:+.1}%, CPU per operation {:+.1}% (bound: at most 10%)",
        100.0 * (median(&one.p50) / base_p50 - 1.0),
        100.0 * (mean(&one.rate) / base_rate - 1.0),
        100.0 * (mean(&one.cpu) / base_cpu - 1.0)
    );
    // The two settings ran side by side in each round.
    let per_round = |of: fn(&Pooled) -> &Vec<f64>| -> Vec<f64> {
        of(one)
            .iter()
            .zip(of(base))
            .map(|(one, off)| 100.0 * (one / off - 1.0))
            .collect()
    };
    let (p50s, rates, cpus) = (
        per_round(|p| &p.p50),
        per_round(|p| &p.rate),
        per_round(|p| &p.cpu),
    );
    let show = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:+.1}%"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "overhead at 1% sampling, per round: throughput {} (median {:+.1}%); CPU per operation {} (median {:+.1}%); p50 {} (median {:+.1}%)",
        show(&rates),
        median(&rates),
        show(&cpus),
        median(&cpus),
        show(&p50s),
        median(&p50s)
    );

    // Side by side: rounds of the two settings one after the other still
    // see different moments of a shared machine (a round's export-off
    // baseline moves by up to 15 % from the next one's). Here an export-off
    // worker and a 1 % worker run at once, started and stopped together,
    // so whatever the machine does falls on both alike.
    let (window, paired_rounds) = if quick {
        (Duration::from_millis(300), 1)
    } else {
        (Duration::from_secs(5), 8)
    };
    let mut overheads = Vec::new();
    let (mut cpu_off, mut cpu_one) = (Vec::new(), Vec::new());
    for round in 0..paired_rounds {
        let mut pair = [command("off", ""), command("export", "0.01")].map(|mut c| {
            c.env(WINDOW_ENV, "1")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap()
        });
        let mut outs: Vec<_> = pair
            .iter_mut()
            .map(|w| tokio::io::BufReader::new(w.stdout.take().unwrap()).lines())
            .collect();
        for out in &mut outs {
            let ready = tokio::time::timeout(Duration::from_secs(120), out.next_line()).await;
            assert!(
                matches!(ready, Ok(Ok(Some(ref l))) if l == "ready"),
                "a paired worker did not get ready: {ready:?}"
            );
        }
        // Who is told first alternates.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for say in ["go", "stop"] {
            if say == "stop" {
                tokio::time::sleep(window).await;
            }
            for i in order {
                let stdin = pair[i].stdin.as_mut().unwrap();
                stdin
                    .write_all(format!("{say}\n").as_bytes())
                    .await
                    .unwrap();
                stdin.flush().await.unwrap();
            }
        }
        let mut cpu = [0.0; 2];
        for (i, out) in outs.iter_mut().enumerate() {
            let mut last = String::new();
            while let Some(line) = out.next_line().await.unwrap() {
                last = line;
            }
            let v: serde_json::Value = serde_json::from_str(&last)
                .unwrap_or_else(|e| panic!("paired worker output {last:?}: {e}"));
            cpu[i] = v["cpu_us"].as_f64().unwrap_or(f64::NAN);
        }
        for worker in pair {
            let out = worker.wait_with_output().await.unwrap();
            assert!(
                out.status.success(),
                "a paired worker failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        cpu_off.push(cpu[0]);
        cpu_one.push(cpu[1]);
        overheads.push(100.0 * (cpu[1] / cpu[0] - 1.0));
    }
    println!(
        "\nside by side ({paired_rounds} rounds, an export-off and a 1% worker at once over the same {window:?}): \
         CPU per operation (worker + plugin) {:.1} µs and {:.1} µs; overhead at 1% pooled {:+.1}%, per round {} (median {:+.1}%)",
        mean(&cpu_off),
        mean(&cpu_one),
        100.0 * (mean(&cpu_one) / mean(&cpu_off) - 1.0),
        show(&overheads),
        median(&overheads)
    );
}
