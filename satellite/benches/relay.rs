//! Round trip of a no-op operation caller → NATS → satellite → plugin
//! process → back, beside raw NATS request/reply measured in the same run.
//! The operation is an update of one of [`THINGS`] testbed things, answered
//! at once with its properties (`support::Requests`).
//!
//! `cargo bench -p orrery-satellite --bench relay` (needs a nats-server, see
//! scripts/ensure-nats.sh).
//!
//! Raw NATS and Orrery are measured in alternating rounds (the order within
//! a round alternates too), so both see the same machine load; each figure
//! pools its path's rounds.
//!
//! Each responder runs on a thread of its own, in a current-thread runtime
//! with its own NATS connection: the relay as the `orrery-satellite` binary
//! runs it by default (`--worker-threads 0`), and raw NATS's echoing
//! responder and the floor's `cat` hop the same way, so that only the work
//! differs. The callers share a two-worker runtime. A second table gives the CPU time per operation
//! of each process (Linux `/proc`), with 64 in flight.
//!
//! The plugin process is release-built, like the relay in this bench: a full
//! run first runs `cargo build --release -p orrery-plugin-testbed` (into the
//! bench's own target directory; cargo has released its build lock by the
//! time a bench runs, and the build is a no-op when nothing changed). If that
//! build fails, an existing release binary is used, and failing that the
//! debug one, each with a warning on stderr; the table names the binary used.
//! `ORRERY_BENCH_PLUGIN=<path>` overrides the choice (e.g. to measure the
//! debug build).
//!
//! Smoke test: append `-- --quick`, or set `ORRERY_BENCH_QUICK=1`. Run
//! without cargo's `--bench` argument (as `cargo test --benches` does), the
//! program also runs in quick mode. Quick mode takes tiny counts and the
//! debug plugin built by `cargo build --workspace --bins`; its figures are
//! meaningless.
//!
//! Profile mode: `-- --ops N [--raw]` warms up, makes N sequential calls
//! (Orrery's, or raw NATS's with `--raw`) and exits, printing nothing else:
//! run under `valgrind --tool=callgrind` by `scripts/relay-profile.sh`, which
//! subtracts two such runs to get instructions per operation per process.
//! `--in-flight M` keeps M calls in flight instead of one (for `perf record`
//! under load).

use orrery_testing::nats as common;
#[path = "support/hop.rs"]
mod hop;
mod support;

use std::time::{Duration, Instant};

use common::NatsServer;
use futures::StreamExt;
use orrery_plugin_sdk::schema::OperationStatus;
use orrery_plugin_sdk::Answer;
use orrery_satellite::bus::NatsBus;
use orrery_satellite::plugin_host::{PluginHost, PluginSpec};
use orrery_satellite::relay::{self, RelayConfig};
use support::{
    children_named, cpu_time, plugin_binary, populate, quick, request, Requests, THINGS,
};

const PAYLOAD: usize = 256;

/// What one path (raw NATS, or Orrery with N satellites) measured, pooled
/// over its rounds.
struct Samples {
    latencies: Vec<Duration>,
    seq_time: Duration,
    par_calls: usize,
    par_time: Duration,
    /// CPU time in the runs with 64 in flight, per process group (see
    /// [`Procs`]); `None` where /proc cannot tell.
    par_cpu: [Option<Duration>; 3],
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            latencies: Vec::new(),
            seq_time: Duration::ZERO,
            par_calls: 0,
            par_time: Duration::ZERO,
            par_cpu: [Some(Duration::ZERO); 3],
        }
    }
}

