//! Distributed mode: a real nats-server, two `orrery-satellite` processes
//! running the `local` plugin, and `orrery apply --nats-url`: the stack is
//! applied through NATS with operations spread over both satellites.

use orrery_testing::nats;

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::fleet::{apply_through_nats, satellite, served, spread_stack, wait_registered};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_applies_through_nats_spread_over_two_satellites() {
    let server = nats::NatsServer::start().await;
    let _a = satellite(&server.url, "sat-a");
    let _b = satellite(&server.url, "sat-b");
    let client = server.client().await;
    wait_registered(&client, 2, Duration::from_secs(20)).await;

    let scratch = common::Scratch::new();
    let doc = spread_stack("spread", 4, 10);
    let file = scratch.write("spread.yaml", &doc);
    let run = apply_through_nats(&file, &server.url, &scratch.path().join("state"), &[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("44 succeeded"), "{run:?}");
    for d in 0..4 {
        for f in 0..10 {
            let content =
                std::fs::read_to_string(scratch.path().join(format!("site/d{d}/f{f}"))).unwrap();
            assert_eq!(content, format!("{d}.{f}"));
        }
    }
    let served = served(&client).await;
    assert_eq!(
        served.values().sum::<u64>(),
        44,
        "each operation served once: {served:?}"
    );
    assert!(
        served.values().all(|n| *n > 0),
        "both satellites took operations: {served:?}"
    );

    // The fleet view: both satellites, their plugin and load.
    let url = server.url.clone();
    let fleet = tokio::task::spawn_blocking(move || {
        let run = |cmd: &str| {
            common::Run::from(
                Command::new(env!("CARGO_BIN_EXE_orrery"))
                    .args([cmd, "--nats-url", &url, "--output", "json"])
                    .output()
                    .unwrap(),
            )
        };
        (run("satellites"), run("plugins"))
    })
    .await
    .unwrap();
    let sats: serde_json::Value = serde_json::from_str(&fleet.0.stdout).unwrap();
    let sats = sats.as_array().unwrap();
    assert_eq!(sats.len(), 2, "{:?}", fleet.0);
    assert!(sats
        .iter()
        .all(|s| s["plugins"] == "local@0.1.0" && s["requests"].as_u64().unwrap() > 0));
    // Live health and load from the satellites' stats: idle and healthy now.
    for s in sats {
        assert_eq!(s["in_flight"], 0, "{s}");
        assert_eq!(s["restarts"], 0, "{s}");
        assert_eq!(s["unhealthy"], serde_json::json!([]), "{s}");
    }
    let plugins: serde_json::Value = serde_json::from_str(&fleet.1.stdout).unwrap();
    assert_eq!(
        plugins["local@0.1.0"].as_array().unwrap().len(),
        2,
        "{:?}",
        fleet.1
    );
}
