//! Round trip of a no-op operation caller → NATS → satellite → plugin
//! process → back, beside raw NATS request/reply measured in the same run.
//!
//! `cargo bench -p orrery-satellite --bench relay` (needs the workspace's
//! binaries built and a nats-server, see scripts/ensure-nats.sh).
//! `ORRERY_BENCH_QUICK=1` runs tiny counts (a smoke test for CI).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{binary, NatsServer};
use futures::StreamExt;
use orrery_plugin_sdk::schema::{CreateRequest, PropertyMap, Request, Target, Value};
use orrery_satellite::bus::NatsBus;
use orrery_satellite::plugin_host::{PluginHost, PluginSpec};
use orrery_satellite::relay::{self, RelayConfig};

const PAYLOAD: usize = 256;

fn quick() -> bool {
    std::env::var("ORRERY_BENCH_QUICK").is_ok_and(|v| v == "1")
}

fn request(i: usize) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("bench-{i}"),
        resource_type: "Testbed::Noop::Thing".into(),
        label: "bench".into(),
        target: Target {
            name: "bench".into(),
            config: PropertyMap::new(),
        },
        properties: PropertyMap::from([
            ("name".to_owned(), Value::from(format!("thing-{i}"))),
            ("value".to_owned(), Value::from("x".repeat(150))),
        ]),
    })
}

struct Figures {
    p50: Duration,
    p99: Duration,
    seq_rate: f64,
    rate_64: f64,
}

async fn measure<F, Fut>(n_seq: usize, n_par: usize, call: F) -> Figures
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    for i in 0..50 {
        call(i).await;
    }
    let mut lat = Vec::with_capacity(n_seq);
    let start = Instant::now();
    for i in 0..n_seq {
        let t = Instant::now();
        call(i).await;
        lat.push(t.elapsed());
    }
    let seq_rate = n_seq as f64 / start.elapsed().as_secs_f64();
    lat.sort();
    let start = Instant::now();
    futures::stream::iter(0..n_par)
        .map(call)
        .buffer_unordered(64)
        .for_each(|()| async {})
        .await;
    let rate_64 = n_par as f64 / start.elapsed().as_secs_f64();
    Figures {
        p50: lat[lat.len() / 2],
        p99: lat[lat.len() * 99 / 100],
        seq_rate,
        rate_64,
    }
}

async fn satellite(server: &NatsServer, id: &str) -> tokio::sync::oneshot::Sender<()> {
    let host = PluginHost::start(PluginSpec::new(binary("orrery-plugin-testbed")))
        .await
        .unwrap();
    let client = server.client().await;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = RelayConfig {
        satellite_id: id.into(),
        ..RelayConfig::default()
    };
    tokio::spawn(async move {
        let _ = relay::serve(client, vec![host], config, async {
            let _ = rx.await;
        })
        .await;
    });
    tx
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (n_seq, n_par) = if quick() { (200, 500) } else { (5_000, 40_000) };
    let server = NatsServer::start().await;

    // Baseline: raw request/reply with a responder that echoes 256 bytes.
    let responder = server.client().await;
    let mut sub = responder
        .queue_subscribe("bench.raw", "q".into())
        .await
        .unwrap();
    tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            if let Some(reply) = msg.reply {
                let _ = responder.publish(reply, msg.payload).await;
            }
        }
    });
    let caller = server.client().await;
    caller.flush().await.unwrap();
    let payload: bytes::Bytes = vec![7u8; PAYLOAD].into();
    let raw = {
        let caller = caller.clone();
        measure(n_seq, n_par, move |_| {
            let caller = caller.clone();
            let payload = payload.clone();
            async move {
                caller.request("bench.raw", payload).await.unwrap();
            }
        })
        .await
    };

    let bus = NatsBus::new(server.client().await);
    let stop_a = satellite(&server, "bench-a").await;
    wait_served(&bus).await;
    let encoded = request(0).to_envelope().unwrap().encode().unwrap().len();
    let call = {
        let bus = bus.clone();
        move |i: usize| {
            let bus = bus.clone();
            async move {
                bus.send("testbed", &request(i), Duration::from_secs(30))
                    .await
                    .unwrap();
            }
        }
    };
    let one = measure(n_seq, n_par, call.clone()).await;
    let stop_b = satellite(&server, "bench-b").await;
    // Let the second satellite's subscription reach the server.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let two = measure(n_seq / 5, n_par, call).await;

    println!(
        "no-op operation round trip, {n_seq} sequential calls, {n_par} calls with 64 in flight"
    );
    println!("request envelope {encoded} bytes; raw NATS payload {PAYLOAD} bytes\n");
    println!("| path | p50 | p99 | seq ops/s | ops/s @64 | p50 vs raw | ops/s @64 vs raw |");
    println!("|---|---|---|---|---|---|---|");
    row("raw NATS request/reply", &raw, None);
    row("orrery, 1 satellite", &one, Some(&raw));
    row("orrery, 2 satellites", &two, Some(&raw));
    println!(
        "\nscale-out (2 vs 1 satellite, ops/s @64): {:.2}x",
        two.rate_64 / one.rate_64
    );
    let _ = stop_a.send(());
    let _ = stop_b.send(());
}