impl Samples {
    async fn sequential<F, Fut>(&mut self, n: usize, call: &F)
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let start = Instant::now();
        for i in 0..n {
            let t = Instant::now();
            call(i).await;
            self.latencies.push(t.elapsed());
        }
        self.seq_time += start.elapsed();
    }

    async fn in_flight_64<F, Fut>(&mut self, n: usize, procs: &Procs, call: &F)
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let before = procs.cpu();
        let start = Instant::now();
        futures::stream::iter(0..n)
            .map(call)
            .buffer_unordered(64)
            .for_each(|()| async {})
            .await;
        self.par_time += start.elapsed();
        self.par_calls += n;
        let after = procs.cpu();
        for (i, total) in self.par_cpu.iter_mut().enumerate() {
            *total = match (*total, before[i], after[i]) {
                (Some(t), Some(b), Some(a)) => Some(t + a.saturating_sub(b)),
                _ => None,
            };
        }
    }

    fn figures(&mut self) -> Figures {
        self.latencies.sort();
        let lat = &self.latencies;
        let n = self.par_calls.max(1) as u32;
        Figures {
            p50: lat[lat.len() / 2],
            p99: lat[lat.len() * 99 / 100],
            seq_rate: lat.len() as f64 / self.seq_time.as_secs_f64(),
            rate_64: self.par_calls as f64 / self.par_time.as_secs_f64(),
            cpu_64: self.par_cpu.map(|c| c.map(|c| c / n)),
        }
    }
}

struct Figures {
    p50: Duration,
    p99: Duration,
    seq_rate: f64,
    rate_64: f64,
    /// CPU time per operation with 64 in flight, per process group.
    cpu_64: [Option<Duration>; 3],
}

/// The processes whose CPU time is counted: the bench process (the caller,
/// and the relay or the raw responder), the plugin processes, nats-server.
#[derive(Clone, Default)]
struct Procs {
    groups: [Vec<u32>; 3],
}

const GROUPS: [&str; 3] = ["bench process", "plugin (or `cat`)", "nats-server"];

impl Procs {
    fn cpu(&self) -> [Option<Duration>; 3] {
        self.groups.clone().map(|pids| {
            pids.iter()
                .map(|pid| cpu_time(*pid))
                .sum::<Option<Duration>>()
        })
    }
}

/// Measures `path` and the raw baseline in alternating rounds, so that both
/// see the same machine load; the order within a round alternates too.
async fn alternate<R, RF, O, OF>(
    rounds: usize,
    (n_seq, n_par): (usize, usize),
    procs: &Procs,
    (raw, raw_call): (&mut Samples, &R),
    (path, path_call): (&mut Samples, &O),
) where
    R: Fn(usize) -> RF,
    RF: std::future::Future<Output = ()>,
    O: Fn(usize) -> OF,
    OF: std::future::Future<Output = ()>,
{
    for round in 0..rounds {
        if round % 2 == 0 {
            raw.sequential(n_seq, raw_call).await;
            path.sequential(n_seq, path_call).await;
            raw.in_flight_64(n_par, procs, raw_call).await;
            path.in_flight_64(n_par, procs, path_call).await;
        } else {
            path.sequential(n_seq, path_call).await;
            raw.sequential(n_seq, raw_call).await;
            path.in_flight_64(n_par, procs, path_call).await;
            raw.in_flight_64(n_par, procs, raw_call).await;
        }
    }
}

async fn warm_up<F, Fut>(call: &F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for i in 0..50 {
        call(i).await;
    }
}

/// What runs on a thread of its own: stopped by sending on `stop`, over
/// once `thread` has ended.
struct OwnThread {
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl OwnThread {
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::task::spawn_blocking(move || self.thread.join()).await;
    }
}

/// Runs `serve` on a thread of its own, in a current-thread runtime, as
/// the `orrery-satellite` binary runs its relay (by default): what it
/// sends on its first argument comes back once it is up; it stops when
/// the second resolves.
async fn on_own_thread<T, F, Fut>(serve: F) -> (T, OwnThread)
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::oneshot::Sender<T>, tokio::sync::oneshot::Receiver<()>) -> Fut
        + Send
        + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (up_tx, up_rx) = tokio::sync::oneshot::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel();
    // Named, so that profiles tell it from the callers' threads.
    let thread = std::thread::Builder::new()
        .name("responder".into())
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(serve(up_tx, stop_rx));
        })
        .expect("a thread");
    let up = up_rx.await.expect("the thread came up");
    (up, OwnThread { stop, thread })
}

