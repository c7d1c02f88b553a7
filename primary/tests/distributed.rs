//! Distributed mode: a real nats-server, two `orrery-satellite` processes
//! running the `local` plugin, and `orrery apply --nats-url`: the stack is
//! applied through NATS with operations spread over both satellites.

#[path = "../../satellite/tests/common/mod.rs"]
mod nats;

mod common;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn satellite(url: &str, id: &str) -> Killed {
    Killed(
        Command::new(nats::binary("orrery-satellite"))
            .args(["--nats-url", url, "--id", id])
            .arg("--plugin")
            .arg(nats::binary("orrery-plugin-local"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Requests served per satellite id, from `$SRV.STATS`.
async fn served(client: &async_nats::Client) -> HashMap<String, u64> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply("$SRV.STATS.orrery-satellite", inbox, "".into())
        .await
        .unwrap();
    let mut out = HashMap::new();
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
        // No responders yet arrives as an empty status message.
        let Ok(stats) = serde_json::from_slice::<serde_json::Value>(&msg.payload) else {
            continue;
        };
        let n = stats["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["num_requests"].as_u64().unwrap())
            .sum();
        out.insert(stats["id"].as_str().unwrap_or_default().to_owned(), n);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_applies_through_nats_spread_over_two_satellites() {
    let server = nats::NatsServer::start().await;
    let _a = satellite(&server.url, "sat-a");
    let _b = satellite(&server.url, "sat-b");
    let client = server.client().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while served(&client).await.len() < 2 {
        assert!(Instant::now() < deadline, "satellites did not register");
    }

    let scratch = common::Scratch::new();
    let mut doc = String::from(
        "stack: spread\ntargets:\n  - name: site\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources:\n",
    );
    for d in 0..4 {
        doc.push_str(&format!("  - label: dir{d}\n    type: Local::Fs::Directory\n    target: site\n    properties: {{ path: d{d} }}\n"));
        for f in 0..10 {
            doc.push_str(&format!(
                "  - label: f{d}-{f}\n    type: Local::Fs::File\n    target: site\n    properties: {{ path: \"${{dir{d}.path}}/f{f}\", content: \"{d}.{f}\" }}\n"
            ));
        }
    }
    let file = scratch.write("spread.yaml", &doc);
    let run = tokio::task::spawn_blocking({
        let file = file.clone();
        let url = server.url.clone();
        let state = scratch.path().join("state");
        move || {
            common::Run::from(
                Command::new(env!("CARGO_BIN_EXE_orrery"))
                    .args(["apply", file.to_str().unwrap(), "--yes", "--nats-url", &url])
                    .env("ORRERY_DATA_DIR", state)
                    .env("ORRERY_PLUGIN_DIR", "/nonexistent")
                    .output()
                    .unwrap(),
            )
        }
    })
    .await
    .unwrap();
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
    let plugins: serde_json::Value = serde_json::from_str(&fleet.1.stdout).unwrap();
    assert_eq!(
        plugins["local@0.1.0"].as_array().unwrap().len(),
        2,
        "{:?}",
        fleet.1
    );
}