/// A satellite's relay for `spec`'s plugin, on a thread of its own; and
/// the plugin's pid.
async fn satellite(server: &NatsServer, spec: PluginSpec, id: &str) -> (OwnThread, u32) {
    let (url, id) = (server.url.clone(), id.to_owned());
    let (pid, relay) = on_own_thread(move |up, stop| async move {
        let host = PluginHost::start(spec).await.unwrap();
        let _ = up.send(host.status().pid.unwrap_or(0));
        let client = async_nats::connect(&url).await.unwrap();
        let config = RelayConfig {
            satellite_id: id,
            ..RelayConfig::default()
        };
        let _ = relay::serve(client, vec![host], config, async {
            let _ = stop.await;
        })
        .await;
    })
    .await;
    (relay, pid)
}

/// Raw NATS's responder, on a thread of its own like the relay: echoes
/// every request on `subject`.
async fn raw_responder(server: &NatsServer, subject: &'static str) -> OwnThread {
    let url = server.url.clone();
    let ((), responder) = on_own_thread(move |up, stop| async move {
        let responder = async_nats::connect(&url).await.unwrap();
        let mut sub = responder
            .queue_subscribe(subject, "q".into())
            .await
            .unwrap();
        responder.flush().await.unwrap();
        let _ = up.send(());
        let serve = async {
            while let Some(msg) = sub.next().await {
                if let Some(reply) = msg.reply {
                    let _ = responder.publish(reply, msg.payload).await;
                }
            }
        };
        tokio::select! {
            () = serve => {}
            _ = stop => {}
        }
    })
    .await;
    responder
}

async fn wait_served(bus: &NatsBus) {
    for _ in 0..500 {
        if bus
            .send("testbed", &request(0), Duration::from_secs(5))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("satellite never served");
}

fn row(name: &str, f: &Figures, base: Option<&Figures>) {
    let ratio = |x: f64, y: f64| format!("{:.2}x", x / y);
    let (r_p50, r_rate) = match base {
        Some(b) => (
            ratio(f.p50.as_secs_f64(), b.p50.as_secs_f64()),
            format!("{:.0}%", 100.0 * f.rate_64 / b.rate_64),
        ),
        None => ("1.00x".into(), "100%".into()),
    };
    println!(
        "| {name} | {:.0} µs | {:.0} µs | {:.0} | {:.0} | {r_p50} | {r_rate} |",
        f.p50.as_secs_f64() * 1e6,
        f.p99.as_secs_f64() * 1e6,
        f.seq_rate,
        f.rate_64
    );
}

fn cpu_row(name: &str, f: &Figures, base: Option<&Figures>) {
    let us =
        |d: Option<Duration>| d.map_or("?".into(), |d| format!("{:.1}", d.as_secs_f64() * 1e6));
    let total = |f: &Figures| f.cpu_64.iter().copied().sum::<Option<Duration>>();
    let ratio = match (total(f), base.map_or(total(f), total)) {
        (Some(t), Some(b)) if !b.is_zero() => format!("{:.2}x", t.as_secs_f64() / b.as_secs_f64()),
        _ => "?".into(),
    };
    println!(
        "| {name} | {} | {} | {} | {} | {ratio} |",
        us(f.cpu_64[0]),
        us(f.cpu_64[1]),
        us(f.cpu_64[2]),
        us(total(f))
    );
}

/// The row of [`hop`]'s path: what a process hop costs on its own.
const FLOOR: &str = "floor: raw + a hop through `cat`";

/// Rounds per phase; each round runs every path once.
const ROUNDS: usize = 5;

fn succeeded(answer: &Answer) -> bool {
    matches!(answer, Answer::Progress(p) if p.status == OperationStatus::Success)
}

/// `--in-flight N` of the profile mode: calls kept in flight (default 1).
fn in_flight_arg() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--in-flight")
        .map_or(1, |at| {
            let n = args.get(at + 1).and_then(|n| n.parse().ok());
            n.expect("--in-flight takes a number of calls")
        })
}

/// `--ops N` of the profile mode (see the module comment).
fn profile_ops() -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--ops")?;
    let n = args.get(at + 1).and_then(|n| n.parse().ok());
    Some(n.expect("--ops takes a number of operations"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if let Some(ops) = profile_ops() {
        return profile(ops, std::env::args().any(|a| a == "--raw")).await;
    }
    let quick = quick();
    let (n_seq, n_par) = if quick { (200, 500) } else { (5_000, 40_000) };
    let rounds = if quick { 1 } else { ROUNDS };
    let plugin = plugin_binary(quick);
    let server = NatsServer::start().await;
    let mut procs = Procs::default();
    procs.groups[0].push(std::process::id());
    procs.groups[2] = children_named("nats-server");

    // Baseline: raw request/reply with a responder that echoes 256 bytes.
    let _raw = raw_responder(&server, "bench.raw").await;
    let caller = server.client().await;
    caller.flush().await.unwrap();
    let payload: bytes::Bytes = vec![7u8; PAYLOAD].into();
    let raw_call = |_: usize| {
        let caller = caller.clone();
        let payload = payload.clone();
        async move {
            caller.request("bench.raw", payload).await.unwrap();
        }
    };

    // The floor: the same, through a child process that does nothing.
    let url = server.url.clone();
    let (cat, _hop) = on_own_thread(move |up, stop| async move {
        let client = async_nats::connect(&url).await.unwrap();
        let _ = up.send(hop::serve(client, "bench.hop").await);
        let _ = stop.await;
    })
    .await;
    procs.groups[1].push(cat);
    let hop_call = |_: usize| {
        let caller = caller.clone();
        let payload = payload.clone();
        async move {
            caller.request("bench.hop", payload).await.unwrap();
        }
    };

    let bus = NatsBus::new(server.client().await);
    let (relay_a, pid_a) = satellite(&server, PluginSpec::new(&plugin), "bench-a").await;
    procs.groups[1].push(pid_a);
    wait_served(&bus).await;
    let encoded = request(0).to_envelope().unwrap().encode().unwrap().len();
    let requests = Requests::new(THINGS);
    populate(&bus, &requests, 1).await;
    let failed = std::sync::atomic::AtomicUsize::new(0);
    let orrery_call = |_: usize| {
        let bus = bus.clone();
        let request = requests.next();
        let failed = &failed;
        async move {
            let answer = bus
                .send("testbed", request, Duration::from_secs(30))
                .await
                .unwrap();
            if !succeeded(&answer) {
                failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    };

    let mut raw = Samples::default();
    let mut floor = Samples::default();
    let mut one = Samples::default();
    let mut two = Samples::default();
    warm_up(&raw_call).await;
    warm_up(&hop_call).await;
    warm_up(&orrery_call).await;
    alternate(
        rounds,
        (n_seq / rounds, n_par / rounds),
        &procs,
        (&mut raw, &raw_call),
        (&mut floor, &hop_call),
    )
    .await;
    alternate(
        rounds,
        (n_seq / rounds, n_par / rounds),
        &procs,
        (&mut raw, &raw_call),
        (&mut one, &orrery_call),
    )
    .await;
    let (relay_b, pid_b) = satellite(&server, PluginSpec::new(&plugin), "bench-b").await;
    procs.groups[1].push(pid_b);
    // Let the second satellite's subscription reach the server.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Its plugin holds nothing yet, and the queue group picks a satellite
    // per message: each create sent 20 times leaves a thing missing from a
    // plugin with odds of 1 in a million.
    populate(&bus, &requests, 20).await;
    warm_up(&orrery_call).await;
    alternate(
        rounds,
        (n_seq / 5 / rounds, n_par / rounds),
        &procs,
        (&mut raw, &raw_call),
        (&mut two, &orrery_call),
    )
    .await;
    let (raw, floor, one, two) = (raw.figures(), floor.figures(), one.figures(), two.figures());

    if quick {
        println!("quick mode: a smoke test, the figures are meaningless\n");
    }
    println!(
        "no-op operation round trip, {n_seq} sequential calls, {n_par} calls with 64 in flight \
         (2 satellites: {} sequential); raw NATS measured alongside each, in {rounds} alternating rounds",
        n_seq / 5
    );
    println!("request envelope {encoded} bytes; raw NATS payload {PAYLOAD} bytes");
    println!("plugin binary: {}", plugin.display());
    println!(
        "orrery calls answered other than `Success`: {} (should be 0)\n",
        failed.load(std::sync::atomic::Ordering::Relaxed)
    );
    println!("| path | p50 | p99 | seq ops/s | ops/s @64 | p50 vs raw | ops/s @64 vs raw |");
    println!("|---|---|---|---|---|---|---|");
    row("raw NATS request/reply", &raw, None);
    row(FLOOR, &floor, Some(&raw));
    row("orrery, 1 satellite", &one, Some(&raw));
    row("orrery, 2 satellites", &two, Some(&raw));
    println!(
        "\nscale-out (2 vs 1 satellite, ops/s @64): {:.2}x",
        two.rate_64 / one.rate_64
    );
    println!("\nCPU time per operation with 64 in flight, µs (user + system, all threads):\n");
    println!(
        "| path | {} (caller + relay or responder) | {} | {} | total | total vs raw |",
        GROUPS[0], GROUPS[1], GROUPS[2]
    );
    println!("|---|---:|---:|---:|---:|---:|");
    cpu_row("raw NATS request/reply", &raw, None);
    cpu_row(FLOOR, &floor, Some(&raw));
    cpu_row("orrery, 1 satellite", &one, Some(&raw));
    cpu_row("orrery, 2 satellites", &two, Some(&raw));
    relay_a.stop().await;
    relay_b.stop().await;
}

/// What the profile mode measures: a warm-up, then `ops` calls of `call`,
/// `--in-flight` of them at a time.
async fn profiled<F, Fut>(ops: usize, call: &F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    warm_up(call).await;
    futures::stream::iter(0..ops)
        .map(call)
        .buffer_unordered(in_flight_arg())
        .for_each(|()| async {})
        .await;
}

/// The profile mode: `ops` calls after a warm-up, nothing else.
/// The plugin is `ORRERY_BENCH_PLUGIN` or the release build (never built
/// here: under valgrind, cargo would be profiled too).
async fn profile(ops: usize, raw: bool) {
    let server = NatsServer::start().await;
    if raw {
        let _responder = raw_responder(&server, "bench.raw").await;
        let caller = server.client().await;
        caller.flush().await.unwrap();
        let payload: bytes::Bytes = vec![7u8; PAYLOAD].into();
        let call = |_: usize| {
            let caller = caller.clone();
            let payload = payload.clone();
            async move {
                caller.request("bench.raw", payload).await.unwrap();
            }
        };
        return profiled(ops, &call).await;
    }
    let plugin = std::env::var_os("ORRERY_BENCH_PLUGIN").map_or_else(
        || {
            support::target_dir()
                .expect("the target directory")
                .join("release")
                .join(support::PLUGIN)
        },
        std::path::PathBuf::from,
    );
    // A generous handshake: the plugin may be starting under valgrind too.
    let spec = PluginSpec {
        handshake_timeout: Duration::from_secs(60),
        ping_interval: Duration::from_secs(60),
        ..PluginSpec::new(&plugin)
    };
    let (relay, _) = satellite(&server, spec, "profile").await;
    let bus = NatsBus::new(server.client().await);
    wait_served(&bus).await;
    let requests = Requests::new(THINGS);
    populate(&bus, &requests, 1).await;
    let call = |_: usize| {
        let bus = bus.clone();
        let request = requests.next();
        async move {
            bus.send("testbed", request, Duration::from_secs(60))
                .await
                .unwrap();
        }
    };
    profiled(ops, &call).await;
    // A plugin that exits by itself (its stdin closed) writes its profile;
    // one killed with the bench would not.
    relay.stop().await;
}
